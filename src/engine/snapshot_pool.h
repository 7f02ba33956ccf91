// SnapshotPool: recurrent-state snapshots for the prefix cache of hybrid models. A snapshot is a
// state slot (in the same StateCache as the live slots, indices [first, first + n)) holding the
// conv + recurrent state of every GDN layer after a prefix whose last full KV block has the
// chained hash `hash`. Together with the cached KV blocks it lets a new request skip that prefix.
// LRU: acquiring a slot when none is free forgets the least recently used snapshot. Pure
// bookkeeping — the engine copies the state.
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tessera {

class SnapshotPool {
public:
    SnapshotPool(int32_t first_slot, int64_t n_slots);

    int64_t size() const { return n_; }
    int64_t n_published() const { return int64_t(by_hash_.size()); }
    int64_t n_used() const { return n_ - int64_t(free_.size()); }  // published + held

    // The slot holding the snapshot for `hash` (marks it recently used), or nullopt.
    std::optional<int32_t> find(uint64_t hash);
    bool contains(uint64_t hash) const { return by_hash_.count(hash) > 0; }
    // A slot to write a new snapshot into: a free one, else the least recently used published one
    // (forgotten). nullopt if every slot is held unpublished. The slot is held until publish/drop.
    std::optional<int32_t> acquire();
    // Makes a held slot the snapshot for `hash` (an older snapshot for the same hash is freed).
    void publish(int32_t slot, uint64_t hash);
    void drop(int32_t slot);  // a held slot back to the free list

private:
    int32_t first_;
    int64_t n_;
    std::vector<int32_t> free_;
    std::list<int32_t> lru_;  // published, front = least recently used
    struct Entry {
        int32_t slot;
        std::list<int32_t>::iterator lru;
    };
    std::unordered_map<uint64_t, Entry> by_hash_;
    std::unordered_map<int32_t, uint64_t> hash_of_;  // published slot -> hash
};

}  // namespace tessera
