// Shared by the chunked (WY) gated delta rule kernels (fast_gdn_chunked.cu, fast_gdn_split.cu):
// the launch arguments, a sequence's WY range, cp.async tile loads and the 3×TF32 warp tiles.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_step.cuh"
#include "kernels/cuda/fast_mma.cuh"

namespace tessera::cuda::fast::detail::wy {

constexpr int kC = int(kGdnChunk);  // 64
constexpr int kThreads = 256;       // 8 warps
constexpr int kTb = 16;             // diagonal blocks of the triangular solve
constexpr int kNs = 32;             // state columns per wy_state block
constexpr int kLdT = kC + 4;        // row stride of 64-wide tiles (A reads: rows gid, columns tig → no conflicts)
constexpr int kLdS = kNs + 8;       // row stride of 32-wide tiles (B reads: rows tig, columns gid)


struct ChArgs {
    float* o;
    int64_t o_ts, o_hs;
    HeadsIn q, k, v;
    const float* g;
    int64_t g_s;
    const float* beta;
    int64_t beta_s;
    int64_t T;
    int dk, dv, dkp, dvp;  // dkp, dvp: rounded up to 8 (the mma k / n step)
    float* state;
    int64_t slot_stride, n_slots;
    SeqPlan plan;
    int nk, nv;
    bool tiled;
    float* scratch;
    int64_t rs;  // scratch floats per (token, head)
    int64_t max_len;
    bool vec;  // every q/k/v and scratch row starts 16-byte aligned and dk, dv % 4 == 0: 16-byte copies
    // F16x3 passes: 0, or this call's tag (never 0, never an earlier call's) that wy_prep16 stores in
    // a chunk's flag once its scratch rows are written, for a state pass that starts before the prep
    // has completed (fast_gdn_chunked16.cu).
    uint32_t epoch;
    // wy_prep_rt's persistent form (F16RtSched): kGdnPrepCtrWords counters zeroed before the launch
    // from which its blocks take items (wy_prep_rt_kernel); prep_items items; prep_reserve SMs left to
    // the state pass. prep_front: 0 (one item a block there, from the counter in turn with the rest),
    // or the first items, taken by the first prep_solo blocks to arrive on each of those SMs.
    uint32_t* prep_ctr;
    uint32_t prep_items, prep_reserve, prep_front, prep_solo;
    uint32_t prep_stay;  // F16RtStay: 1 where the first solo block of each reserved SM stays (GdnSchedPlan::stay)
    // A profiling build's stamps (fast_gdn_phases.h), or null: always null in the default build.
    unsigned long long* phases;
};

// A chunked call's arguments, all but rs and vec (the callers' scratch layout and copy width).
inline ChArgs ch_args(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                      int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv, float* state,
                      int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const GdnParams& p, float* scratch,
                      int64_t max_len) {
    ChArgs a{};
    a.o = o;
    a.o_ts = o_ts;
    a.o_hs = o_hs;
    a.q = q;
    a.k = k;
    a.v = v;
    a.g = g;
    a.g_s = g_s;
    a.beta = beta;
    a.beta_s = beta_s;
    a.T = T;
    a.dk = int(dk);
    a.dv = int(dv);
    a.dkp = int((dk + 7) / 8 * 8);
    a.dvp = int((dv + 7) / 8 * 8);
    a.state = state;
    a.slot_stride = slot_stride;
    a.n_slots = n_slots;
    a.plan = plan;
    a.nk = p.n_k_heads;
    a.nv = p.n_v_heads;
    a.tiled = p.tiled_heads;
    a.scratch = scratch;
    a.max_len = max_len;
    return a;
}
// ptr 16-byte aligned and both strides (in floats) multiples of 4.
inline bool al16(const void* ptr, int64_t s1, int64_t s2) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && s1 % 4 == 0 && s2 % 4 == 0;
}

// Sequence s's usable range and WY part, or false (then the caller writes NaN or nothing).
struct Seq {
    int64_t t0, n, n_wy, slot;
    bool range_ok;
};
__device__ inline bool seq_of(const ChArgs& a, int s, Seq* q) {
    q->t0 = a.plan.q_start[s];
    const int64_t t1 = a.plan.q_start[s + 1];
    q->n = t1 - q->t0;
    q->slot = a.plan.slot[s];
    q->range_ok = q->t0 >= 0 && q->n >= 0 && t1 <= a.T;
    q->n_wy = q->n == 1 || q->n % kC == 1 ? q->n - 1 : q->n;  // lone last tokens: the recurrent kernel
    return q->range_ok && q->slot >= -1 && q->slot < a.n_slots && q->n <= a.max_len;
}

// ---- asynchronous tile loads: every element's copy in flight at once, one wait ----

using step::cp_async4;  // fast_gdn_step.cuh
using step::cp_async16;
using step::cp_async_wait_all;
// Γ of a chunk (the cumulative sum of g in double, 2 tokens a lane; g = 0 past L, so Γ stays) into
// Gd[64], and e^Γ (0 past L) into eg[64]: chunk tokens tb … tb + L − 1, value head h. One warp.
__device__ inline void chunk_gamma(const ChArgs& a, int64_t tb, int L, int64_t h, int lane, double* Gd, float* eg) {
    const int l0 = 2 * lane;
    const double g0 = l0 < L ? double(a.g[(tb + l0) * a.g_s + h]) : 0.0;
    const double g1 = l0 + 1 < L ? double(a.g[(tb + l0 + 1) * a.g_s + h]) : 0.0;
    double incl = g0 + g1;
    for (int off = 1; off < 32; off *= 2) {
        const double y = __shfl_up_sync(0xffffffffu, incl, off);
        if (lane >= off) incl += y;
    }
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0.0;
    Gd[l0] = excl + g0;
    Gd[l0 + 1] = excl + g0 + g1;
    eg[l0] = l0 < L ? float(exp(excl + g0)) : 0.f;
    eg[l0 + 1] = l0 + 1 < L ? float(exp(excl + g0 + g1)) : 0.f;
}

// Column j of T = (I − A)⁻¹ inside its 16 × 16 diagonal block (As, Xs [64][kLdT]; rows past L:
// A = 0): X[i, j] = A[i, j] + Σ_{j<m<i} A[i, m]·X[m, j], m ascending (the CPU's order). Column j
// is the calling thread's alone: no barrier inside.
__device__ inline void solve_diag_column(const float* As, float* Xs, int j, int L) {
    const int end = (j / kTb + 1) * kTb, stop = end < L ? end : L;
    for (int i = 0; i <= j; ++i) Xs[i * kLdT + j] = i == j ? 1.f : 0.f;
    for (int i = j + 1; i < stop; ++i) {
        float acc = As[i * kLdT + j];
        for (int m = j + 1; m < i; ++m) acc += As[i * kLdT + m] * Xs[m * kLdT + j];
        Xs[i * kLdT + j] = acc;
    }
    for (int i = j + 1 > stop ? j + 1 : stop; i < end; ++i) Xs[i * kLdT + j] = 0.f;  // padding rows: A = 0
}

// The outputs of a sequence the plan gets wrong (seq_of false, its range valid) as NaN: this
// block's columns c0 … c0 + kNs − 1 of value head h; threads tid of nth.
__device__ inline void nan_columns(const ChArgs& a, const Seq& sq, int64_t h, int c0, int tid, int nth) {
    if (!sq.range_ok) return;
    for (int64_t idx = tid; idx < sq.n * kNs; idx += nth) {
        const int col = c0 + int(idx % kNs);
        if (col < a.dv) a.o[(sq.t0 + idx / kNs) * a.o_ts + h * a.o_hs + col] = dev::quiet_nan();
    }
}

// A padding sequence keeps no state, so the recurrent kernel could not continue it: its last
// one-token chunk is stepped by the state pass itself — o of token t0 + n − 1 for this block's
// columns c0 + lane from S after the last WY chunk (Ss [dk][kLdS]; outputs only). One warp.
__device__ inline void step_padding_last(const ChArgs& a, const Seq& sq, int64_t h, int64_t hk, int c0, const float* Ss,
                                         int lane) {
    const int64_t t = sq.t0 + sq.n - 1;
    const float* kt = a.k.data + t * a.k.tok_stride + hk * a.k.head_stride;
    const float* qt = a.q.data + t * a.q.tok_stride + hk * a.q.head_stride;
    const float decay = expf(a.g[t * a.g_s + h]), beta = a.beta[t * a.beta_s + h];
    float u = 0.f, os = 0.f, kq = 0.f;
    for (int i = 0; i < a.dk; ++i) {
        const float sv = decay * Ss[i * kLdS + lane];
        u += sv * kt[i];
        os += sv * qt[i];
        kq += kt[i] * qt[i];
    }
    const int col = c0 + lane;
    if (col < a.dv) {
        const float delta = beta * (a.v.data[t * a.v.tok_stride + h * a.v.head_stride + col] - u);
        a.o[t * a.o_ts + h * a.o_hs + col] = os + delta * kq;
    }
}

__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>  // wait until at most the N most recent groups of this thread are in flight
__device__ inline void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// dst[i] = ok ? *src : 0 (the zero stored at once, the copy queued).
__device__ inline void load_or_zero(float* dst, const float* src, bool ok) {
    if (ok) cp_async4(dst, src);
    else *dst = 0.f;
}
// One row: dst[i] = row_ok && i < n ? src[i] : 0 for i < n_pad (a multiple of 4), by the 32 lanes
// of a warp; with vec (dst, src 16-byte aligned, n % 4 == 0) four floats a copy.
__device__ inline void load_row(float* dst, const float* src, int n, int n_pad, bool row_ok, bool vec, int lane) {
    if (vec) {
        for (int i = 4 * lane; i < n_pad; i += 128) {
            if (row_ok && i < n) cp_async16(dst + i, src + i);
            else *reinterpret_cast<float4*>(dst + i) = make_float4(0.f, 0.f, 0.f, 0.f);
        }
    } else {
        for (int i = lane; i < n_pad; i += 32) load_or_zero(dst + i, src + i, row_ok && i < n);
    }
}

// ---- 3×TF32 warp tiles ----

using dev::mma_tf32;    // fast_mma.cuh: the 3×TF32 primitives
using dev::tf32_split;

// One tile's 3×TF32 sums kept as four independent chains (the big term hi·hi and the small terms
// lo·hi + hi·lo, each split over even and odd k-steps), so a warp's mma are not one dependent chain
// of 3·K/8 (48 at K = 128) but of at most K/8; joined in a fixed order: the same bits every time,
// and in tile_mma_grid as in tile_mma.
struct Acc3 {
    float big[2][4], small[2][4];
};
__device__ inline void acc3_start(Acc3& a, const float (&c)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) a.big[0][e] = c[e], a.big[1][e] = 0.f, a.small[0][e] = 0.f, a.small[1][e] = 0.f;
}
__device__ inline void acc3_finish(const Acc3& a, float (&c)[4]) {
#pragma unroll
    for (int e = 0; e < 4; ++e) c[e] = (a.big[0][e] + a.big[1][e]) + (a.small[0][e] + a.small[1][e]);
}
// k-step parity p (compile-time after unrolling): the small terms first, as before.
template <int P>
__device__ inline void acc3_step(Acc3& a, const uint32_t (&ah)[4], const uint32_t (&al)[4], const uint32_t (&bh)[2],
                                 const uint32_t (&bl)[2]) {
    mma_tf32(a.small[P], al, bh);
    mma_tf32(a.small[P], ah, bl);
    mma_tf32(a.big[P], ah, bh);
}

// c[16×8 tile at (m0, n0)] += Σ_{k<K} A(m, k)·B(k, n), K a multiple of 8. Fragment layout of
// m16n8k8: gid = lane/4, tig = lane%4; a = A(gid, tig), A(gid+8, tig), A(gid, tig+4),
// A(gid+8, tig+4); b = B(tig, gid), B(tig+4, gid); c = C(gid, 2tig), C(gid, 2tig+1),
// C(gid+8, 2tig), C(gid+8, 2tig+1).
template <class FA, class FB>
__device__ inline void tile_mma(float (&c)[4], int m0, int n0, int K, FA A, FB B) {
    const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
    Acc3 acc;
    acc3_start(acc, c);
    auto step = [&](int k0, auto parity) {
        uint32_t ah[4], al[4], bh[2], bl[2];
        tf32_split(A(m0 + gid, k0 + tig), ah[0], al[0]);
        tf32_split(A(m0 + gid + 8, k0 + tig), ah[1], al[1]);
        tf32_split(A(m0 + gid, k0 + tig + 4), ah[2], al[2]);
        tf32_split(A(m0 + gid + 8, k0 + tig + 4), ah[3], al[3]);
        tf32_split(B(k0 + tig, n0 + gid), bh[0], bl[0]);
        tf32_split(B(k0 + tig + 4, n0 + gid), bh[1], bl[1]);
        acc3_step<decltype(parity)::value>(acc, ah, al, bh, bl);
    };
    int k0 = 0;
    for (; k0 + 16 <= K; k0 += 16) {
        step(k0, std::integral_constant<int, 0>{});
        step(k0 + 8, std::integral_constant<int, 1>{});
    }
    if (k0 < K) step(k0, std::integral_constant<int, 0>{});
    acc3_finish(acc, c);
}
// f(row, col, value) for the 4 elements a lane holds of the tile at (m0, n0).
template <class F>
__device__ inline void tile_each(const float (&c)[4], int m0, int n0, F f) {
    const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
    f(m0 + gid, n0 + 2 * tig, c[0]);
    f(m0 + gid, n0 + 2 * tig + 1, c[1]);
    f(m0 + gid + 8, n0 + 2 * tig, c[2]);
    f(m0 + gid + 8, n0 + 2 * tig + 1, c[3]);
}

// MA × NB tiles of one warp: c[i][j] += Σ_{k<K} A(i, m, k)·B(k, n) over the 16 × 8 tile at
// (m0[i], n0[j]), each in tile_mma's order (so each has tile_mma's bits); every A and B fragment
// loaded and split once for all the tiles that use it, the MA·NB tiles' chains interleaved.
template <int MA, int NB, class FA, class FB>
__device__ inline void tile_mma_grid(float (&c)[MA][NB][4], const int (&m0)[MA], const int (&n0)[NB], int K, FA A,
                                     FB B) {
    const int lane = threadIdx.x % 32, gid = lane / 4, tig = lane % 4;
    Acc3 acc[MA][NB];
#pragma unroll
    for (int i = 0; i < MA; ++i)
#pragma unroll
        for (int j = 0; j < NB; ++j) acc3_start(acc[i][j], c[i][j]);
    auto step = [&](int k0, auto parity) {
        uint32_t bh[NB][2], bl[NB][2];
#pragma unroll
        for (int j = 0; j < NB; ++j) {
            tf32_split(B(k0 + tig, n0[j] + gid), bh[j][0], bl[j][0]);
            tf32_split(B(k0 + tig + 4, n0[j] + gid), bh[j][1], bl[j][1]);
        }
#pragma unroll
        for (int i = 0; i < MA; ++i) {
            uint32_t ah[4], al[4];
            tf32_split(A(i, m0[i] + gid, k0 + tig), ah[0], al[0]);
            tf32_split(A(i, m0[i] + gid + 8, k0 + tig), ah[1], al[1]);
            tf32_split(A(i, m0[i] + gid, k0 + tig + 4), ah[2], al[2]);
            tf32_split(A(i, m0[i] + gid + 8, k0 + tig + 4), ah[3], al[3]);
#pragma unroll
            for (int j = 0; j < NB; ++j) acc3_step<decltype(parity)::value>(acc[i][j], ah, al, bh[j], bl[j]);
        }
    };
    int k0 = 0;
    for (; k0 + 16 <= K; k0 += 16) {
        step(k0, std::integral_constant<int, 0>{});
        step(k0 + 8, std::integral_constant<int, 1>{});
    }
    if (k0 < K) step(k0, std::integral_constant<int, 0>{});
#pragma unroll
    for (int i = 0; i < MA; ++i)
#pragma unroll
        for (int j = 0; j < NB; ++j) acc3_finish(acc[i][j], c[i][j]);
}

// The blocks of T = (I − A)⁻¹ below its diagonal blocks (solve_diag_column's), block row by block
// row: (I − A)T = I gives T_ib = T_ii · Σ_{b<=c<i} A_ic T_cb, the sum one product over columns
// [16b, 16i) of A. Every warp of the block (8) calls it; a block barrier ends each block row, the
// last one included, so T is complete for every thread on return.
__device__ inline void solve_block_rows(const float* As, float* Xs, int warp) {
    for (int bi = 1; bi < kC / kTb; ++bi) {
        const int m0 = bi * kTb;
        for (int t = warp; t < 2 * bi; t += 8) {  // Y_ib = Σ A_ic T_cb into block (i, b): 16 × 8 halves
            const int bb = t / 2, n0 = bb * kTb + (t % 2) * 8;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma(acc, m0, n0, m0 - bb * kTb, [&](int m, int kk) { return As[m * kLdT + bb * kTb + kk]; },
                     [&](int kk, int n) { return Xs[(bb * kTb + kk) * kLdT + n]; });
            tile_each(acc, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
        }
        __syncthreads();
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        const int t = warp, n0 = (t / 2) * kTb + (t % 2) * 8;
        if (t < 2 * bi)  // T_ib = T_ii · Y_ib
            tile_mma(acc, m0, n0, kTb, [&](int m, int kk) { return Xs[m * kLdT + m0 + kk]; },
                     [&](int kk, int n) { return Xs[(m0 + kk) * kLdT + n]; });
        __syncthreads();  // every Y read
        if (t < 2 * bi) tile_each(acc, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
        __syncthreads();
    }
}

// solve_block_rows's blocks level by level instead of block row by block row: at distance d = i − b
// (1, 2, 3) every block (i, b) at once — Y_ib = Σ_{b<=c<i} A_ic·T_cb (its T_cb at smaller distances),
// then T_ib = T_ii·Y_ib by the same warp, Y in T_ib's place (the warp's own 16 × 8 half-tile, so a
// warp barrier between them, not a block one), one block barrier a level: 3 where block rows take 9.
// The same tile products in the same order: the same bits. Every warp (8) calls it; T is complete
// for every thread on return.
__device__ inline void solve_levels(const float* As, float* Xs, int warp) {
#pragma unroll
    for (int d = 1; d < kC / kTb; ++d) {
        if (warp < 2 * (kC / kTb - d)) {  // half-tile warp % 2 of block (b + d, b), b = warp / 2
            const int b = warp / 2, m0 = (b + d) * kTb, n0 = b * kTb + (warp % 2) * 8;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma(acc, m0, n0, d * kTb, [&](int m, int kk) { return As[m * kLdT + b * kTb + kk]; },
                     [&](int kk, int n) { return Xs[(b * kTb + kk) * kLdT + n]; });
            tile_each(acc, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
            __syncwarp();  // Y written
            float t[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma(t, m0, n0, kTb, [&](int m, int kk) { return Xs[m * kLdT + m0 + kk]; },
                     [&](int kk, int n) { return Xs[(m0 + kk) * kLdT + n]; });
            __syncwarp();  // every lane's reads of Y done
            tile_each(t, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
        }
        __syncthreads();
    }
}

// The state pass and output pass of GdnChunkVariant::Split* (fast_gdn_split.cu), queued after
// wy_prep has filled the scratch rows of `a`.
cudaError_t launch_wy_split(const ChArgs& a, int state_warps, cudaStream_t stream);

}  // namespace tessera::cuda::fast::detail::wy
