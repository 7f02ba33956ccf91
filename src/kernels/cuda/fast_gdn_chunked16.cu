// GdnChunkVariant::F16x3: the chunked (WY) gated delta rule of fast_gdn_chunked.cu (same steps, same
// chunks) with the serial pass's products on mma.sync m16n8k16 f16 instead of 3×TF32 m16n8k8.
// Every operand tile X is stored as 2^-e·(hi + 2^-11·lo), hi and lo f16 and e one power of two per
// tile (max |X|·2^e in [2^12, 2^13): f16's range, and 22 bits of each element relative to the
// tile's max); a product is hi·hi + 2^-11·(hi·lo + lo·hi) in three f32 accumulators (the dropped
// lo·lo is ~2^-22 relative, as 3×TF32's), then scaled back. The state stays f32 (in registers) and
// is rounded so once a chunk for its products, as FLA does.
//  1. wy_prep16, a block per (chunk, sequence, value head), all chunks in parallel: wy_prep's Γ, A,
//     T, P, W and U (3×TF32, as there), then W, K̃ = K ⊙ e^(Γlast−Γ), Q̃ = Q ⊙ e^Γ and P written split
//     (hi | lo halves) to scratch rows, U in f32, and the chunk's 2^-e scales and e^Γlast in its first row.
//  2. wy_state16, a block of 16 warps per (sequence, value head, 32 state columns), chunks in order:
//     Vn = U − W·S and Q̃·S (one pass over S's fragments), then O = Q̃·S + P·Vn and
//     S ← e^Γlast·S + K̃ᵀ·Vn. Tiles by cp.async straight from scratch into ldmatrix layouts: P and U
//     a chunk ahead (two buffers), W and Q̃ once W·S is done, K̃ once the S update is.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_gdn_wy.cuh"
#include "kernels/cuda/fast_mma.cuh"

namespace tessera::cuda::fast::detail {

using namespace wy;

namespace {

constexpr int kNW = 16, kTh16 = kNW * 32;  // wy_state16: warps, threads
constexpr int kLdP = 2 * kC + 8;           // halves: a P row [hi 64 | lo 64 | pad] (≡ 4 banks: no conflicts)
constexpr int kLdN = 2 * kNs + 8;          // halves: an S or Vn row [hi 32 | lo 32 | pad]
constexpr float kLo = 2048.f, kLoInv = 1.f / 2048.f;  // lo's scale 2^11
enum { kMxW, kMxK, kMxQ, kMxP };  // wy_prep16's tile maxima; also the order of the chunk scales

// The exponent e that brings a tile whose max |x| has these f32 bits into [2^12, 2^13), clamped
// to [-60, 60] (a tile of zeros, NaN or inf: any e; they stay what they are).
__device__ inline int tile_exp(uint32_t max_bits) {
    const int e = 12 - (int(max_bits >> 23) - 127);
    return e < -60 ? -60 : e > 60 ? 60 : e;
}
__device__ inline float pow2(int e) { return __uint_as_float(uint32_t(127 + e) << 23); }
// |x| as bits: a max over them orders like |x| and keeps NaN (fmaxf would drop it).
__device__ inline uint32_t abs_bits(float x) { return __float_as_uint(x) & 0x7fffffffu; }
// The max of m over the warp into *slot (a shared max over warps). Every lane calls it.
__device__ inline void max_into(uint32_t* slot, uint32_t m) {
    m = __reduce_max_sync(0xffffffffu, m);
    if (threadIdx.x % 32 == 0) atomicMax(slot, m);
}
// (x0, x1)·s as f16 pairs with x·s = hi + 2^-11·lo to ~2^-22 (low half: x0). x·s − hi is exact in f32.
__device__ inline void split16(float x0, float x1, float s, uint32_t& hi, uint32_t& lo) {
    x0 *= s;
    x1 *= s;
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 f = __half22float2(h);
    const __half2 l = __floats2half2_rn((x0 - f.x) * kLo, (x1 - f.y) * kLo);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
}

// A 16 × 8 tile's three accumulators: hi·hi, hi·lo, lo·hi (independent mma chains).
struct Acc3 {
    float hh[4], hl[4], lh[4];
};
__device__ inline void mma3(Acc3& c, const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0, uint32_t bh1,
                            uint32_t bl0, uint32_t bl1) {
    dev::mma_f16(c.hh, ah, bh0, bh1);
    dev::mma_f16(c.hl, ah, bl0, bl1);
    dev::mma_f16(c.lh, al, bh0, bh1);
}
__device__ inline float acc3(const Acc3& c, int e) { return c.hh[e] + (c.hl[e] + c.lh[e]) * kLoInv; }

// The scratch row of F16x3 per (token, value head), dkq = dk rounded up to 16: halves [W hi | W lo |
// K̃ hi | K̃ lo | Q̃ hi | Q̃ lo] (dkq each), [P hi | P lo] (64 each); floats U (dv, room for a multiple
// of 4), then 8 floats: the chunk's 2^-e of W, K̃, Q̃, P and e^Γlast (its first row only).
struct Row16 {
    int w, k, q, p;  // halves
    int u, meta;     // floats
};
__device__ inline Row16 row16(int dkq, int dv) {
    const int u = 3 * dkq + kC;
    return {0, 2 * dkq, 4 * dkq, 6 * dkq, u, u + (dv + 3) / 4 * 4};
}

// ---- 1. chunk-local matrices, written split ----

__global__ void __launch_bounds__(kThreads, 2) wy_prep16_kernel(ChArgs a) {
    const int64_t c = blockIdx.x, h = blockIdx.z;
    const int s = blockIdx.y, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
    Seq sq;
    if (!seq_of(a, s, &sq) || c * kC >= sq.n_wy) return;
    const int64_t tb = sq.t0 + c * kC;
    const int L = int(sq.n_wy - c * kC < kC ? sq.n_wy - c * kC : kC);
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    const int dk = a.dk, dv = a.dv, dkq = (dk + 15) / 16 * 16, dvp = a.dvp, ldk = dkq + 4, ldv = dvp + 8;
    const Row16 ro = row16(dkq, dv);
    auto srow = [&](int i) { return a.scratch + ((tb + i) * a.nv + h) * a.rs; };  // i < L
    auto srow2 = [&](int i) { return reinterpret_cast<uint32_t*>(srow(i)); };    // as f16 pairs

    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);    // [64][ldk] k (rows >= L and columns >= dk: 0)
    float* Qs = Ks + kC * ldk;                      // [64][ldk] q, until Q̃ and P are written
    float* Vs = Qs;                                 // [64][ldv] v, loaded after them
    float* As = Qs + kC * (ldk > ldv ? ldk : ldv);  // [64][kLdT] A
    float* Xs = As + kC * kLdT;                     // [64][kLdT] T
    float* bt = Xs + kC * kLdT;                     // [64] β
    float* eg = bt + kC;                            // [64] e^Γ (0 past L)
    float* dl = eg + kC;                            // [64] e^(Γlast − Γ) (0 past L)
    double* Gd = reinterpret_cast<double*>(dl + kC);  // [64] Γ
    uint32_t* mx = reinterpret_cast<uint32_t*>(Gd + kC);  // [4] tile maxima (kMx*)

    for (int l = warp; l < kC; l += kThreads / 32) {  // a warp per token row, lanes along it
        const float* kr = a.k.data + (tb + l) * a.k.tok_stride + hk * a.k.head_stride;
        const float* qr = a.q.data + (tb + l) * a.q.tok_stride + hk * a.q.head_stride;
        load_row(Ks + l * ldk, kr, dk, dkq, l < L, a.vec, lane);
        load_row(Qs + l * ldk, qr, dk, dkq, l < L, a.vec, lane);
    }
    if (tid < kC) bt[tid] = tid < L ? a.beta[(tb + tid) * a.beta_s + h] : 0.f;
    if (tid < 4) mx[tid] = 0u;
    if (warp == 0) {  // Γ: inclusive scan in double, 2 tokens per lane (g = 0 past L: Γ stays)
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
    cp_async_wait_all();  // this thread's copies; the barrier publishes everyone's
    __syncthreads();
    auto D = [&](int i, int j) { return expf(float(Gd[i] - Gd[j])); };  // i >= j
    if (tid < kC) dl[tid] = tid < L ? D(L - 1, tid) : 0.f;

    // A = −strictlower((diag(β)K)·Kᵀ ⊙ D): 4 × 8 tiles of 16 × 8.
    for (int t = warp; t < 32; t += 8) {
        const int m0 = (t / 8) * 16, n0 = (t % 8) * 8;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (n0 < m0 + 16)  // tiles wholly above the diagonal stay 0
            tile_mma(acc, m0, n0, dkq, [&](int m, int kk) { return bt[m] * Ks[m * ldk + kk]; },
                     [&](int kk, int n) { return Ks[n * ldk + kk]; });
        tile_each(acc, m0, n0, [&](int i, int j, float x) { As[i * kLdT + j] = j < i ? -x * D(i, j) : 0.f; });
    }
    __syncthreads();

    // Warps 0, 1: the diagonal 16 × 16 blocks of T, as wy_prep. Warps 2..7: P = Q·Kᵀ ⊙ D (lower,
    // incl. the diagonal; 0 above it and past L) into registers, 32 tiles over 6 warps.
    float pacc[6][4] = {};
    uint32_t mp = 0u;
    if (warp < 2) {
        const int j = tid, end = (j / kTb + 1) * kTb, stop = end < L ? end : L;
        for (int i = 0; i <= j; ++i) Xs[i * kLdT + j] = i == j ? 1.f : 0.f;
        for (int i = j + 1; i < stop; ++i) {
            float acc = As[i * kLdT + j];
            for (int m = j + 1; m < i; ++m) acc += As[i * kLdT + m] * Xs[m * kLdT + j];
            Xs[i * kLdT + j] = acc;
        }
        for (int i = j + 1 > stop ? j + 1 : stop; i < end; ++i) Xs[i * kLdT + j] = 0.f;  // padding rows: A = 0
    } else {
#pragma unroll
        for (int r = 0; r < 6; ++r) {
            const int t = warp - 2 + 6 * r, m0 = (t / 8) * 16, n0 = (t % 8) * 8;
            if (t < 32 && n0 < m0 + 16) {
                tile_mma(pacc[r], m0, n0, dkq, [&](int m, int kk) { return Qs[m * ldk + kk]; },
                         [&](int kk, int n) { return Ks[n * ldk + kk]; });
#pragma unroll
                for (int e = 0; e < 4; ++e) {  // tile_each's element order
                    const int i = m0 + gid + (e / 2) * 8, j = n0 + 2 * tig + e % 2;
                    pacc[r][e] = i < L && j <= i ? pacc[r][e] * D(i, j) : 0.f;
                    mp = max(mp, abs_bits(pacc[r][e]));
                }
            }
        }
    }
    max_into(&mx[kMxP], mp);
    __syncthreads();  // T's diagonal blocks, P's max, dl

    // Q̃ = Q ⊙ e^Γ and K̃ = K ⊙ e^(Γlast − Γ): their maxima, then every row split into scratch.
    uint32_t mq = 0u, mk = 0u;
    for (int idx = tid; idx < kC * dkq; idx += kThreads) {
        const int l = idx / dkq, i = idx % dkq;
        mq = max(mq, abs_bits(Qs[l * ldk + i] * eg[l]));
        mk = max(mk, abs_bits(Ks[l * ldk + i] * dl[l]));
    }
    max_into(&mx[kMxQ], mq);
    max_into(&mx[kMxK], mk);
    __syncthreads();
    const int eq = tile_exp(mx[kMxQ]), ek = tile_exp(mx[kMxK]), ep = tile_exp(mx[kMxP]);
    for (int l = warp; l < L; l += kThreads / 32) {
        uint32_t* row = srow2(l);
        for (int p = lane; p < dkq / 2; p += 32) {
            uint32_t hi, lo;
            split16(Qs[l * ldk + 2 * p] * eg[l], Qs[l * ldk + 2 * p + 1] * eg[l], pow2(eq), hi, lo);
            row[ro.q / 2 + p] = hi;
            row[(ro.q + dkq) / 2 + p] = lo;
            split16(Ks[l * ldk + 2 * p] * dl[l], Ks[l * ldk + 2 * p + 1] * dl[l], pow2(ek), hi, lo);
            row[ro.k / 2 + p] = hi;
            row[(ro.k + dkq) / 2 + p] = lo;
        }
    }
    if (warp >= 2) {
#pragma unroll
        for (int r = 0; r < 6; ++r) {
            const int t = warp - 2 + 6 * r, m0 = (t / 8) * 16, n0 = (t % 8) * 8;
            if (t >= 32) continue;
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // rows gid, gid + 8: columns 2tig, 2tig + 1
                const int i = m0 + gid + 8 * half, j = n0 + 2 * tig;
                if (i >= L) continue;
                uint32_t hi, lo;
                split16(pacc[r][2 * half], pacc[r][2 * half + 1], pow2(ep), hi, lo);
                srow2(i)[(ro.p + j) / 2] = hi;
                srow2(i)[(ro.p + kC + j) / 2] = lo;
            }
        }
    }
    __syncthreads();  // Qs is free for V, which lands during the block rows below
    for (int l = warp; l < kC; l += kThreads / 32) {
        const float* vr = a.v.data + (tb + l) * a.v.tok_stride + h * a.v.head_stride;
        load_row(Vs + l * ldv, vr, dv, dvp, l < L, a.vec, lane);
    }
    // The blocks below the diagonal, block row by block row, as wy_prep.
    for (int bi = 1; bi < kC / kTb; ++bi) {
        const int m0 = bi * kTb;
        for (int t = warp; t < 2 * bi; t += 8) {
            const int bb = t / 2, n0 = bb * kTb + (t % 2) * 8;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma(acc, m0, n0, m0 - bb * kTb, [&](int m, int kk) { return As[m * kLdT + bb * kTb + kk]; },
                     [&](int kk, int n) { return Xs[(bb * kTb + kk) * kLdT + n]; });
            tile_each(acc, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
        }
        __syncthreads();
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        const int t = warp, n0 = (t / 2) * kTb + (t % 2) * 8;
        if (t < 2 * bi)
            tile_mma(acc, m0, n0, kTb, [&](int m, int kk) { return Xs[m * kLdT + m0 + kk]; },
                     [&](int kk, int n) { return Xs[(m0 + kk) * kLdT + n]; });
        __syncthreads();
        if (t < 2 * bi) tile_each(acc, m0, n0, [&](int i, int n, float x) { Xs[i * kLdT + n] = x; });
        __syncthreads();
    }

    cp_async_wait_all();  // V
    __syncthreads();
    // W = T·(diag(β)K ⊙ e^Γ) into registers (4 row tiles × dkq/8 column tiles, 8 a warp at most)
    // and U = T·diag(β)V straight to scratch; T is lower triangular: rows [m0, m0 + 16) stop at m0 + 16.
    const int nw = dkq / 8, nu = dvp / 8;
    auto Tm = [&](int m, int kk) { return Xs[m * kLdT + kk]; };
    float wacc[8][4];
    uint32_t mw = 0u;
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int t = warp + 8 * r, m0 = (t % 4) * 16, n0 = (t / 4) * 8;
        for (float& x : wacc[r]) x = 0.f;
        if (t < 4 * nw) {
            tile_mma(wacc[r], m0, n0, m0 + 16, Tm, [&](int kk, int n) { return eg[kk] * (bt[kk] * Ks[kk * ldk + n]); });
            for (float x : wacc[r]) mw = max(mw, abs_bits(x));
        }
    }
    max_into(&mx[kMxW], mw);
    for (int t = 4 * nw + warp; t < 4 * (nw + nu); t += 8) {
        const int m0 = (t % 4) * 16, n0 = (t / 4 - nw) * 8;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        tile_mma(acc, m0, n0, m0 + 16, Tm, [&](int kk, int n) { return bt[kk] * Vs[kk * ldv + n]; });
        tile_each(acc, m0, n0, [&](int i, int n, float x) {
            if (i < L && n < dv) srow(i)[ro.u + n] = x;
        });
    }
    __syncthreads();  // W's max
    const int ew = tile_exp(mx[kMxW]);
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        const int t = warp + 8 * r, m0 = (t % 4) * 16, n0 = (t / 4) * 8;
        if (t >= 4 * nw) continue;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int i = m0 + gid + 8 * half, j = n0 + 2 * tig;
            if (i >= L) continue;
            uint32_t hi, lo;
            split16(wacc[r][2 * half], wacc[r][2 * half + 1], pow2(ew), hi, lo);
            srow2(i)[(ro.w + j) / 2] = hi;
            srow2(i)[(ro.w + dkq + j) / 2] = lo;
        }
    }
    if (tid == 0) {
        float* meta = srow(0) + ro.meta;
        meta[kMxW] = pow2(-ew);
        meta[kMxK] = pow2(-ek);
        meta[kMxQ] = pow2(-eq);
        meta[kMxP] = pow2(-ep);
        meta[4] = eg[L - 1];  // e^Γlast
        meta[5] = meta[6] = meta[7] = 0.f;  // copied with the rest (no uninitialised reads)
    }
}

// ---- 2. the state carried chunk by chunk ----

__global__ void __launch_bounds__(kTh16, 1) wy_state16_kernel(ChArgs a) {
    const int s = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
    const int64_t h = blockIdx.y;
    const int c0 = int(blockIdx.z) * kNs;  // this block's first state column
    const int dk = a.dk, dv = a.dv, dkq = (dk + 15) / 16 * 16, ldw = 2 * dkq + 8;
    Seq sq;
    if (!seq_of(a, s, &sq)) {
        if (sq.range_ok)
            for (int64_t idx = tid; idx < sq.n * kNs; idx += kTh16) {
                const int col = c0 + int(idx % kNs);
                if (col < dv) a.o[(sq.t0 + idx / kNs) * a.o_ts + h * a.o_hs + col] = dev::quiet_nan();
            }
        return;
    }
    if (sq.n_wy == 0) return;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = sq.slot >= 0 ? a.state + sq.slot * a.slot_stride + h * int64_t(dk) * dv : nullptr;
    const Row16 ro = row16(dkq, dv);

    // Split tiles are rows [hi | lo | 8 pad] of halves (the row strides ≡ 4 banks: ldmatrix without
    // conflicts); lo sits dkq, 64 or 32 halves after hi.
    extern __shared__ float4 smem4[];
    uint16_t* Wt = reinterpret_cast<uint16_t*>(smem4);  // [64][ldw] W
    uint16_t* Qt = Wt + kC * ldw;                       // [64][ldw] Q̃
    uint16_t* Kt = Qt + kC * ldw;                       // [64][ldw] K̃
    uint16_t* Pt = Kt + kC * ldw;                       // [2][64][kLdP] P of this chunk and of the next
    uint16_t* Sh = Pt + 2 * kC * kLdP;                  // [dkq][kLdN] S·2^eS
    uint16_t* Vh = Sh + dkq * kLdN;                     // [64][kLdN] Vn·2^eV
    float* Ub = reinterpret_cast<float*>(Vh + kC * kLdN);  // [2][64][kLdS] U, likewise
    float* meta = Ub + 2 * kC * kLdS;                   // [2][8] the chunk scales (Row16)
    uint32_t* red = reinterpret_cast<uint32_t*>(meta + 16);  // [4] max |Vn| (2 chunks), max |S| (2 states)

    auto chunk_rows = [&](int64_t cs) { return int(sq.n_wy - cs < kC ? sq.n_wy - cs : kC); };
    auto srow = [&](int64_t t) { return a.scratch + (t * a.nv + h) * a.rs; };
    // n16 16-byte pieces of every row from float offset off of the scratch rows of the chunk at cs
    // (rows past its end: zeros) to dst, rows ld halves apart; 32 / rpw pieces a row at most.
    auto copy_rows = [&](uint16_t* dst, int ld, int64_t cs, int off, int n16, int rpw) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs), per = 32 / rpw, p = lane % per;
        for (int l = warp * rpw + lane / per; l < kC; l += kNW * rpw) {
            if (p >= n16) continue;
            const bool ok = l < L;
            dev::cp_async16(dev::smem_addr(dst + l * ld + 8 * p), ok ? srow(tb + l) + off + 4 * p : a.scratch, ok);
        }
    };
    auto load_wq = [&](int64_t cs) {
        if (cs >= sq.n_wy) return;
        copy_rows(Wt, ldw, cs, ro.w / 2, dkq / 4, 1);
        copy_rows(Qt, ldw, cs, ro.q / 2, dkq / 4, 1);
    };
    auto load_k = [&](int64_t cs) {
        if (cs < sq.n_wy) copy_rows(Kt, ldw, cs, ro.k / 2, dkq / 4, 1);
    };
    auto load_pu = [&](int64_t cs, int b) {  // P, U (this block's columns) and the scales into buffer b
        if (cs >= sq.n_wy) return;
        copy_rows(Pt + b * kC * kLdP, kLdP, cs, ro.p / 2, 16, 2);
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs), l = warp * 4 + lane / 8, p = lane % 8, col = c0 + 4 * p;
        const int nb = l < L && col < dv ? (dv - col < 4 ? dv - col : 4) * 4 : 0;  // bytes read, rest zero
        dev::cp_async16_n(dev::smem_addr(Ub + (b * kC + l) * kLdS + 4 * p), nb ? srow(tb + l) + ro.u + col : a.scratch,
                          nb);
        if (tid < 2) dev::cp_async16(dev::smem_addr(meta + 8 * b + 4 * tid), srow(tb) + ro.meta + 4 * tid, true);
    };

    // This warp's tiles. Phase 1 (W·S, Q̃·S) and P·Vn: rows m1 of the chunk, columns n1. The S update:
    // rows m2 of S (none when m2 >= dkq), columns n2 and n2 + 8; S lives there in registers.
    const int m1 = (warp % 4) * 16, n1 = (warp / 4) * 8, m2 = (warp / 2) * 16, n2 = (warp % 2) * 16;
    const bool s_rows = m2 < dkq;
    float Sr[2][4];  // S(m2 + gid + 8·(e/2), n2 + 8j + 2tig + e%2)
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = m2 + gid + (e / 2) * 8, col = c0 + n2 + 8 * j + 2 * tig + e % 2;
            Sr[j][e] = S && i < dk && col < dv ? S[int64_t(i) * dv + col] : 0.f;
        }
    // Writes S·2^eS split into Sh from the registers (after a barrier that ends Sh's reads and
    // publishes max |S|); returns 2^-eS.
    auto round_s = [&](const uint32_t* smax) {
        const int es = tile_exp(*smax);
        if (s_rows)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int half = 0; half < 2; ++half) {
                    const int i = m2 + gid + 8 * half, col = n2 + 8 * j + 2 * tig;
                    uint32_t hi, lo;
                    split16(Sr[j][2 * half], Sr[j][2 * half + 1], pow2(es), hi, lo);
                    *reinterpret_cast<uint32_t*>(Sh + i * kLdN + col) = hi;
                    *reinterpret_cast<uint32_t*>(Sh + i * kLdN + kNs + col) = lo;
                }
        return pow2(-es);
    };
    auto s_max = [&] {
        uint32_t m = 0u;
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) m = max(m, abs_bits(Sr[j][e]));
        return m;
    };

    // Copy groups, in commit order: P/U(0), W/Q̃(0), K̃(0), P/U(1), then per chunk c: W/Q̃(c + 1) once
    // W·S is done, K̃(c + 1) and P/U(c + 2) once the S update is (empty past the last chunk). So
    // "all but the two newest" is W/Q̃(c) at the chunk's start and K̃(c) before the S update; every
    // buffer is rewritten only after the barrier that ends its last reads.
    load_pu(0, 0);
    cp_async_commit();
    load_wq(0);
    cp_async_commit();
    load_k(0);
    cp_async_commit();
    load_pu(kC, 1);
    cp_async_commit();
    if (tid < 4) red[tid] = 0u;
    __syncthreads();
    max_into(&red[2], s_rows ? s_max() : 0u);
    __syncthreads();
    float inv_s = round_s(&red[2]);  // 2^-eS of the state the chunk starts from

    int b = 0;
    for (int64_t cs = 0, ci = 0; cs < sq.n_wy; cs += kC, ++ci, b ^= 1) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        cp_async_wait<2>();  // W, Q̃, P, U and the scales of this chunk
        __syncthreads();     // ... and Sh
        if (tid == 0) red[(ci + 1) & 1] = red[2 + ((ci + 1) & 1)] = 0u;  // next chunk's max |Vn|, new max |S|
        const float* sc = meta + 8 * b;

        // Phase 1: W·S and Q̃·S, S's fragments loaded once for both.
        Acc3 ws = {}, qs = {};
        {
            const uint32_t a_w = dev::smem_addr(Wt + (m1 + (lane & 15)) * ldw + (lane >> 4) * 8);
            const uint32_t a_q = dev::smem_addr(Qt + (m1 + (lane & 15)) * ldw + (lane >> 4) * 8);
            const uint32_t a_s = dev::smem_addr(Sh + (lane & 15) * kLdN + n1 + (lane >> 4) * kNs);
            for (int k0 = 0; k0 < dkq; k0 += 16) {
                uint32_t bs[4], wh[4], wl[4], qh[4], ql[4];
                dev::ldsm_x4_trans(bs, a_s + 2 * k0 * kLdN);  // b0, b1 of hi, then of lo
                dev::ldsm_x4(wh, a_w + 2 * k0);
                dev::ldsm_x4(wl, a_w + 2 * (dkq + k0));
                dev::ldsm_x4(qh, a_q + 2 * k0);
                dev::ldsm_x4(ql, a_q + 2 * (dkq + k0));
                mma3(ws, wh, wl, bs[0], bs[1], bs[2], bs[3]);
                mma3(qs, qh, ql, bs[0], bs[1], bs[2], bs[3]);
            }
        }
        // Vn = U − W·S and o's first part e^Γ ⊙ (Q·S), both at (m1 + gid + 8·(e/2), n1 + 2tig + e%2).
        const float fw = sc[kMxW] * inv_s, fq = sc[kMxQ] * inv_s;
        float vn[4], oq[4];
        uint32_t mv = 0u;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = m1 + gid + (e / 2) * 8, n = n1 + 2 * tig + e % 2;
            vn[e] = Ub[(b * kC + i) * kLdS + n] - acc3(ws, e) * fw;
            oq[e] = acc3(qs, e) * fq;
            mv = max(mv, abs_bits(vn[e]));
        }
        max_into(&red[ci & 1], mv);
        __syncthreads();  // max |Vn|; every read of W, Q̃ and Sh is done
        load_wq(cs + kC);
        cp_async_commit();
        const int ev = tile_exp(red[ci & 1]);
        const float inv_v = pow2(-ev);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int i = m1 + gid + 8 * half, n = n1 + 2 * tig;
            uint32_t hi, lo;
            split16(vn[2 * half], vn[2 * half + 1], pow2(ev), hi, lo);
            *reinterpret_cast<uint32_t*>(Vh + i * kLdN + n) = hi;
            *reinterpret_cast<uint32_t*>(Vh + i * kLdN + kNs + n) = lo;
        }
        cp_async_wait<2>();  // K̃ of this chunk
        __syncthreads();     // ... and Vh

        // O = Q̃·S + P·Vn (P lower triangular: rows [m1, m1 + 16) stop at column m1 + 16).
        {
            Acc3 pv = {};
            const uint32_t a_p = dev::smem_addr(Pt + (b * kC + m1 + (lane & 15)) * kLdP + (lane >> 4) * 8);
            const uint32_t a_v = dev::smem_addr(Vh + (lane & 15) * kLdN + n1 + (lane >> 4) * kNs);
            for (int k0 = 0; k0 <= m1; k0 += 16) {
                uint32_t bv[4], ph[4], pl[4];
                dev::ldsm_x4_trans(bv, a_v + 2 * k0 * kLdN);
                dev::ldsm_x4(ph, a_p + 2 * k0);
                dev::ldsm_x4(pl, a_p + 2 * (kC + k0));
                mma3(pv, ph, pl, bv[0], bv[1], bv[2], bv[3]);
            }
            const float fp = sc[kMxP] * inv_v;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = m1 + gid + (e / 2) * 8, col = c0 + n1 + 2 * tig + e % 2;
                if (i < L && col < dv) a.o[(tb + i) * a.o_ts + h * a.o_hs + col] = oq[e] + acc3(pv, e) * fp;
            }
        }
        // S ← e^Γlast·S + K̃ᵀ·Vn: K̃ᵀ's fragments by transposed loads of K̃'s rows (tokens).
        if (s_rows) {
            Acc3 ds[2] = {};
            const uint32_t a_k =
                dev::smem_addr(Kt + ((lane >> 4) * 8 + (lane & 7)) * ldw + m2 + ((lane >> 3) & 1) * 8);
            const uint32_t a_v = dev::smem_addr(Vh + (lane & 15) * kLdN + n2 + (lane >> 4) * 8);
#pragma unroll
            for (int k0 = 0; k0 < kC; k0 += 16) {
                uint32_t kh[4], kl[4], vh[4], vl[4];
                dev::ldsm_x4_trans(kh, a_k + 2 * k0 * ldw);
                dev::ldsm_x4_trans(kl, a_k + 2 * (k0 * ldw + dkq));
                dev::ldsm_x4_trans(vh, a_v + 2 * k0 * kLdN);  // columns n2, then n2 + 8
                dev::ldsm_x4_trans(vl, a_v + 2 * (k0 * kLdN + kNs));
                mma3(ds[0], kh, kl, vh[0], vh[1], vl[0], vl[1]);
                mma3(ds[1], kh, kl, vh[2], vh[3], vl[2], vl[3]);
            }
            const float fk = sc[kMxK] * inv_v, last = sc[4];
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) Sr[j][e] = last * Sr[j][e] + acc3(ds[j], e) * fk;
        }
        max_into(&red[2 + ((ci + 1) & 1)], s_rows ? s_max() : 0u);
        __syncthreads();  // max |S|; every read of K̃, P, U, Vh, Sh and the scales is done
        load_k(cs + kC);
        cp_async_commit();
        load_pu(cs + 2 * kC, b);
        cp_async_commit();
        inv_s = round_s(&red[2 + ((ci + 1) & 1)]);
    }
    cp_async_wait<0>();  // (only empty groups remain)
    if (!S) {
        // A padding sequence keeps no state, so the recurrent kernel could not continue it: its
        // last one-token chunk is stepped here (outputs only; nothing is written back), from S in
        // f32 in U's buffers ([dkq][kLdS]).
        if (sq.n_wy == sq.n) return;
        float* Ss = Ub;
        if (s_rows)
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    Ss[(m2 + gid + (e / 2) * 8) * kLdS + n2 + 8 * j + 2 * tig + e % 2] = Sr[j][e];
        __syncthreads();
        if (warp != 0) return;
        const int64_t t = sq.t0 + sq.n - 1;
        const float* kt = a.k.data + t * a.k.tok_stride + hk * a.k.head_stride;
        const float* qt = a.q.data + t * a.q.tok_stride + hk * a.q.head_stride;
        const float decay = expf(a.g[t * a.g_s + h]), beta = a.beta[t * a.beta_s + h];
        float u = 0.f, os = 0.f, kq = 0.f;
        for (int i = 0; i < dk; ++i) {
            const float sv = decay * Ss[i * kLdS + lane];
            u += sv * kt[i];
            os += sv * qt[i];
            kq += kt[i] * qt[i];
        }
        const int col = c0 + lane;
        if (col < dv) {
            const float delta = beta * (a.v.data[t * a.v.tok_stride + h * a.v.head_stride + col] - u);
            a.o[t * a.o_ts + h * a.o_hs + col] = os + delta * kq;
        }
        return;
    }
    if (s_rows)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int i = m2 + gid + (e / 2) * 8, col = c0 + n2 + 8 * j + 2 * tig + e % 2;
                if (i < dk && col < dv) S[int64_t(i) * dv + col] = Sr[j][e];
            }
}

}  // namespace

cudaError_t launch_gdn_chunked16(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                 const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk,
                                 int64_t dv, float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                                 const GdnParams& p, float* scratch, int64_t max_len, cudaStream_t stream) {
    ChArgs a = ch_args(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state, slot_stride, n_slots, plan, p,
                       scratch, max_len);
    a.rs = gdn_chunk16_row_floats(dk, dv);  // a multiple of 4: the state pass copies 16 bytes (scratch 16-aligned)
    a.vec = dk % 4 == 0 && dv % 4 == 0 && al16(q.data, q.tok_stride, q.head_stride) &&
            al16(k.data, k.tok_stride, k.head_stride) && al16(v.data, v.tok_stride, v.head_stride);
    const int dkq = int((dk + 15) / 16 * 16), ldk = dkq + 4, ldv = a.dvp + 8, ldw = 2 * dkq + 8;
    const size_t prep_smem = sizeof(float) * size_t(kC * (ldk + (ldk > ldv ? ldk : ldv) + 2 * kLdT) + 3 * kC) +
                             sizeof(double) * kC + 4 * sizeof(uint32_t);
    const size_t state_smem = 2 * size_t(kC * 3 * ldw + 2 * kC * kLdP + (dkq + kC) * kLdN) +
                              sizeof(float) * size_t(2 * kC * kLdS + 16) + 4 * sizeof(uint32_t);
    cudaError_t err =
        cudaFuncSetAttribute(wy_prep16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(wy_state16_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(state_smem));
    if (err != cudaSuccess) return err;
    const dim3 prep_grid{unsigned((max_len + kC - 1) / kC), unsigned(plan.n_seqs), unsigned(p.n_v_heads)};
    wy_prep16_kernel<<<prep_grid, kThreads, prep_smem, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const dim3 state_grid{unsigned(plan.n_seqs), unsigned(p.n_v_heads), unsigned((dv + kNs - 1) / kNs)};
    wy_state16_kernel<<<state_grid, kTh16, state_smem, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
