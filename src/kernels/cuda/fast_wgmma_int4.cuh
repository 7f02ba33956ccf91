// The Int4 side of the kernel pack's wgmma kernels (the prefill GEMM, fast_gemm_wgmma.cu, and the
// MoE's large tiles, fast_moe_wgmma.cu): weights as wgmma's A, dequantized straight into the A
// registers; activations as B in shared memory. Header-only, device code only.
//
// The k pairing. Lane (g, t) of a warp holds rows g and g + 8 of the warp's 16 weight rows and,
// of each k-tile of 128 columns, the 32 columns 32t … 32t + 31 (one 16-byte chunk of codes a row,
// within one scale group since G is a multiple of 32). Word j of a chunk (columns 8j … 8j + 7)
// gives, through dequant_int4_pairs' (i, i + 4) pairs, two k-steps: step s ∈ {0, 1} takes columns
// (2s, 2s + 4) as A's k (2t, 2t + 1) and (2s + 1, 2s + 5) as k (2t + 8, 2t + 9). So k-step
// σ = 2j + s of a k-tile reads, at B's k index κ = 8h + 2t + e (h, e ∈ {0, 1}), activation column
// 32t + 8j + 2s + h + 4e: the "wgmma order" each activation row is stored in (16 values a k-step,
// k-steps 0 … 3 the first 64-column k-block, 4 … 7 the second; rows padded with zeros to a
// multiple of 128 columns).
//
// The B tile in shared memory: per k-block, BN activation rows of 128 bytes in the 128-byte
// swizzle (fast_wgmma.cuh), the two k-blocks one after the other.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"

namespace tessera::cuda::fast::dev {

constexpr int kWgmmaK = 128;  // columns of a k-tile

// Columns rounded up to whole k-tiles (the row length of an activation in the wgmma order).
__host__ __device__ __forceinline__ int64_t wgmma_row_len(int64_t k) { return (k + kWgmmaK - 1) / kWgmmaK * kWgmmaK; }

// Position of column c (0..127) of a k-tile in the wgmma order.
__device__ __forceinline__ int wgmma_pos(int c) {
    const int t = c >> 5, j = (c >> 3) & 3, e = (c >> 2) & 1, s = (c >> 1) & 1, h = c & 1;
    return 16 * (2 * j + s) + 8 * h + 2 * t + e;
}

// K-step σ of a k-tile in the wgmma order — words 8σ … 8σ + 7, word 8σ + 4h + t = (v[c], v[c + 4])
// with c = 32t + 8j + 2s + h (σ = 2j + s) — from an f32 row: `src` the row, c0 the k-tile's first
// column, zeros past k (a multiple of 32: each t's 32 columns all in or all out). Columns (c, c + 1)
// are one float2 (h = 0, 1), so 8 float2 loads; lo: words 8σ … 8σ + 3, hi: 8σ + 4 … 8σ + 7.
// vec2: src 8-byte aligned.
__device__ __forceinline__ void wgmma_kstep_words(const float* __restrict__ src, int64_t c0, int64_t k, int sigma,
                                                  bool vec2, uint4& lo, uint4& hi) {
    const int j = sigma >> 1, s = sigma & 1;
    float2 f[4][2];  // [t][e]: columns 32t + 8j + 2s + 4e, + 1
#pragma unroll
    for (int t = 0; t < 4; ++t) {
        const bool in = c0 + 32 * t < k;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            const float* p = src + c0 + 32 * t + 8 * j + 2 * s + 4 * e;
            f[t][e] = !in  ? make_float2(0.f, 0.f)
                      : vec2 ? __ldg(reinterpret_cast<const float2*>(p))
                             : make_float2(__ldg(p), __ldg(p + 1));
        }
    }
    lo.x = pack_bf16x2(f[0][0].x, f[0][1].x), lo.y = pack_bf16x2(f[1][0].x, f[1][1].x);
    lo.z = pack_bf16x2(f[2][0].x, f[2][1].x), lo.w = pack_bf16x2(f[3][0].x, f[3][1].x);
    hi.x = pack_bf16x2(f[0][0].y, f[0][1].y), hi.y = pack_bf16x2(f[1][0].y, f[1][1].y);
    hi.z = pack_bf16x2(f[2][0].y, f[2][1].y), hi.w = pack_bf16x2(f[3][0].y, f[3][1].y);
}

// The same k-step stored at `tile` (the k-tile's 64 words of a row in the wgmma order): 32
// contiguous bytes, two 16-byte stores — the 8 lanes of a k-tile's steps write its 256 bytes whole.
__device__ __forceinline__ void wgmma_store_kstep(uint32_t* tile, const float* __restrict__ src, int64_t c0, int64_t k,
                                                  int sigma, bool vec2) {
    uint4 lo, hi;
    wgmma_kstep_words(src, c0, k, sigma, vec2, lo, hi);
    uint4* out = reinterpret_cast<uint4*>(tile + 8 * sigma);
    out[0] = lo;
    out[1] = hi;
}

// A word's four bf16 pairs of rows g (lo) and g + 8 (hi) as the fragments of its two k-steps.
__device__ __forceinline__ void wgmma_pair_fragments(const uint32_t (&lo)[4], const uint32_t (&hi)[4],
                                                     uint32_t (&a0)[4], uint32_t (&a1)[4]) {
    a0[0] = lo[0], a0[1] = hi[0], a0[2] = lo[1], a0[3] = hi[1];
    a1[0] = lo[2], a1[1] = hi[2], a1[2] = lo[3], a1[3] = hi[3];
}
// Word j of rows g (lo) and g + 8 (hi) → the A fragments of k-steps 2j and 2j + 1. LEAN (the k-tile
// probe's lean form): w = code·s (dequant_int4_pairs_lean; b_lo, b_hi the rows' −128·s pairs, negc
// unused).
template <bool LEAN = false>
__device__ __forceinline__ void wgmma_a_fragments(uint32_t lo_word, uint32_t hi_word, uint32_t s_lo, uint32_t b_lo,
                                                  uint32_t s_hi, uint32_t b_hi, uint32_t negc, uint32_t (&a0)[4],
                                                  uint32_t (&a1)[4]) {
    uint32_t lo[4], hi[4];
    if constexpr (LEAN) {
        dequant_int4_pairs_lean(lo_word, s_lo, b_lo, lo);
        dequant_int4_pairs_lean(hi_word, s_hi, b_hi, hi);
    } else {
        dequant_int4_pairs(lo_word, s_lo, b_lo, negc, lo);
        dequant_int4_pairs(hi_word, s_hi, b_hi, negc, hi);
    }
    wgmma_pair_fragments(lo, hi, a0, a1);
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int j) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; }

// Half `half` of a k-tile's A (words 2·half, 2·half + 1 of rows g, g + 8: its four k-steps' fragments).
__device__ __forceinline__ void wgmma_half_fragments(const uint4& q_lo, const uint4& q_hi, const uint32_t (&s2)[2],
                                                     const uint32_t (&b2)[2], uint32_t negc, int half,
                                                     uint32_t (&a)[4][4]) {
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {  // word j = 2·half + jj: k-steps 2jj, 2jj + 1 of the half
        const int j = 2 * half + jj;
        wgmma_a_fragments(word_of(q_lo, j), word_of(q_hi, j), s2[0], b2[0], s2[1], b2[1], negc, a[2 * jj],
                          a[2 * jj + 1]);
    }
}

// One k-tile of a warpgroup: acc[64 rows × BN] += A · B over the 128 columns, A from this lane's
// code chunks q_lo, q_hi (rows g, g + 8; scale and bias bf16x2 pairs s2, b2 of each), B the tile
// whose first k-block's descriptor is `desc` (the second `block_bytes` further). In two halves (a
// k-block each): dequantize the half's 4 k-steps into one of two register sets, issue 4 wgmma,
// commit, and wait until only this group is in flight — on return the last half may still run.
template <int BN>
__device__ __forceinline__ void wgmma_int4_ktile(float (&acc)[BN / 2], const uint4& q_lo, const uint4& q_hi,
                                                 const uint32_t (&s2)[2], const uint32_t (&b2)[2], uint32_t negc,
                                                 uint64_t desc, int block_bytes) {
    uint32_t a[2][4][4];  // [half][k-step of the half][a0..a3]
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        wgmma_half_fragments(q_lo, q_hi, s2, b2, negc, half, a[half]);
        wgmma_fence();
        wgmma_fence_operands(acc);
#pragma unroll
        for (int s = 0; s < 4; ++s)  // k-block `half`, k-step s: 32 bytes into each 128-byte row
            wgmma_rs<BN>(acc, a[half][s], wgmma_desc_add(desc, uint32_t((half * block_bytes + 32 * s) >> 4)), 1);
        wgmma_commit();
        wgmma_fence_operands(acc);
        wgmma_wait<1>();  // the group before this one is done: its A registers are free again
    }
}

// f(std::integral_constant<int, N>) for the smallest N of NN, NN + 8, …, BN that is at least n (BN
// at most): a branch for each N, where n is uniform across the warpgroup.
template <int BN, int NN, class F>
__device__ __forceinline__ void with_fitted_n(int n, F&& f) {
    if constexpr (NN >= BN) f(std::integral_constant<int, BN>{});
    else if (n <= NN) f(std::integral_constant<int, NN>{});
    else with_fitted_n<BN, NN + 8>(n, f);
}

// wgmma_int4_ktile with wgmma's N chosen at run time: the smallest of NMIN, NMIN + 8, …, BN that is
// at least n (uniform across the warpgroup) — one loop for every N, each half's four wgmma issued in
// the branch of its N (acc's first N / 2 values; the rest untouched).
template <int BN, int NMIN>
__device__ __forceinline__ void wgmma_int4_ktile_fit(float (&acc)[BN / 2], const uint4& q_lo, const uint4& q_hi,
                                                     const uint32_t (&s2)[2], const uint32_t (&b2)[2], uint32_t negc,
                                                     uint64_t desc, int block_bytes, int n) {
    uint32_t a[2][4][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        wgmma_half_fragments(q_lo, q_hi, s2, b2, negc, half, a[half]);
        uint64_t at[4];  // (the same for every N: made once, not in each branch)
#pragma unroll
        for (int s = 0; s < 4; ++s) at[s] = wgmma_desc_add(desc, uint32_t((half * block_bytes + 32 * s) >> 4));
        wgmma_fence();
        wgmma_fence_operands(acc);
        auto issue = [&](auto nn) {
            constexpr int NN = decltype(nn)::value;
            float(&d)[NN / 2] = *reinterpret_cast<float(*)[NN / 2]>(&acc[0]);
#pragma unroll
            for (int s = 0; s < 4; ++s) wgmma_rs<NN>(d, a[half][s], at[s], 1);
            wgmma_commit();  // (in the branch: committed after the merge, ptxas adds a no-op wgmma to close the group)
        };
        with_fitted_n<BN, NMIN>(n, issue);
        wgmma_fence_operands(acc);
        wgmma_wait<1>();
    }
}

// A k-tile's weights staged in shared memory by TMA, as packed_weight.h's 16-row tiles lie: a
// box of row tiles' codes (1 KB a tile: 16 rows × 64 bytes, so row r of the box at 64·r) and their
// scales (biases), 16 rows × gpt halves a tile (gpt = 128 / G groups a row and k-tile).
//
// Byte offset of row r's scale (bias) for this lane's columns 32·tq … 32·tq + 31 in such a box.
__device__ __forceinline__ int staged_scale_at(int r, int tq, int gpt) {
    return (r >> 4) * 32 * gpt + 2 * ((r & 15) * gpt + (tq * gpt) / 4);
}

// A stage of `runs` k-tiles a row tile (codes [tiles][runs][1 KB], scales / biases [tiles][runs][32·gpt
// bytes]: a 3-D box, packed_tiles_tma_maps_3d): row r's index for wgmma_int4_ktile_staged (it reads
// codes + 64·r; k-tile q's codes from +1 KB·q) and the byte offset of row r's scales for lane tq in
// k-tile q. runs = 1: r and staged_scale_at.
__device__ __forceinline__ int staged_code_row(int r, int runs) { return (r >> 4) * 16 * runs + (r & 15); }
__device__ __forceinline__ int staged_scale_at(int r, int tq, int gpt, int runs, int q) {
    return staged_scale_at(r, tq, gpt) + ((r >> 4) * (runs - 1) + q) * 32 * gpt;
}

// negc for wgmma_int4_ktile on staged codes: −128 (0x4300 | code is 128 + code; the −8 of codes
// without biases is in b).
constexpr uint32_t kWgmmaInt4NegC = 0xc300c300u;

// A row's staged scale (byte `at` of `scales`) as a bf16x2 pair.
__device__ __forceinline__ uint32_t staged_scale(const uint8_t* scales, int at) {
    return f16_to_bf16x2(*reinterpret_cast<const uint16_t*>(scales + at));
}
// Its bias as a bf16x2 pair: byte `at` of `biases`, or −8·s (s2: the scale pair) where the matrix has
// none — exact, so (code − 8)·s is one rounding.
__device__ __forceinline__ uint32_t staged_bias(const uint8_t* biases, int at, bool bias, uint32_t s2) {
    constexpr uint32_t kNeg8 = 0xc100c100u, kNegZero = 0x80008000u;
    return bias ? f16_to_bf16x2(*reinterpret_cast<const uint16_t*>(biases + at)) : fma_bf16x2(s2, kNeg8, kNegZero);
}

// A lane's operands of a staged k-tile (wgmma_int4_ktile_staged's below): its code chunks of rows
// r_lo, r_hi, and their scales and biases as bf16x2 pairs.
__device__ __forceinline__ void wgmma_int4_staged_operands(const uint8_t* codes, int r_lo, int r_hi, int tq,
                                                           const uint8_t* scales, const uint8_t* biases, int s_lo,
                                                           int s_hi, bool bias_lo, bool bias_hi, uint4& q_lo,
                                                           uint4& q_hi, uint32_t (&s2)[2], uint32_t (&b2)[2]) {
    q_lo = *reinterpret_cast<const uint4*>(codes + r_lo * 64 + tq * 16);
    q_hi = *reinterpret_cast<const uint4*>(codes + r_hi * 64 + tq * 16);
    s2[0] = staged_scale(scales, s_lo);
    s2[1] = staged_scale(scales, s_hi);
    b2[0] = staged_bias(biases, s_lo, bias_lo, s2[0]);
    b2[1] = staged_bias(biases, s_hi, bias_hi, s2[1]);
}

// wgmma_int4_ktile on staged weights: A rows r_lo, r_hi of `codes` (lane (g, tq): rows g and g + 8
// of the warp's 16), their scales at byte s_lo / s_hi of `scales` and biases at the same offsets of
// `biases` — or, where a matrix has none (bias_lo / bias_hi false), b = −8·s: exact, so w = code·s
// − 8·s is one rounding of (code − 8)·s.
template <int BN>
__device__ __forceinline__ void wgmma_int4_ktile_staged(float (&acc)[BN / 2], const uint8_t* codes, int r_lo,
                                                        int r_hi, int tq, const uint8_t* scales,
                                                        const uint8_t* biases, int s_lo, int s_hi, bool bias_lo,
                                                        bool bias_hi, uint64_t desc, int block_bytes) {
    uint4 q_lo, q_hi;
    uint32_t s2[2], b2[2];
    wgmma_int4_staged_operands(codes, r_lo, r_hi, tq, scales, biases, s_lo, s_hi, bias_lo, bias_hi, q_lo, q_hi, s2,
                               b2);
    wgmma_int4_ktile<BN>(acc, q_lo, q_hi, s2, b2, kWgmmaInt4NegC, desc, block_bytes);
}

// wgmma_int4_ktile for MT m-tiles sharing B, in groups of one code word (two k-steps) of one
// m-tile, the m-tiles taking turns, one group in flight: 8 A registers a group, where
// wgmma_int4_ktile's groups of half a k-tile (16, two in flight) for two m-tiles back to back left
// ptxas short of registers for the wgmma pipeline (C7512: two m-tiles of N = 32 at 104 registers a
// consumer, fast_moe_tma_tile.cuh) and it serialized every wgmma. Each m-tile's k-steps go in
// wgmma_int4_ktile's order: the same sums. acc[j]'s first BN / 2 values (LD ≥ BN / 2).
template <int BN, int MT, int LD>
__device__ __forceinline__ void wgmma_int4_ktile_words(float (&acc)[MT][LD], const uint4 (&q_lo)[MT],
                                                       const uint4 (&q_hi)[MT], const uint32_t (&s2)[MT][2],
                                                       const uint32_t (&b2)[MT][2], uint32_t negc, uint64_t desc,
                                                       int block_bytes) {
    static_assert(BN / 2 <= LD, "wgmma_int4_ktile_words: N past the accumulators");
#pragma unroll
    for (int w = 0; w < 4; ++w) {  // word w: k-steps 2·(w % 2), + 1 of k-block w / 2
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            float(&d)[BN / 2] = *reinterpret_cast<float(*)[BN / 2]>(&acc[j][0]);
            uint32_t a0[4], a1[4];
            wgmma_a_fragments(word_of(q_lo[j], w), word_of(q_hi[j], w), s2[j][0], b2[j][0], s2[j][1], b2[j][1], negc,
                              a0, a1);
            const uint64_t at = wgmma_desc_add(desc, uint32_t(((w >> 1) * block_bytes + 64 * (w & 1)) >> 4));
            wgmma_fence();
            wgmma_fence_operands(d);
            wgmma_rs<BN>(d, a0, at, 1);
            wgmma_rs<BN>(d, a1, wgmma_desc_add(at, 2), 1);  // (the next k-step: 32 bytes on)
            wgmma_commit();
            wgmma_fence_operands(d);
            wgmma_wait<1>();  // the group before this one is done: its A registers are free again
        }
    }
}

// wgmma_int4_ktile_words with wgmma's N chosen at run time, as wgmma_int4_ktile_fit chooses it: the
// smallest of NMIN, NMIN + 8, …, BN that is at least n (uniform across the warpgroup).
template <int BN, int MT, int LD, int NMIN>
__device__ __forceinline__ void wgmma_int4_ktile_words_fit(float (&acc)[MT][LD], const uint4 (&q_lo)[MT],
                                                           const uint4 (&q_hi)[MT], const uint32_t (&s2)[MT][2],
                                                           const uint32_t (&b2)[MT][2], uint32_t negc, uint64_t desc,
                                                           int block_bytes, int n) {
    static_assert(BN / 2 <= LD, "wgmma_int4_ktile_words_fit: N past the accumulators");
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            uint32_t a0[4], a1[4];
            wgmma_a_fragments(word_of(q_lo[j], w), word_of(q_hi[j], w), s2[j][0], b2[j][0], s2[j][1], b2[j][1], negc,
                              a0, a1);
            const uint64_t at = wgmma_desc_add(desc, uint32_t(((w >> 1) * block_bytes + 64 * (w & 1)) >> 4));
            const uint64_t at2 = wgmma_desc_add(at, 2);  // (the next k-step: 32 bytes on)
            wgmma_fence();
            wgmma_fence_operands(acc[j]);
            auto issue = [&](auto nn) {
                constexpr int NN = decltype(nn)::value;
                float(&d)[NN / 2] = *reinterpret_cast<float(*)[NN / 2]>(&acc[j][0]);
                wgmma_rs<NN>(d, a0, at, 1);
                wgmma_rs<NN>(d, a1, at2, 1);
                wgmma_commit();  // (in the branch, as wgmma_int4_ktile_fit's)
            };
            with_fitted_n<BN, NMIN>(n, issue);
            wgmma_fence_operands(acc[j]);
            wgmma_wait<1>();
        }
    }
}

}  // namespace tessera::cuda::fast::dev
