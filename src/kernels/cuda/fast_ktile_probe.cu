// The MoE tiles' consumer loop alone (fast_ktile_probe.h). A block is the tiles' two consumer
// warpgroups, each on gate+up's 64 weight rows as MoeTmaTile<BN, true, ...> maps them (warp w4 of
// warpgroup wg, lane (gq, tq): gate row 32·wg + 8·w4 + gq and up's row 64 further); its shared
// memory is the tiles' ring of stages, each a copy of one host-made stage. k-tile kt reads stage
// kt mod S, as the tiles' ring does, with no barrier: nothing is ever written after the start.
#include "kernels/cuda/fast_ktile_probe.h"

#include <cstdint>
#include <random>

#include "core/half.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"

namespace tessera::cuda::fast {

namespace {

using namespace dev;

constexpr int kThreads = 256;  // two warpgroups
constexpr int kGpt = 4;        // Q4_0: groups of 32, four a k-tile a row

// The tiles' stage (MoeTmaTile's offsets for gate+up, one m-tile): A's two k-blocks of BN rows,
// 8 code tiles of 1 KB (gate's 4, up's 4), their scales (and the biases' room, unused here).
template <int BN>
struct Stage {
    static constexpr int kWOff = 2 * BN * 128, kSOff = kWOff + 8 * 1024, kBOff = kSOff + 8 * 128;
    static constexpr int kBytes = (kBOff + 8 * 128 + 1023) / 1024 * 1024;
};

template <int MINB>
constexpr int stages() {
    return MINB == 3 ? 3 : 4;
}

// The dequantization alone keeps its A words by summing them (mod 2^32) into one register, two a
// 3-input add: an empty asm statement naming them does not (ptxas sees no use and drops the work —
// session 57's first run timed such a loop at 27 µs for 372 k-tiles an SM, the dequantization's
// 120 instructions a k-tile never issued). The sum's 16 adds a k-tile are the form's overhead.
__device__ __forceinline__ uint32_t word_sum(const uint32_t (&a)[4]) { return a[0] + a[1] + a[2] + a[3]; }

// Half k-tile `half` of A (its four k-steps' fragments) against the stage at `desc`: one group of
// four wgmma, committed, then waited on until WAIT groups are left in flight (wgmma_int4_ktile's half).
template <int BN, int WAIT>
__device__ __forceinline__ void half_group(float (&acc)[BN / 2], const uint32_t (&a)[4][4], uint64_t desc, int half) {
    wgmma_fence();
    wgmma_fence_operands(acc);
#pragma unroll
    for (int k = 0; k < 4; ++k)
        wgmma_rs<BN>(acc, a[k], wgmma_desc_add(desc, uint32_t((half * BN * 128 + 32 * k) >> 4)), 1);
    wgmma_commit();
    wgmma_fence_operands(acc);
    wgmma_wait<WAIT>();
}

constexpr uint32_t kNeg128 = 0xc300c300u, kNeg8 = 0xc100c100u, kNegZero = 0x80008000u;  // bf16x2

// The low halves of a and b as one pair (a's low first).
__device__ __forceinline__ uint32_t low_halves(uint32_t a, uint32_t b) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, 0x5410;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

// Lean's k-tile: wgmma_int4_ktile's halves and groups over Lean's A; z_lo, z_hi: −8·s of the rows.
template <int BN>
__device__ __forceinline__ void lean_ktile(float (&acc)[BN / 2], const uint8_t* codes, const uint8_t* scales, int f,
                                           int rh, int tq, int s_lo, int s_hi, uint64_t desc, uint32_t& z_lo,
                                           uint32_t& z_hi) {
    const uint4 q_lo = *reinterpret_cast<const uint4*>(codes + f * 64 + tq * 16);
    const uint4 q_hi = *reinterpret_cast<const uint4*>(codes + rh * 64 + tq * 16);
    const uint32_t sl = staged_scale(scales, s_lo), sh = staged_scale(scales, s_hi);
    const uint32_t cl = fma_bf16x2(sl, kNeg128, kNegZero), ch = fma_bf16x2(sh, kNeg128, kNegZero);
    z_lo = fma_bf16x2(sl, kNeg8, kNegZero), z_hi = fma_bf16x2(sh, kNeg8, kNegZero);
    uint32_t a[2][4][4];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
        for (int jj = 0; jj < 2; ++jj) {
            const int j = 2 * half + jj;
            wgmma_a_fragments<true>(word_of(q_lo, j), word_of(q_hi, j), sl, cl, sh, ch, 0u, a[half][2 * jj],
                                    a[half][2 * jj + 1]);
        }
        wgmma_fence();
        wgmma_fence_operands(acc);
#pragma unroll
        for (int k = 0; k < 4; ++k)
            wgmma_rs<BN>(acc, a[half][k], wgmma_desc_add(desc, uint32_t((half * BN * 128 + 32 * k) >> 4)), 1);
        wgmma_commit();
        wgmma_fence_operands(acc);
        wgmma_wait<1>();
    }
}

// The overlap forms' work on word j of rows (lo, hi): KIND 0 the dequantization (wgmma_a_fragments),
// 1 its pairs' two FMA as a LOP3 (XOR) and an IADD3, 2 as two f32 FFMA — the 8 words summed.
template <int KIND>
__device__ __forceinline__ uint32_t side_work(uint32_t lo_word, uint32_t hi_word, const uint32_t (&s2)[2],
                                              const uint32_t (&b2)[2]) {
    if constexpr (KIND == 0) {
        uint32_t a0[4], a1[4];
        wgmma_a_fragments(lo_word, hi_word, s2[0], b2[0], s2[1], b2[1], kWgmmaInt4NegC, a0, a1);
        return word_sum(a0) + word_sum(a1);
    } else {
        constexpr uint32_t kMask = 0x000f000f, kExp = 0x43004300;
        uint32_t sum = 0;
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const uint32_t q = r ? hi_word : lo_word;
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t t = and_or(q >> (4 * i), kMask, kExp);
                if constexpr (KIND == 1) {
                    sum += (t ^ s2[r]) + b2[r];
                } else {
                    const float f = fmaf(fmaf(__uint_as_float(t), __uint_as_float(s2[r]), __uint_as_float(kNeg128)),
                                         __uint_as_float(s2[r]), __uint_as_float(b2[r]));
                    sum += __float_as_uint(f);
                }
            }
        }
        return sum;
    }
}

template <int BN, int FORM, int MINB>
__global__ void __launch_bounds__(kThreads, MINB)
    ktile_probe_kernel(const uint8_t* __restrict__ stage0, int iters, float* __restrict__ out) {
    using St = Stage<BN>;
    constexpr int S = stages<MINB>();
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int tid = int(threadIdx.x);
    for (int i = tid; i < S * St::kBytes / 16; i += kThreads)
        reinterpret_cast<uint4*>(smem)[i] = reinterpret_cast<const uint4*>(stage0)[i % (St::kBytes / 16)];
    fence_proxy_async_smem();  // (wgmma reads the activation rows, its B, through the async proxy)
    __syncthreads();

    const int lane = tid & 31, warp = tid >> 5, wg = warp / 4, w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    const int f = wg * 32 + w4 * 8 + gq, rh = 64 + f;  // gate's row, up's
    const int s_lo = staged_scale_at(f, tq, kGpt), s_hi = 512 + s_lo;
    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    wgmma_fence_operands(acc);
    // This lane's codes (rows f, rh) and scale / bias pairs of the k-tile staged at st
    auto operands = [&](const uint8_t* st, uint4& q_lo, uint4& q_hi, uint32_t(&s2)[2], uint32_t(&b2)[2]) {
        wgmma_int4_staged_operands(st + St::kWOff, f, rh, tq, st + St::kSOff, st + St::kBOff, s_lo, s_hi, false, false,
                                   q_lo, q_hi, s2, b2);
    };
    // Stage 0's k-tile as A, made once (the wgmma-alone forms)
    auto a_once = [&](uint32_t(&a)[2][4][4]) {
        uint4 q_lo, q_hi;
        uint32_t s2[2], b2[2];
        operands(smem, q_lo, q_hi, s2, b2);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            wgmma_a_fragments(word_of(q_lo, j), word_of(q_hi, j), s2[0], b2[0], s2[1], b2[1], kWgmmaInt4NegC,
                              a[j / 2][2 * (j % 2)], a[j / 2][2 * (j % 2) + 1]);
    };

    if constexpr (FORM == int(KtileProbeForm::Tiles)) {
        for (int kt = 0; kt < iters; ++kt) {
            const uint8_t* st = smem + (kt % S) * St::kBytes;
            wgmma_int4_ktile_staged<BN>(acc, st + St::kWOff, f, rh, tq, st + St::kSOff, st + St::kBOff, s_lo, s_hi,
                                        false, false, wgmma_desc_sw128(smem_addr(st)), BN * 128);
        }
    } else if constexpr (FORM == int(KtileProbeForm::Dequant)) {
        uint32_t sum = 0;  // every A word made, mod 2^32: acc[0]'s bits
        for (int kt = 0; kt < iters; ++kt) {
            uint4 q_lo, q_hi;
            uint32_t s2[2], b2[2];
            operands(smem + (kt % S) * St::kBytes, q_lo, q_hi, s2, b2);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                uint32_t a0[4], a1[4];
                wgmma_a_fragments(word_of(q_lo, j), word_of(q_hi, j), s2[0], b2[0], s2[1], b2[1], kWgmmaInt4NegC, a0,
                                  a1);
                sum += word_sum(a0) + word_sum(a1);
            }
        }
        acc[0] = __uint_as_float(sum);
    } else if constexpr (FORM == int(KtileProbeForm::Mma)) {
        uint32_t a[2][4][4];  // stage 0's k-tile, made once
        a_once(a);
        for (int kt = 0; kt < iters; ++kt) {
            const uint64_t desc = wgmma_desc_sw128(smem_addr(smem + (kt % S) * St::kBytes));
#pragma unroll
            for (int half = 0; half < 2; ++half) half_group<BN, 1>(acc, a[half], desc, half);
        }
    } else if constexpr (FORM == int(KtileProbeForm::Words2) || FORM == int(KtileProbeForm::Words4)) {
        // word w into set w mod NW, NW − 1 groups left in flight
        constexpr int NW = FORM == int(KtileProbeForm::Words2) ? 2 : 4;
        uint32_t a[NW][2][4];
        for (int kt = 0; kt < iters; ++kt) {
            const uint8_t* st = smem + (kt % S) * St::kBytes;
            uint4 q_lo, q_hi;
            uint32_t s2[2], b2[2];
            operands(st, q_lo, q_hi, s2, b2);
            const uint64_t desc = wgmma_desc_sw128(smem_addr(st));
#pragma unroll
            for (int w = 0; w < 4; ++w) {  // word w: k-steps 2·(w % 2), + 1 of k-block w / 2 (wgmma_int4_ktile_words)
                uint32_t(&aw)[2][4] = a[w % NW];
                wgmma_a_fragments(word_of(q_lo, w), word_of(q_hi, w), s2[0], b2[0], s2[1], b2[1], kWgmmaInt4NegC,
                                  aw[0], aw[1]);
                const uint64_t at = wgmma_desc_add(desc, uint32_t(((w >> 1) * BN * 128 + 64 * (w & 1)) >> 4));
                wgmma_fence();
                wgmma_fence_operands(acc);
                wgmma_rs<BN>(acc, aw[0], at, 1);
                wgmma_rs<BN>(acc, aw[1], wgmma_desc_add(at, 2), 1);
                wgmma_commit();
                wgmma_fence_operands(acc);
                wgmma_wait<NW - 1>();
            }
        }
    } else if constexpr (FORM >= int(KtileProbeForm::MmaDequant)) {  // the overlap forms
        constexpr bool kMma = FORM != int(KtileProbeForm::IntOps) && FORM != int(KtileProbeForm::FloatOps);
        constexpr int kKind = FORM == int(KtileProbeForm::MmaDequant)                                   ? 0
                              : FORM == int(KtileProbeForm::IntOps) || FORM == int(KtileProbeForm::MmaIntOps) ? 1
                                                                                                             : 2;
        uint32_t a[2][4][4];  // (Mma's: stage 0's k-tile, made once)
        if constexpr (kMma) a_once(a);
        uint32_t sum = 0;
        for (int kt = 0; kt < iters; ++kt) {
            const uint8_t* st = smem + (kt % S) * St::kBytes;
            uint4 q_lo, q_hi;
            uint32_t s2[2], b2[2];
            operands(st, q_lo, q_hi, s2, b2);
            const uint64_t desc = wgmma_desc_sw128(smem_addr(st));
#pragma unroll
            for (int half = 0; half < 2; ++half) {
#pragma unroll
                for (int jj = 0; jj < 2; ++jj)
                    sum += side_work<kKind>(word_of(q_lo, 2 * half + jj), word_of(q_hi, 2 * half + jj), s2, b2);
                if constexpr (kMma) half_group<BN, 1>(acc, a[half], desc, half);
            }
        }
        wgmma_wait<0>();
        wgmma_fence_operands(acc);
        acc[0] = __uint_as_float(__float_as_uint(acc[0]) ^ sum);
    } else if constexpr (FORM == int(KtileProbeForm::Lean)) {
        for (int k4 = 0; k4 < iters; k4 += 4) {  // (iters a multiple of 4: launch_ktile_probe)
            uint32_t zl[4], zh[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const uint8_t* st = smem + ((k4 + q) % S) * St::kBytes;
                lean_ktile<BN>(acc, st + St::kWOff, st + St::kSOff, f, rh, tq, s_lo, s_hi,
                               wgmma_desc_sw128(smem_addr(st)), zl[q], zh[q]);
            }
            // The offsets: A's k (2t, 2t + 1) the 4 k-tiles' group t of rows f (k-tiles 0, 1) and
            // (2t + 8, 2t + 9) (2, 3); rh's likewise — against the last stage's first k-step.
            const uint32_t z[4] = {low_halves(zl[0], zl[1]), low_halves(zh[0], zh[1]), low_halves(zl[2], zl[3]),
                                   low_halves(zh[2], zh[3])};
            const uint8_t* st = smem + ((k4 + 3) % S) * St::kBytes;
            wgmma_fence();
            wgmma_fence_operands(acc);
            wgmma_rs<BN>(acc, z, wgmma_desc_sw128(smem_addr(st)), 1);
            wgmma_commit();
            wgmma_fence_operands(acc);
        }
    } else if constexpr (FORM == int(KtileProbeForm::LeanDequant)) {
        uint32_t sum = 0;  // every A word made and the −8·s pairs, mod 2^32
        for (int kt = 0; kt < iters; ++kt) {
            const uint8_t* st = smem + (kt % S) * St::kBytes;
            const uint4 q_lo = *reinterpret_cast<const uint4*>(st + St::kWOff + f * 64 + tq * 16);
            const uint4 q_hi = *reinterpret_cast<const uint4*>(st + St::kWOff + rh * 64 + tq * 16);
            const uint32_t sl = staged_scale(st + St::kSOff, s_lo), sh = staged_scale(st + St::kSOff, s_hi);
            const uint32_t cl = fma_bf16x2(sl, kNeg128, kNegZero), ch = fma_bf16x2(sh, kNeg128, kNegZero);
            sum += fma_bf16x2(sl, kNeg8, kNegZero) + fma_bf16x2(sh, kNeg8, kNegZero);
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                uint32_t a0[4], a1[4];
                wgmma_a_fragments<true>(word_of(q_lo, j), word_of(q_hi, j), sl, cl, sh, ch, 0u, a0, a1);
                sum += word_sum(a0) + word_sum(a1);
            }
        }
        acc[0] = __uint_as_float(sum);
    } else {  // Sets2 / 3 / 4: half k-tile h into register set h mod NS, NS − 1 groups left in flight
        static_assert(FORM >= int(KtileProbeForm::Sets2) && FORM <= int(KtileProbeForm::Sets4), "a loop form");
        constexpr int NS = FORM - int(KtileProbeForm::Sets2) + 2;
        uint32_t a[NS][4][4];
        const int halves = 2 * iters;  // (a multiple of NS: launch_ktile_probe)
        for (int h0 = 0; h0 < halves; h0 += NS) {
#pragma unroll
            for (int s = 0; s < NS; ++s) {
                const int h = h0 + s;
                const int kt = h >> 1, half = h & 1;
                const uint8_t* st = smem + (kt % S) * St::kBytes;
                // words 2·half, 2·half + 1 of rows f and rh (wgmma_int4_ktile's half), the k-tile's scales
                const uint2 ql = *reinterpret_cast<const uint2*>(st + St::kWOff + f * 64 + tq * 16 + half * 8);
                const uint2 qh = *reinterpret_cast<const uint2*>(st + St::kWOff + rh * 64 + tq * 16 + half * 8);
                const uint32_t sl = staged_scale(st + St::kSOff, s_lo), sh = staged_scale(st + St::kSOff, s_hi);
                const uint32_t bl = staged_bias(st + St::kBOff, s_lo, false, sl);
                const uint32_t bh = staged_bias(st + St::kBOff, s_hi, false, sh);
                wgmma_a_fragments(ql.x, qh.x, sl, bl, sh, bh, kWgmmaInt4NegC, a[s][0], a[s][1]);
                wgmma_a_fragments(ql.y, qh.y, sl, bl, sh, bh, kWgmmaInt4NegC, a[s][2], a[s][3]);
                half_group<BN, NS - 1>(acc, a[s], wgmma_desc_sw128(smem_addr(st)), half);
            }
        }
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    float* o = out + int64_t(blockIdx.x) * kThreads * (BN / 2) + tid;  // accumulator i at o[256·i]: coalesced
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) o[i * kThreads] = acc[i];
}

// The ring forms: MoeTmaTile's roles and registers (two consumer warpgroups at 104, a producer
// warpgroup at 32 whose warp 8 lane 0 issues), its S = 4 stages, full barriers counting the copies'
// bytes and empty ones each consumer warp's release after the k-tile's wgmma are done — the tiles'
// protocol, with one bulk copy of the activation rows and one of the codes and scales a stage for
// its boxes.
constexpr int kRingThreads = 384, kRingStages = 4;

template <int BN, bool DRAM>
__global__ void __launch_bounds__(kRingThreads, 2)
    ktile_ring_kernel(const uint8_t* __restrict__ stage0, const uint8_t* __restrict__ wbuf, int64_t wstages,
                      const uint8_t* __restrict__ abuf, int64_t astages, int iters, int tile_ktiles,
                      float* __restrict__ out) {
    using St = Stage<BN>;
    constexpr int S = kRingStages;
    constexpr uint32_t kA = St::kWOff, kW = St::kBytes - St::kWOff;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    __shared__ uint64_t full[S], empty[S];
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 8);
        }
    }
    __syncthreads();
    if (wg == 2) {  // ---- producer ----
        setmaxnreg_dec<32>();
        if (tid != 256) return;
        for (int u = 0; u < iters; ++u) {
            const int slot = u % S;
            mbar_wait(&empty[slot], (uint32_t(u / S) & 1) ^ 1);  // k-tile u − S's wgmma are done
            mbar_arrive_expect_tx(&full[slot], kA + kW);
            const uint32_t dst = smem_addr(smem) + uint32_t(slot * St::kBytes);
            const int64_t at = int64_t(blockIdx.x) * iters + u;
            bulk_load(dst, DRAM && abuf ? abuf + (at % astages) * kA : stage0, kA, &full[slot]);
            const uint8_t* w = DRAM ? wbuf + (at % wstages) * kW : stage0 + kA;
            bulk_load(dst + kA, w, kW, &full[slot]);
        }
        return;
    }
    setmaxnreg_inc<104>();
    const int w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    const int f = wg * 32 + w4 * 8 + gq, rh = 64 + f;
    const int s_lo = staged_scale_at(f, tq, kGpt), s_hi = 512 + s_lo;
    float* o = out + int64_t(blockIdx.x) * kThreads * (BN / 2) + tid;  // (as the loop forms store)
    float acc[BN / 2];
    const int per_tile = tile_ktiles > 0 ? tile_ktiles : iters;
    for (int u = 0; u < iters;) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
        wgmma_fence_operands(acc);
        for (const int first = u, end = min(u + per_tile, iters); u < end; ++u) {
            const int slot = u % S;
            mbar_wait(&full[slot], uint32_t(u / S) & 1);
            const uint8_t* st = smem + slot * St::kBytes;
            wgmma_int4_ktile_staged<BN>(acc, st + St::kWOff, f, rh, tq, st + St::kSOff, st + St::kBOff, s_lo, s_hi,
                                        false, false, wgmma_desc_sw128(smem_addr(st)), BN * 128);
            if (u > first && lane == 0) mbar_arrive(&empty[(u - 1) % S]);  // k-tile u − 1's wgmma are done
        }
        // The tile's epilogue, as the persistent tiles run it: its wgmma drained, its last slot freed
        // for the next tile's k-tiles, its sums stored (the last tile's stay in out).
        wgmma_wait<0>();
        wgmma_fence_operands(acc);
        if (u < iters && lane == 0) mbar_arrive(&empty[(u - 1) % S]);
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) o[i * kThreads] = acc[i];
    }
}

template <int BN, bool DRAM>
cudaError_t launch_ring(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream) {
    constexpr int smem = kRingStages * Stage<BN>::kBytes + 1024;
    static const cudaError_t attr =
        cudaFuncSetAttribute(ktile_ring_kernel<BN, DRAM>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
    const int blocks = a.blocks > 0 ? a.blocks : current_sm_count() * 2;
    ktile_ring_kernel<BN, DRAM><<<blocks, kRingThreads, smem, stream>>>(
        static_cast<const uint8_t*>(stage), static_cast<const uint8_t*>(a.weights), a.weight_stages,
        static_cast<const uint8_t*>(a.acts), a.act_stages, a.iters, a.tile_ktiles, out);
    return cudaGetLastError();
}

template <int BN, int FORM, int MINB>
cudaError_t launch_form(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream) {
    constexpr int smem = stages<MINB>() * Stage<BN>::kBytes + 1024;
    static const cudaError_t attr = cudaFuncSetAttribute(ktile_probe_kernel<BN, FORM, MINB>,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
    const int blocks = a.blocks > 0 ? a.blocks : current_sm_count() * MINB;
    ktile_probe_kernel<BN, FORM, MINB>
        <<<blocks, kThreads, smem, stream>>>(static_cast<const uint8_t*>(stage), a.iters, out);
    return cudaGetLastError();
}

template <int BN, int MINB>
cudaError_t launch_bn(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream) {
    switch (a.form) {
        case KtileProbeForm::Tiles: return launch_form<BN, 0, MINB>(a, stage, out, stream);
        case KtileProbeForm::Dequant: return launch_form<BN, 1, MINB>(a, stage, out, stream);
        case KtileProbeForm::Mma: return launch_form<BN, 2, MINB>(a, stage, out, stream);
        case KtileProbeForm::Sets2: return launch_form<BN, 3, MINB>(a, stage, out, stream);
        case KtileProbeForm::Sets3: return launch_form<BN, 4, MINB>(a, stage, out, stream);
        case KtileProbeForm::Sets4: return launch_form<BN, 5, MINB>(a, stage, out, stream);
        case KtileProbeForm::Words2: return launch_form<BN, 6, MINB>(a, stage, out, stream);
        case KtileProbeForm::Words4: return launch_form<BN, 7, MINB>(a, stage, out, stream);
        case KtileProbeForm::RingL2: return launch_ring<BN, false>(a, stage, out, stream);
        case KtileProbeForm::RingDram: return launch_ring<BN, true>(a, stage, out, stream);
        case KtileProbeForm::Lean: return launch_form<BN, int(KtileProbeForm::Lean), MINB>(a, stage, out, stream);
        case KtileProbeForm::LeanDequant:
            return launch_form<BN, int(KtileProbeForm::LeanDequant), MINB>(a, stage, out, stream);
        case KtileProbeForm::MmaDequant:
            return launch_form<BN, int(KtileProbeForm::MmaDequant), MINB>(a, stage, out, stream);
        case KtileProbeForm::IntOps: return launch_form<BN, int(KtileProbeForm::IntOps), MINB>(a, stage, out, stream);
        case KtileProbeForm::MmaIntOps:
            return launch_form<BN, int(KtileProbeForm::MmaIntOps), MINB>(a, stage, out, stream);
        case KtileProbeForm::FloatOps:
            return launch_form<BN, int(KtileProbeForm::FloatOps), MINB>(a, stage, out, stream);
        case KtileProbeForm::MmaFloatOps:
            return launch_form<BN, int(KtileProbeForm::MmaFloatOps), MINB>(a, stage, out, stream);
    }
    return cudaErrorInvalidValue;
}

template <int MINB>
cudaError_t launch_minb(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream) {
    switch (a.bn) {
        case 16: return launch_bn<16, MINB>(a, stage, out, stream);
        case 32: return launch_bn<32, MINB>(a, stage, out, stream);
        case 48: return launch_bn<48, MINB>(a, stage, out, stream);
        case 64: return launch_bn<64, MINB>(a, stage, out, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

const char* ktile_probe_form_name(KtileProbeForm f) {
    switch (f) {
        case KtileProbeForm::Tiles: return "tiles";
        case KtileProbeForm::Dequant: return "dequant";
        case KtileProbeForm::Mma: return "mma";
        case KtileProbeForm::Sets2: return "sets2";
        case KtileProbeForm::Sets3: return "sets3";
        case KtileProbeForm::Sets4: return "sets4";
        case KtileProbeForm::Words2: return "words2";
        case KtileProbeForm::Words4: return "words4";
        case KtileProbeForm::RingL2: return "ring-l2";
        case KtileProbeForm::RingDram: return "ring-dram";
        case KtileProbeForm::Lean: return "lean";
        case KtileProbeForm::LeanDequant: return "lean-dequant";
        case KtileProbeForm::MmaDequant: return "mma+dequant";
        case KtileProbeForm::IntOps: return "int-ops";
        case KtileProbeForm::MmaIntOps: return "mma+int-ops";
        case KtileProbeForm::FloatOps: return "float-ops";
        case KtileProbeForm::MmaFloatOps: return "mma+float-ops";
    }
    return "?";
}

int64_t ktile_probe_stage_bytes(int bn) {
    switch (bn) {
        case 16: return Stage<16>::kBytes;
        case 32: return Stage<32>::kBytes;
        case 48: return Stage<48>::kBytes;
        case 64: return Stage<64>::kBytes;
        default: return 0;
    }
}

std::vector<uint8_t> ktile_probe_make_stage(int bn, uint32_t seed) {
    const int64_t bytes = ktile_probe_stage_bytes(bn);
    std::vector<uint8_t> s(size_t(bytes), 0);
    if (bytes == 0) return s;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> x(-1.f, 1.f), sc(0.005f, 0.02f);
    const int64_t w_off = 2 * bn * 128, s_off = w_off + 8 * 1024;
    for (int64_t i = 0; i < w_off; i += 2) {
        const uint16_t b = f32_to_bf16(x(rng));
        s[size_t(i)] = uint8_t(b), s[size_t(i + 1)] = uint8_t(b >> 8);
    }
    for (int64_t i = w_off; i < s_off; ++i) s[size_t(i)] = uint8_t(rng());
    for (int64_t i = s_off; i < s_off + 8 * 128; i += 2) {
        const uint16_t h = f32_to_f16(sc(rng));
        s[size_t(i)] = uint8_t(h), s[size_t(i + 1)] = uint8_t(h >> 8);
    }
    return s;
}

int64_t ktile_probe_act_bytes(int bn) { return ktile_probe_stage_bytes(bn) ? 2 * bn * 128 : 0; }

int64_t ktile_probe_weight_bytes(int bn) { return ktile_probe_stage_bytes(bn) - ktile_probe_act_bytes(bn); }

int64_t ktile_probe_out_floats(const KtileProbeArgs& a) {
    const int64_t blocks = a.blocks > 0 ? a.blocks : int64_t(current_sm_count()) * a.blocks_per_sm;
    return blocks * kThreads * (a.bn / 2);
}

cudaError_t launch_ktile_probe(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream) {
    if (!stage || !out || a.iters < 1 || a.blocks < 0 || ktile_probe_stage_bytes(a.bn) == 0)
        return cudaErrorInvalidValue;
    if ((a.form == KtileProbeForm::Sets3 && a.iters % 3 != 0) || (a.form == KtileProbeForm::Sets4 && a.iters % 2 != 0))
        return cudaErrorInvalidValue;  // (whole rounds of the register sets: 2·iters half k-tiles)
    if (a.form == KtileProbeForm::Lean && a.iters % 4 != 0) return cudaErrorInvalidValue;  // (its offsets' rounds)
    const bool ring = a.form == KtileProbeForm::RingL2 || a.form == KtileProbeForm::RingDram;
    if ((ring && a.blocks_per_sm != 2) || a.tile_ktiles < 0) return cudaErrorInvalidValue;
    if (a.form == KtileProbeForm::RingDram && (!a.weights || a.weight_stages < 1)) return cudaErrorInvalidValue;
    if (a.acts && (a.form != KtileProbeForm::RingDram || a.act_stages < 1)) return cudaErrorInvalidValue;
    if (a.blocks_per_sm == 2) return launch_minb<2>(a, stage, out, stream);
    if (a.blocks_per_sm == 3) return launch_minb<3>(a, stage, out, stream);
    return cudaErrorInvalidValue;
}

}  // namespace tessera::cuda::fast
