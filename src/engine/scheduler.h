// Scheduler: continuous batching as data in, data out. Each step packs, under a token budget,
// the running sequences' next tokens (decodes: 1; prefills: a chunk) oldest first, then admits
// waiting sequences first come first served, each starting from the longest prefix the prefix
// cache holds. When KV blocks run out the newest running sequence is preempted (its blocks and
// state freed; it is recomputed later, largely from the prefix cache). It decides and keeps the
// books — block ids, state slots, snapshot slots — and never touches memory or a model: the
// engine executes its plans. Unit-tested without a model (tests/engine/test_scheduler.cpp).
//
// Alignment: prefill chunks end at multiples of `align` tokens (or at the sequence's end), so a
// sequence's tokens are cut the same way whatever else is in the batch (the CPU backend's
// chunked Gated DeltaNet is then batch-invariant), and state snapshots land on block boundaries.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/block_pool.h"
#include "engine/sequence.h"
#include "engine/snapshot_pool.h"

namespace tessera {

struct SchedulerConfig {
    int64_t max_num_batched_tokens = 512;
    int64_t max_num_seqs = 16;       // running at once (also the number of live state slots)
    int64_t block_size = 16;
    int64_t n_blocks = 0;
    bool prefix_caching = true;
    // Hybrid models (recurrent state): live slots [0, max_num_seqs), snapshot slots after them.
    bool has_state = false;
    int64_t n_snapshots = 0;         // 0: no state snapshots (dense models, or caching off)
    int64_t align = 1;               // prefill chunk alignment (tokens; a multiple of block_size when > 1)
    int64_t snapshot_interval = 0;   // snapshots every this many tokens in a prefill (multiple of align; 0: none)
};

struct StepItem {
    Sequence* seq = nullptr;
    int64_t start = 0;  // first position computed
    int64_t n = 0;      // tokens computed
    bool logits = false;  // reaches the sequence's last token: sample the next one
};

struct StateInit {
    int32_t slot = -1;      // live slot handed to an admitted sequence
    int32_t snapshot = -1;  // copy this snapshot slot into it; -1: zero it
};

struct SnapshotCopy {
    int32_t src = -1, dst = -1;  // state slot -> snapshot slot
};

struct StepPlan {
    std::vector<StepItem> items;         // in batch order
    std::vector<StateInit> state_inits;  // before the forward
    std::vector<Sequence*> preempted;    // now waiting again (their tokens are kept)
    int64_t n_tokens() const {
        int64_t n = 0;
        for (const StepItem& i : items) n += i.n;
        return n;
    }
};

class Scheduler {
public:
    explicit Scheduler(const SchedulerConfig& cfg);

    void add(Sequence* s);       // to the waiting queue (FCFS by s->arrival)
    void finish(Sequence* s);    // removes it (waiting or running) and frees what it holds
    StepPlan schedule();
    // After the forward: advances the items' sequences, registers their newly full blocks with
    // the prefix cache, and returns the state snapshots to copy now. Items whose `seq` is null
    // (their request ended while the step was in flight) are skipped.
    std::vector<SnapshotCopy> complete(const StepPlan& plan);
    // The engine's pipelined decode: the step after `cur` (completed, its tokens not yet sampled),
    // planned before those tokens are known — each of cur's sequences computes the token cur
    // samples for it, in cur's order. Empty (nothing allocated) unless every item of cur samples,
    // cur holds every running sequence (none was left out by the token budget), nothing waits, no
    // sequence is in step mode, that token cannot end a sequence by length
    // (tokens + 1 < max_len), and the KV blocks for it are free (allocated here). A sequence that
    // ends on cur's token is finish()ed as usual; the ahead step's work for it is wasted.
    StepPlan schedule_ahead(const StepPlan& cur);

    bool has_work() const;  // a step now would schedule something
    int64_t n_waiting() const { return int64_t(waiting_.size()); }
    int64_t n_running() const { return int64_t(running_.size()); }
    int64_t n_preemptions() const { return preemptions_; }
    const BlockPool& blocks() const { return pool_; }
    const SnapshotPool* snapshots() const { return snaps_.get(); }
    int64_t free_slots() const { return int64_t(free_slots_.size()); }
    const SchedulerConfig& config() const { return cfg_; }

private:
    int64_t chunk(const Sequence& s, int64_t budget) const;  // tokens to compute this step
    int64_t prompt_snapshot_point(const Sequence& s) const;
    void ensure_hashes(Sequence& s, int64_t n_blocks);
    // Takes the longest cached prefix (blocks with references, and for hybrid models the snapshot
    // to start from, at an aligned point); returns the snapshot slot or -1.
    int32_t take_cached_prefix(Sequence& s);
    void release(Sequence& s);  // blocks, live slot, pending snapshot
    void preempt(Sequence* s, StepPlan& plan);
    void insert_waiting(Sequence* s);

    SchedulerConfig cfg_;
    BlockPool pool_;
    std::unique_ptr<SnapshotPool> snaps_;
    std::vector<int32_t> free_slots_;
    std::deque<Sequence*> waiting_;
    std::vector<Sequence*> running_;  // oldest first
    int64_t preemptions_ = 0;
};

}  // namespace tessera
