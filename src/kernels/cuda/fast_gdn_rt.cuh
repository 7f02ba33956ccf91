// Shared by the F16x3Rt state passes (fast_gdn_chunked16_rt.cu): the scratch's tensor maps, the
// per-row split of an accumulator into A fragments, and the 3×F16 register-A products (hi·B_hi +
// hi·B_lo + lo·B_hi, lo raw) over a run of k-steps at compile-time descriptor offsets.
#pragma once
#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <utility>

#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail::f16x3 {

constexpr int kRtBox = 64 * 128;  // bytes: one TMA box, 64 rows of a 128-byte swizzled row
constexpr int kRtRows = 64;       // value columns of a block (Sᵀ's rows: an m64 accumulator)

struct RtMaps {
    CUtensorMap h16;  // the scratch as halves: [T][nv][2·rs], boxes 64 × 1 × 64
    CUtensorMap f32;  // the scratch as floats: [T][nv][rs], boxes 32 × 1 × 64 (U)
};
// The scratch rows of `a` (a.rs floats a token and value head) as RtMaps; false where the driver
// cannot describe them (the caller then takes F16x3Wg's pass, before the prep has run).
inline bool rt_tma_maps(const wy::ChArgs& a, RtMaps* m) {
    const uint64_t T = uint64_t(a.T), nv = uint64_t(a.nv), rs = uint64_t(a.rs);
    return tma_map_3d_sw128(&m->h16, true, a.scratch, {2 * rs, nv, T}, {rs * 4, nv * rs * 4}, {64, 1, 64}) &&
           tma_map_3d_sw128(&m->f32, false, a.scratch, {rs, nv, T}, {rs * 4, nv * rs * 4}, {32, 1, 64});
}
// The F16x3Rt state passes, after wy_prep16 in its raw-lo form has filled the scratch rows (dk
// rounded up to 16 must be 128): one warpgroup a 64-column block (fast_gdn_chunked16_rt.cu) or two,
// split along dk (fast_gdn_chunked16_rt2.cu, F16x3Rt2).
// terms: 3 (F16x3Rt) or 1 (F16Rt: hi·hi products only, the prep's lo halves neither written nor read);
// lean (terms 1 only): F16RtLean's form of the pass (the same arithmetic, leaner addressing).
// two_chains (lean only): a block per 128 value columns, a warpgroup's chain each (F16RtSched).
// u16 (lean only): U read as f16 under the chunk's kMetaU (F16RtU16's lean prep wrote it so).
cudaError_t launch_wy_state16_rt(const wy::ChArgs& a, const RtMaps& maps, int terms, cudaStream_t stream,
                                 bool lean = false, bool two_chains = false, bool u16 = false);
cudaError_t launch_wy_state16_rt2(const wy::ChArgs& a, const RtMaps& maps, cudaStream_t stream);

// The opening of an F16x3Rt pass's block (sequence blockIdx.x, value head blockIdx.y, `cols` value
// columns from v0 = blockIdx.z·cols): its sequence, key head, state (null: a padding sequence) and chunk
// count; false where the block has nothing to run — a bad sequence (its 64 columns NaN, written by
// the first `consumers` threads) or no WY tokens.
struct RtBlock {
    wy::Seq sq;
    int64_t h, hk;
    int v0, n_chunks;
    float* S;
    // The rows of chunk c (64 but for the last).
    __device__ int chunk_rows(int c) const {
        return int(sq.n_wy - int64_t(c) * wy::kC < wy::kC ? sq.n_wy - int64_t(c) * wy::kC : wy::kC);
    }
};
__device__ inline bool rt_block(const wy::ChArgs& a, int consumers, RtBlock* b, int cols = kRtRows) {
    b->h = blockIdx.y;
    b->v0 = int(blockIdx.z) * cols;
    if (!wy::seq_of(a, int(blockIdx.x), &b->sq)) {
        if (int(threadIdx.x) < consumers) {
            wy::nan_columns(a, b->sq, b->h, b->v0, int(threadIdx.x), consumers);
            wy::nan_columns(a, b->sq, b->h, b->v0 + wy::kNs, int(threadIdx.x), consumers);
            // (columns past 64: a loop from 0 changed the 64-column blocks' code, so the first two stay)
            for (int c = 2 * wy::kNs; c < cols; c += wy::kNs)
                wy::nan_columns(a, b->sq, b->h, b->v0 + c, int(threadIdx.x), consumers);
        }
        return false;
    }
    if (b->sq.n_wy == 0) return false;
    b->hk = a.tiled ? b->h % a.nk : b->h / (a.nv / a.nk);
    b->S = b->sq.slot >= 0 ? a.state + b->sq.slot * a.slot_stride + b->h * int64_t(a.dk) * a.dv : nullptr;
    b->n_chunks = int((b->sq.n_wy + wy::kC - 1) / wy::kC);
    return true;
}
// The dynamic shared memory's first 1024-aligned byte (TMA's 128-byte swizzle repeats every 1 KB), as
// a shared-window address (*sb) and a pointer.
__device__ inline uint8_t* rt_smem_base(uint8_t* smem_raw, uint32_t* sb) {
    const uint32_t raw = dev::smem_addr(smem_raw);
    *sb = (raw + 1023u) & ~1023u;
    return smem_raw + (*sb - raw);
}

// Waits until wy_prep16 has raised the flag of the chunk whose scratch meta this is (ChArgs::epoch;
// every prep block is resident or done by the time a state pass launched after it runs, so the
// flag comes), then orders the async proxy's reads of the chunk's rows after it. The wait is
// bounded (~2^26 polls) so that a broken plan cannot hang the GPU: past it the pass reads what is there.
__device__ inline void wait_chunk(const float* meta, uint32_t epoch) {
    const uint32_t* f = reinterpret_cast<const uint32_t*>(meta + kMetaFlag);
    for (uint32_t i = 0; dev::flag_acquire(f) != epoch && i < (1u << 26); ++i) __nanosleep(32);
    dev::fence_proxy_async_global();
}

// 2^-e of a chunk scale back to e.
__device__ inline int exp_of(float p) { return 127 - int(__float_as_uint(p) >> 23); }

// Row maxima (as |x| bits) of an m64nN accumulator's two rows of this thread — g (elements 4i, 4i+1)
// and g + 8 (4i + 2, 4i + 3) — over the quad that shares them.
template <int N>
__device__ inline void row_maxima(const float (&d)[N], uint32_t& m0, uint32_t& m1) {
    m0 = m1 = 0u;
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
        m0 = max(m0, max(abs_bits(d[4 * i]), abs_bits(d[4 * i + 1])));
        m1 = max(m1, max(abs_bits(d[4 * i + 2]), abs_bits(d[4 * i + 3])));
    }
#pragma unroll
    for (int x = 1; x <= 2; x *= 2) {
        m0 = max(m0, __shfl_xor_sync(0xffffffffu, m0, x));
        m1 = max(m1, __shfl_xor_sync(0xffffffffu, m1, x));
    }
}

// The A fragments (hi, raw lo) of an accumulator's KS k-steps of 16 columns, row g scaled by s0 and
// g + 8 by s1: k-step kk's a0..a3 are accumulator elements 8kk + (0,1), (2,3), (4,5), (6,7).
template <int KS>
__device__ inline void to_frags(const float (&d)[8 * KS], float s0, float s1, uint32_t (&hi)[KS][4],
                                uint32_t (&lo)[KS][4]) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            split16<true>(d[8 * kk + 2 * j], d[8 * kk + 2 * j + 1], j & 1 ? s1 : s0, hi[kk][j], lo[kk][j]);
}

// ---- Sᵀ in an m64nN accumulator: element j = 4i + e is row r0 + 8·(e / 2), column k0 + 8i + 2t + e % 2
// (r0 = this thread's first row, t = its lane % 4) ----

// The state slot's S[k][v] (dk × dv row-major; null: zeros) into the accumulator, v = v0 + row.
template <int M>
__device__ inline void load_state(float (&d)[M], const float* S, int v0, int k0, int t, int dv, int dk) {
#pragma unroll
    for (int j = 0; j < M; ++j) {
        const int v = v0 + 8 * ((j >> 1) & 1), k = k0 + 8 * (j >> 2) + 2 * t + (j & 1);
        d[j] = S && v < dv && k < dk ? S[int64_t(k) * dv + v] : 0.f;
    }
}
// The accumulator back to the slot. (Addresses from values the compiler cannot see through: else it
// computes them once for load_state at the start and keeps them, spilled, across the chunk loop.)
template <int M>
__device__ inline void store_state(const float (&d)[M], float* S, int v0, int k0, int t, int dv, int dk) {
    asm volatile("" : "+l"(S), "+r"(dv));
#pragma unroll
    for (int j = 0; j < M; ++j) {
        const int v = v0 + 8 * ((j >> 1) & 1), k = k0 + 8 * (j >> 2) + 2 * t + (j & 1);
        if (v < dv && k < dk) S[int64_t(k) * dv + v] = d[j];
    }
}
// The accumulator's rows split under their own powers of two (max in [2^12, 2^13)): e0, e1 and the
// A fragments hi + lo (raw).
template <int KS>
__device__ inline void split_rows(const float (&d)[8 * KS], int& e0, int& e1, uint32_t (&hi)[KS][4],
                                  uint32_t (&lo)[KS][4]) {
    uint32_t m0, m1;
    row_maxima(d, m0, m1);
    e0 = tile_exp(m0);
    e1 = tile_exp(m1);
    to_frags<KS>(d, pow2(e0), pow2(e1), hi, lo);
}
// to_frags undone: d = (hi + lo)·f, f = f0 on row g and f1 on row g + 8 (hi + lo is exact in f32).
template <int KS>
__device__ inline void from_frags(const uint32_t (&hi)[KS][4], const uint32_t (&lo)[KS][4], float f0, float f1,
                                  float (&d)[8 * KS]) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk)
#pragma unroll
        for (int q = 0; q < 4; ++q) {  // register q of k-step kk: elements 8kk + 2q, + 1 (row: q odd → g + 8)
            const float2 h = __half22float2(*reinterpret_cast<const __half2*>(&hi[kk][q]));
            const float2 l = __half22float2(*reinterpret_cast<const __half2*>(&lo[kk][q]));
            const float f = q & 1 ? f1 : f0;
            d[8 * kk + 2 * q] = (h.x + l.x) * f;
            d[8 * kk + 2 * q + 1] = (h.y + l.y) * f;
        }
}
// A padding sequence keeps no state (see wy_state16): its last one-token chunk is stepped from S in
// f32, written by every thread of a group of `consumers` (rows r0 = wr + g of the group's 64 value
// columns from v0, columns k0 …) as two [128][kLdS] halves of 32 value columns at Ss, then stepped by
// the group's warps 0 and 1 (named barrier `bar` between). Outputs only.
template <int M>
__device__ inline void step_padding_tail(const wy::ChArgs& a, const wy::Seq& sq, int64_t h, int64_t hk, int v0,
                                         const float (&d)[M], int r0, int k0, int t, float* Ss, int consumers,
                                         int bar = 1) {
    const int warp = int(threadIdx.x / 32) % (consumers / 32), lane = threadIdx.x % 32;
#pragma unroll
    for (int j = 0; j < M; ++j) {
        const int r = r0 + 8 * ((j >> 1) & 1), k = k0 + 8 * (j >> 2) + 2 * t + (j & 1);
        Ss[(r >> 5) * 128 * wy::kLdS + k * wy::kLdS + (r & 31)] = d[j];
    }
    dev::named_barrier_sync(bar, consumers);
    if (warp < 2) wy::step_padding_last(a, sq, h, hk, v0 + wy::kNs * warp, Ss + warp * 128 * wy::kLdS, lane);
}

// Byte offsets of B's k-step kk, part p (0 hi, 1 lo), from its tile's first byte: W or Q̃ (K-major,
// [hi d0–63, hi d64–127, lo, lo] boxes), K̃ (N-major: 16 tokens a k-step), P (K-major, [hi, lo]).
struct LayWQ {
    static constexpr int off(int p, int kk) { return (2 * p + (kk >> 2)) * kRtBox + (kk & 3) * 32; }
};
struct LayK {
    static constexpr int off(int p, int kk) { return 2 * p * kRtBox + kk * 16 * 128; }
};
struct LayP {
    static constexpr int off(int p, int kk) { return p * kRtBox + kk * 32; }
};

// One k-step of d (+)= A·B, A = hi + lo in registers, B = B_hi + B_lo at descriptor b + Lay's
// offsets: TERMS 3, hi·B_hi + hi·B_lo + lo·B_hi (lo·lo dropped, ~2^-22); TERMS 1, hi·B_hi alone
// (F16Rt: f16's rounding of each operand, ~2^-12 of its row's or tile's max).
template <int TERMS, int TB, int N, class Lay, int KK>
__device__ inline void mma3_step(float (&d)[N / 2], const uint32_t (&hi)[4], const uint32_t (&lo)[4], uint64_t b,
                                 int accumulate) {
    static_assert(TERMS == 1 || TERMS == 3, "mma3_step: 1 or 3 products");
    if constexpr (N == 32) {
        dev::wgmma_m64n32k16_rs_f16_at<TB, Lay::off(0, KK)>(d, hi, b, accumulate);
        if constexpr (TERMS == 3) {
            dev::wgmma_m64n32k16_rs_f16_at<TB, Lay::off(1, KK)>(d, hi, b, 1);
            dev::wgmma_m64n32k16_rs_f16_at<TB, Lay::off(0, KK)>(d, lo, b, 1);
        }
    } else if constexpr (N == 64) {
        dev::wgmma_m64n64k16_rs_f16_at<TB, Lay::off(0, KK)>(d, hi, b, accumulate);
        if constexpr (TERMS == 3) {
            dev::wgmma_m64n64k16_rs_f16_at<TB, Lay::off(1, KK)>(d, hi, b, 1);
            dev::wgmma_m64n64k16_rs_f16_at<TB, Lay::off(0, KK)>(d, lo, b, 1);
        }
    } else {
        static_assert(N == 128, "mma3_step: m64n32, m64n64 or m64n128");
        dev::wgmma_m64n128k16_rs_f16_at<TB, Lay::off(0, KK)>(d, hi, b, accumulate);
        if constexpr (TERMS == 3) {
            dev::wgmma_m64n128k16_rs_f16_at<TB, Lay::off(1, KK)>(d, hi, b, 1);
            dev::wgmma_m64n128k16_rs_f16_at<TB, Lay::off(0, KK)>(d, lo, b, 1);
        }
    }
}
template <int TERMS, int TB, int N, class Lay, int KS, int... KK>
__device__ inline void mma3_steps(float (&d)[N / 2], const uint32_t (&hi)[KS][4], const uint32_t (&lo)[KS][4],
                                  uint64_t b, bool accumulate, std::integer_sequence<int, KK...>) {
    (mma3_step<TERMS, TB, N, Lay, KK>(d, hi[KK], lo[KK], b, KK > 0 || accumulate), ...);
}
// d (+)= A·B over KS k-steps (TB: B K-major 0, N-major 1; b: the descriptor of B's first byte).
template <int TB, int N, class Lay, int TERMS = 3, int KS>
__device__ inline void mma3_rs(float (&d)[N / 2], const uint32_t (&hi)[KS][4], const uint32_t (&lo)[KS][4], uint64_t b,
                               bool accumulate) {
    mma3_steps<TERMS, TB, N, Lay>(d, hi, lo, b, accumulate, std::make_integer_sequence<int, KS>{});
}

template <int KS>
__device__ inline void fence_frags(uint32_t (&x)[KS][4]) {
#pragma unroll
    for (int kk = 0; kk < KS; ++kk) dev::wgmma_fence_operands(x[kk]);
}

}  // namespace tessera::cuda::fast::detail::f16x3
