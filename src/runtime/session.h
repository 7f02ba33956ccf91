// Session: one model, its caches (paged KV for attention layers, state slots for recurrent
// layers) and the sequences in them — what the CLI verbs drive directly (the engine's scheduler
// takes this role in the server). Prefill runs in chunks of at most model.max_batch_tokens() so
// activation memory is bounded whatever the prompt length.
#pragma once
#include <memory>
#include <vector>

#include "models/model.h"
#include "runtime/kv_cache.h"
#include "runtime/state_cache.h"

namespace tessera {

class Session {
public:
    // A KV pool of `n_blocks` blocks of `block_size` tokens and `max_seqs` recurrent-state slots
    // (each only if the model has such layers).
    Session(Model& model, int64_t n_blocks, int64_t block_size, int64_t max_seqs = 1, DType kv_dtype = DType::F32);

    int add_sequence();   // returns a sequence id
    void reset(int seq);  // frees the sequence's blocks and zeroes its state: it starts again at 0
    int64_t n_tokens(int seq) const { return seqs_.at(size_t(seq)).n_tokens; }
    SeqBlocks& sequence(int seq) { return seqs_.at(size_t(seq)); }

    // Feeds tokens to a sequence in chunks. Returns the logits of the last token [vocab], or with
    // all_logits every token's [n, vocab] row-major.
    std::vector<float> feed(int seq, const std::vector<int32_t>& tokens, bool all_logits = false);
    // One step for several sequences at once (one token each): logits [n, vocab].
    std::vector<float> decode(const std::vector<int>& seqs, const std::vector<int32_t>& tokens);

    Model& model() { return model_; }
    KvCache& cache() { return *kv_; }
    Caches caches() { return Caches{kv_.get(), state_.get()}; }

private:
    void check_room(const SeqBlocks& s, int64_t n) const;

    Model& model_;
    std::unique_ptr<KvCache> kv_;
    std::unique_ptr<StateCache> state_;
    std::vector<SeqBlocks> seqs_;
};


}  // namespace tessera
