#include "runtime/state_cache.h"

#include <algorithm>

#include "core/memlog.h"
#include "core/status.h"

namespace tessera {

StateCache::StateCache(const StateCacheShape& s, Backend& be) : shape_(s), be_(be) {
    TS_CHECK(s.n_slots > 0 && s.conv_k >= 1, "state cache needs slots (got {}) and a conv kernel (got {})", s.n_slots,
             s.conv_k);
    MemoryResource& mem = be.memory();
    storage_ = static_cast<float*>(with_context("state cache", [&] { return mem.allocate(s.bytes()); }));
    for (int64_t i = s.n_slots - 1; i >= 0; --i) free_.push_back(int32_t(i));
    MemLog::global().set("state_pool", int64_t(s.bytes()));
}

StateCache::~StateCache() { be_.memory().deallocate(storage_); }

Tensor StateCache::conv(int64_t layer) const {
    TS_ASSERT(layer >= 0 && layer < shape_.n_layers);
    const size_t per_layer = (shape_.conv_bytes() + shape_.rec_bytes()) / sizeof(float);
    auto* p = storage_ + per_layer * size_t(layer);
    return Tensor(p, DType::F32, {shape_.n_slots, shape_.conv_k - 1, shape_.conv_channels},
                  be_.device());
}

Tensor StateCache::recurrent(int64_t layer) const {
    TS_ASSERT(layer >= 0 && layer < shape_.n_layers);
    const size_t per_layer = (shape_.conv_bytes() + shape_.rec_bytes()) / sizeof(float);
    auto* p = storage_ + per_layer * size_t(layer) + shape_.conv_bytes() / sizeof(float);
    return Tensor(p, DType::F32, {shape_.n_slots, shape_.n_v_heads, shape_.dk, shape_.dv},
                  be_.device());
}

int32_t StateCache::alloc() {
    if (free_.empty())
        fail(ErrorKind::OutOfMemory, "state cache: all {} sequence slots are in use", shape_.n_slots);
    const int32_t slot = free_.back();
    free_.pop_back();
    zero(slot);
    return slot;
}

void StateCache::zero(int32_t slot) {
    TS_ASSERT(slot >= 0 && slot < shape_.n_slots);
    for (int64_t l = 0; l < shape_.n_layers; ++l) {
        const Tensor c = conv(l), r = recurrent(l);
        const size_t cb = size_t(c.shape[1] * c.shape[2]) * sizeof(float);
        const size_t rb = size_t(r.shape[1] * r.shape[2] * r.shape[3]) * sizeof(float);
        void* cp = c.row_ptr(slot * c.shape[1]);
        void* rp = r.row_ptr(slot * r.shape[1] * r.shape[2]);
        be_.zero(cp, cb);
        be_.zero(rp, rb);
    }
}

void StateCache::copy(int32_t dst, int32_t src) {
    TS_ASSERT(dst >= 0 && dst < shape_.n_slots && src >= 0 && src < shape_.n_slots);
    if (dst == src) return;
    for (int64_t l = 0; l < shape_.n_layers; ++l) {
        const Tensor c = conv(l), r = recurrent(l);
        const int64_t cn = c.shape[1] * c.shape[2], rn = r.shape[1] * r.shape[2] * r.shape[3];
        const void* cs = c.row_ptr(src * c.shape[1]);
        const void* rs = r.row_ptr(src * r.shape[1] * r.shape[2]);
        void* cd = c.row_ptr(dst * c.shape[1]);
        void* rd = r.row_ptr(dst * r.shape[1] * r.shape[2]);
        be_.copy(cd, cs, size_t(cn) * sizeof(float));
        be_.copy(rd, rs, size_t(rn) * sizeof(float));
    }
}

void StateCache::release(int32_t slot) {
    TS_ASSERT(slot >= 0 && slot < shape_.n_slots);
    free_.push_back(slot);
}

}  // namespace tessera
