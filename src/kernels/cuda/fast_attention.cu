// Kernels of the fast paged attention (fast_attention.h), AttnKernel::Simt: a block per (token,
// kv head, split) scores a tile of keys for every query head of the group, folds it into a
// per-head online softmax, and accumulates the values; a second kernel (shared with the
// tensor-core kernel, fast_decode_attention.cu) merges the splits.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/fast_attention_tile.cuh"
#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::detail {

cudaError_t launch_attention_combine(float* out, int64_t out_ts, int64_t out_hs, const float* partial, int64_t T,
                                     int64_t n_head, int64_t D, int splits, OutGate gate, cudaStream_t stream);

namespace {

using dev::warp_max;
using dev::warp_sum;

constexpr int kWarps = 8, kThreads = kWarps * 32;

template <typename E>
constexpr int kTile = sizeof(E) == 2 ? 32 : 16;  // keys per shared-memory tile (≤ 32: a lane per key)

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }

// partial: [T, n_head, splits, D + 2] = (m, l, acc[D]) per split, when splits > 1.
template <typename E, int DPL>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ q, int64_t q_ts,
                     int64_t q_hs, int n_head, ref::PagedCache kc, ref::PagedCache vc, AttnPlan plan, float scale,
                     int splits, float* __restrict__ partial, OutGate gate) {
    constexpr int D = 32 * DPL, KT = kTile<E>;
    __shared__ __align__(16) E k_s[KT][D];
    __shared__ __align__(16) E v_s[KT][D];
    __shared__ float q_s[kAttnMaxGroup][D];
    __shared__ float p_s[kAttnMaxGroup][KT];
    __shared__ int bad_s;

    const int64_t t = blockIdx.x;
    const int g = blockIdx.y, sp = blockIdx.z, G = n_head / int(kc.n_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t bs = kc.block_size;

    // Where this block's results go: out (one split) or its partial row.
    auto finish = [&](int h, float m, float l, const float* acc) {  // lane-level: dims lane·DPL + i
        const int head = g * G + h;
        if (splits == 1) {
            float* o = out + t * out_ts + int64_t(head) * out_hs + lane * DPL;
            const float inv = l > 0.f ? 1.f / l : 0.f;
#pragma unroll
            for (int i = 0; i < DPL; ++i)
                o[i] = dev::gated(gate, m != m ? ref::quiet_nan() : acc[i] * inv, t, head, lane * DPL + i);
        } else {
            float* pr = partial + ((t * n_head + head) * splits + sp) * int64_t(D + 2);
            if (lane == 0) {
                pr[0] = m;
                pr[1] = l;
            }
#pragma unroll
            for (int i = 0; i < DPL; ++i) pr[2 + lane * DPL + i] = acc[i];
        }
    };

    const ref::TokenContext tc = ref::token_context(plan, t, bs);
    const int s = tc.s;
    const int64_t pos = tc.pos, len = tc.len;
    const bool ok = tc.ok;
    if (warp >= G) return;  // no query head for this warp (whole warps: no barrier below counts them)
    float zero[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) zero[i] = ok ? 0.f : ref::quiet_nan();
    if (!ok || len == 0) {  // a bad plan row (NaN), or a padding sequence (zeros)
        finish(warp, ok ? -INFINITY : ref::quiet_nan(), ok ? 0.f : ref::quiet_nan(), zero);
        return;
    }
    // This split's keys: [lo, hi) of [0, pos].
    const int64_t max_ctx = int64_t(plan.max_blocks) * bs;
    const int64_t per = ((max_ctx + splits - 1) / splits + KT - 1) / KT * KT;
    const int64_t lo = int64_t(sp) * per, hi = min(lo + per, pos + 1);
    const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;
    const int W = G;  // warps taking part from here on: one per query head

    for (int i = tid; i < G * D; i += W * 32) {
        const int h = i / D, d = i - h * D;
        q_s[h][d] = q[t * q_ts + int64_t(g * G + h) * q_hs + d] * scale;
    }
    if (tid == 0) bad_s = 0;
    asm volatile("bar.sync 1, %0;" ::"r"(W * 32));
    float qr[kAttnMaxGroup][DPL];
#pragma unroll
    for (int h = 0; h < kAttnMaxGroup; ++h)
#pragma unroll
        for (int i = 0; i < DPL; ++i) qr[h][i] = h < G ? q_s[h][lane * DPL + i] : 0.f;

    float m = -INFINITY, l = 0.f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; ++i) acc[i] = 0.f;
    constexpr int kVec = int(16 / sizeof(E));  // elements per 16-byte load
    for (int64_t p0 = lo; p0 < hi; p0 += KT) {
        const int n_tile = int(min(int64_t(KT), hi - p0));
        // K and V rows of the tile into shared memory (16-byte vectors).
        for (int i = tid; i < n_tile * (D / kVec); i += W * 32) {
            const int j = i / (D / kVec), c = (i - j * (D / kVec)) * kVec;
            const int64_t p = p0 + j, blk = table[p / bs];
            if (blk < 0 || blk >= kc.n_blocks) {
                bad_s = 1;
                continue;
            }
            const int64_t row = p % bs;
            const E* kp = static_cast<const E*>(kc.data) + blk * kc.block_stride + row * kc.row_stride + g * kc.head_stride + c;
            const E* vp = static_cast<const E*>(vc.data) + blk * vc.block_stride + row * vc.row_stride + g * vc.head_stride + c;
            *reinterpret_cast<uint4*>(&k_s[j][c]) = __ldg(reinterpret_cast<const uint4*>(kp));
            *reinterpret_cast<uint4*>(&v_s[j][c]) = __ldg(reinterpret_cast<const uint4*>(vp));
        }
        asm volatile("bar.sync 1, %0;" ::"r"(W * 32));
        // Scores: warp w takes keys w, w + W, …; lanes split D; one sum per query head.
        for (int j = warp; j < n_tile; j += W) {
            float kv[DPL];
#pragma unroll
            for (int i = 0; i < DPL; ++i) kv[i] = to_f32(k_s[j][lane * DPL + i]);
#pragma unroll
            for (int h = 0; h < kAttnMaxGroup; ++h) {
                if (h >= G) break;
                float part = 0.f;
#pragma unroll
                for (int i = 0; i < DPL; ++i) part = fmaf(qr[h][i], kv[i], part);
                part = warp_sum(part);
                if (lane == 0) p_s[h][j] = part;
            }
        }
        asm volatile("bar.sync 1, %0;" ::"r"(W * 32));
        // Online softmax of head h = warp over the tile (lane j holds key j), then the values.
        const float sc = lane < n_tile ? p_s[warp][lane] : -INFINITY;
        const float m_new = fmaxf(m, warp_max(sc));
        const float corr = __expf(m - m_new);  // 0 on the first tile (m = −inf)
        const float pj = lane < n_tile ? __expf(sc - m_new) : 0.f;
        l = l * corr + warp_sum(pj);
        m = m_new;
#pragma unroll
        for (int i = 0; i < DPL; ++i) acc[i] *= corr;
        for (int j = 0; j < n_tile; ++j) {
            const float w = __shfl_sync(0xffffffffu, pj, j);
#pragma unroll
            for (int i = 0; i < DPL; ++i) acc[i] = fmaf(w, to_f32(v_s[j][lane * DPL + i]), acc[i]);
        }
        asm volatile("bar.sync 1, %0;" ::"r"(W * 32));  // the tile and p_s are rewritten next
    }
    if (bad_s) {
        finish(warp, ref::quiet_nan(), ref::quiet_nan(), zero);
        return;
    }
    if (lo >= hi) m = -INFINITY;  // an empty split: (−inf, 0, 0)
    finish(warp, m, l, acc);
}

// out[t, h, :] = Σ_s acc_s · e^(m_s − M) / Σ_s l_s · e^(m_s − M); zero when every split is empty,
// NaN when any split is. A block per (token, head, 32 dims), its 8 warps on splits w, w + 8, …:
// each lane requests its splits' values at once together with every split's (m, l) — one memory
// latency, where a warp walking all splits in batches of 16 after the weights took five at 64
// splits — then each warp reduces M and L by shuffles in a fixed order (the same bits in every
// warp), weighs its splits in order, and the 8 partial sums meet in shared memory in warp order
// (deterministic).
constexpr int kCombineWarps = 8;
constexpr int kCombinePer = int(kAttnMaxSplits) / kCombineWarps;  // splits a warp takes, at most

__global__ void __launch_bounds__(kCombineWarps * 32)
    combine_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ partial,
                   int n_head, int D, int splits, OutGate gate) {
    __shared__ float wgt[kCombineWarps][kAttnMaxSplits];
    __shared__ float part[kCombineWarps][32];
    pdl::wait();  // launched with PDL (pdl.cuh): the partials come from the kernel before
    pdl::trigger();
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int64_t t = blockIdx.x;
    const int h = blockIdx.y, d = int(blockIdx.z) * 32 + lane;
    const bool dok = d < D;
    const int64_t stride = D + 2;
    const float* pr = partial + (t * n_head + h) * splits * stride;
    float v[kCombinePer];  // this lane's dimension of splits warp + 8·j
#pragma unroll
    for (int j = 0; j < kCombinePer; ++j) {
        const int s = warp + kCombineWarps * j;
        v[j] = dok && s < splits ? pr[s * stride + 2 + d] : 0.f;
    }
    constexpr int kPer = kAttnMaxSplits / 32;  // splits' (m, l) a lane holds
    float m[kPer], l[kPer];
    float mx = -INFINITY;
    bool nan = false;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int s = i * 32 + lane;
        m[i] = s < splits ? pr[s * stride] : -INFINITY;
        l[i] = s < splits ? pr[s * stride + 1] : 0.f;
        nan |= m[i] != m[i];
        mx = fmaxf(mx, m[i]);
    }
    mx = dev::warp_max(mx);
    const bool any_nan = __any_sync(0xffffffffu, nan);
    float lsum = 0.f;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
        const int s = i * 32 + lane;
        const float e = m[i] == -INFINITY || mx == -INFINITY ? 0.f : __expf(m[i] - mx);
        if (s < splits) wgt[warp][s] = e;
        lsum += l[i] * e;
    }
    const float L = dev::warp_sum(lsum);  // a butterfly: the same bits on every lane of every warp
    __syncwarp();                         // publishes wgt within the warp
    float num = 0.f;
#pragma unroll
    for (int j = 0; j < kCombinePer; ++j) {
        const int s = warp + kCombineWarps * j;
        if (s < splits) num = fmaf(wgt[warp][s], v[j], num);
    }
    part[warp][lane] = num;
    __syncthreads();
    if (warp != 0 || !dok) return;
    float* o = out + t * out_ts + int64_t(h) * out_hs;
    if (any_nan) {
        o[d] = dev::gated(gate, ref::quiet_nan(), t, h, d);
        return;
    }
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kCombineWarps; ++w) total += part[w][lane];
    o[d] = dev::gated(gate, L > 0.f ? total / L : 0.f, t, h, d);
}

template <typename E, int DPL>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan,
                   float scale, int splits, float* partial, OutGate gate, cudaStream_t stream) {
    const dim3 grid{unsigned(T), unsigned(kc.n_kv), unsigned(splits)};
    attention_kernel<E, DPL><<<grid, kThreads, 0, stream>>>(out, out_ts, out_hs, q, q_ts, q_hs, int(n_head), kc, vc,
                                                            plan, scale, splits, partial, gate);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess || splits == 1) return e;
    return launch_attention_combine(out, out_ts, out_hs, partial, T, n_head, kc.D, splits, gate, stream);
}

template <typename E>
cudaError_t launch_dims(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                        int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                        const AttnPlan& plan, float scale, int splits, float* partial, OutGate gate,
                        cudaStream_t stream) {
    switch (kc.D / 32) {
        case 1: return launch<E, 1>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, stream);
        case 2: return launch<E, 2>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, stream);
        case 4: return launch<E, 4>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, stream);
        case 8: return launch<E, 8>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, stream);
        default: return cudaErrorInvalidValue;  // D = 96, 160, 192, 224: not instantiated
    }
}

}  // namespace

cudaError_t launch_attention_combine(float* out, int64_t out_ts, int64_t out_hs, const float* partial, int64_t T,
                                     int64_t n_head, int64_t D, int splits, OutGate gate, cudaStream_t stream) {
    const unsigned dims = unsigned((D + 31) / 32);
    return pdl::launch(combine_kernel, dim3(unsigned(T), unsigned(n_head), dims), kCombineWarps * 32, 0, stream, out,
                       out_ts, out_hs, partial, int(n_head), int(D), splits, gate);
}

cudaError_t launch_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                             int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                             const AttnPlan& plan, float scale, int splits, float* partial, OutGate gate,
                             cudaStream_t stream) {
    if (kc.f16)
        return launch_dims<__half>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial,
                                   gate, stream);
    return launch_dims<float>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial,
                              gate, stream);
}

}  // namespace tessera::cuda::fast::detail
