// GdnChunkVariant::F16x3: the chunked (WY) gated delta rule of fast_gdn_chunked.cu (same steps, same
// chunks) with its products (all but the triangular solve's) on mma.sync m16n8k16 f16 instead of
// 3×TF32 m16n8k8. Every operand tile X is stored as 2^-e·(hi + 2^-11·lo), hi and lo f16 and e one
// power of two per tile, or per row where it can be undone on the product's rows or folded into the
// other operand (max |X|·2^e in [2^12, 2^13): f16's range, and 22 bits of each element relative to
// the tile's max, full relative precision for elements down to 2^-26 of it); a product is
// hi·hi + 2^-11·(hi·lo + lo·hi) in three f32 accumulators (the dropped lo·lo is ~2^-22 relative,
// as 3×TF32's), then scaled back. The state stays f32 (in registers) and
// is rounded so once a chunk for its products, as FLA does.
//  1. wy_prep16, a block per (chunk, sequence, value head), all chunks in parallel: wy_prep's Γ, A,
//     T, P, W and U, its products (K·Kᵀ, Q·Kᵀ, T·diag(βe^Γ)·K, T·diag(β)·V) 3×F16 as well, K and Q
//     split in place of their f32 rows, V a power of two a row; the triangular solve in f32 (scalar
//     diagonal blocks, 3×TF32 block rows). W, K̃ = K ⊙ e^(Γlast−Γ), Q̃ = Q ⊙ e^Γ and P written split
//     (hi | lo halves) to scratch rows, U in f32, and the chunk's 2^-e scales and e^Γlast in its first row.
//  2. wy_state16, a block of 16 warps per (sequence, value head, 32 state columns), chunks in order:
//     Vn = U − W·S and Q̃·S (one pass over S's fragments), then O = Q̃·S + P·Vn and
//     S ← e^Γlast·S + K̃ᵀ·Vn. Tiles by cp.async straight from scratch into ldmatrix layouts: P and U
//     a chunk ahead (two buffers), W and Q̃ once W·S is done, K̃ once the S update is.
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_gdn_phases.h"
#include "kernels/cuda/fast_gdn_prep16.cuh"
#include "kernels/cuda/fast_gdn_prep_rt.cuh"
#include "kernels/cuda/fast_gdn_rt.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

using namespace wy;
using namespace f16x3;

namespace {

using prep16::Acc3;  // (wy has a 3×TF32 Acc3 of its own)
using prep16::acc3;
using prep16::mma3;
using prep16::wy_prep16_kernel;

constexpr int kNW = 16, kTh16 = kNW * 32;  // wy_state16: warps, threads
constexpr int kLdP = 2 * kC + 8;           // halves: a P row [hi 64 | lo 64 | pad] (≡ 4 banks: no conflicts)
constexpr int kLdN = 2 * kNs + 8;          // halves: an S or Vn row [hi 32 | lo 32 | pad]

// ---- 1. chunk-local matrices, written split: wy_prep16_kernel (fast_gdn_prep16.cuh) ----

// ---- 2. the state carried chunk by chunk ----

// DKQ: dk rounded up to 16 as a constant (128: the flagship's heads, whose k-loops unroll), or 0 (from a.dk).
template <int DKQ>
__global__ void __launch_bounds__(kTh16, 1) wy_state16_kernel(ChArgs a) {
    const int s = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gid = lane / 4, tig = lane % 4;
    const int64_t h = blockIdx.y;
    const int c0 = int(blockIdx.z) * kNs;  // this block's first state column
    const int dk = a.dk, dv = a.dv, dkq = DKQ ? DKQ : (dk + 15) / 16 * 16, ldw = 2 * dkq + 8;
    Seq sq;
    if (!seq_of(a, s, &sq)) return nan_columns(a, sq, h, c0, tid, kTh16);
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
    // The scratch row of the chunk at cs's first token; a token's row is rstride floats after the last's.
    auto rstride = [&] { return int64_t(a.nv) * a.rs; };  // from the parameters at each use (no register held)
    auto chunk_row0 = [&](int64_t cs) { return a.scratch + ((sq.t0 + cs) * a.nv + h) * a.rs; };
    // n16 16-byte pieces of every row from float offset off of the scratch rows of the chunk at cs
    // (rows past its end: zeros) to dst, rows ld halves apart; 32 / rpw pieces a row at most. The
    // addresses advance by a stride a row (no 64-bit products in the loop).
    auto copy_rows = [&](uint16_t* dst, int ld, int64_t cs, int off, int n16, int rpw) {
        const int L = chunk_rows(cs), per = 32 / rpw, p = lane % per, l0 = warp * rpw + lane / per, step = kNW * rpw;
        if (p >= n16) return;
        const float* src = chunk_row0(cs) + l0 * rstride() + off + 4 * p;
        uint32_t d = dev::smem_addr(dst + l0 * ld + 8 * p);
        for (int l = l0; l < kC; l += step, src += step * rstride(), d += 2 * step * ld)
            dev::cp_async16(d, l < L ? src : a.scratch, l < L);
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
        const float* row0 = chunk_row0(cs);
        const int L = chunk_rows(cs), l = warp * 4 + lane / 8, p = lane % 8, col = c0 + 4 * p;
        const int nb = l < L && col < dv ? (dv - col < 4 ? dv - col : 4) * 4 : 0;  // bytes read, rest zero
        dev::cp_async16_n(dev::smem_addr(Ub + (b * kC + l) * kLdS + 4 * p),
                          nb ? row0 + l * rstride() + ro.u + col : a.scratch, nb);
        if (tid < 2) dev::cp_async16(dev::smem_addr(meta + 8 * b + 4 * tid), row0 + ro.meta + 4 * tid, true);
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
#pragma unroll
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
        step_padding_last(a, sq, h, hk, c0, Ss, lane);
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

// A tag no earlier call of this process used (ChArgs::epoch; 0 skipped on wrap-around, 2^32 calls on).
uint32_t next_chunk_epoch() {
    static std::atomic<uint32_t> last{0};
    uint32_t e = ++last;
    while (e == 0) e = ++last;
    return e;
}
// Whether the state pass may start before the prep completes: o shares no float with q, k or v
// (which the prep may still be reading) and the stream is not capturing a graph.
bool gdn_overlap_safe(const float* o, int64_t o_ts, int64_t o_hs, const HeadsIn& q, const HeadsIn& k,
                      const HeadsIn& v, int64_t T, int64_t nk, int64_t nv, int64_t dk, int64_t dv,
                      cudaStream_t stream) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone) return false;
    const int64_t no = gdn_view_span(T, nv, dv, o_ts, o_hs);
    return gdn_spans_disjoint(o, no, q.data, gdn_view_span(T, nk, dk, q.tok_stride, q.head_stride)) &&
           gdn_spans_disjoint(o, no, k.data, gdn_view_span(T, nk, dk, k.tok_stride, k.head_stride)) &&
           gdn_spans_disjoint(o, no, v.data, gdn_view_span(T, nv, dv, v.tok_stride, v.head_stride));
}

// The lean prep's instance: PERSIST, on 16 warps a block or 8, with 16-byte loads or not, U in f32 or
// (u16, on 8 warps) f16.
template <bool PERSIST>
auto lean_prep_kernel(bool w16, bool vec, bool u16 = false) {
    using prep_rt::wy_prep_rt_kernel;
    if (u16) return vec ? wy_prep_rt_kernel<true, PERSIST, 8, true> : wy_prep_rt_kernel<false, PERSIST, 8, true>;
    return w16 ? (vec ? wy_prep_rt_kernel<true, PERSIST, 16> : wy_prep_rt_kernel<false, PERSIST, 16>)
               : (vec ? wy_prep_rt_kernel<true, PERSIST> : wy_prep_rt_kernel<false, PERSIST>);
}

}  // namespace

cudaError_t launch_gdn_chunked16(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                 const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk,
                                 int64_t dv, float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                                 const GdnParams& p, float* scratch, int64_t max_len, GdnChunkVariant variant,
                                 cudaStream_t stream) {
    ChArgs a = ch_args(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state, slot_stride, n_slots, plan, p,
                       scratch, max_len);
    a.rs = gdn_chunk16_row_floats(dk, dv);  // a multiple of 4: the state pass copies 16 bytes (scratch 16-aligned)
    if (int64_t(kC) * a.nv * a.rs >= (int64_t(1) << 31)) return cudaErrorInvalidValue;  // wy_prep16's row offsets
    a.vec = dk % 4 == 0 && dv % 4 == 0 && al16(q.data, q.tok_stride, q.head_stride) &&
            al16(k.data, k.tok_stride, k.head_stride) && al16(v.data, v.tok_stride, v.head_stride);
    const int dkq = int((dk + 15) / 16 * 16), ldk = dkq + 4, ldv = a.dvp + 4, ldw = 2 * dkq + 8;
    const size_t prep_tail =  // A, T and the per-row arrays, Γ, the maxima
        sizeof(float) * size_t(kC * 2 * kLdT + 6 * kC) + sizeof(double) * kC + 6 * sizeof(uint32_t);
    const size_t prep_smem = sizeof(float) * size_t(kC * (ldk + (ldk > ldv ? ldk : ldv))) + prep_tail;
    // The DIRECT prep: f16 rows of K, then of Q / V (wy_prep16_kernel's layout).
    const size_t prep1_smem = 2 * size_t(kC * (dkq + 8 + (dkq > a.dvp ? dkq : a.dvp) + 8)) + prep_tail;
    const size_t state_smem = 2 * size_t(kC * 3 * ldw + 2 * kC * kLdP + (dkq + kC) * kLdN) +
                              sizeof(float) * size_t(2 * kC * kLdS + 16) + 4 * sizeof(uint32_t);
    // F16x3Rt(2) where its pass takes the heads (dk rounded to 16 is 128) and the scratch fits a
    // tensor map, else F16x3Wg's pass (decided before the prep, whose lo halves follow the pass).
    // F16Rt: F16x3Rt's pass and prep on one f16 product each (F16x3Wg's pass, on 3, where it cannot run).
    const bool sched = gdn_chunk_sched(variant);
    const bool lean_variant = variant == GdnChunkVariant::F16RtLean || sched;
    const bool f16rt = gdn_chunk_f16rt(variant);  // F16Rt, F16RtSeq or a lean variant
    const bool rt_any = variant == GdnChunkVariant::F16x3Rt || variant == GdnChunkVariant::F16x3Rt2 || f16rt;
    f16x3::RtMaps maps{};
    const bool rt = rt_any && dkq == 128 && f16x3::rt_tma_maps(a, &maps);
    const bool wg = variant == GdnChunkVariant::F16x3Wg || (rt_any && !rt);
    const bool one = rt && f16rt;
    // F16x3Rt's and F16Rt's state pass starts while the prep runs, chunk by chunk behind its flags,
    // where nothing it writes is an input of the prep (o apart from q, k, v) and the launch is not
    // being captured into a graph (whose replays would repeat the tag); F16RtSeq runs them in turn.
    if (rt && (variant == GdnChunkVariant::F16x3Rt || variant == GdnChunkVariant::F16Rt || lean_variant) &&
        gdn_overlap_safe(o, o_ts, o_hs, q, k, v, T, p.n_k_heads, p.n_v_heads, dk, dv, stream))
        a.epoch = next_chunk_epoch();
    // F16Rt's prep: DIRECT (70 KB, three blocks an SM; one fits beside an F16Rt state block, 137 KB)
    // where that takes fewer waves than two, else staged (102 KB). DIRECT always under the overlap
    // measured slower at 1,024 tokens (H200, session 23: 110.4 against 100.9 µs). Its blocks in
    // chunk-major order, one dimension (chunks × sequences × value heads may pass 65,535).
    const int64_t prep_blocks = (max_len + kC - 1) / kC * plan.n_seqs * p.n_v_heads;
    if (prep_blocks > int64_t(INT32_MAX)) return cudaErrorInvalidConfiguration;  // (fast_gdn.cpp says so first)
    const dim3 prep_grid{unsigned(prep_blocks)};
    // F16RtLean's prep: wy_prep_rt (fast_gdn_prep_rt.cuh, meant to give wy_prep16's bits in fewer
    // instructions) where the value heads fit its 128 columns; else wy_prep16's.
    const bool lean_pass = one && lean_variant;  // and its state pass's LEAN form
    const bool lean = lean_pass && dv <= prep_rt::kD;
    const bool w16 = lean && variant == GdnChunkVariant::F16RtSched16;  // its 16 warps a block
    const bool u16 = lean && variant == GdnChunkVariant::F16RtU16;      // U in the scratch as f16
    const int prep_threads = w16 ? 2 * kThreads : kThreads;
    const bool direct = one && !lean && gdn_prep_direct(prep_blocks, current_sm_count());
    auto* prep_kernel = lean          ? lean_prep_kernel<false>(w16, a.vec, u16)
                        : direct      ? wy_prep16_kernel<128, true, 1, true>
                        : one         ? wy_prep16_kernel<128, true, 1>
                        : rt          ? wy_prep16_kernel<128, true>
                        : dkq == 128  ? wy_prep16_kernel<128, false>
                                      : wy_prep16_kernel<0, false>;
    const size_t prep_bytes = lean ? sizeof(prep_rt::PrepRtSmem) : direct ? prep1_smem : prep_smem;
    auto set_prep_attributes = [&](auto* kernel) {
        cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_bytes));
        if (e == cudaSuccess)  // as the state pass's: where they overlap, their blocks share SMs
            e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared);
        return e;
    };
    cudaError_t err = set_prep_attributes(prep_kernel);
    if (err != cudaSuccess) return err;
    auto* state_kernel = dkq == 128 ? wy_state16_kernel<128> : wy_state16_kernel<0>;
    err = cudaFuncSetAttribute(state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(state_smem));
    if (err != cudaSuccess) return err;
    // F16RtSched (F16RtLean1 / 2): gdn_sched_plan's chains a pass block; where the pass overlaps the
    // lean prep, its SMs set aside and the prep persistent (wy_prep_rt_kernel says how it runs).
    GdnSchedPlan sp{};
    dim3 grid = prep_grid;
    if (lean_pass && sched) {
        auto* persistent = lean_prep_kernel<true>(w16, a.vec, u16);
        const int sms = current_sm_count();
        int per_sm = 0;  // (0: no persistent prep — wy_prep16's prep, or no overlap)
        if (lean && a.epoch &&
            ((err = set_prep_attributes(persistent)) != cudaSuccess ||
             (err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent, prep_threads, prep_bytes)) !=
                 cudaSuccess))
            return err;
        sp = gdn_sched_plan(variant, plan.n_seqs, max_len, p.n_v_heads, dv, sms, per_sm, a.epoch != 0);
        if (sp.persistent) {
            a.prep_ctr = reinterpret_cast<uint32_t*>(scratch + T * a.nv * a.rs);  // past the rows (scratch_floats)
            a.prep_items = uint32_t(prep_blocks);  // (below 2^31: checked above)
            a.prep_reserve = uint32_t(sp.reserve);
            a.prep_front = uint32_t(sp.front);  // (≤ prep_items)
            a.prep_solo = uint32_t(sp.solo);
            a.prep_stay = sp.stay ? 1u : 0u;
            grid = dim3{unsigned(sms * per_sm)};
            prep_kernel = persistent;
            const size_t ctr_bytes = sizeof(uint32_t) * (sp.front > 0 ? kGdnPrepCtrWords : 1);
            if ((err = cudaMemsetAsync(a.prep_ctr, 0, ctr_bytes, stream)) != cudaSuccess) return err;
        }
    }
    a.phases = gdn_phases_begin(stream);  // (null but in a profiling build: fast_gdn_phases.h)
    prep_kernel<<<grid, prep_threads, prep_bytes, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (rt && variant == GdnChunkVariant::F16x3Rt2) {
        err = f16x3::launch_wy_state16_rt2(a, maps, stream);
    } else if (rt) {
        err = f16x3::launch_wy_state16_rt(a, maps, one ? 1 : 3, stream, lean_pass, sp.two_chains, u16);
    } else if (wg) {
        err = f16x3::launch_wy_state16_wg(a, stream);
    } else {
        const dim3 state_grid{unsigned(plan.n_seqs), unsigned(p.n_v_heads), unsigned((dv + kNs - 1) / kNs)};
        state_kernel<<<state_grid, kTh16, state_smem, stream>>>(a);
        err = cudaGetLastError();
    }
    if (a.phases && err == cudaSuccess)
        gdn_phases_end(a.phases, prep_blocks, p.n_v_heads, (max_len + kC - 1) / kC, stream);
    return err;
}

}  // namespace tessera::cuda::fast::detail
