// Argument checks for softmax, argmax, kv_store and gdn_gates (ref_misc.cu holds the device code).
#include "kernels/cuda/ref_misc.h"

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::ref {

void softmax(float* x, int64_t ldx, int64_t rows, int64_t cols, cudaStream_t stream) {
    detail::check_shape("softmax", rows, cols);
    if (rows == 0 || cols == 0) return;
    detail::check_rows("softmax", "x", x, ldx, rows, cols);
    TS_CUDA_CHECK(detail::launch_softmax(x, ldx, rows, cols, stream));
}

void argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, cudaStream_t stream) {
    detail::check_shape("argmax", rows, cols);
    if (rows == 0) return;
    TS_CHECK(cols > 0, "argmax: rows of x [{}, {}] are empty", rows, cols);
    TS_CHECK(cols <= INT32_MAX, "argmax: {} columns do not fit an int32 index", cols);
    detail::check_rows("argmax", "x", x, ldx, rows, cols);
    TS_CHECK(out != nullptr, "argmax: out is null for {} rows", rows);
    TS_CUDA_CHECK(detail::launch_argmax(x, ldx, rows, cols, out, stream));
}

namespace {
void check_cache(const KvCacheRef& c, const KvCacheRef& other, const char* what) {
    TS_CHECK(c.dtype == DType::F32 || c.dtype == DType::F16, "kv_store: {} must be f32 or f16, got {}", what,
             dtype_name(c.dtype));
    TS_CHECK(c.n_blocks >= 0 && c.block_size > 0 && c.n_kv >= 0 && c.D >= 0,
             "kv_store: {} has a bad shape [{}, {}, {}, {}]", what, c.n_blocks, c.block_size, c.n_kv, c.D);
    TS_CHECK(c.n_blocks == other.n_blocks && c.block_size == other.block_size,
             "kv_store: k_cache [{}, {}, ...] and v_cache [{}, {}, ...] have different blocks", c.n_blocks,
             c.block_size, other.n_blocks, other.block_size);
    const int64_t elem = c.dtype == DType::F16 ? 2 : 4;
    TS_CHECK(c.block_stride % elem == 0 && c.row_stride % elem == 0 && c.head_stride % elem == 0 &&
                 reinterpret_cast<uintptr_t>(c.data) % uintptr_t(elem) == 0,
             "kv_store: {} strides ({}, {}, {}) bytes or its address are not whole {} elements", what,
             c.block_stride, c.row_stride, c.head_stride, dtype_name(c.dtype));
    TS_CHECK(c.n_blocks == 0 || c.n_kv == 0 || c.D == 0 || c.data != nullptr, "kv_store: {} is null", what);
}
}  // namespace

void kv_store(const KvCacheRef& k_cache, const KvCacheRef& v_cache, const float* k, int64_t k_tok, int64_t k_head,
              const float* v, int64_t v_tok, int64_t v_head, int64_t T, const int32_t* slot, cudaStream_t stream) {
    check_cache(k_cache, v_cache, "k_cache");
    check_cache(v_cache, k_cache, "v_cache");
    TS_CHECK(T >= 0, "kv_store: bad token count {}", T);
    if (T == 0) return;
    TS_CHECK(slot != nullptr, "kv_store: slots are null for {} tokens", T);
    if (k_cache.n_kv > 0 && k_cache.D > 0) {
        detail::check_heads("kv_store", "k", k, k_tok, k_head, T, k_cache.n_kv, k_cache.D);
        TS_CUDA_CHECK(detail::launch_kv_store_one(k_cache, k, k_tok, k_head, T, slot, stream));
    }
    if (v_cache.n_kv > 0 && v_cache.D > 0) {
        detail::check_heads("kv_store", "v", v, v_tok, v_head, T, v_cache.n_kv, v_cache.D);
        TS_CUDA_CHECK(detail::launch_kv_store_one(v_cache, v, v_tok, v_head, T, slot, stream));
    }
}

void gdn_gates(float* beta, int64_t ld_beta, float* g, int64_t ld_g, const float* b, int64_t ld_b, const float* a,
               int64_t ld_a, const float* neg_exp_a, const float* dt_bias, int64_t T, int64_t nv,
               cudaStream_t stream) {
    const char* op = "gdn_gates";
    detail::check_shape(op, T, nv);
    if (T == 0 || nv == 0) return;
    detail::check_rows(op, "beta", beta, ld_beta, T, nv);
    detail::check_rows(op, "g", g, ld_g, T, nv);
    detail::check_rows(op, "b", b, ld_b, T, nv);
    detail::check_rows(op, "a", a, ld_a, T, nv);
    TS_CHECK(neg_exp_a != nullptr && dt_bias != nullptr, "gdn_gates: neg_exp_a or dt_bias is null");
    using detail::overlaps;
    using detail::span_of;
    const auto bs = span_of(beta, ld_beta, T, nv), gs = span_of(g, ld_g, T, nv);
    const auto bi = span_of(b, ld_b, T, nv), ai = span_of(a, ld_a, T, nv);
    TS_CHECK(((beta == b && ld_beta == ld_b) || !overlaps(bs, bi)) && ((g == a && ld_g == ld_a) || !overlaps(gs, ai)) &&
                 !overlaps(bs, ai) && !overlaps(gs, bi) && !overlaps(bs, gs),
             "gdn_gates: beta may only be b itself and g only a itself; outputs must not overlap otherwise");
    TS_CUDA_CHECK(detail::launch_gdn_gates(beta, ld_beta, g, ld_g, b, ld_b, a, ld_a, neg_exp_a, dt_bias, T, nv,
                                           stream));
}

}  // namespace tessera::cuda::ref
