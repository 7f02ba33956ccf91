// Device helpers of the fused GDN decode-step kernels (fast_gdn.cu, fast_gdn_decode.cu,
// fast_gdn_decode_head.cu): SiLU, a block sum of three values (its warp count known at compile time or
// not), the conv taps' SiLU (over a channel-major or a tap-major window), 4- and 16-byte
// cp.async (the chunked kernels' fast_gdn_wy.cuh takes them too), runs of floats copied into shared
// memory spread over a block (Runs), and the two halves of a cluster barrier. Header-only, device
// code only.
#pragma once

#include <cstdint>

namespace tessera::cuda::fast::detail::step {

__device__ inline float silu(float x) { return x / (1.f + expf(-x)); }

// Sum over the block of three values (every thread gets the same sums, added in warp order).
// Uses `sh` [warps][3]; its barrier also publishes the block's earlier shared writes. NWARPS: the
// block's warps where known at compile time (the sum unrolled; the same additions, the same bits),
// 0: blockDim.x / 32.
template <int NWARPS = 0>
__device__ inline float3 block_sum3(float3 x, float (*sh)[3]) {
    for (int off = 16; off > 0; off /= 2) {
        x.x += __shfl_xor_sync(0xffffffffu, x.x, off);
        x.y += __shfl_xor_sync(0xffffffffu, x.y, off);
        x.z += __shfl_xor_sync(0xffffffffu, x.z, off);
    }
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32, nw = blockDim.x / 32;
    if (lane == 0) {
        sh[w][0] = x.x;
        sh[w][1] = x.y;
        sh[w][2] = x.z;
    }
    __syncthreads();
    float3 r = make_float3(0.f, 0.f, 0.f);
    if constexpr (NWARPS > 0) {
#pragma unroll
        for (int i = 0; i < NWARPS; ++i) r.x += sh[i][0], r.y += sh[i][1], r.z += sh[i][2];
    } else {
        for (int i = 0; i < nw; ++i) {
            r.x += sh[i][0];
            r.y += sh[i][1];
            r.z += sh[i][2];
        }
    }
    return r;
}

// SiLU(Σ_{r<K} w[r]·win[r]) over a conv window [K-1 state rows, oldest first | the new input]: the
// CPU's order. KM >= K.
template <int KM>
__device__ inline float conv_silu(const float* w, const float* win, int K) {
    float acc = 0.f;
#pragma unroll
    for (int r = 0; r < KM; ++r)
        if (r < K) acc += w[r] * win[r];
    return silu(acc);
}

__device__ inline void cp_async4(float* dst, const float* src) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
__device__ inline void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

// Queues conv tap `tap` of channel ch into *w, *win by cp.async: phase 0 the weight conv_w[ch, tap]
// and, for tap < K-1, the state row cst[tap, ch] (rows C apart; no state: a zero stored); phase 1
// the new input xrow[ch] as the last tap. Phase 0 reads no kernel's output (before a PDL wait).
__device__ inline void queue_conv_tap(float* w, float* win, const float* conv_w, const float* cst, const float* xrow,
                                      int64_t C, int64_t ch, int tap, int K, int phase) {
    if (phase == 1) {
        if (tap == K - 1) cp_async4(win, xrow + ch);
        return;
    }
    cp_async4(w, conv_w + ch * K + tap);
    if (tap == K - 1) return;
    if (cst) cp_async4(win, cst + tap * C + ch);
    else *win = 0.f;
}

// SiLU(Σ_{r<K} w[r]·win[r·stride]): conv_silu over a tap-major window (rows `stride` apart).
template <int KM>
__device__ inline float conv_silu_strided(const float* w, const float* win, int stride, int K) {
    float acc = 0.f;
#pragma unroll
    for (int r = 0; r < KM; ++r)
        if (r < K) acc += w[r] * win[r * stride];
    return silu(acc);
}

__device__ inline void cp_async16(float* dst, const float* src) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// Runs of floats global → shared memory, each run's items — 16-byte chunks where both ends are
// 16-byte aligned and n % 4 == 0, else single floats — dealt to the block's threads in turn,
// continuing across runs (so a few short runs still spread over every thread). copy: cp.async;
// load: plain loads (where no cp.async group may be waited for); zero: stores of 0.
template <int THREADS>
struct Runs {
    static constexpr int threads = THREADS;
    int tid, next = 0;  // next: the thread taking the next run's first item
    __device__ int first() const { return (tid - next + threads) % threads; }
    __device__ static bool wide(const float* dst, const float* src, int n) {
        return n % 4 == 0 && ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0;
    }
    // Item i of the run (its 16-byte chunk or float) by `wide(i)` / `one(i)`, this thread's items only.
    template <class Wide, class One>
    __device__ void deal(const float* dst, const float* src, int n, Wide wide_item, One one_item) {
        const int i0 = first();
        if (wide(dst, src, n)) {
#pragma unroll 1
            for (int i = i0; i < n / 4; i += threads) wide_item(i);
            next = (next + n / 4) % threads;
        } else {
#pragma unroll 1
            for (int i = i0; i < n; i += threads) one_item(i);
            next = (next + n) % threads;
        }
    }
    __device__ void copy(float* dst, const float* src, int n) {
        deal(
            dst, src, n, [&](int i) { cp_async16(dst + 4 * i, src + 4 * i); },
            [&](int i) { cp_async4(dst + i, src + i); });
    }
    __device__ void load(float* dst, const float* src, int n) {
        deal(
            dst, src, n,
            [&](int i) { *reinterpret_cast<float4*>(dst + 4 * i) = *reinterpret_cast<const float4*>(src + 4 * i); },
            [&](int i) { dst[i] = src[i]; });
    }
    __device__ void zero(float* dst, int n) {
#pragma unroll 1
        for (int i = first(); i < n; i += threads) dst[i] = 0.f;
        next = (next + n) % threads;
    }
};

// Cluster barrier halves. The default arrive releases every earlier memory access of the thread
// to the cluster, global stores included (it waits for them); the relaxed one orders nothing.
__device__ inline void cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory"); }
__device__ inline void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ inline void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

}  // namespace tessera::cuda::fast::detail::step
