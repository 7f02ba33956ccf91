// The F16x3 chunked delta rule's first pass (GdnChunkVariant::F16x3 and its Rt / F16Rt forms,
// fast_gdn_chunked16.cu's step 1): wy_prep16_kernel, a block per (chunk, sequence, value head),
// writing the chunk-local matrices split into scratch rows; and the 3×F16 tile products it shares
// with the state pass (Acc3, mma3, acc3). Included by fast_gdn_chunked16.cu only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_gdn_wy.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail::prep16 {

using namespace wy;
using namespace f16x3;

// A 16 × 8 tile's three accumulators: hi·hi, hi·lo, lo·hi (independent mma chains).
struct Acc3 {
    float hh[4], hl[4], lh[4];
};
// TERMS 1 (F16Rt's prep): hi·hi alone.
template <int TERMS = 3>
__device__ inline void mma3(Acc3& c, const uint32_t (&ah)[4], const uint32_t (&al)[4], uint32_t bh0, uint32_t bh1,
                            uint32_t bl0, uint32_t bl1) {
    dev::mma_f16(c.hh, ah, bh0, bh1);
    if constexpr (TERMS == 3) {
        dev::mma_f16(c.hl, ah, bl0, bl1);
        dev::mma_f16(c.lh, al, bh0, bh1);
    }
}
template <int TERMS = 3>
__device__ inline float acc3(const Acc3& c, int e) {
    if constexpr (TERMS == 1) return c.hh[e];
    return c.hh[e] + (c.hl[e] + c.lh[e]) * kLoInv;
}

// ---- 1. chunk-local matrices, written split ----

static_assert(kGdnChunkMaxDk <= 128, "wy_prep16 holds one float4 of a k / q row a lane");
constexpr int kLdTh = 2 * kLdT;  // halves: a split T row [hi 64 | lo 64 | pad] in a T row's bytes (≡ 4 banks)

// Job jb < 20 of the chunk's K·Kᵀ and Q·Kᵀ: the 16 × 8 tile at (m0, n0) of row block bi, n-tile
// nj <= 2bi + 1 (the lower block triangle and the diagonal blocks).
struct PrepJob {
    int m0, n0;
};
__device__ inline PrepJob prep_job(int jb) {
    const int bi = jb < 2 ? 0 : jb < 6 ? 1 : jb < 12 ? 2 : 3;
    return {bi * kTb, 8 * (jb - bi * (bi + 1))};
}

// The chunk's scales 2^-e of W, K̃, Q̃ and P and its e^Γlast into the meta floats of its first scratch
// row (thread 0), then, with an epoch, its flag once every thread's rows are out (generic and async
// proxies: the state pass reads them by TMA). Every thread of the block calls it.
// (su: 2^-e of U's f16 tile, F16RtU16's; 0 where U is f32.)
__device__ inline void publish_chunk(float* meta, float sw, float sk, float sq, float sp, float last, uint32_t epoch,
                                     int tid, float su = 0.f) {
    if (tid == 0) {
        meta[kMxW] = sw;
        meta[kMxK] = sk;
        meta[kMxQ] = sq;
        meta[kMxP] = sp;
        meta[4] = last;
        meta[kMetaU] = su;
        meta[6] = 0.f;  // copied with the rest (no uninitialised reads)
        if (!epoch) meta[kMetaFlag] = 0.f;
    }
    if (epoch) {
        __threadfence();
        dev::fence_proxy_async_global();
        __syncthreads();
        if (tid == 0) dev::flag_release(reinterpret_cast<uint32_t*>(meta + kMetaFlag), epoch);
    }
}

// Row i of T'(i, j) = T(i, j)·cw_j and T''(i, j) = T(i, j)·cu_j (j <= i: T is lower; its upper blocks
// are never written) from Xs [64][kLdT], a warp a row, columns 2·lane and 2·lane + 1 (cw0, cw1, cu0,
// cu1 theirs): each split under the row's own power of two into Tw / Tu [64][kLdTh] (hi at 0, lo at
// 64; Tu's row in place of T's, after every lane's reads), 2^-e into rw[i] / ru[i]. Returns
// Σ_j |T'(i, j)| (every lane the same bits); with usum, Σ_j |T''(i, j)| there too.
template <int TERMS>
__device__ inline float split_t_row(const float* Xs, uint16_t* Tw, uint16_t* Tu, float* rw, float* ru, int i, int lane,
                                   float cw0, float cw1, float cu0, float cu1, float* usum = nullptr) {
    const int j = 2 * lane;
    const float2 x = *reinterpret_cast<const float2*>(Xs + i * kLdT + j);
    const float t0 = j <= i ? x.x : 0.f, t1 = j + 1 <= i ? x.y : 0.f;
    const float w0 = t0 * cw0, w1 = t1 * cw1, u0 = t0 * cu0, u1 = t1 * cu1;
    const int ew = tile_exp(__reduce_max_sync(0xffffffffu, max(abs_bits(w0), abs_bits(w1))));
    const int eu = tile_exp(__reduce_max_sync(0xffffffffu, max(abs_bits(u0), abs_bits(u1))));
    float sum = fabsf(w0) + fabsf(w1);
#pragma unroll
    for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (usum) {
        float su = fabsf(u0) + fabsf(u1);
#pragma unroll
        for (int off = 16; off > 0; off /= 2) su += __shfl_xor_sync(0xffffffffu, su, off);
        *usum = su;
    }
    if (lane == 0) {
        rw[i] = pow2(-ew);
        ru[i] = pow2(-eu);
    }
    __syncwarp();  // every lane's reads of T's row i are done
    uint32_t hi, lo;
    split16(w0, w1, pow2(ew), hi, lo);
    reinterpret_cast<uint32_t*>(Tw + i * kLdTh)[lane] = hi;
    if constexpr (TERMS == 3) reinterpret_cast<uint32_t*>(Tw + i * kLdTh + kC)[lane] = lo;
    split16(u0, u1, pow2(eu), hi, lo);
    reinterpret_cast<uint32_t*>(Tu + i * kLdTh)[lane] = hi;
    if constexpr (TERMS == 3) reinterpret_cast<uint32_t*>(Tu + i * kLdTh + kC)[lane] = lo;
    return sum;
}

// x·s split as four f16 hi and four lo (x0 in the low half of hi.x); Raw as split16's.
template <bool Raw = false>
__device__ inline void split16x4(float4 x, float s, uint2& hi, uint2& lo) {
    split16<Raw>(x.x, x.y, s, hi.x, lo.x);
    split16<Raw>(x.z, x.w, s, hi.y, lo.y);
}
// Four floats of a K / Q / V row from column c of n (zeros past n, or all of them where !ok); vec:
// the row 16-byte aligned and n % 4 == 0, one 16-byte load.
__device__ inline float4 load_row4(const float* src, int c, int n, bool ok, bool vec) {
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!ok || c >= n) return x;
    if (vec) return *reinterpret_cast<const float4*>(src);
    x.x = src[0];
    if (c + 1 < n) x.y = src[1];
    if (c + 2 < n) x.z = src[2];
    if (c + 3 < n) x.w = src[3];
    return x;
}
__device__ inline uint32_t max_abs4(uint32_t m, float4 x) {
    return max(max(m, max(abs_bits(x.x), abs_bits(x.y))), max(abs_bits(x.z), abs_bits(x.w)));
}

// Every product of the prep on m16n8k16 f16 (3×F16, as the state pass): K and Q split under one
// power of two each (in place of their f32 rows: a split row [hi | lo | 8 pad] has an f32 row's
// bytes); T's products with diag(β)·e^Γ·K (W) and diag(β)·V (U) as T'·K and T''·V, where the
// per-token factors (and V's per-row powers of two) go into T's columns, T' = T·diag(β e^Γ) and
// T'' = T·diag(β 2^-eV), each row split under its own power of two (undone on the product's rows).
// The triangular solve stays f32 (its diagonal blocks scalar, the block rows 3×TF32).
// DKQ as wy_state16_kernel's. RAW: W, K̃, Q̃ and P written with raw lo halves (split16<true>: the
// F16x3Rt state pass); the prep's own split operands keep the 2^11 scale either way. TERMS 1 (F16Rt,
// RAW only): every product hi·hi alone, and no lo half written or read (nor its scratch halves).
// DIRECT (TERMS 1 only): K, Q and V not staged in f32 either — read from global memory into
// registers (K and Q twice: for the maxima, then for the splits, the second time from L2) and only
// their f16 rows kept, 70 KB of shared memory a block at dv 128 instead of 102: three blocks an SM.
template <int DKQ, bool RAW, int TERMS = 3, bool DIRECT = false>
__global__ void __launch_bounds__(kThreads, DIRECT ? 3 : 2) wy_prep16_kernel(ChArgs a) {
    static_assert(!DIRECT || TERMS == 1, "wy_prep16: the direct loads keep hi rows only");
    // Blocks in chunk-major order (value head, then sequence, then chunk): the first waves hold every
    // head's first chunks, which a state pass started early (a.epoch) needs first. Every block lets
    // that pass launch as soon as it has started: then all prep blocks are resident or done.
    pdl::trigger();
    const GdnPrepBlock pb = gdn_prep_block(blockIdx.x, uint32_t(a.nv), uint32_t(a.plan.n_seqs));
    const int64_t c = pb.chunk, h = pb.head;
    const int s = int(pb.seq);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
    Seq sq;
    if (!seq_of(a, s, &sq) || c * kC >= sq.n_wy) return;
    const int64_t tb = sq.t0 + c * kC;
    const int L = int(sq.n_wy - c * kC < kC ? sq.n_wy - c * kC : kC);
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    const int dk = a.dk, dv = a.dv, dkq = DKQ ? DKQ : (dk + 15) / 16 * 16, dvp = a.dvp, ldk = dkq + 4, ldv = dvp + 4;
    // halves: split rows of K / Q and V in their f32 rows' bytes; DIRECT: hi rows of their own (≡ 4 banks)
    const int ldw = DIRECT ? dkq + 8 : 2 * ldk, ldvh = DIRECT ? dvp + 8 : 2 * ldv;
    const Row16 ro = row16(dkq, dv);
    // The scratch row of token i < L: the chunk's first row + i rows of nv·rs floats (< 2^31 / 64: the
    // launch checks), 32-bit offsets from one 64-bit base.
    float* const row0 = a.scratch + (tb * a.nv + h) * a.rs;
    const int rstep = int(a.nv * a.rs);
    auto srow = [&](int i) { return row0 + i * rstep; };
    auto srow2 = [&](int i) { return reinterpret_cast<uint32_t*>(srow(i)); };    // as f16 pairs

    extern __shared__ float4 smem4[];
    // Staged: [64][ldk] k (rows >= L and columns >= dk: 0), then Kh; [64][ldk] q, then Qh, then [64][ldv]
    // v, then Vh. DIRECT: Kh, then Qh, then Vh only.
    float* Ks = reinterpret_cast<float*>(smem4);
    float* Qs = Ks + (DIRECT ? kC * ldw / 2 : kC * ldk);
    float* Vs = Qs;
    // [64][kLdT] A, then T' split (Tw)
    float* As = Qs + (DIRECT ? kC * (ldw > ldvh ? ldw : ldvh) / 2 : kC * (ldk > ldv ? ldk : ldv));
    float* Xs = As + kC * kLdT;                     // [64][kLdT] T, then T'' split (Tu)
    float* bt = Xs + kC * kLdT;                     // [64] β
    float* eg = bt + kC;                            // [64] e^Γ (0 past L)
    float* dl = eg + kC;                            // [64] e^(Γlast − Γ) (0 past L)
    float* iv = dl + kC;                            // [64] 2^-eV of V's rows
    float* rw = iv + kC;                            // [64] 2^-e of T''s rows
    float* ru = rw + kC;                            // [64] 2^-e of T'''s rows
    double* Gd = reinterpret_cast<double*>(ru + kC);  // [64] Γ
    uint32_t* mx = reinterpret_cast<uint32_t*>(Gd + kC);  // [6] maxima (kMx*, then |K|, |Q|)
    uint16_t* Kh = reinterpret_cast<uint16_t*>(Ks);  // [64][ldw] K·2^eK: hi at 0, lo at dkq
    uint16_t* Qh = reinterpret_cast<uint16_t*>(Qs);  // [64][ldw] Q·2^eQ
    uint16_t* Vh = reinterpret_cast<uint16_t*>(Vs);  // [64][ldvh] V·2^eV(row): hi at 0, lo at dvp
    uint16_t* Tw = reinterpret_cast<uint16_t*>(As);  // [64][kLdTh] T'·2^e(row): hi at 0, lo at 64
    uint16_t* Tu = reinterpret_cast<uint16_t*>(Xs);  // [64][kLdTh] T''·2^e(row)

    // Rows of K, Q and V from global memory (DIRECT): lane's four columns c of row l, zeros past L
    // and past n (with a.vec rows are 16-byte aligned and n % 4 == 0).
    const float* kb = a.k.data + tb * a.k.tok_stride + hk * a.k.head_stride;
    const float* qb = a.q.data + tb * a.q.tok_stride + hk * a.q.head_stride;
    auto row4 = [&](const float* base, int64_t ts, int l, int c, int n) {
        return load_row4(base + l * ts + c, c, n, l < L, a.vec);
    };
    if constexpr (!DIRECT) {  // a warp a token row, lanes along it; sources stepped (rows past L are not read)
        constexpr int kStep = kThreads / 32;
        const float* kr = a.k.data + (tb + warp) * a.k.tok_stride + hk * a.k.head_stride;
        const float* qr = a.q.data + (tb + warp) * a.q.tok_stride + hk * a.q.head_stride;
        if (DKQ == 128 && a.vec) {  // a 16-byte copy a lane a row, zero-filled past L and dk (nothing read)
            const bool col_ok = 4 * lane < dk;
            const uint32_t ks = dev::smem_addr(Ks + warp * ldk + 4 * lane);
            const uint32_t qs = dev::smem_addr(Qs + warp * ldk + 4 * lane);
            static_assert(kC % kStep == 0, "wy_prep16: every warp copies as many rows");
#pragma unroll
            for (int i = 0; i < kC / kStep; ++i) {
                const bool ok = col_ok && warp + kStep * i < L;
                dev::cp_async16(ks + 4 * i * kStep * ldk, ok ? kr + 4 * lane : kb, ok);
                dev::cp_async16(qs + 4 * i * kStep * ldk, ok ? qr + 4 * lane : qb, ok);
                kr += kStep * a.k.tok_stride;
                qr += kStep * a.q.tok_stride;
            }
        } else {
            for (int l = warp; l < kC; l += kStep, kr += kStep * a.k.tok_stride, qr += kStep * a.q.tok_stride) {
                load_row(Ks + l * ldk, kr, dk, dkq, l < L, a.vec, lane);
                load_row(Qs + l * ldk, qr, dk, dkq, l < L, a.vec, lane);
            }
        }
    }
    if (tid < kC) bt[tid] = tid < L ? a.beta[(tb + tid) * a.beta_s + h] : 0.f;
    if (tid < 6) mx[tid] = 0u;
    if (warp == 0) chunk_gamma(a, tb, L, h, lane, Gd, eg);
    cp_async_wait_all();  // this thread's copies; the barrier publishes everyone's
    __syncthreads();
    auto D = [&](int i, int j) { return expf(float(Gd[i] - Gd[j])); };  // i >= j

    // e^(Γlast − Γ), and the maxima of |K|, |Q|, |K̃| = |K ⊙ e^(Γlast−Γ)|, |Q̃| = |Q ⊙ e^Γ| (a warp a
    // row, a float4 a lane: dkq <= 128).
    const bool kq_lane = 4 * lane < dkq;
    {
        uint32_t m[4] = {0u, 0u, 0u, 0u};  // K, Q, K̃, Q̃
        for (int l = warp; l < kC; l += kThreads / 32) {
            const float d = l < L ? D(L - 1, l) : 0.f, e = eg[l];
            if (lane == 0) dl[l] = d;
            if (!kq_lane) continue;
            const float4 k4 = DIRECT ? row4(kb, a.k.tok_stride, l, 4 * lane, dk)
                                   : *reinterpret_cast<const float4*>(Ks + l * ldk + 4 * lane);
            const float4 q4 = DIRECT ? row4(qb, a.q.tok_stride, l, 4 * lane, dk)
                                   : *reinterpret_cast<const float4*>(Qs + l * ldk + 4 * lane);
            m[0] = max_abs4(m[0], k4);
            m[1] = max_abs4(m[1], q4);
            m[2] = max_abs4(m[2], make_float4(k4.x * d, k4.y * d, k4.z * d, k4.w * d));
            m[3] = max_abs4(m[3], make_float4(q4.x * e, q4.y * e, q4.z * e, q4.w * e));
        }
        max_into(&mx[kMxKr], m[0]);
        max_into(&mx[kMxQr], m[1]);
        max_into(&mx[kMxK], m[2]);
        max_into(&mx[kMxQ], m[3]);
    }
    __syncthreads();

    // K̃ and Q̃ split into scratch; K and Q split in place (every lane's reads of a row before its
    // writes); P's columns past the diagonal block zeroed in scratch.
    const int eK = tile_exp(mx[kMxKr]), eQ = tile_exp(mx[kMxQr]), ek = tile_exp(mx[kMxK]), eq = tile_exp(mx[kMxQ]);
    for (int l = warp; l < kC; l += kThreads / 32) {
        float4 k4 = make_float4(0.f, 0.f, 0.f, 0.f), q4 = k4;
        if (kq_lane && DIRECT) {
            k4 = row4(kb, a.k.tok_stride, l, 4 * lane, dk);
            q4 = row4(qb, a.q.tok_stride, l, 4 * lane, dk);
        } else if (kq_lane) {
            k4 = *reinterpret_cast<const float4*>(Ks + l * ldk + 4 * lane);
            q4 = *reinterpret_cast<const float4*>(Qs + l * ldk + 4 * lane);
        }
        uint2 hi, lo;
        if (l < L) {
            if (kq_lane) {
                const float d = dl[l], e = eg[l];
                split16x4<RAW>(make_float4(k4.x * d, k4.y * d, k4.z * d, k4.w * d), pow2(ek), hi, lo);
                reinterpret_cast<uint2*>(srow(l) + ro.k / 2)[lane] = hi;
                if constexpr (TERMS == 3) reinterpret_cast<uint2*>(srow(l) + (ro.k + dkq) / 2)[lane] = lo;
                split16x4<RAW>(make_float4(q4.x * e, q4.y * e, q4.z * e, q4.w * e), pow2(eq), hi, lo);
                reinterpret_cast<uint2*>(srow(l) + ro.q / 2)[lane] = hi;
                if constexpr (TERMS == 3) reinterpret_cast<uint2*>(srow(l) + (ro.q + dkq) / 2)[lane] = lo;
            }
            if (lane >= 8 * (l / kTb + 1)) {  // P pairs (lane) past row l's diagonal block
                srow2(l)[ro.p / 2 + lane] = 0u;
                if constexpr (TERMS == 3) srow2(l)[(ro.p + kC) / 2 + lane] = 0u;
            }
        }
        if constexpr (!DIRECT) __syncwarp();  // (K and Q are split in place of their f32 rows)
        if (kq_lane) {
            split16x4(k4, pow2(eK), hi, lo);
            reinterpret_cast<uint2*>(Kh + l * ldw)[lane] = hi;
            if constexpr (TERMS == 3) reinterpret_cast<uint2*>(Kh + l * ldw + dkq)[lane] = lo;
            split16x4(q4, pow2(eQ), hi, lo);
            reinterpret_cast<uint2*>(Qh + l * ldw)[lane] = hi;
            if constexpr (TERMS == 3) reinterpret_cast<uint2*>(Qh + l * ldw + dkq)[lane] = lo;
        }
    }
    __syncthreads();

    // A = −strictlower(diag(β)·K·Kᵀ ⊙ D) into As and P = Q·Kᵀ ⊙ D (lower, 0 past L) into registers:
    // jobs (row block bi, 16 × 8 tile nj <= 2bi + 1), 20, both products a job (Kᵀ's fragments shared),
    // jobs warp, warp + 8, warp + 16. Kᵀ's B fragments: non-transposed loads of K's rows (tokens).
    const float ik = pow2(-eK), iqk = pow2(-eQ - eK);
    float pacc[3][4];
    uint32_t mp = 0u;
#pragma unroll
    for (int r = 0; r < 3; ++r) {
        const int jb = warp + 8 * r;
        const auto [m0, n0] = prep_job(jb);
#pragma unroll
        for (int e = 0; e < 4; ++e) pacc[r][e] = 0.f;
        if (jb >= 20) continue;
        Acc3 ka = {}, qp = {};
        const uint32_t a_k = dev::smem_addr(Kh + (m0 + (lane & 15)) * ldw + (lane >> 4) * 8);
        const uint32_t a_q = dev::smem_addr(Qh + (m0 + (lane & 15)) * ldw + (lane >> 4) * 8);
        const uint32_t b_k = dev::smem_addr(Kh + (n0 + (lane & 7)) * ldw + ((lane >> 3) & 1) * 8 + (lane >> 4) * dkq);
#pragma unroll
        for (int k0 = 0; k0 < dkq; k0 += 16) {
            uint32_t bk[4] = {}, kh[4], kl[4] = {}, qh[4], ql[4] = {};
            if constexpr (TERMS == 3) {
                dev::ldsm_x4(bk, b_k + 2 * k0);  // b0, b1 of hi, then of lo
                dev::ldsm_x4(kl, a_k + 2 * (dkq + k0));
                dev::ldsm_x4(ql, a_q + 2 * (dkq + k0));
            } else {
                dev::ldsm_x2(bk, b_k + 2 * k0);  // b0, b1 of hi (lanes 16–31's addresses unused)
            }
            dev::ldsm_x4(kh, a_k + 2 * k0);
            dev::ldsm_x4(qh, a_q + 2 * k0);
            mma3<TERMS>(ka, kh, kl, bk[0], bk[1], bk[2], bk[3]);
            mma3<TERMS>(qp, qh, ql, bk[0], bk[1], bk[2], bk[3]);
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int i = m0 + gid + (e / 2) * 8, j = n0 + 2 * tig + e % 2;
            As[i * kLdT + j] = j < i ? -(acc3<TERMS>(ka, e) * ik * ik) * bt[i] * D(i, j) : 0.f;
            pacc[r][e] = i < L && j <= i ? acc3<TERMS>(qp, e) * iqk * D(i, j) : 0.f;
            mp = max(mp, abs_bits(pacc[r][e]));
        }
    }
    max_into(&mx[kMxP], mp);
    __syncthreads();  // A, P's max

    const int ep = tile_exp(mx[kMxP]);
    auto write_p = [&] {  // this warp's P tiles, split
#pragma unroll
        for (int r = 0; r < 3; ++r) {
            const int jb = warp + 8 * r;
            const auto [m0, n0] = prep_job(jb);
            if (jb >= 20) continue;
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // rows gid, gid + 8: columns 2tig, 2tig + 1
                const int i = m0 + gid + 8 * half, j = n0 + 2 * tig;
                if (i >= L) continue;
                uint32_t hi, lo;
                split16<RAW>(pacc[r][2 * half], pacc[r][2 * half + 1], pow2(ep), hi, lo);
                srow2(i)[(ro.p + j) / 2] = hi;
                if constexpr (TERMS == 3) srow2(i)[(ro.p + kC + j) / 2] = lo;
            }
        }
    };
    // Warps 0, 1: the diagonal 16 × 16 blocks of T, as wy_prep. Warps 2..7: V's rows (Qh is done),
    // then P, then V split in place, a power of two a row.
    if (warp < 2) {
        solve_diag_column(As, Xs, tid, L);
        write_p();
    } else {
        constexpr int kStep = kThreads / 32 - 2;
        const float* vb = a.v.data + tb * a.v.tok_stride + h * a.v.head_stride;  // (DIRECT; the copies' idle source)
        if constexpr (!DIRECT) {
            const float* vr = a.v.data + (tb + warp - 2) * a.v.tok_stride + h * a.v.head_stride;
            if (dvp == 128 && a.vec) {  // as K's and Q's rows
                const bool col_ok = 4 * lane < dv;
                uint32_t vs = dev::smem_addr(Vs + (warp - 2) * ldv + 4 * lane);
                for (int l = warp - 2; l < kC; l += kStep, vr += kStep * a.v.tok_stride, vs += 4 * kStep * ldv) {
                    const bool ok = col_ok && l < L;
                    dev::cp_async16(vs, ok ? vr + 4 * lane : vb, ok);
                }
            } else {
                for (int l = warp - 2; l < kC; l += kStep, vr += kStep * a.v.tok_stride)
                    load_row(Vs + l * ldv, vr, dv, dvp, l < L, a.vec, lane);
            }
        }
        write_p();
        cp_async_wait_all();
        __syncwarp();  // this warp's rows of V have landed
        for (int l = warp - 2; l < kC; l += kStep) {
            float4 x[2];
            uint32_t m = 0u;
#pragma unroll
            for (int u = 0; u < 2; ++u) {  // dvp <= 256: two float4 a lane at most
                const int p = lane + 32 * u;
                x[u] = 4 * p >= dvp ? make_float4(0.f, 0.f, 0.f, 0.f)
                       : DIRECT     ? row4(vb, a.v.tok_stride, l, 4 * p, dv)
                                    : *reinterpret_cast<const float4*>(Vs + l * ldv + 4 * p);
                m = max_abs4(m, x[u]);
            }
            const int ev = tile_exp(__reduce_max_sync(0xffffffffu, m));
            if (lane == 0) iv[l] = pow2(-ev);
            if constexpr (!DIRECT) __syncwarp();  // every lane's reads of row l are done (V split in place)
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const int p = lane + 32 * u;
                if (4 * p >= dvp) continue;
                uint2 hi, lo;
                split16x4(x[u], pow2(ev), hi, lo);
                reinterpret_cast<uint2*>(Vh + l * ldvh)[p] = hi;
                if constexpr (TERMS == 3) reinterpret_cast<uint2*>(Vh + l * ldvh + dvp)[p] = lo;
            }
        }
    }
    __syncthreads();  // the diagonal blocks, Vh and its row scales
    solve_block_rows(As, Xs, warp);  // the blocks below the diagonal, as wy_prep (T complete on return)

    // T'(i, j) = T(i, j)·β_j·e^Γj and T''(i, j) = T(i, j)·β_j·2^-eV(j) (j <= i: T is lower; its upper
    // blocks are never written), a warp a row, two columns a lane; T' into A's place, T'' into T's.
    // The bound max_i Σ_j |T'(i, j)| · max |K| >= max |W| gives W's power of two with no pass over W.
    {
        uint32_t mr = 0u;
        const int j = 2 * lane;
        const float cw0 = bt[j] * eg[j], cw1 = bt[j + 1] * eg[j + 1];
        const float cu0 = bt[j] * iv[j], cu1 = bt[j + 1] * iv[j + 1];
        for (int i = warp; i < kC; i += kThreads / 32)
            mr = max(mr, abs_bits(split_t_row<TERMS>(Xs, Tw, Tu, rw, ru, i, lane, cw0, cw1, cu0, cu1)));
        if (lane == 0) atomicMax(&mx[kMxW], mr);  // lane 0's sums: the same bits every run
    }
    __syncthreads();

    // W = T'·K (× 2^-e of T''s row, 2^-eK) split into scratch under the bound's power of two, and
    // U = T''·V (× 2^-e of T'''s row) in f32: a warp a 8-column tile over the 4 row blocks (T lower:
    // rows [m0, m0 + 16) stop at column m0 + 16), tiles warp, warp + 8, ... of W's dkq / 8 and U's
    // dvp / 8. B fragments by transposed loads of K's and V's rows (tokens), hi then lo.
    const int ew = tile_exp(__float_as_uint(__uint_as_float(mx[kMxW]) * __uint_as_float(mx[kMxKr])));
    const int nw = dkq / 8, nu = dvp / 8;
    for (int t = warp; t < nw + nu; t += kThreads / 32) {
        const bool is_w = t < nw;
        const int n0 = is_w ? 8 * t : 8 * (t - nw), ldb = is_w ? ldw : ldvh;
        const uint32_t a_t = dev::smem_addr((is_w ? Tw : Tu) + (lane & 15) * kLdTh + (lane >> 4) * 8);
        const uint32_t b_x = is_w ? dev::smem_addr(Kh + (lane & 15) * ldw + n0 + (lane >> 4) * dkq)
                                  : dev::smem_addr(Vh + (lane & 15) * ldvh + n0 + (lane >> 4) * dvp);
#pragma unroll
        for (int bi = 0; bi < kC / kTb; ++bi) {
            const int m0 = bi * kTb;
            Acc3 acc = {};
#pragma unroll
            for (int k0 = 0; k0 <= m0; k0 += 16) {
                uint32_t th[4], tl[4] = {}, bx[4] = {};
                dev::ldsm_x4(th, a_t + 2 * (m0 * kLdTh + k0));
                if constexpr (TERMS == 3) {
                    dev::ldsm_x4(tl, a_t + 2 * (m0 * kLdTh + kC + k0));
                    dev::ldsm_x4_trans(bx, b_x + 2 * k0 * ldb);  // b0, b1 of hi, then of lo
                } else {
                    dev::ldsm_x2_trans(bx, b_x + 2 * k0 * ldb);  // b0, b1 of hi
                }
                mma3<TERMS>(acc, th, tl, bx[0], bx[1], bx[2], bx[3]);
            }
#pragma unroll
            for (int half = 0; half < 2; ++half) {  // rows gid, gid + 8: columns 2tig, 2tig + 1
                const int i = m0 + gid + 8 * half, j = n0 + 2 * tig;
                if (i >= L) continue;
                if (is_w) {
                    const float f = rw[i] * ik;  // both powers of two >= 2^-60: exact
                    uint32_t hi, lo;
                    split16<RAW>(acc3<TERMS>(acc, 2 * half) * f, acc3<TERMS>(acc, 2 * half + 1) * f, pow2(ew), hi, lo);
                    srow2(i)[(ro.w + j) / 2] = hi;
                    if constexpr (TERMS == 3) srow2(i)[(ro.w + dkq + j) / 2] = lo;
                } else {
                    float* u = srow(i) + ro.u + j;
                    const float u0 = acc3<TERMS>(acc, 2 * half) * ru[i], u1 = acc3<TERMS>(acc, 2 * half + 1) * ru[i];
                    if (j + 1 < dv) *reinterpret_cast<float2*>(u) = make_float2(u0, u1);
                    else if (j < dv) u[0] = u0;
                }
            }
        }
    }
    publish_chunk(srow(0) + ro.meta, pow2(-ew), pow2(-ek), pow2(-eq), pow2(-ep), eg[L - 1], a.epoch, tid);
}

}  // namespace tessera::cuda::fast::detail::prep16
