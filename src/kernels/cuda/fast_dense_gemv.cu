// dense_gemv (fast_dense_gemv.h): a block of 256 threads owns RB rows; its threads stride over the
// rows' 16-byte vectors together (all RB rows' loads issued before the x loads, so ~2·RB loads of
// 16 bytes per thread are in flight), x read through L1 as float4 for every token; the partial
// sums meet in a warp butterfly, then across the 8 warps in shared memory (fixed order:
// deterministic).
#include <algorithm>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_dense_gemv.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kWarps = 8, kThreads = kWarps * 32;

// 16 bytes of weights as floats: 4 f32, or 8 bf16 (bits << 16 is the f32 value, exact).
template <typename W>
struct Vec;
template <>
struct Vec<float> {
    static constexpr int E = 4;
    __device__ static void get(const uint4& q, float* f) {
        f[0] = __uint_as_float(q.x);
        f[1] = __uint_as_float(q.y);
        f[2] = __uint_as_float(q.z);
        f[3] = __uint_as_float(q.w);
    }
};
template <>
struct Vec<uint16_t> {
    static constexpr int E = 8;
    __device__ static void get(const uint4& q, float* f) {
        const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            f[2 * i] = __uint_as_float(u[i] << 16);
            f[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
        }
    }
};

template <typename W, int TMAX, int RB>
__global__ void __launch_bounds__(kThreads)
    dense_gemv_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                      const W* __restrict__ w, int64_t N, int64_t K) {
    constexpr int E = Vec<W>::E;
    __shared__ float part[kWarps][RB * TMAX];
    const int64_t row0 = int64_t(blockIdx.x) * RB;
    const int64_t nv = K / E;  // 16-byte vectors per row
    float acc[RB][TMAX];
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
        for (int t = 0; t < TMAX; ++t) acc[r][t] = 0.f;
    pdl::wait();  // launched with PDL (pdl.cuh): x comes from the kernel before
    pdl::trigger();

    for (int64_t v = threadIdx.x; v < nv; v += kThreads) {
        uint4 q[RB];
#pragma unroll
        for (int r = 0; r < RB; ++r)
            q[r] = row0 + r < N ? dev::load_stream(reinterpret_cast<const uint8_t*>(w + (row0 + r) * K + v * E))
                                : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int t = 0; t < TMAX; ++t) {
            if (t >= T) break;
            float xv[E];
#pragma unroll
            for (int h = 0; h < E / 4; ++h) {
                const float4 f = __ldg(reinterpret_cast<const float4*>(x + t * ldx + v * E) + h);
                xv[4 * h] = f.x;
                xv[4 * h + 1] = f.y;
                xv[4 * h + 2] = f.z;
                xv[4 * h + 3] = f.w;
            }
#pragma unroll
            for (int r = 0; r < RB; ++r) {
                float wv[E];
                Vec<W>::get(q[r], wv);
#pragma unroll
                for (int e = 0; e < E; ++e) acc[r][t] = fmaf(wv[e], xv[e], acc[r][t]);
            }
        }
    }
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
        for (int t = 0; t < TMAX; ++t) {
            const float s = dev::warp_sum(acc[r][t]);
            if (lane == 0) part[warp][r * TMAX + t] = s;
        }
    __syncthreads();
    if (threadIdx.x < RB * TMAX) {
        const int r = int(threadIdx.x) / TMAX, t = int(threadIdx.x) % TMAX;
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < kWarps; ++i) s += part[i][threadIdx.x];
        if (t < T && row0 + r < N) y[t * ldy + row0 + r] = s;
    }
}

template <typename W, int TMAX, int RB>
cudaError_t launch(float* y, int64_t ldy, const float* x, int64_t ldx, int T, const W* w, int64_t N, int64_t K,
                   cudaStream_t stream) {
    const int64_t blocks = (N + RB - 1) / RB;
    return pdl::launch(dense_gemv_kernel<W, TMAX, RB>, dim3(unsigned(blocks)), kThreads, 0, stream, y, ldy, x, ldx, T,
                       w, N, K);
}

template <typename W, int TMAX>
cudaError_t launch_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int T, const W* w, int64_t N, int64_t K,
                        cudaStream_t stream) {
    // Rows per block: the most that still gives every SM two blocks (more loads in flight per
    // thread, x read once for RB rows).
    const int64_t want = 2 * int64_t(current_sm_count());
    if (N >= 4 * want) return launch<W, TMAX, 4>(y, ldy, x, ldx, T, w, N, K, stream);
    if (N >= 2 * want) return launch<W, TMAX, 2>(y, ldy, x, ldx, T, w, N, K, stream);
    return launch<W, TMAX, 1>(y, ldy, x, ldx, T, w, N, K, stream);
}

template <typename W>
cudaError_t launch_tokens(float* y, int64_t ldy, const float* x, int64_t ldx, int T, const W* w, int64_t N, int64_t K,
                          cudaStream_t stream) {
    if (T <= 1) return launch_rows<W, 1>(y, ldy, x, ldx, T, w, N, K, stream);
    if (T <= 2) return launch_rows<W, 2>(y, ldy, x, ldx, T, w, N, K, stream);
    if (T <= 4) return launch_rows<W, 4>(y, ldy, x, ldx, T, w, N, K, stream);
    return launch_rows<W, 8>(y, ldy, x, ldx, T, w, N, K, stream);
}

}  // namespace

cudaError_t launch_dense_gemv(float* y, int64_t ldy, const float* x, int64_t ldx, int T, const void* w, bool w_bf16,
                              int64_t N, int64_t K, cudaStream_t stream) {
    if (w_bf16) return launch_tokens(y, ldy, x, ldx, T, static_cast<const uint16_t*>(w), N, K, stream);
    return launch_tokens(y, ldy, x, ldx, T, static_cast<const float*>(w), N, K, stream);
}

}  // namespace tessera::cuda::fast::detail
