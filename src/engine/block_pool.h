// BlockPool: the ids of the paged KV cache's blocks, with reference counts and the prefix cache.
// A full block can be registered under the chained hash of its content (the hash of the parent
// block's hash and the block's tokens). When its last owner releases it, a registered block is
// not freed but parked in an LRU list: a later request whose prompt starts with the same tokens
// takes it back (lookup), and allocation evicts the least recently used parked blocks only when
// the free list is empty. Pure bookkeeping over ids — the KV memory itself is KvCache's.
#pragma once
#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tessera {

// Chained content hash of a block: parent hash (0 for the first block) and its tokens.
uint64_t block_hash(uint64_t parent, const int32_t* tokens, int64_t n);

class BlockPool {
public:
    BlockPool(int64_t n_blocks, int64_t block_size, bool prefix_caching);

    int64_t n_blocks() const { return int64_t(blocks_.size()); }
    int64_t block_size() const { return block_size_; }
    int64_t n_available() const { return int64_t(free_.size() + lru_.size()); }  // free + evictable
    int64_t n_used() const { return n_blocks() - n_available(); }                // referenced
    int64_t n_cached() const { return int64_t(lru_.size()); }                    // parked, matchable

    // n blocks with refcount 1, or nullopt (nothing taken) if fewer are available.
    std::optional<std::vector<int32_t>> allocate(int64_t n);
    // Drops one reference of each block (in reverse order, so a sequence's tail is evicted first).
    void release(const std::vector<int32_t>& blocks);

    // The cached block holding exactly these tokens after `parent`, with a reference taken; nullopt
    // on a miss. The tokens are compared, so a hash collision never returns a wrong block.
    std::optional<int32_t> lookup(uint64_t hash, uint64_t parent, const int32_t* tokens);
    // Makes a full block findable under its hash. If another block already holds that content the
    // call does nothing (this block stays private and is freed normally).
    void register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens);
    bool is_registered(int32_t block) const { return blocks_.at(size_t(block)).registered; }

private:
    struct Info {
        int32_t refs = 0;
        bool registered = false;
        uint64_t hash = 0, parent = 0;
        std::vector<int32_t> tokens;         // the block's content, for collision checks
        std::list<int32_t>::iterator lru;    // valid while parked
    };
    void unregister(int32_t block);

    int64_t block_size_;
    bool caching_;
    std::vector<Info> blocks_;
    std::vector<int32_t> free_;                     // unregistered, refcount 0
    std::list<int32_t> lru_;                        // registered, refcount 0; front = oldest
    std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace tessera
