#include "engine/snapshot_pool.h"

#include "core/status.h"

namespace tessera {

SnapshotPool::SnapshotPool(int32_t first_slot, int64_t n_slots) : first_(first_slot), n_(n_slots) {
    for (int64_t i = n_slots - 1; i >= 0; --i) free_.push_back(first_slot + int32_t(i));
}

std::optional<int32_t> SnapshotPool::find(uint64_t hash) {
    auto it = by_hash_.find(hash);
    if (it == by_hash_.end()) return std::nullopt;
    lru_.splice(lru_.end(), lru_, it->second.lru);  // most recently used
    return it->second.slot;
}

std::optional<int32_t> SnapshotPool::acquire() {
    if (!free_.empty()) {
        const int32_t s = free_.back();
        free_.pop_back();
        return s;
    }
    if (lru_.empty()) return std::nullopt;
    const int32_t s = lru_.front();
    lru_.pop_front();
    by_hash_.erase(hash_of_.at(s));
    hash_of_.erase(s);
    return s;
}

void SnapshotPool::publish(int32_t slot, uint64_t hash) {
    TS_ASSERT(slot >= first_ && slot < first_ + n_ && !hash_of_.count(slot));
    if (auto it = by_hash_.find(hash); it != by_hash_.end()) {  // replace the older snapshot
        const int32_t old = it->second.slot;
        lru_.erase(it->second.lru);
        hash_of_.erase(old);
        by_hash_.erase(it);
        free_.push_back(old);
    }
    by_hash_[hash] = Entry{slot, lru_.insert(lru_.end(), slot)};
    hash_of_[slot] = hash;
}

void SnapshotPool::drop(int32_t slot) {
    TS_ASSERT(slot >= first_ && slot < first_ + n_ && !hash_of_.count(slot));
    free_.push_back(slot);
}

}  // namespace tessera
