// Device helpers of the fused GDN decode-step kernels (fast_gdn.cu, fast_gdn_decode.cu,
// fast_gdn_decode_head.cu): SiLU, a block sum of three values, the conv taps' SiLU, 4-byte
// cp.async (the chunked kernels' fast_gdn_wy.cuh takes it too), and the two halves of a cluster
// barrier. Header-only, device code only.
#pragma once

namespace tessera::cuda::fast::detail::step {

__device__ inline float silu(float x) { return x / (1.f + expf(-x)); }

// Sum over the block of three values (every thread gets the same sums, added in warp order).
// Uses `sh` [blockDim.x / 32][3]; its barrier also publishes the block's earlier shared writes.
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
    for (int i = 0; i < nw; ++i) {
        r.x += sh[i][0];
        r.y += sh[i][1];
        r.z += sh[i][2];
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

// Cluster barrier halves. The default arrive releases every earlier memory access of the thread
// to the cluster, global stores included (it waits for them); the relaxed one orders nothing.
__device__ inline void cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory"); }
__device__ inline void cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ inline void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }

}  // namespace tessera::cuda::fast::detail::step
