// F16Rt's first pass in its lean form: wy_prep_rt_kernel, a block per (chunk, sequence, value
// head), writing the scratch rows wy_state16_rt_kernel<1> reads — the same values, bit for bit, as
// wy_prep16_kernel<128, true, 1> (fast_gdn_prep16.cuh, whose header gives the arithmetic), for
// heads of dk <= 128 (rounded to 128) and dv <= 128, in fewer instructions:
//  - K and Q rows go straight to registers (a warp 8 token rows, a float4 a lane) and are rounded
//    to f16 from there, K̃ and Q̃ to the scratch rows; no f32 staging. V's rows follow into registers
//    while K·Kᵀ and Q·Kᵀ run, then into Q's f16 rows' place.
//  - Maxima of |K̃| and |Q̃| from a row's max times its factor (rounding is monotonic: the same
//    bits as the max of the products), per warp, then one reduction a lane.
//  - The diagonal 16 × 16 blocks of T in registers: a lane a column, unrolled (x[i] = Σ_{m<i}
//    A(i, m)·x[m] in m order — the loop form's sum, whose first term is A(i, j)·1); the blocks below
//    them level by level (solve_levels: 3 block barriers, not solve_block_rows's 9).
//  - W = T'·K and U = T''·V a 16-column strip a warp (the A fragments shared by two n-tiles), with
//    W's and U's strips fixed per warp at compile time (no branches in the epilogue).
// 70 KB of shared memory a block (V takes Q's place) at 80 registers: three blocks an SM; on 16 warps
// (F16RtSched16, session 50) two blocks an SM at 64 registers, the same values.
// Written in session 39; its bits confirmed on the H200 in session 41 (FastGdnChunked.LeanFormGivesF16RtBits);
// the default's prep since session 45 (F16RtLean, then F16RtSched persistent: wy_prep_rt_kernel below).
// Included by fast_gdn_chunked16.cu only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_gdn_phases.cuh"
#include "kernels/cuda/fast_gdn_prep16.cuh"
#include "kernels/cuda/fast_gdn_wy.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"  // sm_id
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail::prep_rt {

using namespace wy;
using namespace f16x3;
using prep16::kLdTh;

constexpr int kD = 128;            // dk and dv, padded (zero columns past them)
constexpr int kLdH = kD + 8;       // halves: an f16 row of K, Q or V (272 bytes ≡ 4 banks: no ldmatrix conflicts)
constexpr int kMaxWarps = 16;  // a block's warps: 8 (kThreads, three blocks an SM) or 16 (two)

// Shared memory of a block (bytes from the dynamic base, every array 16-byte aligned).
struct PrepRtSmem {
    uint16_t k[kC][kLdH];   // K·2^eK (rows past L: 0)
    uint16_t qv[kC][kLdH];  // Q·2^eQ, then V·2^eV(row)
    float a[kC][kLdT];      // A = −strictlower(diag(β)·K·Kᵀ ⊙ D), then T' split (halves [64][kLdTh])
    float x[kC][kLdT];      // T = (I − A)⁻¹, then T'' split
    double gd[kC];          // Γ
    float bt[kC], eg[kC], dl[kC], iv[kC], rw[kC], ru[kC];  // β, e^Γ, e^(Γlast − Γ), 2^-eV, T' / T'' row scales
    uint4 wmax[kMaxWarps];     // per warp: max |K|, |Q|, |K̃|, |Q̃| (as bits)
    uint32_t pmax[kMaxWarps];  // per warp: max |P|
    uint32_t wbound[kMaxWarps];  // per warp: max_i Σ_j |T'(i, j)|
    uint32_t ubound[kMaxWarps];  // per warp: max_i Σ_j |T''(i, j)| (U16: U's f16 tile's scale)
};
static_assert(sizeof(PrepRtSmem) <= 75 * 1024, "wy_prep_rt: three blocks an SM");
constexpr int kPrepJobs = 20;  // K·Kᵀ / Q·Kᵀ's 16 × 8 tiles on or below the diagonal (prep16::prep_job)

using prep16::load_row4;
__device__ inline float max_abs4(float4 x) {
    return fmaxf(fmaxf(fabsf(x.x), fabsf(x.y)), fmaxf(fabsf(x.z), fabsf(x.w)));
}
// f16 of x·s, four of them (x.x in the low half of the first word): split16x4's hi.
__device__ inline uint2 half4(float4 x, float s) {
    uint2 hi, lo;
    prep16::split16x4<true>(x, s, hi, lo);
    return hi;
}

// One (chunk, sequence, value head) of the prep: item `item` of the chunk-major order (gdn_prep_block).
// (OPAQUE: the thread's index read where it is used, so that a loop over items cannot hoist what
// follows from it into registers held across the items: 80 registers leave no room for them.)
// NW warps (8: three blocks an SM at 80 registers; 16: two at 64) share the item's rows, tiles and
// strips alike: token rows warp + NW·r, K·Kᵀ jobs warp + NW·r, W's strips on warps 0–7 and U's on
// 8–15 (NW 8: both on each). The same values either way: only maxima cross warps.
// U16 (F16RtU16): U into the scratch as f16 under one power of two a chunk (kMetaU), not f32.
template <bool VEC, bool OPAQUE = false, int NW = 8, bool U16 = false>
__device__ __forceinline__ void prep_rt_item(const ChArgs& a, uint32_t item) {
    static_assert(NW == 8 || NW == 16, "wy_prep_rt: 8 or 16 warps");
    constexpr int kWarps = NW, kRowsW = kC / NW, kJobs = (kPrepJobs + NW - 1) / NW;
    const GdnPrepBlock pb = gdn_prep_block(item, uint32_t(a.nv), uint32_t(a.plan.n_seqs));
    const int64_t c = pb.chunk, h = pb.head;
    const int s = int(pb.seq);
    int tid = int(threadIdx.x);
    if constexpr (OPAQUE) asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
    const int warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
    Seq sq;
    if (!seq_of(a, s, &sq) || c * kC >= sq.n_wy) return;
    const int64_t tb = sq.t0 + c * kC;
    const int L = int(sq.n_wy - c * kC < kC ? sq.n_wy - c * kC : kC);
    // (32-bit: a 64-bit division is a subroutine call)
    const int64_t hk = a.tiled ? pb.head % uint32_t(a.nk) : pb.head / uint32_t(a.nv / a.nk);
    const int dk = a.dk, dv = a.dv, col = 4 * lane;
    const Row16 ro = row16(kD, dv);
    // The scratch row of token i < L (as wy_prep16_kernel's: 32-bit offsets from the chunk's first).
    float* const row0 = a.scratch + (tb * a.nv + h) * a.rs;
    const int rstep = int(a.nv * a.rs);
    auto srow = [&](int i) { return row0 + i * rstep; };
    auto srow2 = [&](int i) { return reinterpret_cast<uint32_t*>(srow(i)); };  // as f16 pairs

    extern __shared__ float4 smem4[];
    PrepRtSmem& sm = *reinterpret_cast<PrepRtSmem*>(smem4);
    const PrepStamps stamp(a, item, tid);  // (a profiling build's: fast_gdn_phases.h)

    // 1. This warp's rows l = warp + 8r of K and Q into registers (zeros past L and dk); Γ, e^Γ and
    // e^(Γlast − Γ) by warp 0, β by warp 1.
    float4 kx[kRowsW], qx[kRowsW];
    {
        const float* kp = a.k.data + (tb + warp) * a.k.tok_stride + hk * a.k.head_stride + col;
        const float* qp = a.q.data + (tb + warp) * a.q.tok_stride + hk * a.q.head_stride + col;
        const int64_t ks = kWarps * a.k.tok_stride, qs = kWarps * a.q.tok_stride;
#pragma unroll
        for (int r = 0; r < kRowsW; ++r) {
            const bool ok = warp + kWarps * r < L;
            kx[r] = load_row4(kp + r * ks, col, dk, ok, VEC);
            qx[r] = load_row4(qp + r * qs, col, dk, ok, VEC);
        }
    }
    if (warp == 0) {
        chunk_gamma(a, tb, L, h, lane, sm.gd, sm.eg);
        __syncwarp();
        for (int l = lane; l < kC; l += 32) sm.dl[l] = l < L ? expf(float(sm.gd[L - 1] - sm.gd[l])) : 0.f;
    } else if (warp == 1) {
        for (int l = lane; l < kC; l += 32) sm.bt[l] = l < L ? a.beta[(tb + l) * a.beta_s + h] : 0.f;
    }
    __syncthreads();
    stamp(1);

    // 2. The maxima of |K|, |Q|, |K̃| = |K ⊙ e^(Γlast−Γ)| and |Q̃| = |Q ⊙ e^Γ| a warp.
    {
        float mk = 0.f, mq = 0.f, mkt = 0.f, mqt = 0.f;
#pragma unroll
        for (int r = 0; r < kRowsW; ++r) {
            const int l = warp + kWarps * r;
            const float rk = max_abs4(kx[r]), rq = max_abs4(qx[r]);
            mk = fmaxf(mk, rk);
            mq = fmaxf(mq, rq);
            mkt = fmaxf(mkt, rk * sm.dl[l]);
            mqt = fmaxf(mqt, rq * sm.eg[l]);
        }
        const uint4 m = make_uint4(__reduce_max_sync(0xffffffffu, __float_as_uint(mk)),
                                   __reduce_max_sync(0xffffffffu, __float_as_uint(mq)),
                                   __reduce_max_sync(0xffffffffu, __float_as_uint(mkt)),
                                   __reduce_max_sync(0xffffffffu, __float_as_uint(mqt)));
        if (lane == 0) sm.wmax[warp] = m;
    }
    __syncthreads();
    stamp(2);

    // 3. K and Q as f16 rows under their tiles' powers of two; K̃ and Q̃ split into scratch; P's pairs
    // past row l's diagonal block zeroed there. Then V's rows into registers.
    uint32_t mK;
    int eK, eQ, ek, eq;
    {
        const uint4 m = lane < kWarps ? sm.wmax[lane] : make_uint4(0u, 0u, 0u, 0u);
        mK = __reduce_max_sync(0xffffffffu, m.x);
        eK = tile_exp(mK);
        eQ = tile_exp(__reduce_max_sync(0xffffffffu, m.y));
        ek = tile_exp(__reduce_max_sync(0xffffffffu, m.z));
        eq = tile_exp(__reduce_max_sync(0xffffffffu, m.w));
    }
    {
        const float sK = pow2(eK), sQ = pow2(eQ), sk = pow2(ek), sq = pow2(eq);
        // This lane's pieces of row l's K̃, Q̃ and P, stepped 8 rows at a time (row l's block l / 16 is r / 2).
        uint2* kq = reinterpret_cast<uint2*>(srow(warp) + ro.k / 2) + lane;  // K̃; Q̃ is (ro.q − ro.k) / 4 uint2 on
        uint32_t* pz = srow2(warp) + ro.p / 2 + lane;
        const int64_t step = int64_t(kWarps) * rstep;
#pragma unroll
        for (int r = 0; r < kRowsW; ++r, kq += step / 2, pz += step) {  // (uint2: two floats)
            const int l = warp + kWarps * r;
            *reinterpret_cast<uint2*>(&sm.k[l][col]) = half4(kx[r], sK);
            *reinterpret_cast<uint2*>(&sm.qv[l][col]) = half4(qx[r], sQ);
            if (l < L) {
                const float d = sm.dl[l], e = sm.eg[l];
                const float4 kt = make_float4(kx[r].x * d, kx[r].y * d, kx[r].z * d, kx[r].w * d);
                const float4 qt = make_float4(qx[r].x * e, qx[r].y * e, qx[r].z * e, qx[r].w * e);
                kq[0] = half4(kt, sk);
                kq[(ro.q - ro.k) / 4] = half4(qt, sq);
                if (lane >= 8 * ((NW == 8 ? r / 2 : r) + 1)) *pz = 0u;  // (l / 16, warp < NW)
            }
        }
    }
    float4 vx[kRowsW];
    {
        const float* vp = a.v.data + (tb + warp) * a.v.tok_stride + h * a.v.head_stride + col;
        const int64_t vs = kWarps * a.v.tok_stride;
#pragma unroll
        for (int r = 0; r < kRowsW; ++r) vx[r] = load_row4(vp + r * vs, col, dv, warp + kWarps * r < L, VEC);
    }
    __syncthreads();
    stamp(3);

    // 4. A = −strictlower(diag(β)·K·Kᵀ ⊙ D) into a and P = Q·Kᵀ ⊙ D (lower, 0 past L) into registers,
    // as wy_prep16_kernel's jobs (row block bi, 16 × 8 tile nj <= 2bi + 1), warp, warp + NW, ….
    // Then V's rows as f16 (a power of two a row), kept in registers until Q's rows are read.
    const float ik = pow2(-eK), iqk = pow2(-eQ - eK);
    float pacc[kJobs][4];
    uint32_t mp = 0u;
#pragma unroll
    for (int r = 0; r < kJobs; ++r) {
        const int jb = warp + NW * r;
        const auto [m0, n0] = prep16::prep_job(jb);
#pragma unroll
        for (int e = 0; e < 4; ++e) pacc[r][e] = 0.f;
        if (jb >= kPrepJobs) continue;
        float ka[4] = {0.f, 0.f, 0.f, 0.f}, qp[4] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t a_k = dev::smem_addr(&sm.k[m0 + (lane & 15)][(lane >> 4) * 8]);
        const uint32_t a_q = dev::smem_addr(&sm.qv[m0 + (lane & 15)][(lane >> 4) * 8]);
        const uint32_t b_k = dev::smem_addr(&sm.k[n0 + (lane & 7)][((lane >> 3) & 1) * 8]);
#pragma unroll
        for (int k0 = 0; k0 < kD; k0 += 16) {
            uint32_t bk[4], kh[4], qh[4];
            dev::ldsm_x2(bk, b_k + 2 * k0);
            dev::ldsm_x4(kh, a_k + 2 * k0);
            dev::ldsm_x4(qh, a_q + 2 * k0);
            dev::mma_f16(ka, kh, bk[0], bk[1]);
            dev::mma_f16(qp, qh, bk[0], bk[1]);
        }
        const double2 gj = *reinterpret_cast<const double2*>(&sm.gd[n0 + 2 * tig]);  // Γ of columns j, j + 1
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = m0 + gid + (e / 2) * 8, j = n0 + 2 * tig + e % 2;
            const float d = expf(float(sm.gd[i] - (e % 2 ? gj.y : gj.x)));
            sm.a[i][j] = j < i ? -(ka[e] * ik * ik) * sm.bt[i] * d : 0.f;
            pacc[r][e] = i < L && j <= i ? qp[e] * iqk * d : 0.f;
            mp = max(mp, abs_bits(pacc[r][e]));
        }
    }
    mp = __reduce_max_sync(0xffffffffu, mp);
    if (lane == 0) sm.pmax[warp] = mp;
    uint2 vh[kRowsW];
#pragma unroll
    for (int r = 0; r < kRowsW; ++r) {
        const int ev = tile_exp(__reduce_max_sync(0xffffffffu, __float_as_uint(max_abs4(vx[r]))));
        if (lane == 0) sm.iv[warp + kWarps * r] = pow2(-ev);
        vh[r] = half4(vx[r], pow2(ev));
    }
    __syncthreads();  // A, max |P|, Q's rows read
    stamp(4);

    // 5. V's rows in Q's place; P split into scratch; warps 0, 1: the diagonal 16 × 16 blocks of T,
    // a lane a column (block 2·warp + lane / 16), its 16 rows in registers.
#pragma unroll
    for (int r = 0; r < kRowsW; ++r) *reinterpret_cast<uint2*>(&sm.qv[warp + kWarps * r][col]) = vh[r];
    const int ep = tile_exp(__reduce_max_sync(0xffffffffu, lane < kWarps ? sm.pmax[lane] : 0u));
    {
#pragma unroll
        for (int r = 0; r < kJobs; ++r) {
            const int jb = warp + NW * r;
            const auto [m0, n0] = prep16::prep_job(jb);
            if (jb >= kPrepJobs) continue;
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // rows gid, gid + 8: columns 2tig, 2tig + 1
                const int i = m0 + gid + 8 * half, j = n0 + 2 * tig;
                uint32_t hi, lo;
                split16<true>(pacc[r][2 * half], pacc[r][2 * half + 1], pow2(ep), hi, lo);
                if (i < L) srow2(i)[(ro.p + j) / 2] = hi;
            }
        }
    }
    if (warp < 2) {
        // X(i, j) = Σ_{m<i} A(i, m)·X(m, j) with X(m, j) = 0 for m < j and X(j, j) = 1: solve_diag_column's
        // sum (A(i, j) + Σ_{j<m<i} in m order) term for term; rows past L have A = 0, so X = 0 there.
        const int r0 = (2 * warp + lane / 16) * kTb, jj = lane % 16;
        float x[kTb];
#pragma unroll
        for (int i = 0; i < kTb; ++i) {
            const float* ar = &sm.a[r0 + i][r0];
            float acc = 0.f;
#pragma unroll
            for (int m = 0; m < i; m += 4) {
                const float4 av = *reinterpret_cast<const float4*>(ar + m);
                acc = fmaf(av.x, x[m], acc);
                if (m + 1 < i) acc = fmaf(av.y, x[m + 1], acc);
                if (m + 2 < i) acc = fmaf(av.z, x[m + 2], acc);
                if (m + 3 < i) acc = fmaf(av.w, x[m + 3], acc);
            }
            x[i] = i == jj ? 1.f : acc;
        }
#pragma unroll
        for (int i = 0; i < kTb; ++i) sm.x[r0 + i][r0 + jj] = x[i];
    }
    __syncthreads();  // the diagonal blocks, V's rows and row scales
    stamp(5);
    solve_levels(&sm.a[0][0], &sm.x[0][0], warp);  // the blocks below the diagonal (T complete on return)
    stamp(6);

    // 6. T'(i, j) = T(i, j)·β_j·e^Γj and T''(i, j) = T(i, j)·β_j·2^-eV(j), split a row under its own
    // power of two (wy_prep16_kernel's step, T' into A's place, T'' into T's), and the bound
    // max_i Σ_j |T'(i, j)| on max |W| / max |K|.
    uint16_t* const tw = reinterpret_cast<uint16_t*>(&sm.a[0][0]);  // [64][kLdTh]
    uint16_t* const tu = reinterpret_cast<uint16_t*>(&sm.x[0][0]);
    {
        uint32_t mr = 0u, mu = 0u;
        const int j = 2 * lane;
        const float cw0 = sm.bt[j] * sm.eg[j], cw1 = sm.bt[j + 1] * sm.eg[j + 1];
        const float cu0 = sm.bt[j] * sm.iv[j], cu1 = sm.bt[j + 1] * sm.iv[j + 1];
#pragma unroll 2
        for (int i = warp; i < kC; i += kWarps) {
            float su = 0.f;
            mr = max(mr, abs_bits(prep16::split_t_row<1>(&sm.x[0][0], tw, tu, sm.rw, sm.ru, i, lane, cw0, cw1, cu0,
                                                         cu1, U16 ? &su : nullptr)));
            if constexpr (U16) mu = max(mu, abs_bits(su));
        }
        if (lane == 0) sm.wbound[warp] = mr;
        if (U16 && lane == 0) sm.ubound[warp] = mu;
    }
    __syncthreads();
    stamp(7);

    // 7. W = T'·K (× 2^-e of T' 's row, 2^-eK) split into scratch under the bound's power of two, and
    // U = T''·V (× 2^-e of T'' 's row) in f32: warp w the columns [16w', 16w' + 16) (w' = w mod 8) of both
    // (NW 16: W on warps 0–7, U on 8–15), two n-tiles sharing T's fragments, over the 4 row blocks (T
    // lower: rows [m0, m0 + 16) stop at column m0 + 16).
    const uint32_t wb = __reduce_max_sync(0xffffffffu, lane < kWarps ? sm.wbound[lane] : 0u);
    const int ew = tile_exp(__float_as_uint(__uint_as_float(wb) * __uint_as_float(mK)));
    // U16: |U(i, c)| ≤ Σ_j |T''(i, j)|·|V(j, c)·2^eV(j)| < bound · 2^13 (V's f16 rows below 2^13), so U ·
    // 2^eu stays below 2^15 (tile_exp: into [2^12, 2^13), then 4×) — f16's 11 bits for every element
    // within 2^29 of the bound.
    int eu = 0;
    if constexpr (U16) {
        const uint32_t ubits = __reduce_max_sync(0xffffffffu, lane < kWarps ? sm.ubound[lane] : 0u);
        eu = tile_exp(__float_as_uint(__uint_as_float(ubits) * 8192.f)) + 2;
    }
    const int n0 = 16 * (warp & 7);
    // This lane's pieces of row gid's W (f16 pairs) and U (floats); row m0 + gid + 8·half's are
    // (m0 + 8·half)·rstep floats on. (ro.u is a constant: 3·128 + 64.)
    float* const ug = srow(gid) + ro.u + n0 + 2 * tig;
    uint32_t* const ug16 = srow2(gid) + ro.u + (n0 + 2 * tig) / 2;  // U16: its f16 pairs (halves 2·ro.u + j)
    uint32_t* const wg = srow2(gid) + (ro.w + n0 + 2 * tig) / 2;
    const int64_t step8 = int64_t(8) * rstep;
    auto strips = [&](auto which_c) {  // 0: W, 1: U
        constexpr int which = decltype(which_c)::value;
        const uint32_t a_t = dev::smem_addr((which ? tu : tw) + (lane & 15) * kLdTh + (lane >> 4) * 8);
        const uint32_t b_x = dev::smem_addr(which ? &sm.qv[lane & 15][n0 + (lane >> 4) * 8]
                                                  : &sm.k[lane & 15][n0 + (lane >> 4) * 8]);
#pragma unroll
        for (int bi = 0; bi < kC / kTb; ++bi) {
            const int m0 = bi * kTb;
            float acc[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
            for (int k0 = 0; k0 <= m0; k0 += 16) {
                uint32_t th[4], bx[4];
                dev::ldsm_x4(th, a_t + 2 * (m0 * kLdTh + k0));
                dev::ldsm_x4_trans(bx, b_x + 2 * k0 * kLdH);  // b0, b1 of columns n0…, then of n0 + 8…
                dev::mma_f16(acc[0], th, bx[0], bx[1]);
                dev::mma_f16(acc[1], th, bx[2], bx[3]);
            }
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // rows gid, gid + 8: columns 2tig, 2tig + 1 of each n-tile
                const int i = m0 + gid + 8 * half;
                const bool row_ok = i < L;
                const int64_t off = (2 * bi + half) * step8;
                if constexpr (which == 0) {
                    const float f = sm.rw[i] * ik;  // both powers of two >= 2^-60: exact
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt) {
                        uint32_t hi, lo;
                        split16<true>(acc[nt][2 * half] * f, acc[nt][2 * half + 1] * f, pow2(ew), hi, lo);
                        if (row_ok) wg[off + 4 * nt] = hi;
                    }
                } else if constexpr (U16) {
                    const float f = sm.ru[i] * pow2(eu);  // (powers of two: one rounding, to f16)
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt) {
                        const int j = n0 + 8 * nt + 2 * tig;
                        const __half2 h = __floats2half2_rn(acc[nt][2 * half] * f, acc[nt][2 * half + 1] * f);
                        uint32_t* u = ug16 + off + 4 * nt;
                        if (row_ok && (VEC ? j < dv : j + 1 < dv)) *u = *reinterpret_cast<const uint32_t*>(&h);
                        else if (!VEC && row_ok && j < dv) *reinterpret_cast<__half*>(u) = __low2half(h);
                    }
                } else {
                    const float f = sm.ru[i];
#pragma unroll
                    for (int nt = 0; nt < 2; ++nt) {
                        const int j = n0 + 8 * nt + 2 * tig;
                        float* u = ug + off + 8 * nt;
                        const float u0 = acc[nt][2 * half] * f, u1 = acc[nt][2 * half + 1] * f;
                        // (VEC: dv % 4 == 0, so j < dv takes j + 1 too)
                        if (row_ok && (VEC ? j < dv : j + 1 < dv)) *reinterpret_cast<float2*>(u) = make_float2(u0, u1);
                        else if (!VEC && row_ok && j < dv) u[0] = u0;
                    }
                }
            }
        }
    };
    if constexpr (NW == 8) {
        strips(std::integral_constant<int, 0>{});
        strips(std::integral_constant<int, 1>{});
    } else if (warp < 8) {
        strips(std::integral_constant<int, 0>{});
    } else {
        strips(std::integral_constant<int, 1>{});
    }
    prep16::publish_chunk(srow(0) + ro.meta, pow2(-ew), pow2(-ek), pow2(-eq), pow2(-ep), sm.eg[L - 1], a.epoch, tid,
                          U16 ? pow2(-eu) : 0.f);
    stamp(8);
    stamp.end();
}

// Whether this block's SM is one of the `reserve` set aside for the state pass.
__device__ inline bool on_reserved_sm(uint32_t reserve) {
    uint32_t n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return gdn_reserved_sm(dev::sm_id(), n, reserve);
}

// The prep's kernel. Plain: a block an item (blockIdx.x in chunk-major order). PERSIST
// (F16RtSched's, the state pass overlapping it): a grid that fills every SM at once, whose
// blocks on a.prep_reserve SMs leave after one item — those SMs are then free for the state
// pass launched behind it (otherwise it finds room only as the prep drains: session 49) — and the
// rest take items in chunk-major order (gdn_next_prep_item) until a.prep_items are taken. With
// a.prep_front > 0 (F16RtSolo1 / 2) the first items are the reserved SMs' first a.prep_solo blocks',
// the others there leaving at once: the first chunks on fewer blocks an SM, so sooner (the pass
// starts when they end: session 50's trace).
// NW warps a block (prep_rt_item's): 8, three blocks an SM; 16, two.
template <bool VEC, bool PERSIST = false, int NW = 8, bool U16 = false>
__global__ void __launch_bounds__(32 * NW, NW == 8 ? 3 : 2) wy_prep_rt_kernel(ChArgs a) {
    // The early trigger, as wy_prep16_kernel's: the pass launches once every block has started.
    pdl::trigger();
    if constexpr (!PERSIST) {
        prep_rt_item<VEC, false, NW, U16>(a, blockIdx.x);
    } else {
        // (On a reserved SM one item first — a first chunk, which the pass waits for anyway: leaving
        // at once measured level or slower, session 49. left is 1 only there: the rest take fewer
        // than 2^31 items.)
        // (F16RtStay: the first block to arrive on a reserved SM takes the free SMs' part after its item.)
        __shared__ uint32_t item_s, rank_s;
        for (uint32_t left = on_reserved_sm(a.prep_reserve) ? 1u : UINT32_MAX; left > 0; --left) {
            if (threadIdx.x == 0) {
                rank_s = UINT32_MAX;
                item_s = gdn_next_prep_item(a.prep_ctr, a.prep_items, a.prep_front, a.prep_solo, left == 1,
                                            dev::sm_id(), [](uint32_t* w) { return atomicAdd(w, 1u); }, &rank_s);
            }
            __syncthreads();
            const uint32_t item = item_s;
            if (item >= a.prep_items) return;
            prep_rt_item<VEC, true, NW, U16>(a, item);
            if (left == 1 && a.prep_stay && rank_s == 0) left = UINT32_MAX;  // (uniform: rank_s read by all)
            __syncthreads();  // the item's shared memory, item_s and rank_s read before the next item writes them
        }
    }
}

}  // namespace tessera::cuda::fast::detail::prep_rt
