// EngineCore: the synchronous engine — requests in, one scheduled step at a time, events out.
// It owns the model, the caches (paged KV + state slots + snapshots), the prefix cache, the
// scheduler and the per-request samplers. Not thread-safe: Engine (engine.h) runs it on a
// thread of its own; the C ABI drives it directly under a lock.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine_options.h"
#include "engine/request.h"
#include "models/model_config.h"

namespace tessera {

class Tokenizer;
struct LoadedModel;

// A point-in-time view for /metrics, the CLI and the memory log.
struct EngineStats {
    int64_t waiting = 0, running = 0;          // requests
    int64_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0;  // cached: evictable prefix blocks
    int64_t block_size = 0;
    int64_t state_slots_total = 0, state_slots_used = 0;
    int64_t snapshots_total = 0, snapshots_used = 0;
    int64_t kv_bytes = 0, state_bytes = 0, snapshot_bytes = 0, weight_bytes = 0;
    int64_t max_model_len = 0, max_num_seqs = 0, max_num_batched_tokens = 0;
    // Counters since start.
    int64_t steps = 0, prompt_tokens = 0, generated_tokens = 0, cached_prompt_tokens = 0, preemptions = 0;
    int64_t requests_finished = 0, requests_cancelled = 0, requests_failed = 0;
    int64_t steps_ahead = 0;  // steps launched before the step before them had its tokens (pipelined decode)
};

class EngineCore {
public:
    explicit EngineCore(const EngineOptions& opts);  // loads the model and tokenizer, sizes the pools
    ~EngineCore();
    EngineCore(const EngineCore&) = delete;
    EngineCore& operator=(const EngineCore&) = delete;

    // Validates and queues a request; returns its id (> 0). Throws Error: Invalid (bad params or
    // tokens), TooLarge (prompt + 1 > max_model_len), Busy (the waiting queue is full).
    uint64_t add(Request r);
    // The checks add() makes that do not depend on the queue; reads only immutable state, so it
    // is safe from any thread while another runs step().
    void validate(const Request& r) const;
    int64_t queued() const;  // waiting requests
    // Finishes a request with FinishReason::Cancelled (its final event is delivered during the
    // call) and frees its blocks and slot. Unknown or finished ids are ignored.
    void cancel(uint64_t id);
    void cancel_all();
    // Step mode: lets the request generate one more token.
    void resume(uint64_t id);

    // Runs one scheduled step (a forward pass over decodes + prefill chunks, sampling, events).
    // Returns false when there was nothing to do. A failing forward finishes the requests in it
    // with FinishReason::Error; the engine goes on.
    bool step();
    bool has_work() const;  // any request that can make progress now

    EngineStats stats() const;
    const ModelConfig& config() const;
    const Tokenizer* tokenizer() const;      // null when the checkpoint has none
    std::string model_name() const;          // the file or folder name
    const EngineOptions& options() const;    // with the derived values filled in

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
