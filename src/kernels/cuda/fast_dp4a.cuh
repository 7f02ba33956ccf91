// The integer-unit decode kernels' shared pieces (fast_gemv_dp4a.cu, fast_moe_decode_dp4a.cu):
// x quantized by a block into two int8 limbs in shared memory, and one lane's share of a 16-row
// × 128-column Int4 k-tile dotted with it by dp4a. Header-only, device code only.
//
// x, per row t (a token, or a slot's act row) and 32 columns:
//   x ≈ dx · (qh + ql / 254),   dx = amax / 127,  qh = rint(x / dx),  ql = rint((x / dx − qh) · 254)
// (|qh|, |ql| ≤ 127), so |x − x̃| ≤ dx / 508 = amax / 64516 — ~16 bits against the group's largest
// value, finer than bf16 (|x| / 512) wherever |x| > amax / 126. In shared memory, per row: the hi
// limbs [Kp] and lo limbs [Kp] as bytes in the order the nibbles unpack (per 8 columns the even
// ones, then the odd ones), then (dx, sx = dx · (Σ qh + Σ ql / 254)) per 32 columns; Kp = K
// rounded up to 128, zeros past K. A non-finite value makes its group's dx NaN (and so the
// outputs that read it).
//
// A k-tile of a lane: row l / 2 of the 16, columns 64·(l % 2) … + 63 — two 16-byte chunks of
// codes (two scale groups of 32 at most) — so a lane keeps one row for a whole K loop. For a
// chunk, with s its scale and b its bias (−8·s without biases: Q4_0):
//   Σ w·x̃ = s · dx · (Σ code·qh + Σ code·ql / 254) + b · sx
// each Σ exact in int32 (dp4a of 4 code bytes — `w & 0x0F0F0F0F` the even columns, `(w >> 4) &
// 0x0F0F0F0F` the odd ones — against 4 limb bytes), joined in f32.
#pragma once
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast::dev {

// Where row t's pieces are in the staged x (base 16-byte aligned; gemv_dp4a_smem(K, R) bytes).
struct Dp4aX {
    const uint8_t* hi;  // [R][Kp]
    const uint8_t* lo;  // [R][Kp]
    const float2* st;   // [R][Kp / 32]
    int Kp;
};
__device__ __forceinline__ Dp4aX dp4a_x(const void* base, int K, int R) {
    const int Kp = (K + 127) / 128 * 128;
    const auto* p = static_cast<const uint8_t*>(base);
    return {p, p + R * Kp, reinterpret_cast<const float2*>(p + 2 * R * Kp), Kp};
}

// The low bytes of four words, as one word (byte i from word i).
__device__ __forceinline__ uint32_t low_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return __byte_perm(__byte_perm(a, b, 0x0040u), __byte_perm(c, d, 0x0040u), 0x5410u);
}

// Eight neighbouring columns of x quantized into the two limbs, by four neighbouring lanes that
// hold one 32-column group together (call from every lane of the warp: it shuffles). H, L: this
// lane's hi and lo limb bytes, its even columns then its odd ones; dx, sx: the group's (NaN dx
// where a value of the group is not finite), the same in all four lanes.
struct Dp4aQ8 {
    uint2 H, L;
    float dx, sx;
};
__device__ __forceinline__ Dp4aQ8 dp4a_quantize8(const float (&v)[8]) {
    constexpr float kRound = 12582912.f;  // 1.5 · 2²³: v + kRound rounds v to an integer in its low bits
    float amax = 0.f;
    int bad = 0;  // fmaxf drops NaN: test the values, not amax
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e])), bad |= !isfinite(v[e]);
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
    bad |= __shfl_xor_sync(0xffffffffu, bad, 2);
    const float inv = amax > 0.f && !bad ? 127.f / amax : 0.f;
    uint32_t hb[8], lb[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const float f = v[e] * inv;                       // |f| ≤ 127
        const float rh = f + kRound;                      // low byte: rint(f) as int8
        const float r = f - (rh - kRound);                // |r| ≤ 1/2, exact
        hb[e] = __float_as_uint(rh);
        lb[e] = __float_as_uint(fmaf(r, 254.f, kRound));  // low byte: rint(254 r), |.| ≤ 127
    }
    Dp4aQ8 q;
    q.H = make_uint2(low_bytes(hb[0], hb[2], hb[4], hb[6]), low_bytes(hb[1], hb[3], hb[5], hb[7]));
    q.L = make_uint2(low_bytes(lb[0], lb[2], lb[4], lb[6]), low_bytes(lb[1], lb[3], lb[5], lb[7]));
    int sh = __dp4a(int(q.H.y), 0x01010101, __dp4a(int(q.H.x), 0x01010101, 0));
    int sl = __dp4a(int(q.L.y), 0x01010101, __dp4a(int(q.L.x), 0x01010101, 0));
    sh += __shfl_xor_sync(0xffffffffu, sh, 1);
    sh += __shfl_xor_sync(0xffffffffu, sh, 2);
    sl += __shfl_xor_sync(0xffffffffu, sl, 1);
    sl += __shfl_xor_sync(0xffffffffu, sl, 2);
    q.dx = bad ? quiet_nan() : amax / 127.f;
    q.sx = q.dx * (float(sh) + float(sl) * (1.f / 254.f));
    return q;
}

// x[R, K] (row stride ldx; K a multiple of 32) → the staged form at `base`, by all THREADS
// threads of the block (call from every thread; a barrier must follow before reading). Thread
// item i: row i / (Kp/8), columns 8·j … 8·j + 7 (j = i % (Kp/8)); four neighbouring lanes hold a
// 32-column group.
// CL > 1: the block is rank `rank` of a thread-block cluster of CL blocks that stage the same x at
// the same offset of their shared memory; it quantizes every CL-th batch of THREADS items only and
// stores each into all CL blocks (distributed shared memory), so x is read and quantized once a
// cluster. A cluster barrier must follow (every block's part written everywhere).
// B > 1: B batches' loads are issued before any of them is quantized — one round trip to L2 for
// B batches, where one a batch makes a long row's staging a chain of dependent loads (K = 14336
// at 512 threads: 4 batches).
template <int THREADS, int CL = 1, int B = 1>
__device__ __forceinline__ void dp4a_quantize_x(const float* __restrict__ x, int64_t ldx, int R, int K, bool aligned,
                                                void* base, unsigned rank = 0) {
    const int Kp = (K + 127) / 128 * 128, per_row = Kp / 8, items = R * per_row;
    auto* xh = static_cast<uint8_t*>(base);
    uint8_t* xl = xh + R * Kp;
    auto* st = reinterpret_cast<float2*>(xl + R * Kp);
    // p's counterpart in cluster block r (mapa: one instruction); p itself without a cluster.
    auto peer = [](auto* p, int r) {
        if constexpr (CL == 1) return p;
        else return cooperative_groups::this_cluster().map_shared_rank(p, r);
    };
    // Whole warps (the shuffles need every lane); with a cluster, this block's batches only.
    for (int start = int(rank) * THREADS; start < items; start += THREADS * CL * B) {
        float v[B][8];
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int i = start + b * THREADS * CL + int(threadIdx.x);
            const int t = R == 1 || i >= items ? 0 : i / per_row, c0 = 8 * (i - t * per_row);  // one row: no division
#pragma unroll
            for (int e = 0; e < 8; ++e) v[b][e] = 0.f;
            if (i < items && c0 < K) load8(x + t * ldx + c0, aligned, v[b]);  // a 32-column group is all in or out
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
            const int i = start + b * THREADS * CL + int(threadIdx.x);
            const int t = R == 1 || i >= items ? 0 : i / per_row, j = i - t * per_row, c0 = 8 * j;
            const Dp4aQ8 q = dp4a_quantize8(v[b]);
            if (i < items) {
#pragma unroll
                for (int r = 0; r < CL; ++r) {
                    *reinterpret_cast<uint2*>(peer(xh + t * Kp + c0, r)) = q.H;
                    *reinterpret_cast<uint2*>(peer(xl + t * Kp + c0, r)) = q.L;
                }
                if ((j & 3) == 0) {
                    const float2 ds = make_float2(q.dx, q.sx);
#pragma unroll
                    for (int r = 0; r < CL; ++r) *peer(st + t * (Kp / 32) + j / 4, r) = ds;
                }
            }
        }
    }
}

// Σ code·limb over one 16-byte chunk of codes (32 columns) against the limb's 32 bytes at p, in
// the staged order (per code word the even columns' 4 bytes, then the odd ones'): exact in int32.
// The chunk-a-lane kernels' dot (Bulk, the fused MoE decode: lane (g, t) takes chunk t of rows g
// and g + 8, so a warp's 16-byte loads of a 1 KB k-tile are contiguous).
__device__ __forceinline__ int dp4a_chunk32(const uint4& q, const uint4* p) {
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
    const uint4 a = p[0], b = p[1];
    int s = 0;
    s = __dp4a(int(q.x & kLow), int(a.x), s), s = __dp4a(int((q.x >> 4) & kLow), int(a.y), s);
    s = __dp4a(int(q.y & kLow), int(a.z), s), s = __dp4a(int((q.y >> 4) & kLow), int(a.w), s);
    s = __dp4a(int(q.z & kLow), int(b.x), s), s = __dp4a(int((q.z >> 4) & kLow), int(b.y), s);
    s = __dp4a(int(q.w & kLow), int(b.z), s), s = __dp4a(int((q.w >> 4) & kLow), int(b.w), s);
    return s;
}

// A lane's share of a k-tile: its two 16-byte chunks of one row, their scales and biases (f16
// bits; zeros where a chunk is past the row or masked): chunk c's in half c — or, where both
// chunks lie in one scale group (G ≥ 64, dp4a_load_row), that group's in the low half.
struct Dp4aTile {
    uint4 q[2];
    uint32_t s, b;
};

// Scales (biases) of chunks ch, ch + 1 at p (their group's, lg > 0: one group of G ≥ 64 holds
// both; lg = 0, G = 32: p[0] and p[1]) as Dp4aTile holds them — one load, nothing done with the
// loaded value here, so its latency waits at the dot behind every other load in flight. The pair
// takes two 2-byte loads only where the row's end cuts it or it is not 4-byte aligned (row-major
// rows of an odd number of groups).
__device__ __forceinline__ uint32_t dp4a_scale_pair(const uint16_t* p, int lg, bool in0, bool in1) {
    if (lg > 0) return in0 ? uint32_t(__ldg(p)) : 0u;
    if (in1 && (reinterpret_cast<uintptr_t>(p) & 3) == 0) return __ldg(reinterpret_cast<const uint32_t*>(p));
    return (in0 ? uint32_t(__ldg(p)) : 0u) | (in1 ? uint32_t(__ldg(p + 1)) << 16 : 0u);
}

// Chunks 2h, 2h + 1 of k-tile kt of a row (codes, scales, biases at the row's chunk 0 and group
// 0; biases may be null) in either order of packed_weight.h — each chunk and group where the row's
// steps put them (a row's k-tiles are 64 bytes apart row-major, 1 KB in tiles); nch = the row's
// chunks, lg = log2 of the chunks a scale group (G is 32·2^j). With G = 32 the two chunks' groups
// are neighbours in both orders (PackedRowSteps::scale_group keeps a k-tile's groups together).
// Dot it with dp4a_tile_dot(…, lg == 0).
__device__ __forceinline__ Dp4aTile dp4a_load_row(const uint8_t* codes, const uint16_t* scales, const uint16_t* biases,
                                                  const PackedRowSteps& st, int kt, int h, int nch, int lg, bool ok) {
    Dp4aTile tl;
    const int ch = 4 * kt + 2 * h, gi = st.scale_group(ch >> lg);
    const bool in0 = ok && ch < nch, in1 = ok && ch + 1 < nch;
    tl.q[0] = in0 ? load_stream(codes + st.chunk(ch)) : make_uint4(0, 0, 0, 0);
    tl.q[1] = in1 ? load_stream(codes + st.chunk(ch + 1)) : make_uint4(0, 0, 0, 0);
    tl.s = dp4a_scale_pair(scales + gi, lg, in0, in1);
    tl.b = biases ? dp4a_scale_pair(biases + gi, lg, in0, in1) : 0u;
    return tl;
}

// Σ w·x̃ over a lane's share of k-tile kt (its half h) against staged row t: f32. bias: the
// matrix has biases (else b = −8·s); halves: tl holds a scale (bias) a chunk, else one for both.
__device__ __forceinline__ float dp4a_tile_dot(const Dp4aTile& tl, const Dp4aX& X, int t, int kt, int h, bool bias,
                                               bool halves = true) {
    const int col = kt * 128 + 64 * h;
    const uint4* ph = reinterpret_cast<const uint4*>(X.hi + t * X.Kp + col);
    const uint4* pl = reinterpret_cast<const uint4*>(X.lo + t * X.Kp + col);
    const float4 s2 = *reinterpret_cast<const float4*>(X.st + t * (X.Kp / 32) + col / 32);  // two (dx, sx)
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
    float out = 0.f;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
        const uint32_t wd[4] = {tl.q[c].x, tl.q[c].y, tl.q[c].z, tl.q[c].w};
        int sh = 0, sl = 0;
#pragma unroll
        for (int q = 0; q < 2; ++q) {  // 16 bytes of each limb: two code words
            const uint4 a = ph[2 * c + q], b = pl[2 * c + q];
            const uint32_t l0 = wd[2 * q] & kLow, h0 = (wd[2 * q] >> 4) & kLow;
            const uint32_t l1 = wd[2 * q + 1] & kLow, h1 = (wd[2 * q + 1] >> 4) & kLow;
            sh = __dp4a(int(l0), int(a.x), sh), sh = __dp4a(int(h0), int(a.y), sh);
            sh = __dp4a(int(l1), int(a.z), sh), sh = __dp4a(int(h1), int(a.w), sh);
            sl = __dp4a(int(l0), int(b.x), sl), sl = __dp4a(int(h0), int(b.y), sl);
            sl = __dp4a(int(l1), int(b.z), sl), sl = __dp4a(int(h1), int(b.w), sl);
        }
        const int sh16 = halves ? 16 * c : 0;
        const float sc = half_bits(uint16_t(tl.s >> sh16));
        const float bi = bias ? half_bits(uint16_t(tl.b >> sh16)) : -8.f * sc;
        const float dx = c == 0 ? s2.x : s2.z, sx = c == 0 ? s2.y : s2.w;
        out = fmaf(sc * dx, fmaf(float(sl), 1.f / 254.f, float(sh)), fmaf(bi, sx, out));
    }
    return out;
}

}  // namespace tessera::cuda::fast::dev
