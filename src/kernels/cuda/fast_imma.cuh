// The integer tensor-core pieces of the decode GEMV Imma (fast_gemv_imma.cu), which takes x in
// Dp4a's two int8 limbs: mma.sync m16n8k32 on u8 codes × s8 limbs, x staged in the mma's orders,
// and one 16-row × 128-column Int4 k-tile against one to eight tokens with the (chunk, limb)
// columns. Header-only, device code only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"

namespace tessera::cuda::fast::dev {

// d (16×8 s32) = a (16×32 u8) · b (32×8 s8) + c.
__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1, const int (&c)[4]) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%11,%12,%13};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}
__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1, int) {
    const int z[4] = {0, 0, 0, 0};
    mma_u8s8(d, a0, a1, a2, a3, b0, b1, z);
}

// x[T, k0 … k0 + 128·nks) → shared memory, every thread of the block calling (the quantization
// shuffles; a barrier follows). Per token row (stride xs bytes) both limbs, a k-tile's 128 bytes
// ordered [lane column t][chunk c] (8 bytes each: what lane (g, t) reads for chunk c is at 32t +
// 8c, so its four chunks are two 16-byte loads), and per chunk (dx / 254, sx) for `slots` tokens.
// ONE (the (chunk, limb) columns: the one-token ring loop, the register pipeline): per token (stride
// 2·xs) a k-tile's 256 bytes ordered [limb][chunk][word] — the lane of chunk c and limb l reads
// its 32 bytes at 32·(4l + c) — and (dx / 254, sx) per chunk for `slots` tokens.
// THREADS: the block's threads that call (all of them, 0 … THREADS − 1). B > 1: B batches' loads
// in flight before any is quantized (dp4a_quantize_x's). slots: st's token slots a chunk.
template <bool ONE, int THREADS, int B = 1>
__device__ __forceinline__ void imma_stage_x(const float* __restrict__ x, int64_t ldx, int T, int nks, bool aligned,
                                             uint8_t* xh, uint8_t* xl, float2* st, int xs, int slots = 8) {
    const int per_row = nks * 16, items = T * per_row;  // 8 columns an item
    for (int start = 0; start < items; start += THREADS * B) {
        float v[B][8];
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int i = start + b * THREADS + int(threadIdx.x);
            const int t = i < items ? i / per_row : 0, j = i - t * per_row;
#pragma unroll
            for (int e = 0; e < 8; ++e) v[b][e] = 0.f;
            if (i < items) load8(x + t * ldx + 8 * j, aligned, v[b]);
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int i = start + b * THREADS + int(threadIdx.x);
            const int t = i < items ? i / per_row : 0, j = i - t * per_row;
            const Dp4aQ8 q = dp4a_quantize8(v[b]);  // four neighbouring items: one 32-column group
            if (i < items) {
                const int kl = j >> 4, c = (j >> 2) & 3, lt = j & 3;
                if constexpr (ONE) {
                    uint8_t* const row = xh + 2 * t * xs + 256 * kl;
                    *reinterpret_cast<uint2*>(row + 32 * c + 8 * lt) = q.H;
                    *reinterpret_cast<uint2*>(row + 128 + 32 * c + 8 * lt) = q.L;
                } else {
                    const int at = t * xs + 128 * kl + 32 * lt + 8 * c;
                    *reinterpret_cast<uint2*>(xh + at) = q.H;
                    *reinterpret_cast<uint2*>(xl + at) = q.L;
                }
                if (lt == 0) st[(4 * kl + c) * slots + t] = make_float2(q.dx * (1.f / 254.f), q.sx);
            }
        }
    }
}

// The (chunk, limb) columns with the tile as it lies (Imma's register pipeline): lane (g, t)
// holds chunk t of rows g and g + 8 of a k-tile as the tile stores it (two coalesced 16-byte
// loads: the warp reads the tile's 1 KB in two runs of 512) and their scales. The four mma of a
// k-tile take word j of the lanes' own chunks — so a k-step mixes the four chunks of a row — and
// B's column 2c + l holds limb l of chunk c's word j only in the lanes of chunk c (t = c), zero
// elsewhere: column (c, l) gathers chunk c's products alone, as in Imma's one-token ring loop,
// with no transpose.
struct ImmaRegTile {
    uint4 qg, q8;  // chunk t of rows g and g + 8
    uint32_t s, b; // their scales (biases): row g low half, row g + 8 high half (f16 bits)
};
// One k-tile, T ≤ TT tokens: xb is this lane's 32 bytes of B for token 0 (its chunk's limb, words
// 0 … 3, or zeros), the next token's tstride bytes on (0 for the zero lanes); stk the chunk t's
// (dx / 254, sx) for its token slots. A's registers are unpacked once for all tokens.
template <bool BIAS, int TT>
__device__ __forceinline__ void imma_regs_step(float (&acc)[TT][2], const ImmaRegTile& tl, const uint8_t* xb,
                                               int tstride, const float2* stk, int T) {
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
    const uint32_t wg[4] = {tl.qg.x, tl.qg.y, tl.qg.z, tl.qg.w}, w8[4] = {tl.q8.x, tl.q8.y, tl.q8.z, tl.q8.w};
    uint32_t a[4][4];  // word j: even g, even g + 8, odd g, odd g + 8
#pragma unroll
    for (int j = 0; j < 4; ++j)
        a[j][0] = wg[j] & kLow, a[j][1] = w8[j] & kLow, a[j][2] = (wg[j] >> 4) & kLow, a[j][3] = (w8[j] >> 4) & kLow;
    const float s0 = half_bits(uint16_t(tl.s)), s8 = half_bits(uint16_t(tl.s >> 16));
    const float b0f = BIAS ? half_bits(uint16_t(tl.b)) : 0.f, b8f = BIAS ? half_bits(uint16_t(tl.b >> 16)) : 0.f;
#pragma unroll
    for (int b = 0; b < TT; ++b) {
        if (b >= T) break;
        const uint4 x0 = *reinterpret_cast<const uint4*>(xb + b * tstride);
        const uint4 x1 = *reinterpret_cast<const uint4*>(xb + b * tstride + 16);
        const uint32_t bw[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
        int d[4] = {0, 0, 0, 0};
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_u8s8(d, a[j][0], a[j][1], a[j][2], a[j][3], bw[2 * j], bw[2 * j + 1], d);
        const float2 ab = stk[b];
        const float f0 = float(d[0] * 254 + d[1]), f8 = float(d[2] * 254 + d[3]);  // exact: |.| < 2²⁴
        if constexpr (BIAS) {
            acc[b][0] = fmaf(s0 * ab.x, f0, fmaf(b0f, ab.y, acc[b][0]));
            acc[b][1] = fmaf(s8 * ab.x, f8, fmaf(b8f, ab.y, acc[b][1]));
        } else {
            const float m8 = -8.f * ab.y;
            acc[b][0] = fmaf(s0, fmaf(ab.x, f0, m8), acc[b][0]);
            acc[b][1] = fmaf(s8, fmaf(ab.x, f8, m8), acc[b][1]);
        }
    }
}

}  // namespace tessera::cuda::fast::dev
