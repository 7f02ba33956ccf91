// DecodeGraphs: decode steps recorded once per batch-size bucket and replayed (CUDA graphs), so a
// decode step costs one graph launch instead of hundreds of kernel launches.
//
// A batch qualifies when every sequence adds exactly one token and wants its logits. It is padded
// to its bucket with padding sequences (kv_len 0, state slot -1, KV slot -1: they read nothing
// and write nothing), its plan is copied into the bucket's fixed device arrays through
// page-locked memory, the recording is replayed, and the real rows' logits are copied back — or,
// for a step that wants only tokens, its argmax or drawn ids, without waiting (Launch: the
// engine's pipelined decode). A
// bucket is recorded the first time it is needed, right after a plain run of the same padded
// step (which creates every buffer the ops use internally). Recordings are dropped when the
// backend reallocates that memory (Backend::internal_epoch) or the caches change.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <utility>

#include "core/arena.h"
#include "models/model.h"

namespace tessera {

class DecodeGraphs {
public:
    explicit DecodeGraphs(Backend& be);
    ~DecodeGraphs();

    // How a step is launched (Model::launch) and what it left in flight.
    struct Launch {
        // In: each sequence's token is the one the previous step chose for the same row (its
        // argmax or device draw, on the device; holds_ids must be true), not the batch's.
        bool chain = false;
        // Out, for a step whose only output is tokens (argmax or a device draw, no edits): they
        // land in `ids` (page-locked host memory, valid until the step after next) once `mark` has
        // passed; null when the step finished its outputs before returning.
        const int32_t* ids = nullptr;
        uint64_t mark = 0;
    };

    // Runs the batch through a recording and writes its logits (host) → true; false when the
    // batch does not qualify or the backend cannot record (the caller runs it plainly; nothing
    // was queued). An argmax-only step returns without waiting for the device (Launch::ids).
    bool forward(Model& m, const Batch& b, const Caches& c, const LogitsOut& host_out, Launch* launch = nullptr);
    // Whether the last step the model ran came through here with token ids for n rows still on
    // the device — what a chained step reads.
    bool holds_ids(int n) const { return last_ids_ && last_rows_ == n; }

    // The bucket a batch of n sequences is padded to (the smallest listed ≥ n), 0 above the last.
    static int bucket_for(int n_seqs);
    // The block-table width a recording is made for: b.max_blocks rounded up to a power of two.
    static int table_width_for(int max_blocks);

    struct Stats {
        int64_t replays = 0;     // steps run from a recording
        int64_t recordings = 0;  // recordings made (incl. re-recordings after a drop)
        int64_t drops = 0;       // times every recording was dropped
    };
    const Stats& stats() const { return stats_; }
    bool disabled() const { return disabled_; }

private:
    struct Graph;
    void drop_all();
    Graph& graph_for(int bucket, int width);
    void stage(Graph& g, const Batch& b, bool keep_tokens);

    Backend& be_;
    std::map<std::pair<int, int>, std::unique_ptr<Graph>> graphs_;  // by (bucket, table width)
    // Page-locked host memory in two halves used in turn, so a step's plan and argmax ids are
    // never rewritten while the step before is in flight: the plan copy and the ids of step n - 2
    // have landed once the caller has collected step n - 2 (at most two steps are in flight).
    Arena staging_[2];     // a plan
    Arena ids_[2];         // a step's argmax ids
    int turn_ = 0;
    // The last step's token ids: written over its recording's token array (device), so a chained
    // step replaying the same recording finds them in place (no copy); another recording gets
    // them copied. parked_ holds them while the recordings are dropped.
    const int32_t* last_ids_ = nullptr;
    const Graph* last_graph_ = nullptr;
    int last_rows_ = 0;
    Arena parked_;
    Arena logits_;        // [bucket, vocab] device logits, shared by every recording
    int64_t logit_rows_ = 0;
    const KvCache* kv_ = nullptr;
    const StateCache* state_ = nullptr;
    uint64_t epoch_ = 0;
    bool disabled_ = false;
    Stats stats_;
};

}  // namespace tessera
