// Sequence: the scheduler's view of one request — its tokens (prompt + generated), how many of
// them are in the caches, its KV blocks, its state slot and its prefix-cache bookkeeping.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/kv_cache.h"

namespace tessera {

struct Sequence {
    uint64_t id = 0;
    int64_t arrival = 0;           // FCFS order
    std::vector<int32_t> tokens;   // prompt + generated; the last generated one is not computed yet
    int64_t n_prompt = 0;
    int64_t max_len = 0;           // generation ends when tokens.size() reaches this
    SeqBlocks kv;                  // blocks, n_tokens (= tokens computed) and state_slot
    int64_t credit = -1;           // step mode: tokens it may still sample (-1: unlimited)
    int64_t n_cached = 0;          // tokens taken from the prefix cache at the latest admission
    bool running = false;

    // Prefix-cache bookkeeping.
    std::vector<uint64_t> hashes;  // chained hashes of the full blocks of `tokens`, as far as computed
    int64_t n_registered = 0;      // leading blocks registered in the BlockPool
    int32_t pending_snapshot = -1; // decode-time snapshot slot, published when the sequence ends
    uint64_t pending_hash = 0;

    int64_t computed() const { return kv.n_tokens; }
    int64_t to_compute() const { return int64_t(tokens.size()) - kv.n_tokens; }
    int64_t generated() const { return int64_t(tokens.size()) - n_prompt; }
};

}  // namespace tessera
