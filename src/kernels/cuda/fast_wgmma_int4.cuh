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

// Columns 32t … 32t + 31 of a k-tile (v[0..31]) → their 16 words in the k-tile's 64 (`tile`):
// word 8σ + 4h + t (σ = 2j + s) = (v[8j + 2s + h], v[8j + 2s + h + 4]).
__device__ __forceinline__ void wgmma_store_cols32(uint32_t* tile, int t, const float (&v)[32]) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int s = 0; s < 2; ++s)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int c = 8 * j + 2 * s + h;
                tile[8 * (2 * j + s) + 4 * h + t] = pack_bf16x2(v[c], v[c + 4]);
            }
}

// Columns c0 … c0 + 31 of an f32 row (zeros where c0 ≥ k: k is a multiple of 32, so all 32 or
// none) into `row`, a row in the wgmma order (row length wgmma_row_len(k)). vec: src 16-byte
// aligned (float4 loads).
__device__ __forceinline__ void wgmma_store_row_cols32(uint32_t* row, const float* __restrict__ src, int64_t c0,
                                                       int64_t k, bool vec) {
    float v[32];
    if (c0 < k) {
        if (vec) {
#pragma unroll
            for (int q = 0; q < 8; ++q) {
                const float4 f = __ldg(reinterpret_cast<const float4*>(src + c0) + q);
                v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
            }
        } else {
#pragma unroll
            for (int e = 0; e < 32; ++e) v[e] = __ldg(src + c0 + e);
        }
    } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) v[e] = 0.f;
    }
    wgmma_store_cols32(row + (c0 / kWgmmaK) * (kWgmmaK / 2), int(c0 % kWgmmaK) / 32, v);
}

// Word j of rows g (lo) and g + 8 (hi) → the A fragments of k-steps 2j and 2j + 1.
__device__ __forceinline__ void wgmma_a_fragments(uint32_t lo_word, uint32_t hi_word, uint32_t s_lo, uint32_t b_lo,
                                                  uint32_t s_hi, uint32_t b_hi, uint32_t negc, uint32_t (&a0)[4],
                                                  uint32_t (&a1)[4]) {
    uint32_t lo[4], hi[4];
    dequant_int4_pairs(lo_word, s_lo, b_lo, negc, lo);
    dequant_int4_pairs(hi_word, s_hi, b_hi, negc, hi);
    a0[0] = lo[0], a0[1] = hi[0], a0[2] = lo[1], a0[3] = hi[1];
    a1[0] = lo[2], a1[1] = hi[2], a1[2] = lo[3], a1[3] = hi[3];
}

__device__ __forceinline__ uint32_t word_of(const uint4& q, int j) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; }

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
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {  // word j = 2·half + jj: k-steps 2jj, 2jj + 1 of the half
            const int j = 2 * half + jj;
            wgmma_a_fragments(word_of(q_lo, j), word_of(q_hi, j), s2[0], b2[0], s2[1], b2[1], negc, a[half][2 * jj],
                              a[half][2 * jj + 1]);
        }
        wgmma_fence();
        wgmma_fence_operands(acc);
#pragma unroll
        for (int s = 0; s < 4; ++s)  // k-block `half`, k-step s: 32 bytes into each 128-byte row
            wgmma_rs<BN>(acc, a[half][s], desc + uint64_t((half * block_bytes + 32 * s) >> 4), 1);
        wgmma_commit();
        wgmma_fence_operands(acc);
        wgmma_wait<1>();  // the group before this one is done: its A registers are free again
    }
}

}  // namespace tessera::cuda::fast::dev
