// DecodeGraphs: decode steps recorded once per batch-size bucket and replayed (CUDA graphs), so a
// decode step costs one graph launch instead of hundreds of kernel launches.
//
// A batch qualifies when every sequence adds exactly one token and wants its logits. It is padded
// to its bucket with padding sequences (kv_len 0, state slot -1, KV slot -1: they read nothing
// and write nothing), its plan is copied into the bucket's fixed device arrays through
// page-locked memory, the recording is replayed, and the real rows' logits are copied back. A
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

    // Runs the batch through a recording and writes its logits (host) → true; false when the
    // batch does not qualify or the backend cannot record (the caller runs it plainly).
    bool forward(Model& m, const Batch& b, const Caches& c, const LogitsOut& host_out);

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
    void stage(Graph& g, const Batch& b);

    Backend& be_;
    std::map<std::pair<int, int>, std::unique_ptr<Graph>> graphs_;  // by (bucket, table width)
    Arena staging_;       // page-locked host copy of a plan, reused every step
    Arena logits_;        // [bucket, vocab] device logits, shared by every recording
    int64_t logit_rows_ = 0;
    const KvCache* kv_ = nullptr;
    const StateCache* state_ = nullptr;
    uint64_t epoch_ = 0;
    bool disabled_ = false;
    Stats stats_;
};

}  // namespace tessera
