// Softmax, argmax, kv_store and the GDN gates as plain reference kernels: one block per row for
// the row reductions (f32 block reductions), grid-stride elementwise loops otherwise; f32 math
// in the order of the CPU ops (kernels/cpu/elementwise.cpp, attention.cpp, gdn_norm.cpp).
#include "kernels/cuda/ref_misc.h"

#include "core/half.h"
#include "kernels/cuda/arg_best.cuh"
#include "kernels/cuda/ref_reduce.cuh"

namespace tessera::cuda::ref::detail {

namespace {

// x[rows, cols] in place: exp(x - max) / Σ; an all -inf row becomes zeros
__global__ void softmax_kernel(float* x, int64_t ldx, int64_t rows, int64_t cols) {
    __shared__ float scratch[32];
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* v = x + r * ldx;
        float m = -INFINITY;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, v[c]);
        m = block_max(m, scratch);
        if (m == -INFINITY) {  // fully masked row (or all NaN, which fmaxf skips, like the CPU's std::max)
            for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) v[c] = 0.f;
            continue;
        }
        float sum = 0.f;
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
            const float e = expf(v[c] - m);
            v[c] = e;
            sum += e;
        }
        sum = block_sum(sum, scratch);
        const float inv = float(1.0 / double(sum));
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) v[c] *= inv;
    }
}

using Best = ArgBest<int64_t>;

// out[r] = argmax of row r of x[rows, cols]
__global__ void argmax_kernel(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out) {
    __shared__ float sv[32];
    __shared__ int64_t si[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* v = x + r * ldx;
        Best b{0.f, -1};
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)  // increasing c: the first of equals stays
            if (!isnan(v[c]) && (b.idx < 0 || v[c] > b.v)) b = {v[c], c};
        b = warp_best(b);
        __syncthreads();  // the previous row's readers are done with sv/si
        if (lane == 0) {
            sv[warp] = b.v;
            si[warp] = b.idx;
        }
        __syncthreads();
        if (warp == 0) {
            b = lane < n_warps ? Best{sv[lane], si[lane]} : Best{0.f, -1};
            b = warp_best(b);
            if (lane == 0) out[r] = int32_t(b.idx < 0 ? 0 : b.idx);
        }
    }
}

// cache[slot[t] / block_size, slot[t] % block_size, h, :] = src[t, h, :] for slot in [0, n_slots)
template <bool F16>
__global__ void kv_store_kernel(KvCacheRef c, const float* src, int64_t tok, int64_t head, int64_t T,
                                const int32_t* slot) {
    const int64_t per_tok = c.n_kv * c.D, n = T * per_tok, n_slots = c.n_blocks * c.block_size;
    for (int64_t k = global_thread(); k < n; k += grid_threads()) {
        const int64_t t = k / per_tok, h = (k % per_tok) / c.D, i = k % c.D;
        const int64_t s = slot[t];
        if (s < 0 || s >= n_slots) continue;  // padding (or a bad slot: never written out of bounds)
        char* row = static_cast<char*>(c.data) + (s / c.block_size) * c.block_stride +
                    (s % c.block_size) * c.row_stride + h * c.head_stride;
        const float val = src[t * tok + h * head + i];
        if constexpr (F16)
            reinterpret_cast<uint16_t*>(row)[i] = f32_to_f16(val);
        else
            reinterpret_cast<float*>(row)[i] = val;
    }
}

// beta[T, nv] = σ(b); g[T, nv] = neg_exp_a · softplus(a + dt_bias)
__global__ void gdn_gates_kernel(float* beta, int64_t ld_beta, float* g, int64_t ld_g, const float* b, int64_t ld_b,
                                 const float* a, int64_t ld_a, const float* neg_exp_a, const float* dt_bias,
                                 int64_t T, int64_t nv) {
    const int64_t n = T * nv;
    for (int64_t k = global_thread(); k < n; k += grid_threads()) {
        const int64_t t = k / nv, h = k % nv;
        const float x = a[t * ld_a + h] + dt_bias[h];
        const float softplus = x > 20.f ? x : log1pf(expf(x));
        g[t * ld_g + h] = neg_exp_a[h] * softplus;
        beta[t * ld_beta + h] = 1.f / (1.f + expf(-b[t * ld_b + h]));
    }
}

}  // namespace

cudaError_t launch_softmax(float* x, int64_t ldx, int64_t rows, int64_t cols, cudaStream_t stream) {
    softmax_kernel<<<grid_for(rows, 1), kRowThreads, 0, stream>>>(x, ldx, rows, cols);
    return cudaGetLastError();
}

cudaError_t launch_argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out,
                          cudaStream_t stream) {
    argmax_kernel<<<grid_for(rows, 1), kRowThreads, 0, stream>>>(x, ldx, rows, cols, out);
    return cudaGetLastError();
}

cudaError_t launch_kv_store_one(const KvCacheRef& cache, const float* src, int64_t tok, int64_t head, int64_t T,
                                const int32_t* slot, cudaStream_t stream) {
    const unsigned blocks = grid_for(T * cache.n_kv * cache.D, kElemThreads);
    if (cache.dtype == DType::F16)
        kv_store_kernel<true><<<blocks, kElemThreads, 0, stream>>>(cache, src, tok, head, T, slot);
    else
        kv_store_kernel<false><<<blocks, kElemThreads, 0, stream>>>(cache, src, tok, head, T, slot);
    return cudaGetLastError();
}

cudaError_t launch_gdn_gates(float* beta, int64_t ld_beta, float* g, int64_t ld_g, const float* b, int64_t ld_b,
                             const float* a, int64_t ld_a, const float* neg_exp_a, const float* dt_bias, int64_t T,
                             int64_t nv, cudaStream_t stream) {
    gdn_gates_kernel<<<grid_for(T * nv, kElemThreads), kElemThreads, 0, stream>>>(
        beta, ld_beta, g, ld_g, b, ld_b, a, ld_a, neg_exp_a, dt_bias, T, nv);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::ref::detail
