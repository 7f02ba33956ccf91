// Device helpers shared by the reference kernels: grid-stride index ranges and f32 block
// reductions (warp shuffles, then one value per warp through shared memory). Every thread of
// the block gets the result. blockDim.x must be a multiple of 32 and at most 1024.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace tessera::cuda::ref::detail {

constexpr int kRowThreads = 256;          // threads of a one-block-per-row kernel
constexpr int kElemThreads = 256;         // threads of an elementwise kernel
constexpr int64_t kMaxGridBlocks = 65535;  // grid-stride loops cover the rest

// Blocks for n independent items of `per_block` each (at least 1, at most kMaxGridBlocks).
inline unsigned grid_for(int64_t n, int64_t per_block) {
    int64_t b = (n + per_block - 1) / per_block;
    if (b < 1) b = 1;
    if (b > kMaxGridBlocks) b = kMaxGridBlocks;
    return unsigned(b);
}

__device__ inline int64_t global_thread() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline int64_t grid_threads() { return int64_t(gridDim.x) * blockDim.x; }

struct SumOp {
    __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {  // fmaxf ignores NaN, as std::max(m, v) with m first does on the CPU
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Reduces v over the block with op (identity `id`); `scratch` is __shared__ float[32].
// Starts with a barrier so scratch can be reused by consecutive calls.
template <typename Op>
__device__ float block_reduce(float v, Op op, float id, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? scratch[lane] : id;
    for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ inline float block_sum(float v, float* scratch) { return block_reduce(v, SumOp{}, 0.f, scratch); }
__device__ inline float block_max(float v, float* scratch) {
    return block_reduce(v, MaxOp{}, -INFINITY, scratch);
}

// RMSNorm's scale for a row of n values with Σ x² = ss: 1 / √(ss / n + eps), in double, rounded
// to f32 (the CPU ops' arithmetic, kernels/cpu/norm.cpp).
__device__ inline float rms_inverse(float ss, int64_t n, float eps) {
    return float(1.0 / sqrt(double(ss) / double(n) + double(eps)));
}

// Σ x[i]² over one row of n floats, every thread of the block striding over it, in f32.
__device__ inline float block_sum_squares(const float* x, int64_t n, float* scratch) {
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) ss += x[i] * x[i];
    return block_sum(ss, scratch);
}

}  // namespace tessera::cuda::ref::detail
