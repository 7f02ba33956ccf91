// Paged KV cache for attention layers: per layer, K and V pools of [n_blocks, block_size, n_kv, D],
// and a free list of blocks. Sequences own block lists (see SeqBlocks); a slot is
// block * block_size + row.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"

namespace tessera {

struct KvCacheShape {
    int64_t n_layers = 0;    // attention layers only
    int64_t n_blocks = 0;
    int64_t block_size = 16;
    int64_t n_kv_heads = 0;
    int64_t head_dim = 0;
    DType dtype = DType::F32;
    size_t bytes() const;    // K + V over all layers
};

class KvCache {
public:
    // Allocates the pools in `mem` (host memory by default; a device backend's memory()).
    explicit KvCache(const KvCacheShape& shape, MemoryResource& mem = host_memory());
    ~KvCache();
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;
    const KvCacheShape& shape() const { return shape_; }
    Tensor k(int64_t layer) const;  // [n_blocks, block_size, n_kv, D]
    Tensor v(int64_t layer) const;

    int64_t free_blocks() const { return int64_t(free_.size()); }
    // Takes n blocks off the free list; throws Error(OutOfMemory) if there are not enough.
    std::vector<int32_t> alloc(int64_t n);
    void release(const std::vector<int32_t>& blocks);

private:
    KvCacheShape shape_;
    // [2, n_layers, n_blocks, block_size, n_kv, D], not initialised: a pool is a reservation whose
    // pages the OS maps only when a block is first written (attention reads written rows only).
    MemoryResource* mem_;
    uint8_t* storage_ = nullptr;
    size_t bytes_ = 0;
    std::vector<int32_t> free_;
};

// Blocks needed for n_tokens positions.
inline int64_t blocks_for(int64_t n_tokens, int64_t block_size) { return (n_tokens + block_size - 1) / block_size; }

// A sequence's view of the cache: its blocks in order and how many positions are filled.
struct SeqBlocks {
    std::vector<int32_t> blocks;
    int64_t n_tokens = 0;
    int32_t state_slot = -1;  // recurrent-state slot (models with GDN layers), -1 if none
    // Makes room for `extra` more tokens, allocating blocks from the cache.
    void reserve(KvCache& cache, int64_t extra);
    void release(KvCache& cache);
    int32_t slot(int64_t pos, int64_t block_size) const {
        return blocks[size_t(pos / block_size)] * int32_t(block_size) + int32_t(pos % block_size);
    }
};

}  // namespace tessera
