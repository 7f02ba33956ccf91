#include "engine/block_pool.h"

#include <algorithm>

#include "core/status.h"

namespace tessera {

namespace {
uint64_t mix(uint64_t x) {  // splitmix64's finalizer
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}
}  // namespace

uint64_t block_hash(uint64_t parent, const int32_t* tokens, int64_t n) {
    uint64_t h = mix(parent ^ 0x9e3779b97f4a7c15ULL);
    for (int64_t i = 0; i < n; ++i) h = mix(h ^ (uint64_t(uint32_t(tokens[i])) + 0x632be59bd9b4e019ULL));
    return h ? h : 1;  // 0 is "no parent"
}

BlockPool::BlockPool(int64_t n_blocks, int64_t block_size, bool prefix_caching)
    : block_size_(block_size), caching_(prefix_caching), blocks_(size_t(n_blocks)) {
    TS_CHECK(n_blocks > 0 && block_size > 0, "block pool needs blocks (got {} of {} tokens)", n_blocks, block_size);
    free_.reserve(size_t(n_blocks));
    for (int64_t b = n_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
}

std::optional<std::vector<int32_t>> BlockPool::allocate(int64_t n) {
    if (n > n_available()) return std::nullopt;
    std::vector<int32_t> out;
    out.reserve(size_t(n));
    while (int64_t(out.size()) < n) {
        int32_t b;
        if (!free_.empty()) {
            b = free_.back();
            free_.pop_back();
        } else {  // evict the least recently used parked block
            b = lru_.front();
            lru_.pop_front();
            unregister(b);
        }
        blocks_[size_t(b)].refs = 1;
        out.push_back(b);
    }
    return out;
}

void BlockPool::release(const std::vector<int32_t>& blocks) {
    for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
        Info& info = blocks_.at(size_t(*it));
        TS_ASSERT(info.refs > 0);
        if (--info.refs > 0) continue;
        if (info.registered) {
            // The sequence's last blocks are released first, so they sit nearer the LRU front:
            // a prefix outlives its tails.
            info.lru = lru_.insert(lru_.end(), *it);
        } else {
            free_.push_back(*it);
        }
    }
}

std::optional<int32_t> BlockPool::lookup(uint64_t hash, uint64_t parent, const int32_t* tokens) {
    if (!caching_) return std::nullopt;
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return std::nullopt;
    Info& info = blocks_[size_t(it->second)];
    if (info.parent != parent || !std::equal(info.tokens.begin(), info.tokens.end(), tokens)) return std::nullopt;
    if (info.refs++ == 0) lru_.erase(info.lru);
    return it->second;
}

void BlockPool::register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens) {
    if (!caching_) return;
    Info& info = blocks_.at(size_t(block));
    TS_ASSERT(info.refs > 0);
    if (info.registered || by_hash_.count(hash)) return;
    info.registered = true;
    info.hash = hash;
    info.parent = parent;
    info.tokens.assign(tokens, tokens + block_size_);
    by_hash_[hash] = block;
}

void BlockPool::unregister(int32_t block) {
    Info& info = blocks_[size_t(block)];
    by_hash_.erase(info.hash);
    info.registered = false;
    info.tokens.clear();
}

}  // namespace tessera
