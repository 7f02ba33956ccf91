// Shared by the F16x3 (3×F16) chunked gated delta rule kernels: fast_gdn_chunked16.cu (the prep
// and the mma.sync state pass) and fast_gdn_chunked16_wg.cu (the state pass on the warpgroup MMA).
// Operand tiles are stored as 2^-e·(hi + 2^-11·lo), hi and lo f16, e a power of two per tile or row
// (fast_gdn_chunked16.cu's header); the prep writes them to one scratch row per (token, value head).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_gdn_wy.cuh"

namespace tessera::cuda::fast::detail::f16x3 {

using wy::kC;

constexpr float kLo = 2048.f, kLoInv = 1.f / 2048.f;  // lo's scale 2^11
// wy_prep16's maxima: W (a bound), K̃, Q̃, P (also the order of the chunk scales), then |K|, |Q|.
enum { kMxW, kMxK, kMxQ, kMxP, kMxKr, kMxQr };

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
// Raw: lo unscaled (x·s = hi + lo), for products that add hi·lo and lo·hi into hi·hi's accumulator
// (F16x3Rt); with max |x·s| in [2^12, 2^13) lo stays a normal f16 for elements down to ~2^-15 of the
// max and keeps 2^-24 absolute below that (2^-36 of the max).
template <bool Raw = false>
__device__ inline void split16(float x0, float x1, float s, uint32_t& hi, uint32_t& lo) {
    x0 *= s;
    x1 *= s;
    const __half2 h = __floats2half2_rn(x0, x1);
    const float2 f = __half22float2(h);
    const float ls = Raw ? 1.f : kLo;
    const __half2 l = __floats2half2_rn((x0 - f.x) * ls, (x1 - f.y) * ls);
    hi = *reinterpret_cast<const uint32_t*>(&h);
    lo = *reinterpret_cast<const uint32_t*>(&l);
}

// The scratch row of F16x3 per (token, value head), dkq = dk rounded up to 16: halves [W hi | W lo |
// K̃ hi | K̃ lo | Q̃ hi | Q̃ lo] (dkq each), [P hi | P lo] (64 each); floats U (dv, room for a multiple
// of 4; F16RtU16: dv halves there, f16 under the chunk's kMetaU), then 8 floats: the chunk's 2^-e of
// W, K̃, Q̃, P and e^Γlast (its first row only), and in the last of them (kMetaFlag, as bits)
// ChArgs::epoch once the chunk's rows are written.
constexpr int kMetaU = 5;     // F16RtU16: 2^-e of the chunk's U tile, stored as f16 (0: U in f32)
constexpr int kMetaFlag = 7;
struct Row16 {
    int w, k, q, p;  // halves
    int u, meta;     // floats
};
__device__ inline Row16 row16(int dkq, int dv) {
    const int u = 3 * dkq + kC;
    return {0, 2 * dkq, 4 * dkq, 6 * dkq, u, u + (dv + 3) / 4 * 4};
}

// The F16x3 state pass on the warpgroup MMA (fast_gdn_chunked16_wg.cu), after wy_prep16 has filled
// the scratch rows (a.rs = gdn_chunk16_row_floats). Needs dk <= 128.
cudaError_t launch_wy_state16_wg(const wy::ChArgs& a, cudaStream_t stream);
// (The F16x3Rt passes: fast_gdn_rt.cuh.)

}  // namespace tessera::cuda::fast::detail::f16x3
