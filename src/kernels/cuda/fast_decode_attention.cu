// Kernel of the tensor-core flash-decoding (fast_attention.h, AttnKernel::Mma): a block per
// (query token, kv head, context split). The mma's 16 rows are the group's query heads (G ≤ 16,
// zero rows past G), so one K / V tile serves every head of the group at once:
//   s[16 heads × 16 keys] = q·kᵀ and o[16 heads × D] += p·v on mma.sync m16n8k16 (f16 operands,
//   f32 accumulators), warp w of kW taking keys 16w … 16w + 15 of each 64-key tile with its own
//   online softmax; the tiles stream from the paged cache by cp.async, two buffers deep.
// At the end the warps' (m, l, o) are merged in shared memory in warp order, and the block
// writes out (one split) or its split's partial (m, l, o) for fast_attention.cu's merge kernel —
// or, the fused merge (AttnMerge::fused), merges them in this kernel: the splits of a (token, kv
// head) run as thread-block clusters that merge through distributed shared memory, and the last
// cluster to end (a ticket) merges the clusters' partials (fused_merge below).
// A split's keys are cut from the token's own context on the device (whole tiles), so the grid
// depends on (T, n_kv, splits) alone: no host sync, CUDA-graph safe. Launched with PDL: the plan
// lookups and the first tile's loads overlap the kernel before.
//
// Precision as fast_flash_attention.cu: q·scale·log2(e) and p rounded to f16; s, m, l, o in f32.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>

#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/fast_attention_tile.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::detail {

cudaError_t launch_attention_combine(float* out, int64_t out_ts, int64_t out_hs, const float* partial, int64_t T,
                                     int64_t n_head, int64_t D, int splits, OutGate gate, cudaStream_t stream);

namespace {

using namespace dev;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kW = 4, kThreads = kW * 32;
constexpr int kBN = 16 * kW;  // keys a tile: 16 a warp
constexpr int kRows = 16;     // mma rows: query heads of the group, zero-padded
constexpr float kLn2 = 0.6931471805599453f;
constexpr int kMaxCluster = 16;  // the fused merge's blocks a cluster (16: non-portable)

template <int D>
constexpr size_t smem_bytes() {
    return size_t(kRows + 4 * kBN) * (D / 8) * 16;  // q_s | k_s [2] | v_s [2]
}

// A warp's merge of a row's n partial results (m in log2 units, l): M = max m (NaN when any m is
// NaN), the weights 2^(m − M) (0 for m = −inf) in place of m, L = Σ l·weight — lane j taking
// j, j + 32, … and a butterfly over the lanes: a fixed order, the same bits in every launch.
__device__ __forceinline__ void merge_row(float* m, const float* l, int n, float* ml, int lane) {
    float M = -INFINITY;
    bool nan = false;
    for (int j = lane; j < n; j += 32) {
        nan |= m[j] != m[j];
        M = fmaxf(M, m[j]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(kFull, M, o));
    nan = __any_sync(kFull, nan);
    float L = 0.f;
    for (int j = lane; j < n; j += 32) {
        const float w = m[j] == -INFINITY ? 0.f : exp2_approx(m[j] - M);
        L += l[j] * w;
        m[j] = w;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(kFull, L, o);
    if (lane == 0) ml[0] = nan ? ref::quiet_nan() : M, ml[1] = L;
}

// out[t, head, d … d + 3] = acc / L (σ(gate) applied): NaN where M is, zero where L is.
__device__ __forceinline__ void store_out4(float* out, int64_t out_ts, int64_t out_hs, const OutGate& gate, int64_t t,
                                           int head, int d, float4 acc, float M, float L) {
    const float a[4] = {acc.x, acc.y, acc.z, acc.w};
    float* o = out + t * out_ts + int64_t(head) * out_hs + d;
#pragma unroll
    for (int e = 0; e < 4; ++e)
        o[e] = gated(gate, M != M ? ref::quiet_nan() : (L > 0.f ? a[e] / L : 0.f), t, head, d + e);
}

__device__ __forceinline__ void fma4(float4& acc, float w, float4 x) {
    acc.x = fmaf(w, x.x, acc.x);
    acc.y = fmaf(w, x.y, acc.y);
    acc.z = fmaf(w, x.z, acc.z);
    acc.w = fmaf(w, x.w, acc.w);
}

// The fused merge, run by every block of every cluster of the launch (each path of
// decode_mma_kernel<D, true> ends here, after pdl::wait()). The block's result: fin_s[h] = (m in
// log2 units, l) and red[h·D + d] = o (h < G; m NaN: a bad plan, −inf: no key). Clusters of C
// blocks along z: cluster ci = blockIdx.z / C of nc = gridDim.z / C holds splits ci·C … ci·C + C − 1.
//  1. cluster barrier; every block reads the C blocks' (m, l) per row (distributed shared memory)
//     and weighs them in rank order; block `rank` takes dims rank·4·kThreads + 4·tid, … of the
//     G × D outputs, each the rank-ordered Σ weight · o over the C blocks' shared memory.
//  2. nc = 1: those are the outputs. Else they are the cluster's partial, partial[t, head, ci] =
//     (m, l, −, −, o[D]) (D + 4 floats: o 16-byte aligned); each thread fences its writes, a
//     cluster barrier, and rank 0 draws a ticket on counters[t · n_kv + kv head]. The cluster
//     drawing nc − 1 is the last (every other cluster's partial is written and fenced before its
//     ticket): it resets the counter to 0 for the next launch, fences, and tells its blocks
//     (a cluster barrier); the others are done.
//  3. The last cluster merges the nc partials as in 1, in cluster order (the same bits whatever
//     order the clusters ended in), its C blocks splitting the outputs.
// No block waits for a block outside its cluster (clusters are co-scheduled; the ticket only
// picks who merges), so it cannot deadlock whether or not every cluster is resident at once.
template <int D>
__device__ __forceinline__ void fused_merge(const float (&fin_s)[kRows][2], float* red, float* out, int64_t out_ts,
                                            int64_t out_hs, float* partial, unsigned* counters, const OutGate& gate,
                                            int n_head, int G, int64_t t, int g, int tid) {
    const int lane = tid & 31, warp = tid >> 5;
    namespace cg = cooperative_groups;
    constexpr int D4 = D / 4;
    __shared__ float mw_s[kRows][kMaxCluster];  // the blocks' m per row, then their weights
    __shared__ float lw_s[kRows][kMaxCluster];  // … and their l
    __shared__ float cml_s[kRows][2];           // the merged (M, L) per row
    __shared__ int last_s;
    cg::cluster_group cl = cg::this_cluster();
    const int C = int(cl.num_blocks()), rank = int(cl.block_rank());
    const int nc = int(gridDim.z) / C, ci = int(blockIdx.z) / C;

    cl.sync();  // every block's (m, l) and o are in its shared memory
    for (int i = tid; i < G * C; i += kThreads) {
        const int h = i / C, j = i - h * C;
        const float* f = cl.map_shared_rank(&fin_s[0][0], j);
        mw_s[h][j] = f[2 * h];
        lw_s[h][j] = f[2 * h + 1];
    }
    __syncthreads();
    for (int h = warp; h < G; h += kW) merge_row(mw_s[h], lw_s[h], C, cml_s[h], lane);
    __syncthreads();
    for (int i = rank * kThreads + tid; i < G * D4; i += C * kThreads) {
        const int h = i / D4, d = (i - h * D4) * 4;
        float4 acc{0.f, 0.f, 0.f, 0.f};
        for (int j0 = 0; j0 < C; j0 += 8) {  // 8 blocks' o in flight, then their sum in rank order
            float4 x[8];
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (j0 + j < C) x[j] = *reinterpret_cast<const float4*>(cl.map_shared_rank(red, j0 + j) + h * D + d);
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (j0 + j < C) fma4(acc, mw_s[h][j0 + j], x[j]);
        }
        if (nc == 1) {
            store_out4(out, out_ts, out_hs, gate, t, g * G + h, d, acc, cml_s[h][0], cml_s[h][1]);
        } else {
            float* pr = partial + ((t * n_head + g * G + h) * nc + ci) * int64_t(D + 4);
            if (d == 0) __stcg(reinterpret_cast<float2*>(pr), make_float2(cml_s[h][0], cml_s[h][1]));
            __stcg(reinterpret_cast<float4*>(pr + 4 + d), acc);
        }
    }
    if (nc == 1) {
        cl.sync();  // no block leaves while another still reads its shared memory
        return;
    }
    __threadfence();  // this thread's partial writes, before the ticket
    cl.sync();        // … every thread's of the cluster; and every read of another block's shared memory is done
    if (rank == 0 && tid == 0) {
        unsigned* ctr = counters + t * int64_t(gridDim.y) + g;
        const int last = atomicAdd(ctr, 1u) == unsigned(nc - 1);
        if (last) {
            atomicExch(ctr, 0u);  // every cluster has drawn: zero for the next launch
            __threadfence();      // the other clusters' partials, before this cluster reads them
        }
        for (int j = 0; j < C; ++j) *cl.map_shared_rank(&last_s, j) = last;
    }
    cl.sync();
    if (!last_s) return;

    // The last cluster: the nc partials' (m, l) per row into this block's red (no block reads it now).
    float* mw = red;           // [G][nc]: m, then the weights
    float* lw = red + G * nc;  // [G][nc]: l
    const float* base = partial + (t * n_head + g * G) * nc * int64_t(D + 4);
    for (int i = tid; i < G * nc; i += kThreads) {
        const float2 ml = __ldcg(reinterpret_cast<const float2*>(base + i * int64_t(D + 4)));
        mw[i] = ml.x;
        lw[i] = ml.y;
    }
    __syncthreads();
    for (int h = warp; h < G; h += kW) merge_row(mw + h * nc, lw + h * nc, nc, cml_s[h], lane);
    __syncthreads();
    for (int i = rank * kThreads + tid; i < G * D4; i += C * kThreads) {
        const int h = i / D4, d = (i - h * D4) * 4;
        const float* pr = base + h * nc * int64_t(D + 4) + 4 + d;
        const float* w = mw + h * nc;
        float4 acc{0.f, 0.f, 0.f, 0.f};
        for (int c0 = 0; c0 < nc; c0 += 8) {  // 8 partials' loads in flight, then their sum in order
            float4 x[8];
#pragma unroll
            for (int c = 0; c < 8; ++c)
                if (c0 + c < nc) x[c] = __ldcg(reinterpret_cast<const float4*>(pr + (c0 + c) * int64_t(D + 4)));
#pragma unroll
            for (int c = 0; c < 8; ++c)
                if (c0 + c < nc) fma4(acc, w[c0 + c], x[c]);
        }
        store_out4(out, out_ts, out_hs, gate, t, g * G + h, d, acc, cml_s[h][0], cml_s[h][1]);
    }
}

// Grid (T, n_kv, splits). scale_log2 = scale · log2(e). kFused = false: partial [T, n_head,
// splits, D + 2] = (m in natural-log units, l, o[D]) per split when splits > 1, for the combine
// kernel. kFused = true (splits > 1; clusters along z; counters: fused_merge): the merge here.
template <int D, bool kFused>
__global__ void __launch_bounds__(kThreads)
    decode_mma_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ q,
                      int64_t q_ts, int64_t q_hs, int n_head, ref::PagedCache kc, ref::PagedCache vc, AttnPlan plan,
                      float scale_log2, int splits, float* __restrict__ partial, OutGate gate, unsigned* counters) {
    constexpr int CH = D / 8;
    extern __shared__ __align__(128) uint4 smem[];
    uint4* q_s = smem;                // [kRows][CH]
    uint4* k_s = q_s + kRows * CH;    // [2][kBN][CH]
    uint4* v_s = k_s + 2 * kBN * CH;  // [2][kBN][CH]
    __shared__ int2 rows_s[3][kBN];
    __shared__ float ml_s[kW][kRows][2];  // each warp's (m, l) per row
    __shared__ float fin_s[kRows][2];     // the block's (M, L) per row

    const int64_t t = blockIdx.x;
    const int g = blockIdx.y, sp = blockIdx.z, G = n_head / int(kc.n_kv);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    float* red = reinterpret_cast<float*>(k_s);  // at the end: [kW][kRows][D], fits in k_s and v_s
    static_assert(size_t(kW) * kRows * D * 4 <= size_t(4) * kBN * CH * 16);
    static_assert(2 * kRows * (kAttnMaxSplits / 2) <= kW * kRows * 64);  // fused_merge's last cluster's (m, l)
    auto merge = [&] {  // fused: every block ends here
        fused_merge<D>(fin_s, red, out, out_ts, out_hs, partial, counters, gate, n_head, G, t, g, tid);
    };

    // Every head of the group gets m, l and o = v (out = v with one split).
    auto write_const = [&](float m, float l, float v) {
        pdl::wait();  // nothing is written before the kernel before has ended
        pdl::trigger();
        if constexpr (kFused) {  // the block's result, for the merge after attend()
            for (int i = tid; i < G * D; i += kThreads) red[i] = v;
            if (tid < G) fin_s[tid][0] = m, fin_s[tid][1] = l;
        } else {
            for (int i = tid; i < G * D; i += kThreads) {
                const int h = i / D, d = i - h * D, head = g * G + h;
                if (splits == 1) {
                    out[t * out_ts + int64_t(head) * out_hs + d] = gated(gate, v, t, head, d);
                } else {
                    float* pr = partial + ((t * n_head + head) * splits + sp) * int64_t(D + 2);
                    if (d == 0) pr[0] = m, pr[1] = l;
                    pr[2 + d] = v;
                }
            }
        }
    };

    // The block's attention (every return leaves its result: out, its partial, or, fused, its
    // shared memory for the merge), then the fused merge: one call site.
    auto attend = [&] {
        const ref::TokenContext tc = ref::token_context(plan, t, kc.block_size);
        const int s = tc.s;
        const int64_t pos = tc.pos, len = tc.len;
        const bool ok = tc.ok;
        // This split's keys [lo, hi) of [0, pos]: the context in `splits` runs of whole tiles (pos is
        // meaningless for a bad plan row or a padding sequence, which take the constants below).
        const int64_t n_keys = pos + 1;
        const int64_t per = ((n_keys + splits - 1) / splits + kBN - 1) / kBN * kBN;
        const int64_t lo = int64_t(sp) * per, hi = min(lo + per, n_keys);
        // A bad plan row: NaN. A padding sequence (len 0) or an empty split: no key (−inf, 0, 0).
        if (!ok || len == 0 || lo >= hi)
            return ok ? write_const(-INFINITY, 0.f, 0.f)
                      : write_const(ref::quiet_nan(), ref::quiet_nan(), ref::quiet_nan());
        const int n_kt = int((hi - lo + kBN - 1) / kBN);
        const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;
        const int64_t bs = kc.block_size;
        bool bad = false;

        auto resolve_rows = [&](int kt) {  // where key lo + kt·kBN + tid lives (threads < kBN)
            if (tid < kBN) {
                const int64_t p = lo + int64_t(kt) * kBN + tid;
                int2 e{-2, 0};
                if (p < hi) {
                    const int32_t blk = table[p / bs];
                    e = {blk >= 0 && blk < kc.n_blocks ? blk : -1, int(p % bs)};
                    bad |= e.x < 0;
                }
                rows_s[kt % 3][tid] = e;
            }
        };
        resolve_rows(0);
        if (n_kt > 1) resolve_rows(1);
        __syncthreads();
        // Launched with PDL (pdl.cuh): the plan is copied before a step's first kernel and keys before
        // this step's (first_new) were stored by earlier steps, so the first tile's rows of those keys
        // stream while the kernel before (which stores this step's k, v and writes q) ends; the rows of
        // this step's keys (only in the split that holds them) follow the wait, in a second cp.async
        // group (the tile loop's first wait takes both).
        const int64_t first_new = len - (int64_t(plan.q_start[s + 1]) - plan.q_start[s]);
        // Rows 0 … n_old − 1 of the first tile: keys of earlier steps.
        const int n_old = int(max(int64_t(0), min(int64_t(kBN), first_new - lo)));
        auto load_first = [&](int r0, int r1) {
            load_kv_rows<D, kThreads>(k_s, kc, rows_s[0], g, tid, r0, r1);
            load_kv_rows<D, kThreads>(v_s, vc, rows_s[0], g, tid, r0, r1);
            cp_async_commit();
        };
        load_first(0, n_old);
        pdl::wait();
        pdl::trigger();
        // The group's q · scale · log2(e) as f16 rows (rows past G: zeros); the first barrier of the
        // tile loop publishes them.
        for (int i = tid; i < kRows * CH; i += kThreads) {
            const int r = i / CH, ch = i - r * CH;
            q_s[swz<D>(r, ch)] =
                r < G ? q_chunk_f16(q + t * q_ts + int64_t(g * G + r) * q_hs + ch * 8, scale_log2) : uint4{0, 0, 0, 0};
        }
        if (n_old < kBN) load_first(n_old, kBN);

        // Lane (ra, quad) holds rows ra and ra + 8 (heads), keys 2·quad, 2·quad + 1 of each 8.
        const int quad = lane & 3, ra = lane >> 2;
        float o[D / 8][4];
    #pragma unroll
        for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
        float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;  // l: this lane's partial sums

        for (int kt = 0; kt < n_kt; ++kt) {
            cp_async_wait<0>();  // this tile's K and V have landed
            __syncthreads();     // … for every warp, and every warp is done with the other buffers
            if (kt + 1 < n_kt) {
                load_kv_tile<D, kBN, kThreads>(k_s + ((kt + 1) & 1) * kBN * CH, kc, rows_s[(kt + 1) % 3], g, tid);
                load_kv_tile<D, kBN, kThreads>(v_s + ((kt + 1) & 1) * kBN * CH, vc, rows_s[(kt + 1) % 3], g, tid);
            }
            cp_async_commit();
            if (kt + 2 < n_kt) resolve_rows(kt + 2);
            const uint4* k_t = k_s + (kt & 1) * kBN * CH;
            const uint4* v_t = v_s + (kt & 1) * kBN * CH;

            // s = q·kᵀ for the 16 rows × this warp's 16 keys (log2 units).
            float sc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
    #pragma unroll
            for (int ks = 0; ks < D / 16; ++ks) {
                uint32_t a[4], b[4];
                ldsm_x4(a, smem_addr(q_s + swz<D>(lane & 15, 2 * ks + (lane >> 4))));
                ldsm_x4(b, smem_addr(k_t + swz<D>(warp * 16 + (lane & 7) + ((lane >> 4) << 3),
                                                  2 * ks + ((lane >> 3) & 1))));
                mma_f16(sc[0], a, b[0], b[1]);
                mma_f16(sc[1], a, b[2], b[3]);
            }
            const int64_t key0 = lo + int64_t(kt) * kBN + warp * 16 + 2 * quad;
            if (lo + int64_t(kt + 1) * kBN > hi) {  // the last tile: keys past hi are zeros, not keys
    #pragma unroll
                for (int j = 0; j < 2; ++j) {
                    if (key0 + 8 * j >= hi) sc[j][0] = sc[j][2] = -INFINITY;
                    if (key0 + 8 * j + 1 >= hi) sc[j][1] = sc[j][3] = -INFINITY;
                }
            }
            // Online softmax per row. A warp may have no key yet (m = −inf): it scales by 0 from 0.
            float mx_a = fmaxf(m_a, fmaxf(fmaxf(sc[0][0], sc[0][1]), fmaxf(sc[1][0], sc[1][1])));
            float mx_b = fmaxf(m_b, fmaxf(fmaxf(sc[0][2], sc[0][3]), fmaxf(sc[1][2], sc[1][3])));
            mx_a = fmaxf(mx_a, __shfl_xor_sync(kFull, mx_a, 1));
            mx_a = fmaxf(mx_a, __shfl_xor_sync(kFull, mx_a, 2));
            mx_b = fmaxf(mx_b, __shfl_xor_sync(kFull, mx_b, 1));
            mx_b = fmaxf(mx_b, __shfl_xor_sync(kFull, mx_b, 2));
            const float ua = mx_a == -INFINITY ? 0.f : mx_a, ub = mx_b == -INFINITY ? 0.f : mx_b;
            const float corr_a = exp2_approx(m_a - ua), corr_b = exp2_approx(m_b - ub);
            m_a = mx_a;
            m_b = mx_b;
            uint32_t pa[4];  // p as the A operand of p·v: (row a, keys 0–7), (b, 0–7), (a, 8–15), (b, 8–15)
            float sum_a = 0.f, sum_b = 0.f;
    #pragma unroll
            for (int j = 0; j < 2; ++j) {
                const float p0 = exp2_approx(sc[j][0] - ua), p1 = exp2_approx(sc[j][1] - ua);
                const float p2 = exp2_approx(sc[j][2] - ub), p3 = exp2_approx(sc[j][3] - ub);
                sum_a += p0 + p1;
                sum_b += p2 + p3;
                pa[2 * j] = pack_half2(p0, p1);
                pa[2 * j + 1] = pack_half2(p2, p3);
            }
            l_a = l_a * corr_a + sum_a;
            l_b = l_b * corr_b + sum_b;
            // o = o·corr + p·v.
    #pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
    #pragma unroll
                for (int h = 0; h < 2; ++h) {
                    o[2 * dp + h][0] *= corr_a;
                    o[2 * dp + h][1] *= corr_a;
                    o[2 * dp + h][2] *= corr_b;
                    o[2 * dp + h][3] *= corr_b;
                }
                uint32_t b[4];
                ldsm_x4_trans(b, smem_addr(v_t + swz<D>(warp * 16 + (lane & 15), 2 * dp + (lane >> 4))));
                mma_f16(o[2 * dp], pa, b[0], b[1]);
                mma_f16(o[2 * dp + 1], pa, b[2], b[3]);
            }
        }
        cp_async_wait<0>();
        if (__syncthreads_or(bad)) return write_const(ref::quiet_nan(), ref::quiet_nan(), ref::quiet_nan());

        // Merge the warps: M = max_w m_w, L = Σ_w l_w·2^(m_w − M), o = Σ_w o_w·2^(m_w − M), warps in order.
        l_a += __shfl_xor_sync(kFull, l_a, 1);
        l_a += __shfl_xor_sync(kFull, l_a, 2);
        l_b += __shfl_xor_sync(kFull, l_b, 1);
        l_b += __shfl_xor_sync(kFull, l_b, 2);
        if (quad == 0) {
            ml_s[warp][ra][0] = m_a, ml_s[warp][ra][1] = l_a;
            ml_s[warp][ra + 8][0] = m_b, ml_s[warp][ra + 8][1] = l_b;
        }
        __syncthreads();  // also: every warp is done with k_s and v_s, which hold red from here on
        auto row_max = [&](int r) {
            float M = ml_s[0][r][0];
    #pragma unroll
            for (int w = 1; w < kW; ++w) M = fmaxf(M, ml_s[w][r][0]);
            return M;
        };
        const float M_a = row_max(ra), M_b = row_max(ra + 8);
        const float f_a = m_a == -INFINITY ? 0.f : exp2_approx(m_a - M_a);
        const float f_b = m_b == -INFINITY ? 0.f : exp2_approx(m_b - M_b);
        if (tid < kRows) {
            const float M = row_max(tid);
            float L = 0.f;
    #pragma unroll
            for (int w = 0; w < kW; ++w) {
                const float m = ml_s[w][tid][0];
                L += m == -INFINITY ? 0.f : ml_s[w][tid][1] * exp2_approx(m - M);
            }
            fin_s[tid][0] = M, fin_s[tid][1] = L;
        }
    #pragma unroll
        for (int j = 0; j < D / 8; ++j) {
            float* ra_p = red + (warp * kRows + ra) * D + j * 8 + 2 * quad;
            ra_p[0] = o[j][0] * f_a;
            ra_p[1] = o[j][1] * f_a;
            if (G > 8) {
                ra_p[8 * D] = o[j][2] * f_b;
                ra_p[8 * D + 1] = o[j][3] * f_b;
            }
        }
        __syncthreads();
        for (int i = tid; i < G * D; i += kThreads) {
            const int h = i / D, d = i - h * D, head = g * G + h;
            float acc = red[h * D + d];
    #pragma unroll
            for (int w = 1; w < kW; ++w) acc += red[(w * kRows + h) * D + d];
            const float M = fin_s[h][0], L = fin_s[h][1];
            if constexpr (kFused) {
                red[h * D + d] = acc;  // in place: only this thread reads (h, d) of any warp's slice
            } else if (splits == 1) {
                out[t * out_ts + int64_t(head) * out_hs + d] = gated(gate, L > 0.f ? acc / L : 0.f, t, head, d);
            } else {
                float* pr = partial + ((t * n_head + head) * splits + sp) * int64_t(D + 2);
                if (d == 0) pr[0] = M * kLn2, pr[1] = L;
                pr[2 + d] = acc;
            }
        }
    };
    attend();
    if constexpr (kFused) merge();
}

// Blocks a cluster of the fused merge (a power of two ≤ 16 and ≤ splits): `want` where given,
// else the largest of 8, 4, 2 whose T · n_kv · (splits / C) clusters are all resident at once
// (cudaOccupancyMaxActiveClusters: an SM takes one block at D = 256, and a cluster's blocks share
// a GPC, so big clusters may not all fit where as many single blocks would), else 8.
template <int D>
int fused_cluster(int64_t groups, int splits, int want) {
    using K = decltype(&decode_mma_kernel<D, true>);
    static const std::array<int, 5> active = [] {  // most resident clusters of 1, 2, 4, 8, 16 blocks
        std::array<int, 5> n{};
        const K k = decode_mma_kernel<D, true>;
        if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<D>())) != cudaSuccess ||
            cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
            return n;
        for (int e = 1; e < 5; ++e) {
            cudaLaunchConfig_t cfg = {};
            cfg.gridDim = dim3(1, 1, 1u << e);
            cfg.blockDim = dim3(kThreads);
            cfg.dynamicSmemBytes = smem_bytes<D>();
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = 1;
            at[0].val.clusterDim.y = 1;
            at[0].val.clusterDim.z = 1u << e;
            cfg.attrs = at;
            cfg.numAttrs = 1;
            if (cudaOccupancyMaxActiveClusters(&n[size_t(e)], k, &cfg) != cudaSuccess) n[size_t(e)] = 0;
        }
        (void)cudaGetLastError();  // a size the device refuses reads as 0 resident clusters
        return n;
    }();
    auto pow2_at_most = [](int x) {
        int c = 1;
        while (2 * c <= x && 2 * c <= kMaxCluster) c *= 2;
        return c;
    };
    if (want > 0) return pow2_at_most(std::min(want, splits));
    for (int c = 8; c >= 2; c /= 2)
        if (c <= splits && groups * (splits / c) <= active[size_t(__builtin_ctz(unsigned(c)))]) return c;
    return pow2_at_most(std::min(8, splits));
}

template <int D>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan,
                   float scale, int splits, float* partial, OutGate gate, const AttnMerge& merge,
                   cudaStream_t stream) {
    const float sl2 = scale * 1.4426950408889634f;
    if (merge.fused && splits > 1) {
        // The splits rounded down to whole clusters (the fused partials, nc · (D + 4) floats a head,
        // fit in attention_scratch's splits · (D + 2)).
        const int C = fused_cluster<D>(T * kc.n_kv, splits, merge.cluster);
        const int n = splits / C * C;
        static const cudaError_t attr = [] {
            cudaError_t e = cudaFuncSetAttribute(decode_mma_kernel<D, true>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<D>()));
            if (e == cudaSuccess)
                e = cudaFuncSetAttribute(decode_mma_kernel<D, true>, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
            return e;
        }();
        if (attr != cudaSuccess) return attr;
        const dim3 grid{unsigned(T), unsigned(kc.n_kv), unsigned(n)};
        return pdl::launch_cluster(decode_mma_kernel<D, true>, grid, kThreads, smem_bytes<D>(), stream,
                                   dim3(1, 1, unsigned(C)), out, out_ts, out_hs, q, q_ts, q_hs, int(n_head), kc, vc,
                                   plan, sl2, n, partial, gate, merge.counters);
    }
    static const cudaError_t attr = cudaFuncSetAttribute(
        decode_mma_kernel<D, false>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_bytes<D>()));
    if (attr != cudaSuccess) return attr;
    const dim3 grid{unsigned(T), unsigned(kc.n_kv), unsigned(splits)};
    const cudaError_t e = pdl::launch(decode_mma_kernel<D, false>, grid, kThreads, smem_bytes<D>(), stream, out, out_ts,
                                      out_hs, q, q_ts, q_hs, int(n_head), kc, vc, plan, sl2, splits, partial, gate,
                                      static_cast<unsigned*>(nullptr));
    if (e != cudaSuccess || splits == 1) return e;
    return launch_attention_combine(out, out_ts, out_hs, partial, T, n_head, kc.D, splits, gate, stream);
}

}  // namespace

cudaError_t launch_decode_attention_mma(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                        int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                        const ref::PagedCache& vc, const AttnPlan& plan, float scale, int splits,
                                        float* partial, OutGate gate, const AttnMerge& merge, cudaStream_t stream) {
    switch (kc.D) {
        case 64: return launch<64>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, merge, stream);
        case 128: return launch<128>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, merge, stream);
        case 256: return launch<256>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, splits, partial, gate, merge, stream);
        default: return cudaErrorInvalidValue;
    }
}

int decode_fused_cluster(int64_t T, int64_t n_kv, int64_t D, int splits, int want) {
    if (splits <= 1) return 1;
    switch (D) {
        case 64: return fused_cluster<64>(T * n_kv, splits, want);
        case 128: return fused_cluster<128>(T * n_kv, splits, want);
        case 256: return fused_cluster<256>(T * n_kv, splits, want);
        default: return 1;
    }
}

}  // namespace tessera::cuda::fast::detail
