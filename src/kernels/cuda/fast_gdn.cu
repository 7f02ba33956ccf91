// The recurrent gated delta rule (decodes, short sequences, a chunked call's lone last tokens) and
// the fused one-token decode step. Both hold a [dk, 32] column slice of a head's state in
// registers: lane = state column (coalesced 128-byte rows), warp w = rows w, w + 8, ..., so a
// token costs one block barrier: each warp's partial Sᵀk and Sᵀq go through shared memory and
// o = Sᵀq is taken before the rank-1 update as o = S'ᵀq + δ·(kᵀq) (S' = the decayed state).
#include <cooperative_groups.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_step.cuh"

namespace cg = cooperative_groups;

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kCols = 32;   // state columns per block (one per lane)
constexpr int kWarps = 8;   // row groups per value head
constexpr int kMaxGroup = 16;  // value heads per key head the decode step supports (r = nv / nk)

using step::block_sum3;
using step::silu;

struct RecArgs {
    float* o;
    int64_t o_ts, o_hs;
    HeadsIn q, k, v;
    const float* g;
    int64_t g_s;
    const float* beta;
    int64_t beta_s;
    int64_t T, dk, dv;
    float* state;
    int64_t slot_stride, n_slots;
    SeqPlan plan;
    int nk, nv;
    bool tiled;
    int chunk;
    int64_t max_len;
    bool tail_only;
};

// One token's inputs as the thread needs them: its rows of k and q, its column of v, g and β.
template <int R>
struct Tok {
    float k[R], q[R], v, g, b;
};

template <int R>
__device__ inline void load_tok(const RecArgs& a, int64_t t, int64_t hk, int64_t h, int w, int64_t j, Tok<R>& x) {
    const float* kt = a.k.data + t * a.k.tok_stride + hk * a.k.head_stride;
    const float* qt = a.q.data + t * a.q.tok_stride + hk * a.q.head_stride;
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        x.k[m] = i < a.dk ? __ldg(kt + i) : 0.f;
        x.q[m] = i < a.dk ? __ldg(qt + i) : 0.f;
    }
    x.v = j < a.dv ? __ldg(a.v.data + t * a.v.tok_stride + h * a.v.head_stride + j) : 0.f;
    x.g = __ldg(a.g + t * a.g_s + h);
    x.b = __ldg(a.beta + t * a.beta_s + h);
}

// o[t, h, j] and columns [32·z, 32·z + 32) of state[slot, h] for sequence s = blockIdx.x, value
// head h = blockIdx.y, z = blockIdx.z. tail_only: only a Chunked call's lone last token.
template <int R>
__global__ void __launch_bounds__(kWarps * 32) gdn_recurrent_kernel(RecArgs a) {
    const int s = blockIdx.x, lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int64_t h = blockIdx.y, j = int64_t(blockIdx.z) * kCols + lane;
    const bool col_ok = j < a.dv;
    int64_t t0 = a.plan.q_start[s];
    const int64_t t1 = a.plan.q_start[s + 1], slot = a.plan.slot[s];
    const bool range_ok = t0 >= 0 && t1 >= t0 && t1 <= a.T;
    if (!range_ok || slot < -1 || slot >= a.n_slots || t1 - t0 > a.max_len) {
        if (range_ok && w == 0 && col_ok)
            for (int64_t t = t0; t < t1; ++t) a.o[t * a.o_ts + h * a.o_hs + j] = dev::quiet_nan();
        return;
    }
    if (a.tail_only) {  // the CPU's rule: a lone token, or a last chunk of one token, is a recurrent step
        const int64_t n = t1 - t0;
        if (!(n == 1 || (a.chunk > 1 && n % a.chunk == 1))) return;
        if (n > 1 && slot < 0) return;  // a padding sequence's state after its WY part is not kept: wy_state steps it
        t0 = t1 - 1;
    }
    if (t0 == t1) return;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = slot >= 0 ? a.state + slot * a.slot_stride + h * a.dk * a.dv : nullptr;

    __shared__ float2 red[2][kWarps][32];  // per warp: partial (Sᵀk, Sᵀq) of each column
    __shared__ float red_kq[2][kWarps];    // per warp: partial kᵀq

    float sr[R];  // S[w + 8m, j]
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        sr[m] = S && col_ok && i < a.dk ? S[i * a.dv + j] : 0.f;
    }
    Tok<R> cur, nxt;
    load_tok<R>(a, t0, hk, h, w, j, cur);
    int buf = 0;
    for (int64_t t = t0; t < t1; ++t) {
        const float decay = expf(cur.g);
        float pu = 0.f, po = 0.f, pkq = 0.f;
#pragma unroll
        for (int m = 0; m < R; ++m) {
            sr[m] *= decay;
            pu = fmaf(sr[m], cur.k[m], pu);
            po = fmaf(sr[m], cur.q[m], po);
            pkq = fmaf(cur.k[m], cur.q[m], pkq);
        }
        red[buf][w][lane] = make_float2(pu, po);
        if (lane == 0) red_kq[buf][w] = pkq;
        if (t + 1 < t1) load_tok<R>(a, t + 1, hk, h, w, j, nxt);  // in flight across the barrier
        __syncthreads();
        float u = 0.f, os = 0.f, kq = 0.f;
#pragma unroll
        for (int ww = 0; ww < kWarps; ++ww) {
            const float2 p = red[buf][ww][lane];
            u += p.x;
            os += p.y;
            kq += red_kq[buf][ww];
        }
        const float delta = cur.b * (cur.v - u);
#pragma unroll
        for (int m = 0; m < R; ++m) sr[m] = fmaf(cur.k[m], delta, sr[m]);
        if (w == 0 && col_ok) a.o[t * a.o_ts + h * a.o_hs + j] = fmaf(delta, kq, os);
        cur = nxt;
        buf ^= 1;  // the next token writes the other buffer: no second barrier
    }
    if (!S || !col_ok) return;
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        if (i < a.dk) S[i * a.dv + j] = sr[m];
    }
}

// The same step for sequences of at most one token (decodes; a Chunked call's lone last tokens,
// tail_only): the token's k and q wait in shared memory, not registers (no next token to prefetch),
// so a block holds ~40 registers a thread and many blocks fit an SM (batched decodes are
// bandwidth-bound). The same arithmetic as gdn_recurrent_kernel, in the same order: the same bits.
template <int R>
__global__ void __launch_bounds__(kWarps * 32) gdn_recurrent_one_kernel(RecArgs a) {
    const int s = blockIdx.x, lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int64_t h = blockIdx.y, j = int64_t(blockIdx.z) * kCols + lane;
    const bool col_ok = j < a.dv;
    const int64_t t0 = a.plan.q_start[s], t1 = a.plan.q_start[s + 1], slot = a.plan.slot[s];
    const bool range_ok = t0 >= 0 && t1 >= t0 && t1 <= a.T;
    if (!range_ok || slot < -1 || slot >= a.n_slots || t1 - t0 > a.max_len) {
        if (range_ok && w == 0 && col_ok)
            for (int64_t t = t0; t < t1; ++t) a.o[t * a.o_ts + h * a.o_hs + j] = dev::quiet_nan();
        return;
    }
    const int64_t n = t1 - t0;
    if (a.tail_only) {  // as gdn_recurrent_kernel
        if (!(n == 1 || (a.chunk > 1 && n % a.chunk == 1))) return;
        if (n > 1 && slot < 0) return;
    } else if (n != 1) {
        return;  // empty (longer ones exceed max_len = 1 and got NaN above)
    }
    const int64_t t = t1 - 1;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = slot >= 0 ? a.state + slot * a.slot_stride + h * a.dk * a.dv : nullptr;

    __shared__ float kq_s[2][kWarps * R];     // k | q of the token
    __shared__ float2 red[kWarps][32];        // per warp: partial (Sᵀk, Sᵀq) of each column
    __shared__ float red_kq[kWarps];          // per warp: partial kᵀq

    float sr[R];  // S[w + 8m, j]
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        sr[m] = S && col_ok && i < a.dk ? S[i * a.dv + j] : 0.f;
    }
    const float* kt = a.k.data + t * a.k.tok_stride + hk * a.k.head_stride;
    const float* qt = a.q.data + t * a.q.tok_stride + hk * a.q.head_stride;
    for (int i = threadIdx.x; i < kWarps * R; i += kWarps * 32) {
        kq_s[0][i] = i < a.dk ? __ldg(kt + i) : 0.f;
        kq_s[1][i] = i < a.dk ? __ldg(qt + i) : 0.f;
    }
    const float v = col_ok ? __ldg(a.v.data + t * a.v.tok_stride + h * a.v.head_stride + j) : 0.f;
    const float decay = expf(__ldg(a.g + t * a.g_s + h)), beta = __ldg(a.beta + t * a.beta_s + h);
    __syncthreads();
    float pu = 0.f, po = 0.f, pkq = 0.f;
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        const float k = kq_s[0][i], q = kq_s[1][i];
        sr[m] *= decay;
        pu = fmaf(sr[m], k, pu);
        po = fmaf(sr[m], q, po);
        pkq = fmaf(k, q, pkq);
    }
    red[w][lane] = make_float2(pu, po);
    if (lane == 0) red_kq[w] = pkq;
    __syncthreads();
    float u = 0.f, os = 0.f, kq = 0.f;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) {
        const float2 p = red[ww][lane];
        u += p.x;
        os += p.y;
        kq += red_kq[ww];
    }
    const float delta = beta * (v - u);
    if (w == 0 && col_ok) a.o[t * a.o_ts + h * a.o_hs + j] = fmaf(delta, kq, os);
    if (!S || !col_ok) return;
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = w + kWarps * m;
        if (i < a.dk) S[i * a.dv + j] = fmaf(kq_s[0][i], delta, sr[m]);
    }
}

// ---- the fused decode step ----

// Channel ch: SiLU of its conv over [its K-1 state rows (zeros without a state) | x].
__device__ inline float conv_channel(const GdnDecodeArgs& a, const float* st, int64_t C, int64_t ch, float x) {
    const int64_t K = a.conv_k;
    const float* wc = a.conv_w + ch * K;
    float acc = 0.f;
    for (int64_t r = 0; r < K - 1; ++r) acc += wc[r] * (st ? st[r * C + ch] : 0.f);
    acc += wc[K - 1] * x;
    return silu(acc);
}

// Block (s, hk, z) of a cluster of gridDim.z blocks along z: sequence s = blockIdx.x, key head
// hk = blockIdx.y, state columns [32z, 32z + 32) of each of the r value heads reading hk, taken
// `hp_n` heads at a time by groups of 8 warps.
template <int R>
__global__ void __launch_bounds__(512) gdn_decode_kernel(GdnDecodeArgs a) {
    cg::cluster_group cluster = cg::this_cluster();
    const int s = blockIdx.x, tid = threadIdx.x, lane = tid % 32, wall = tid / 32, w = wall % kWarps,
              hp = wall / kWarps, hp_n = blockDim.x / (32 * kWarps);
    const int z = blockIdx.z, nsl = gridDim.z;
    const int64_t hk = blockIdx.y, nk = a.nk, nv = a.nv, dk = a.dk, dv = a.dv, r = nv / nk;
    const int64_t C = 2 * nk * dk + nv * dv, j = int64_t(z) * kCols + lane;
    auto head_of = [&](int64_t jj) { return a.tiled_heads ? jj * nk + hk : hk * r + jj; };
    const int64_t slot = a.slot[s];  // the same in every block of the cluster: all return or none
    if (slot < -1 || slot >= a.n_slots) {
        for (int64_t idx = tid; idx < r * kCols; idx += blockDim.x) {
            const int64_t col = int64_t(z) * kCols + idx % kCols;
            if (col < dv) a.y[s * a.y_s + head_of(idx / kCols) * dv + col] = dev::quiet_nan();
        }
        return;
    }
    const float* cst = slot >= 0 ? a.conv_state + slot * a.conv_slot_stride : nullptr;
    float* S0 = slot >= 0 ? a.state + slot * a.state_slot_stride : nullptr;
    const float* xrow = a.mixed + s * a.mixed_s;

    __shared__ float qk[2 * 256];            // q̂ | k̂ of key head hk
    __shared__ float sh3[32][3];             // block_sum3
    __shared__ float2 red[2][2][kWarps][32]; // per pass parity, head in pass, warp: partial (Sᵀk, Sᵀq)
    __shared__ float vv[2][2][kCols];        // per pass parity: v after conv + SiLU of the pass's heads
    __shared__ float oo[kMaxGroup][kCols];   // o of every head, this block's columns
    __shared__ float ssq[kMaxGroup];         // Σ o² over this block's columns, per head

    // q and k of key head hk: conv + SiLU (every block of the cluster computes them), l2 norms.
    float3 part = make_float3(0.f, 0.f, 0.f);  // Σq², Σk², Σqk
    for (int64_t i = tid; i < dk; i += blockDim.x) {
        const int64_t cq = hk * dk + i, ck = nk * dk + hk * dk + i;
        const float qv = conv_channel(a, cst, C, cq, xrow[cq]), kv = conv_channel(a, cst, C, ck, xrow[ck]);
        qk[i] = qv;
        qk[dk + i] = kv;
        part.x += qv * qv;
        part.y += kv * kv;
        part.z += qv * kv;
    }
    const float3 sums = block_sum3(part, sh3);  // its barrier also publishes qk
    const float inv_q = 1.f / sqrtf(sums.x + 1e-6f), inv_k = 1.f / sqrtf(sums.y + 1e-6f);
    const float scale = 1.f / sqrtf(float(dk));
    const float kq = sums.z * inv_q * scale * inv_k;  // k̂ᵀq̂
    // This thread's rows of q̂ and k̂ are read from qk (broadcast) where used: registers go to S.
    const int dki = int(dk), dvi = int(dv);
    auto q_hat = [&](int i) { return i < dki ? qk[i] * inv_q * scale : 0.f; };
    auto k_hat = [&](int i) { return i < dki ? qk[dki + i] * inv_k : 0.f; };

    // Every block of the cluster has read the old conv state of hk's q/k channels: shift it,
    // block z taking the channels i ≡ z (mod nsl).
    cluster.sync();
    if (slot >= 0) {
        float* st = a.conv_state + slot * a.conv_slot_stride;
        for (int64_t i = int64_t(z) + int64_t(nsl) * tid; i < 2 * dk; i += int64_t(nsl) * blockDim.x) {
            const int64_t ch = i < dk ? hk * dk + i : nk * dk + hk * dk + (i - dk);
            for (int64_t rr = 0; rr + 1 < a.conv_k - 1; ++rr) st[rr * C + ch] = st[(rr + 1) * C + ch];
            st[(a.conv_k - 2) * C + ch] = xrow[ch];
        }
    }

    for (int64_t j0 = 0, pass = 0; j0 < r; j0 += hp_n, ++pass) {
        const int64_t jj = j0 + hp;
        const bool active = jj < r;
        const int64_t h = active ? head_of(jj) : 0;
        const int pb = int(pass & 1);
        float sr[R];
        float decay = 1.f, b = 0.f;
        if (active) {
            // v: conv + SiLU of channel (h, j), owned by this block; warp 0 of the head also shifts
            // its conv state (after its own read; the other warps read vv, not the state).
            if (w == 0) {
                float vval = 0.f;
                if (j < dv) {
                    const int64_t ch = 2 * nk * dk + h * dv + j;
                    vval = conv_channel(a, cst, C, ch, xrow[ch]);
                    if (slot >= 0) {
                        float* st = a.conv_state + slot * a.conv_slot_stride;
                        for (int64_t rr = 0; rr + 1 < a.conv_k - 1; ++rr) st[rr * C + ch] = st[(rr + 1) * C + ch];
                        st[(a.conv_k - 2) * C + ch] = xrow[ch];
                    }
                }
                vv[pb][hp][lane] = vval;
            }
            b = 1.f / (1.f + expf(-a.b[s * a.b_s + h]));
            const float x = a.a[s * a.a_s + h] + a.dt_bias[h];
            const float sp = x > 20.f ? x : log1pf(expf(x));
            decay = expf(a.neg_exp_a[h] * sp);
            const float* S = S0 && j < dv ? S0 + h * dk * dv + j : nullptr;  // column j
            float pu = 0.f, po = 0.f;
#pragma unroll
            for (int m = 0; m < R; ++m) {
                const int i = w + kWarps * m;
                sr[m] = S && i < dki ? S[i * dvi] * decay : 0.f;
                pu = fmaf(sr[m], k_hat(i), pu);
                po = fmaf(sr[m], q_hat(i), po);
            }
            red[pb][hp][w][lane] = make_float2(pu, po);
        }
        __syncthreads();
        if (active) {
            float u = 0.f, os = 0.f;
#pragma unroll
            for (int ww = 0; ww < kWarps; ++ww) {
                const float2 p = red[pb][hp][ww][lane];
                u += p.x;
                os += p.y;
            }
            const float delta = b * (vv[pb][hp][lane] - u);
            float* S = S0 && j < dv ? S0 + h * dk * dv + j : nullptr;
            if (S) {
#pragma unroll
                for (int m = 0; m < R; ++m) {
                    const int i = w + kWarps * m;
                    if (i < dki) S[i * dvi] = fmaf(k_hat(i), delta, sr[m]);
                }
            }
            if (w == 0) {
                const float out = j < dv ? fmaf(delta, kq, os) : 0.f;
                oo[jj][lane] = out;
                float sq = out * out;
                for (int off = 16; off > 0; off /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, off);
                if (lane == 0) ssq[jj] = sq;
            }
        }
        // vv and red of parity pb are rewritten two passes on, after the next pass's barrier.
    }

    cluster.sync();  // every block's ssq is written
    for (int64_t idx = tid; idx < r * kCols; idx += blockDim.x) {
        const int64_t jj = idx / kCols, c = idx % kCols, col = int64_t(z) * kCols + c;
        if (col >= dv) continue;
        float total = 0.f;
        for (int rank = 0; rank < nsl; ++rank) total += cluster.map_shared_rank(ssq, rank)[jj];
        const float inv = 1.f / sqrtf(total / float(dv) + a.rms_eps);
        const int64_t h = head_of(jj);
        a.y[s * a.y_s + h * dv + col] = a.norm_w[col] * (oo[jj][c] * inv) * silu(a.z[s * a.z_s + h * dv + col]);
    }
    cluster.sync();  // no block leaves while another still reads its ssq
}

}  // namespace

cudaError_t launch_gdn_recurrent(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                 const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk,
                                 int64_t dv, float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                                 const GdnParams& p, int64_t max_len, bool tail_only, cudaStream_t stream) {
    const RecArgs a{o,  o_ts,  o_hs,          q,      k,           v,           g,       g_s,
                    beta, beta_s, T,           dk,     dv,          state,       slot_stride, n_slots,
                    plan, p.n_k_heads, p.n_v_heads, p.tiled_heads, p.chunk, max_len, tail_only};
    const dim3 grid{unsigned(plan.n_seqs), unsigned(p.n_v_heads), unsigned((dv + kCols - 1) / kCols)};
    if (tail_only || max_len == 1) {  // at most one token per sequence
        if (dk <= 16 * kWarps) gdn_recurrent_one_kernel<16><<<grid, kWarps * 32, 0, stream>>>(a);
        else gdn_recurrent_one_kernel<32><<<grid, kWarps * 32, 0, stream>>>(a);
    } else if (dk <= 16 * kWarps) {
        gdn_recurrent_kernel<16><<<grid, kWarps * 32, 0, stream>>>(a);
    } else {
        gdn_recurrent_kernel<32><<<grid, kWarps * 32, 0, stream>>>(a);
    }
    return cudaGetLastError();
}

cudaError_t launch_gdn_decode_step(const GdnDecodeArgs& a, cudaStream_t stream) {
    const int64_t r = a.nv / a.nk;
    const int hp_n = int(r < 2 ? r : 2);  // value heads per pass (8 warps each)
    const unsigned nsl = unsigned((a.dv + kCols - 1) / kCols);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(a.n_seqs), unsigned(a.nk), nsl);
    cfg.blockDim = dim3(unsigned(hp_n * kWarps * 32));
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = nsl;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    if (a.dk <= 16 * kWarps) return cudaLaunchKernelEx(&cfg, gdn_decode_kernel<16>, a);
    return cudaLaunchKernelEx(&cfg, gdn_decode_kernel<32>, a);
}

}  // namespace tessera::cuda::fast::detail
