// Model: one forward step over a token-major batch of several sequences (one sequence is the
// special case), each at its own positions with its own cache blocks. The Batch is planned once
// per step and shared by every layer.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/arena.h"
#include "kernels/backend.h"
#include "models/model_config.h"

namespace tessera {

class KvCache;
class StateCache;
class TensorSource;
struct SeqBlocks;

// The caches a forward step reads and writes: paged KV for attention layers, state slots for
// recurrent layers (null for models without them).
struct Caches {
    KvCache* kv = nullptr;
    StateCache* state = nullptr;
};

// What a model needs cached, for sizing the pools from need and budget.
struct CacheSpec {
    int64_t attn_layers = 0, n_kv_heads = 0, head_dim = 0;  // per token: KV
    int64_t state_layers = 0;                               // per sequence: GDN state
    int64_t conv_channels = 0, conv_k = 0, n_v_heads = 0, dk = 0, dv = 0;
};

struct Batch {
    std::vector<int32_t> tokens;     // [T]
    std::vector<int32_t> positions;  // [T]
    std::vector<int32_t> slots;      // [T] KV slot each token writes
    std::vector<int32_t> q_start;    // [n_seqs + 1]
    std::vector<int32_t> kv_len;     // [n_seqs]
    std::vector<int32_t> block_table;  // [n_seqs, max_blocks]
    int max_blocks = 0;
    int block_size = 0;
    std::vector<int32_t> state_slots;  // [n_seqs] recurrent-state slot of each sequence (-1: none)
    std::vector<int32_t> logit_rows;  // tokens whose logits are computed, in output order

    int64_t n_tokens() const { return int64_t(tokens.size()); }
    int n_seqs() const { return int(kv_len.size()); }
    AttnPlan attn_plan() const {
        return AttnPlan{n_seqs(), q_start.data(), kv_len.data(), block_table.data(), max_blocks, block_size};
    }
    SeqPlan seq_plan() const { return SeqPlan{n_seqs(), q_start.data(), state_slots.data()}; }
};

// The batch's arrays where the backend's ops read them: the Batch's own vectors for a host
// backend, copies in the step's arena for a device backend. Built once per forward, before the
// first op.
struct StagedBatch {
    int64_t n_tokens = 0, n_logits = 0;
    const int32_t* tokens = nullptr;      // [T]
    const int32_t* positions = nullptr;   // [T]
    const int32_t* slots = nullptr;       // [T]
    const int32_t* logit_rows = nullptr;  // [n_logits]
    AttnPlan attn;
    SeqPlan seq;
};

// Stages batches for a backend, in an arena of its own that grows (between steps) to the largest
// batch seen — block tables make the size depend on context lengths, not just on tokens.
class BatchStager {
public:
    StagedBatch stage(const Batch& b, Backend& be);

private:
    Arena arena_;
};

// Builds a batch step by step: add(seq, tokens) appends tokens at the sequence's next positions
// (blocks must already be reserved); the sequence's n_tokens advances.
class BatchBuilder {
public:
    explicit BatchBuilder(int block_size /* 0: no KV cache */) { batch_.block_size = block_size; batch_.q_start.push_back(0); }
    // want_logits: 0 none, 1 last token, 2 every token.
    void add(SeqBlocks& seq, const int32_t* tokens, int64_t n, int want_logits);
    Batch finish();

private:
    Batch batch_;
    std::vector<std::vector<int32_t>> tables_;
};

// Where a step's logits go: host memory [rows, V] (a device backend copies rows back as they are
// computed, through a bounded scratch), or a device tensor [rows, V] in the backend's memory
// that the caller copies later (decode graphs: a recorded step must not copy to the host). Or
// only a summary reaches the host — the logits stay where they are: with `argmax` (host, [rows])
// each row's argmax (greedy decoding); with top_k > 0 each row's top_k largest logits and their
// ids (host, [rows, top_k], as Backend::top_k gives them: what Sampler::sample_sorted draws
// from); with `sample` (host, [rows]) each row's token drawn where the logits are
// (Backend::sample) into `tokens` (host, [rows]) — and `host`, when set too, gets the raw rows
// before the edits (for logprobs). In those modes `edits` (host, sorted by row) are applied to
// the logits first: the requests' penalties and bias (Backend::edit_logits).
struct LogitsOut {
    float* host = nullptr;
    const Tensor* device = nullptr;
    int32_t* argmax = nullptr;
    int top_k = 0;
    float* top_values = nullptr;
    int32_t* top_ids = nullptr;
    const SampleRow* sample = nullptr;
    int32_t* tokens = nullptr;
    const LogitEdit* edits = nullptr;
    int64_t n_edits = 0;
};

class DecodeGraphs;

class Model {
public:
    virtual ~Model();
    const ModelConfig& config() const { return cfg_; }
    // What this model caches per token (attention layers) and per sequence (recurrent layers).
    virtual CacheSpec cache_spec() const = 0;
    // Runs the batch; writes logits [batch.logit_rows.size(), vocab] (f32, host) — or, with
    // `argmax` given, only each logit row's argmax (the first index of its largest non-NaN value,
    // as Sampler::argmax) into argmax[rows], and logits may be null. With decode graphs enabled,
    // a batch of one-token sequences replays a recorded step (decode_graphs.h).
    void forward(const Batch& batch, const Caches& caches, float* logits, int32_t* argmax = nullptr);
    // The same with every output mode of LogitsOut (its host-side fields; `device` must be null).
    // No launched step may be in flight.
    void forward(const Batch& batch, const Caches& caches, const LogitsOut& out);

    // Pipelined decoding: forward in two halves. launch() queues the step and returns without
    // waiting where it can — a decode graph's replay whose only output is tokens (argmax or
    // drawn on the device; no edits) —
    // and runs any other step to the end; collect() waits for the oldest launched step and
    // writes its outputs (`out`'s host buffers must live until then). At most two steps are in
    // flight. With `chain`, each sequence's token is not the batch's but the one the step
    // launched before chose for the same row (its argmax or device draw): that step must have had
    // token output (no edits) with one row per sequence of this batch, in the same order, and this
    // batch one token a sequence — the engine launches step n + 1 before it has seen step n's
    // tokens.
    void launch(const Batch& batch, const Caches& caches, const LogitsOut& out, bool chain = false);
    void collect();
    int in_flight() const { return int(pending_.size()); }
    // Record decode steps per batch-size bucket where the backend can (CUDA graphs); off by default.
    void enable_decode_graphs(bool on);
    const DecodeGraphs* decode_graphs() const { return graphs_.get(); }

    // The two halves of forward: the batch's checks (host data), and the step's ops over a
    // staged batch — queued only, never copying to the host when `out` is a device tensor.
    virtual void check_batch(const Batch& batch, const Caches& caches) const = 0;
    virtual void run(const StagedBatch& batch, const Caches& caches, const LogitsOut& out) = 0;

    // Largest batch (tokens) forward accepts; set at creation (the prefill chunk).
    int64_t max_batch_tokens() const { return max_tokens_; }
    Backend& backend() const { return be_; }

protected:
    Model(ModelConfig cfg, Backend& be, int64_t max_tokens);
    // The checks every decoder shares: token count and ids, state slots where the model keeps state.
    void check_tokens(const Batch& b) const;

    ModelConfig cfg_;
    Backend& be_;
    int64_t max_tokens_;

private:
    // A launched step not yet collected: where its outputs go, and where its argmax ids wait
    // (page-locked, after `mark`) when it returned before the device finished.
    struct Pending {
        LogitsOut out;
        int64_t rows = 0;
        const int32_t* ids = nullptr;
        uint64_t mark = 0;
    };
    void check_out(const Batch& batch, const LogitsOut& out) const;
    Batch chained_on_host(const Batch& batch);  // the batch with the last launched step's tokens

    BatchStager stager_;
    std::unique_ptr<DecodeGraphs> graphs_;
    std::deque<Pending> pending_;
};

}  // namespace tessera
