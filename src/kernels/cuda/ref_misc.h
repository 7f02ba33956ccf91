// Reference CUDA kernels for the small Backend ops: softmax and argmax over rows, kv_store into
// the paged caches, and the Gated DeltaNet gates. Same semantics and argument order as the ops
// in kernels/backend.h. Raw device pointers (plan arrays too); row strides in elements. Queued
// on `stream` (asynchronous); throws Error on bad arguments or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace tessera::cuda::ref {

// In-place softmax over each row of x[rows, cols]; a row that is all -inf becomes all zeros.
void softmax(float* x, int64_t ldx, int64_t rows, int64_t cols, cudaStream_t stream);

// out[rows] (device) = index of the largest value of each row of x[rows, cols] (cols > 0):
// the first index on ties; NaN never wins unless the row is all NaN (then 0).
void argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, cudaStream_t stream);

// A paged KV cache [n_blocks, block_size, n_kv, D] of f32 or f16 in device memory; D is
// contiguous, the other dimensions have byte strides.
struct KvCacheRef {
    void* data = nullptr;
    DType dtype = DType::F32;
    int64_t n_blocks = 0, block_size = 0, n_kv = 0, D = 0;
    int64_t block_stride = 0, row_stride = 0, head_stride = 0;  // bytes
};

// Writes k [T, k_cache.n_kv, k_cache.D] and v [T, v_cache.n_kv, v_cache.D] (f32, element
// strides per token and per head) into the caches at slot[t] = block * block_size + row
// (device). slot < 0 is padding and skipped; the slots cannot be checked on the host without a
// sync, so one past the cache is skipped too (never written out of bounds). f16 caches round
// to nearest even like core/half.h.
void kv_store(const KvCacheRef& k_cache, const KvCacheRef& v_cache, const float* k, int64_t k_tok, int64_t k_head,
              const float* v, int64_t v_tok, int64_t v_head, int64_t T, const int32_t* slot, cudaStream_t stream);

// Gates of the delta rule over [T, nv]: beta = σ(b); g = neg_exp_a[nv] · softplus(a + dt_bias[nv])
// (softplus(x) = x for x > 20, as torch and the CPU op). beta may be b itself and g a itself.
void gdn_gates(float* beta, int64_t ld_beta, float* g, int64_t ld_g, const float* b, int64_t ld_b, const float* a,
               int64_t ld_a, const float* neg_exp_a, const float* dt_bias, int64_t T, int64_t nv,
               cudaStream_t stream);

namespace detail {
// The entry points into ref_misc.cu (no fmt there). Arguments are already checked.
cudaError_t launch_softmax(float* x, int64_t ldx, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t launch_argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out,
                          cudaStream_t stream);
cudaError_t launch_kv_store_one(const KvCacheRef& cache, const float* src, int64_t tok, int64_t head, int64_t T,
                                const int32_t* slot, cudaStream_t stream);
cudaError_t launch_gdn_gates(float* beta, int64_t ld_beta, float* g, int64_t ld_g, const float* b, int64_t ld_b,
                             const float* a, int64_t ld_a, const float* neg_exp_a, const float* dt_bias, int64_t T,
                             int64_t nv, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
