// Sizing the caches from need and budget: how many KV blocks, live state slots and state
// snapshots fit in the memory budget, and the longest sequence the pool can then hold. Pure
// arithmetic, so it is unit-tested on the flagship's shapes without allocating anything.
#pragma once
#include <cstdint>
#include <string>

#include "models/model.h"

namespace tessera {

struct PoolRequest {
    int64_t budget_bytes = 0;       // KV + state + snapshots
    int64_t block_size = 16;
    int64_t kv_elem_bytes = 2;      // f16
    int64_t model_ctx = 0;          // the model's context (<= 0: unknown)
    int64_t max_model_len = 0;      // asked for (0: the model's context, clamped to the pool)
    int64_t max_num_seqs = 0;       // asked for (0: as many as fit, up to 256)
    bool prefix_caching = true;
    double snapshot_fraction = 0.15;  // of the budget, for hybrid models' state snapshots
};

struct PoolPlan {
    int64_t n_blocks = 0, block_size = 0;
    int64_t n_slots = 0;            // live state slots (= max running sequences for hybrid models)
    int64_t n_snapshots = 0;
    int64_t max_num_seqs = 0;
    int64_t max_model_len = 0;
    int64_t kv_block_bytes = 0, slot_bytes = 0;
    int64_t kv_bytes() const { return n_blocks * kv_block_bytes; }
    int64_t state_bytes() const { return n_slots * slot_bytes; }
    int64_t snapshot_bytes() const { return n_snapshots * slot_bytes; }
    std::string summary() const;  // "KV pool: N blocks = M tokens (X); state slots: S (Y); snapshots: P (Z)"
};

// Bytes per KV block and per state slot for a model.
int64_t kv_bytes_per_block(const CacheSpec& spec, int64_t block_size, int64_t elem_bytes);
int64_t state_bytes_per_slot(const CacheSpec& spec);

// Throws Error(TooLarge) when the budget cannot hold one sequence of the asked max_model_len
// (or, with none asked, a single block / state slot), naming the budget needed.
PoolPlan plan_pools(const CacheSpec& spec, const PoolRequest& req);

// The default CPU budget when none is given: what a full pool would need, capped at half the
// memory the OS reports available.
int64_t default_cpu_budget(const CacheSpec& spec, const PoolRequest& req);
int64_t host_available_bytes();  // MemAvailable from /proc/meminfo (0 if unknown)

}  // namespace tessera
