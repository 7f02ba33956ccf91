// How an engine is set up: the model, the device, and how the caches and the scheduler are
// sized. Zero means "derive it" (from the model, the memory budget and the device).
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

struct EngineOptions {
    std::string model_path;
    std::string device = "auto";         // cpu | cuda | auto

    // Cache sizing. The KV block pool and the state slots are allocated once, after the weights.
    int64_t memory_budget = 0;           // CPU: bytes for KV + state caches; 0 = derived from free memory
    double gpu_memory_fraction = 0.90;   // GPU: fraction of device memory the process may use
    int64_t max_model_len = 0;           // 0 = the model's context (clamped to what the pool holds)
    int64_t max_num_seqs = 0;            // sequences running at once; 0 = as many as the budget allows (<= 256)
    int64_t max_num_batched_tokens = 512;  // tokens per engine step (decodes + prefill chunks)
    int64_t max_queue = 1024;            // waiting requests beyond which submit() throws Busy
    int64_t block_size = 16;             // tokens per KV block
    std::string kv_dtype = "f16";        // f16 | f32

    // Prefix caching: full KV blocks hashed by content, plus recurrent-state snapshots (hybrid models).
    bool prefix_caching = true;
    int64_t snapshot_interval = 512;     // tokens between state snapshots inside a prompt (multiple of 64)
    double snapshot_fraction = 0.15;     // share of the cache budget for snapshots

    // Where sampled requests draw: "host" (Sampler: the row of logits copied back), "device"
    // (Backend::sample where the logits are: a token a row crosses), "auto" (device on a GPU).
    std::string sampling = "auto";

    // Pipelined decode: while a greedy decode step runs, the next is launched with the tokens it
    // will choose (read on the device), so the host's bookkeeping and the next launch hide under
    // the step (vLLM's async scheduling). "auto": where the backend queues work (a GPU); "on",
    // "off". A request that stops on a step's token had one step computed for it in vain.
    std::string pipeline = "auto";

    int64_t memlog_every = 0;            // memory-log snapshot every N decode steps (0 = off)
};

}  // namespace tessera
