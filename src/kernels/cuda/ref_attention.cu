// Reference paged attention: one thread block per (token, query head). Keys are walked in tiles of
// kTile: each warp scores some of the tile's keys (lanes over D, shuffle sum) into shared memory,
// then every thread folds the tile into the online softmax (running max m, sum l) and into the
// output dims it owns. All arithmetic in f32.
#include <cuda_fp16.h>

#include "kernels/cuda/ref_attention.h"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::ref::detail {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;                                           // keys scored per step
constexpr int kDimsPerThread = int(kAttentionMaxHeadDim) / kThreads;  // output dims d = tid + i·kThreads

__device__ inline float to_f32(float x) { return x; }
__device__ inline float to_f32(__half x) { return __half2float(x); }

// Row of position p (kv head kvh) in a paged cache whose block table row is `table`.
template <typename E>
__device__ inline const E* cache_row(const PagedCache& c, const int32_t* table, int64_t p, int64_t kvh) {
    return static_cast<const E*>(c.data) + table[p / c.block_size] * c.block_stride + (p % c.block_size) * c.row_stride +
           kvh * c.head_stride;
}

// out[t, h, :Dv] for token t = blockIdx.x, query head h = blockIdx.y.
// q [T, n_head, D] (q_ts, q_hs); out [T, n_head, Dv] (out_ts, out_hs); caches [n_blocks, bs, n_kv, D|Dv].
template <typename KE, typename VE>
__global__ void __launch_bounds__(kThreads)
    attention_kernel(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                     int64_t n_head, PagedCache kc, PagedCache vc, AttnPlan plan, float scale) {
    __shared__ float q_s[kAttentionMaxHeadDim];  // this token's query head
    __shared__ float score_s[kTile];             // scale·q·k for the tile's keys

    const int64_t t = blockIdx.x, h = blockIdx.y;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t D = kc.D, Dv = vc.D, bs = kc.block_size;
    float* o = out + t * out_ts + h * out_hs;

    // Sequence, position and block table row of token t (every thread reads the same values).
    const int s = find_seq(plan.q_start, plan.n_seqs, t);
    if (s >= 0 && plan.kv_len[s] == 0) {  // a padding sequence attends to nothing: zero output
        for (int64_t d = tid; d < Dv; d += kThreads) o[d] = 0.f;
        return;
    }
    int64_t pos = -1;
    bool ok = s >= 0;
    const int32_t* table = nullptr;
    if (ok) {
        const int64_t n_new = int64_t(plan.q_start[s + 1]) - plan.q_start[s], len = plan.kv_len[s];
        pos = len - n_new + (t - plan.q_start[s]);
        ok = pos >= 0 && pos < len && len <= int64_t(plan.max_blocks) * bs;
        table = plan.block_table + int64_t(s) * plan.max_blocks;
    }
    const int64_t n_ctx = pos + 1;  // keys at positions [0, pos]
    int bad_block = 0;
    if (ok)
        for (int64_t b = tid; b < (n_ctx + bs - 1) / bs; b += kThreads)
            bad_block |= table[b] < 0 || table[b] >= kc.n_blocks;
    ok = __syncthreads_or(bad_block) == 0 && ok;  // uniform over the block
    if (!ok) {
        for (int64_t d = tid; d < Dv; d += kThreads) o[d] = quiet_nan();
        return;
    }

    for (int64_t d = tid; d < D; d += kThreads) q_s[d] = q[t * q_ts + h * q_hs + d];
    __syncthreads();
    const int64_t kvh = h / (n_head / kc.n_kv);

    float m = -INFINITY, l = 0.f;  // running max of the scores and Σ exp(score − m)
    float acc[kDimsPerThread] = {};  // Σ exp(score − m)·v[d] for the dims this thread owns
    for (int64_t p0 = 0; p0 < n_ctx; p0 += kTile) {
        const int n_tile = int(min(int64_t(kTile), n_ctx - p0));
        for (int j = warp; j < n_tile; j += kWarps) {
            const KE* k = cache_row<KE>(kc, table, p0 + j, kvh);
            float part = 0.f;
            for (int64_t d = lane; d < D; d += 32) part += q_s[d] * to_f32(k[d]);
            for (int off = 16; off > 0; off /= 2) part += __shfl_xor_sync(0xffffffffu, part, off);
            if (lane == 0) score_s[j] = scale * part;
        }
        __syncthreads();

        float m_tile = -INFINITY;
        for (int j = 0; j < n_tile; ++j) m_tile = fmaxf(m_tile, score_s[j]);
        const float m_new = fmaxf(m, m_tile);
        const float corr = expf(m - m_new);  // 0 on the first tile (m = −inf)
        l *= corr;
        for (int i = 0; i < kDimsPerThread; ++i) acc[i] *= corr;
        for (int j = 0; j < n_tile; ++j) {
            const float w = expf(score_s[j] - m_new);
            l += w;
            const VE* v = cache_row<VE>(vc, table, p0 + j, kvh);
            for (int i = 0; i < kDimsPerThread; ++i) {
                const int64_t d = tid + int64_t(i) * kThreads;
                if (d < Dv) acc[i] += w * to_f32(v[d]);
            }
        }
        m = m_new;
        __syncthreads();  // score_s is rewritten by the next tile
    }
    const float inv_l = 1.f / l;
    for (int i = 0; i < kDimsPerThread; ++i) {
        const int64_t d = tid + int64_t(i) * kThreads;
        if (d < Dv) o[d] = acc[i] * inv_l;
    }
}

template <typename KE, typename VE>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const PagedCache& kc, const PagedCache& vc, const AttnPlan& plan, float scale,
                   cudaStream_t stream) {
    const dim3 grid{unsigned(T), unsigned(n_head)};
    attention_kernel<KE, VE><<<grid, kThreads, 0, stream>>>(out, out_ts, out_hs, q, q_ts, q_hs, n_head, kc, vc, plan,
                                                            scale);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                             int64_t T, int64_t n_head, const PagedCache& kc, const PagedCache& vc,
                             const AttnPlan& plan, float scale, cudaStream_t stream) {
    if (kc.f16 && vc.f16) return launch<__half, __half>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, stream);
    if (kc.f16) return launch<__half, float>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, stream);
    if (vc.f16) return launch<float, __half>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, stream);
    return launch<float, float>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, stream);
}

}  // namespace tessera::cuda::ref::detail
