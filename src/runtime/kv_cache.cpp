#include "runtime/kv_cache.h"

#include "core/memlog.h"
#include "core/status.h"

namespace tessera {

size_t KvCacheShape::bytes() const {
    return size_t(2 * n_layers * n_blocks * block_size * n_kv_heads) * dtype_row_bytes(dtype, head_dim);
}

KvCache::KvCache(const KvCacheShape& shape, MemoryResource& mem) : shape_(shape), mem_(&mem) {
    TS_CHECK(shape.dtype == DType::F32 || shape.dtype == DType::F16, "KV cache dtype {} not supported",
             dtype_name(shape.dtype));
    TS_CHECK(shape.n_blocks > 0 && shape.block_size > 0, "KV cache needs blocks (got {} x {})", shape.n_blocks,
             shape.block_size);
    bytes_ = shape.bytes();
    storage_ = static_cast<uint8_t*>(with_context("KV cache", [&] { return mem.allocate(bytes_); }));
    free_.reserve(size_t(shape.n_blocks));
    for (int64_t b = shape.n_blocks - 1; b >= 0; --b) free_.push_back(int32_t(b));
    MemLog::global().set("kv_pool", int64_t(bytes_));
}

KvCache::~KvCache() { mem_->deallocate(storage_); }

Tensor KvCache::k(int64_t layer) const {
    TS_ASSERT(layer >= 0 && layer < shape_.n_layers);
    const size_t per = bytes_ / size_t(2 * shape_.n_layers);
    auto* p = storage_ + per * size_t(layer);
    return Tensor(p, shape_.dtype, {shape_.n_blocks, shape_.block_size, shape_.n_kv_heads, shape_.head_dim},
                  mem_->device());
}

Tensor KvCache::v(int64_t layer) const {
    TS_ASSERT(layer >= 0 && layer < shape_.n_layers);
    const size_t per = bytes_ / size_t(2 * shape_.n_layers);
    auto* p = storage_ + per * size_t(shape_.n_layers + layer);
    return Tensor(p, shape_.dtype, {shape_.n_blocks, shape_.block_size, shape_.n_kv_heads, shape_.head_dim},
                  mem_->device());
}

std::vector<int32_t> KvCache::alloc(int64_t n) {
    if (n > int64_t(free_.size()))
        fail(ErrorKind::OutOfMemory, "KV cache: need {} blocks, {} free of {} ({} tokens per block)", n, free_.size(),
             shape_.n_blocks, shape_.block_size);
    std::vector<int32_t> out(free_.end() - n, free_.end());
    free_.resize(free_.size() - size_t(n));
    return out;
}

void KvCache::release(const std::vector<int32_t>& blocks) { free_.insert(free_.end(), blocks.begin(), blocks.end()); }

void SeqBlocks::reserve(KvCache& cache, int64_t extra) {
    const int64_t bs = cache.shape().block_size;
    const int64_t need = (n_tokens + extra + bs - 1) / bs - int64_t(blocks.size());
    if (need > 0) {
        auto got = cache.alloc(need);
        blocks.insert(blocks.end(), got.begin(), got.end());
    }
}

void SeqBlocks::release(KvCache& cache) {
    cache.release(blocks);
    blocks.clear();
    n_tokens = 0;
}

}  // namespace tessera
