// The decode GEMV's variant WgmmaTma (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w in
// 16-row tiles and 1 ≤ T ≤ 8 on the warpgroup MMA — the prefill GEMM's warp-specialised tiles
// (fast_gemm_wgmma_tma.cu) at wgmma's narrowest N, 8 tokens: weights as A dequantized into
// registers, x as B, m64n8k16 bf16 → f32.
//
// Why. The decode GEMV streams the weights once; its work a weight is the dequantization. Bulk /
// BulkMma (fast_gemv_bulk*.cu) stream them by 1 KB bulk copies — their ring alone takes 11.9 µs at
// 8 tokens of 4096 × 14336 in clusters of 8 (twenty-eighth round). Here a stage is two TMA boxes
// (the block's 4·MT row tiles' codes, 4·MT KB, and their scales; biases a third), the consumers
// wait on mbarriers only, and the MMA is asynchronous: the warps' issue is the dequantization.
//
// Work. A block: 64·MT weight rows × its slice of K, the two consumer warpgroups on the same rows,
// each on every other stage of the slice (their sums added in order at the end), so that 4096 ×
// 14336 spreads over 64 blocks × slices of 2 (128 blocks, clusters of 2). The KS blocks of a
// cluster split the k-tiles. A stage holds plan.runs k-tiles: one (2-D boxes of the block's row
// tiles, a k-tile) or 2 / 4 (3-D boxes of that many k-tiles × the block's row tiles — fewer,
// larger copies: session 36's figures are consistent with a cost of ~0.1–0.2 µs a copy an SM
// almost whatever its size, which a ring of small boxes cannot stream past). The producer lane
// fills the ring at once (the rest of the shared memory: gemv_wgmma_stages, 21 stages of 5 KB at
// 4096 × 14336, 5 of 20 KB in runs of 4) while the consumers convert their block's slice of x
// (f32 → bf16 in the wgmma order, the 128-byte swizzle, rows past T zero) into shared memory. At
// the end the cluster's blocks leave their accumulators in shared memory and block rank 0 adds the
// others' in rank order (distributed shared memory): deterministic, no scratch, no atomics, one
// launch.
//
// Measured (H200, bench_fast_gemv, session 36; docs/cuda-rounds.md, thirty-third round): correct, and
// slow — 28.7 µs at 8 tokens of 4096 × 14336 back to back (BulkMma 19.4), 29–34 in the first form
// (128-row blocks, slices of 4 in clusters, the producer lane converting x with the consumers),
// 9.5–9.9 at 8192 × 2048 (Dp4a 7.0 at one token, BulkMma 8.2 at eight). Its ring alone (the
// consumers only waiting and releasing) takes ~21 µs of it, where Bulk's copies alone take 8.6:
// the weights arrive at ~1.6 TB/s, by the maps' boxes or by 1 KB bulk copies a row tile (slower
// still), whichever the block shape, the ring's depth or who converts x. Why is open (the MoE's TMA
// tiles and the dense TMA GEMM at 64–128 tokens stream at the same rate); the runs of 2 and 4
// k-tiles and the diagnosis forms written for it (fast_gemv_plan.h: Bulk's order, x left out,
// one waiter a warpgroup, the L2 hint, the maps prefetched) are the next measurement (written
// after the session's device time ran out).
//
// Opt-in only (TESSERA_GEMV=wgmma_tma), tested by FastGemv.* on the GPU machine.
#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;   // columns a k-tile
constexpr int kBN = 8;         // tokens: wgmma's N
constexpr int kXTileBytes = 2 * kBN * 128;  // a k-tile of x: two k-blocks of 8 rows × 128 bytes

template <int MT_, int KS_>
struct GemvWgmmaTile {
    static constexpr int MT = MT_;          // m64 tiles: both consumer warpgroups on the same rows
    static constexpr int KS = KS_;          // blocks a cluster, each its slice of K
    static constexpr int BM = 64 * MT;      // weight rows a block
    static constexpr int kThreads = 384;
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kTiles = BM / 16;
    static constexpr int kSOff = kTiles * 1024, kBOff = kSOff + kTiles * 128;
    static constexpr int kStageBytes = (kBOff + kTiles * 128 + 1023) / 1024 * 1024;
    static constexpr int kRedFloats = 128 * MT * 4;  // a warpgroup's accumulators
    static_assert(KS == 1 || KS == 2 || KS == 4 || KS == 8, "a portable cluster");
    static_assert(kStageBytes == gemv_wgmma_stage_bytes(MT), "fast_gemv_plan.h's sizes");
    static_assert(2 * kRedFloats * 4 == gemv_wgmma_red_bytes(MT), "fast_gemv_plan.h's sizes");
};

struct GemvWgmmaMaps {
    CUtensorMap codes, scales, biases;     // 2-D: a k-tile of the block's row tiles a box
    CUtensorMap codes3, scales3, biases3;  // 3-D (runs > 1): plan.runs k-tiles of them a box
};

// The weights as raw pointers, for the diagnosis form that copies them a row tile at a time
// (kGemvWgmmaBulkCopies) instead of by the maps' boxes.
struct GemvWgmmaRaw {
    const uint8_t* codes;
    const uint8_t* scales;
    const uint8_t* biases;
    int64_t row_tiles;  // n / 16
};

// Shared memory: x's slice (per k-tiles × 2 KB, 1024-aligned), the ring of S stages, the
// accumulators (warpgroup 1's for warpgroup 0, then the block's for the cluster's sum).
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemv_wgmma_kernel(const __grid_constant__ GemvWgmmaMaps maps, float* __restrict__ y, int64_t ldy,
                      const float* __restrict__ x, int64_t ldx, int T, int64_t N, int64_t K, int KT, int per, int S,
                      int R, int gpt, bool biases, bool vec2, GemvWgmmaRaw raw, int diag) {
    constexpr int MT = C::MT, KS = C::KS;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    // A stage: R k-tiles of the block's row tiles — codes [kTiles][R][1 KB], then scales and
    // biases [kTiles][R · 32·gpt bytes] in 128·R bytes a tile (R = 1: the boxes' layout).
    const int SB = gemv_wgmma_stage_bytes(MT, R), SOff = C::kTiles * R * 1024, BOff = SOff + C::kTiles * R * 128;
    uint8_t* xs = smem;                                  // [per][2 k-blocks][8 rows][128 bytes]
    uint8_t* ring = xs + per * kXTileBytes;              // S stages
    float* red = reinterpret_cast<float*>(ring + S * SB);  // [2][kRedFloats]
    __shared__ uint64_t full[kGemvWgmmaMaxStages], empty[kGemvWgmmaMaxStages];
    const uint32_t rank = KS > 1 ? cluster_rank() : 0;
    const int64_t n0 = int64_t(blockIdx.x / KS) * C::BM;
    const int kt0 = int(rank) * per, nkt = max(0, min(per, KT - kt0));
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1);  // the producer's arrive.expect_tx
            mbar_init(&empty[s], 4); // the consuming warpgroup's warps, once its wgmma read the slot
        }
    }
    __syncthreads();

    const uint32_t scale_bytes = uint32_t(C::kTiles * 32 * gpt);
    const uint32_t bytes = uint32_t(C::kTiles * 1024) + scale_bytes * (biases ? 2u : 1u);
    const int row_tile = int(n0 >> 4);
    const int NS = (nkt + R - 1) / R;  // stages of the slice
    auto issue = [&](int i) {  // stage i of the slice (k-tiles R·i …) into slot i % S
        const int slot = i % S, kt = kt0 + R * i;
        const uint32_t to = smem_addr(ring) + uint32_t(slot * SB);
        if (R > 1 && !(diag & kGemvWgmmaBulkCopies)) {  // one 3-D box each: R k-tiles × the block's row tiles
            const uint32_t sb = uint32_t(C::kTiles * R * 32 * gpt);  // (past K or N: zeros, counted)
            mbar_arrive_expect_tx(&full[slot], uint32_t(C::kTiles * R * 1024) + sb * (biases ? 2u : 1u));
            const uint64_t policy = l2_evict_first();
            if (diag & kGemvWgmmaEvictFirst) {
                tma_load_3d(to, &maps.codes3, 0, kt, row_tile, &full[slot], policy);
                tma_load_3d(to + SOff, &maps.scales3, 0, kt, row_tile, &full[slot], policy);
                if (biases) tma_load_3d(to + BOff, &maps.biases3, 0, kt, row_tile, &full[slot], policy);
            } else {
                tma_load_3d(to, &maps.codes3, 0, kt, row_tile, &full[slot]);
                tma_load_3d(to + SOff, &maps.scales3, 0, kt, row_tile, &full[slot]);
                if (biases) tma_load_3d(to + BOff, &maps.biases3, 0, kt, row_tile, &full[slot]);
            }
            return;
        }
        if (diag & kGemvWgmmaRowTileRuns) {  // the block's bytes walked a row tile at a time
            const int p = 4 * i, k = kt0 + p % nkt;  // 1 KB pieces 4i … 4i + 3 (nkt % 4 == 0)
            const int64_t rt = row_tile + p / nkt;
            mbar_arrive_expect_tx(&full[slot], uint32_t(4 * 1024 + 4 * 32 * gpt));
            bulk_load(to, raw.codes + (rt * K + int64_t(k) * kBK) * 8, 4096, &full[slot]);
            bulk_load(to + C::kSOff, raw.scales + rt * 32 * (K / kBK) * gpt + int64_t(k) * 32 * gpt,
                      uint32_t(4 * 32 * gpt), &full[slot]);
            return;
        }
        if (diag & kGemvWgmmaBulkCopies) {  // a bulk copy of r k-tiles a row tile and of their scales
            // (rows past N not read; R = 1: 1 KB and 32·gpt bytes)
            const int nt = int(min(int64_t(C::kTiles), raw.row_tiles - row_tile)), r = min(R, nkt - R * i);
            const uint32_t sb = uint32_t(32 * gpt * r);
            const uint64_t policy = l2_evict_first();
            const bool hint = diag & kGemvWgmmaEvictFirst;
            mbar_arrive_expect_tx(&full[slot], uint32_t(nt) * (1024u * r + sb * (biases ? 2u : 1u)));
            for (int t = 0; t < nt; ++t) {
                const int64_t rt = row_tile + t, so = rt * 32 * int64_t(KT) * gpt + int64_t(kt) * 32 * gpt;
                auto copy = [&](uint32_t dst, const uint8_t* src, uint32_t n) {
                    if (hint) bulk_load(dst, src, n, &full[slot], policy);
                    else bulk_load(dst, src, n, &full[slot]);
                };
                copy(to + uint32_t(1024 * R * t), raw.codes + (rt * K + int64_t(kt) * kBK) * 8, 1024u * r);
                copy(to + uint32_t(SOff + 32 * gpt * R * t), raw.scales + so, sb);
                if (biases) copy(to + uint32_t(BOff + 32 * gpt * R * t), raw.biases + so, sb);
            }
            return;
        }
        mbar_arrive_expect_tx(&full[slot], bytes);
        if (diag & kGemvWgmmaEvictFirst) {
            const uint64_t policy = l2_evict_first();
            tma_load_2d(to, &maps.codes, kt * kBK, row_tile, &full[slot], policy);
            tma_load_2d(to + C::kSOff, &maps.scales, kt * 16 * gpt, row_tile, &full[slot], policy);
            if (biases) tma_load_2d(to + C::kBOff, &maps.biases, kt * 16 * gpt, row_tile, &full[slot], policy);
            return;
        }
        tma_load_2d(to, &maps.codes, kt * kBK, row_tile, &full[slot]);
        tma_load_2d(to + C::kSOff, &maps.scales, kt * 16 * gpt, row_tile, &full[slot]);
        if (biases) tma_load_2d(to + C::kBOff, &maps.biases, kt * 16 * gpt, row_tile, &full[slot]);
    };
    // ---- the producer warpgroup: one lane fills the ring, at once and then as slots free ----
    if (wg == 2) {
        setmaxnreg_dec<C::kProducerRegs>();
        if (warp != 8 || lane != 0) return;
        if (diag & kGemvWgmmaPrefetchMaps) {
            tma_prefetch_map(R > 1 ? &maps.codes3 : &maps.codes);
            tma_prefetch_map(R > 1 ? &maps.scales3 : &maps.scales);
        }
        for (int i = 0; i < min(S, NS); ++i) issue(i);  // the first round: every slot is free
        for (int i = S; i < NS; ++i) {
            mbar_wait(&empty[i % S], (uint32_t(i / S) & 1) ^ 1);  // stage i − S's wgmma are done
            issue(i);
        }
        return;
    }

    // ---- consumers: first x's slice → bf16 in the wgmma order, swizzled (the ring filling
    // meanwhile): unit u = (k-tile i, row r, k-step σ), two 16-byte chunks (2·(σ mod 4), + 1) of
    // row r in k-block σ / 4, chunk c at c ^ (r mod 8); kXBatch units a thread with their loads
    // in flight together (the slice's conversion was a third of the kernel's time one unit at a
    // time with the producer's lane waiting on it: session 36's profile) ----
    setmaxnreg_inc<C::kConsumerRegs>();
    constexpr int kXBatch = 4;
    for (int u0 = tid; u0 < ((diag & kGemvWgmmaSkipX) ? 0 : nkt * 64); u0 += 256 * kXBatch) {
        uint4 lo[kXBatch], hi[kXBatch];
#pragma unroll
        for (int b = 0; b < kXBatch; ++b) {
            const int u = u0 + 256 * b, i = u >> 6, r = (u >> 3) & 7, sigma = u & 7;
            lo[b] = make_uint4(0, 0, 0, 0), hi[b] = lo[b];
            if (u < nkt * 64 && r < T)
                wgmma_kstep_words(x + int64_t(r) * ldx, int64_t(kt0 + i) * kBK, K, sigma, vec2, lo[b], hi[b]);
        }
#pragma unroll
        for (int b = 0; b < kXBatch; ++b) {
            const int u = u0 + 256 * b, i = u >> 6, r = (u >> 3) & 7, sigma = u & 7;
            if (u >= nkt * 64) break;
            uint8_t* row = xs + i * kXTileBytes + (sigma >> 2) * (kBN * 128) + r * 128;
            const int c = 2 * (sigma & 3);
            *reinterpret_cast<uint4*>(row + ((c ^ r) << 4)) = lo[b];
            *reinterpret_cast<uint4*>(row + (((c + 1) ^ r) << 4)) = hi[b];
        }
    }
    fence_proxy_async_smem();  // x's stores visible to the tensor cores' reads
    named_barrier_sync(2, 256);

    // ---- then the stages: warpgroup wg on wg, wg + 2, …; warp w4 of it, lane (gq, tq); m-tile
    // j's A rows row(j), row(j) + 8 ----
    const int w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    auto row = [&](int j) { return 64 * j + w4 * 16 + gq; };
    auto code_row = [&](int r) { return staged_code_row(r, R); };  // (a stage of R k-tiles)
    auto scale_at = [&](int r, int q) { return staged_scale_at(r, tq, gpt, R, q); };
    float acc[MT][kBN / 2];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
#pragma unroll
        for (int e = 0; e < kBN / 2; ++e) acc[j][e] = 0.f;
        wgmma_fence_operands(acc[j]);
    }
    if (diag & kGemvWgmmaSkipMath) {  // the stream alone: each slot released once it landed
        const bool one = diag & kGemvWgmmaOneWaiter;  // (one warp a warpgroup waits, arriving for 4)
        if (!one || w4 == 0)
            for (int i = wg; i < NS; i += 2) {
                mbar_wait(&full[i % S], uint32_t(i / S) & 1);
                if (lane == 0 && i + S < NS)
                    for (int a = 0; a < (one ? 4 : 1); ++a) mbar_arrive(&empty[i % S]);
            }
    } else {
        for (int i = wg; i < NS; i += 2) {
            const int slot = i % S, r = min(R, nkt - R * i);
            mbar_wait(&full[slot], uint32_t(i / S) & 1);
            const uint8_t* stage = ring + slot * SB;
#pragma unroll 1
            for (int q = 0; q < r; ++q) {  // k-tile R·i + q of the slice
                const uint64_t desc = wgmma_desc_sw128(smem_addr(xs + (R * i + q) * kXTileBytes));
#pragma unroll
                for (int j = 0; j < MT; ++j)
                    wgmma_int4_ktile_staged<kBN>(acc[j], stage + 1024 * q, code_row(row(j)), code_row(row(j) + 8), tq,
                                                 stage + SOff, stage + BOff, scale_at(row(j), q),
                                                 scale_at(row(j) + 8, q), biases, biases, desc, kBN * 128);
            }
            // (each k-tile ends waiting for all but its own last group: stage i − 2's are read)
            if (i >= 2 && lane == 0 && i - 2 + S < NS) mbar_arrive(&empty[(i - 2) % S]);
        }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < MT; ++j) wgmma_fence_operands(acc[j]);

    // acc[j][e]: row row(j) (e < 2) or row(j) + 8, token 2tq + (e & 1), over this warpgroup's
    // k-tiles. Warpgroup 1's into shared memory, added by warpgroup 0 (its sums first: the order
    // is fixed); a cluster: then every block's into its shared memory and rank 0 adds ranks 1 …
    // KS − 1's in order.
    const int ct = tid & 127;
    if (wg == 1) {
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) red[(j * 4 + e) * 128 + ct] = acc[j][e];
    }
    named_barrier_sync(1, 256);
    if (wg == 1) return;
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] += red[(j * 4 + e) * 128 + ct];
    if constexpr (KS > 1) {
        float* mine = red + C::kRedFloats;
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) mine[(j * 4 + e) * 128 + ct] = acc[j][e];
        cluster_barrier();  // (the producer warpgroup and warpgroup 1 have exited: it waits for the rest)
        if (rank == 0) {
            for (int r = 1; r < KS; ++r)
#pragma unroll
                for (int j = 0; j < MT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[j][e] += ld_shared_cluster_f32(&mine[(j * 4 + e) * 128 + ct], r);
        }
        cluster_barrier();  // the others' accumulators read before they leave
        if (rank != 0) return;
    }
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t r = n0 + row(j) + 8 * (e >> 1);
            const int tok = 2 * tq + (e & 1);
            if (r < N && tok < T) y[tok * ldy + r] = acc[j][e];
        }
}

// The kernel's shared memory opt-in, once a configuration (its largest launch: any K that fits).
template <class C>
cudaError_t prepare() {
    static const cudaError_t err = cudaFuncSetAttribute(
        gemv_wgmma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvWgmmaMaxSmem));
    return err;
}

template <class C>
cudaError_t launch(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                   const PackedMatrix& w, int diag, cudaStream_t stream) {
    const int KT = int(w.k / kBK), per = (KT + C::KS - 1) / C::KS, R = plan.runs;
    const int S = gemv_wgmma_stages(w.k, C::MT, C::KS, R);
    const size_t smem =
        size_t(1024 + per * kXTileBytes + S * gemv_wgmma_stage_bytes(C::MT, R) + 2 * C::kRedFloats * 4);
    if ((R > 1 && (diag & kGemvWgmmaRowTileRuns)) ||
        S < kGemvWgmmaMinStages || smem != size_t(gemv_wgmma_smem(w.k, C::MT, C::KS, R)) ||
        smem > size_t(kGemvWgmmaMaxSmem) ||
        (diag & ~(kGemvWgmmaSkipMath | kGemvWgmmaBulkCopies | kGemvWgmmaRowTileRuns | kGemvWgmmaEvictFirst |
                  kGemvWgmmaSkipX | kGemvWgmmaOneWaiter | kGemvWgmmaPrefetchMaps)) != 0)
        return cudaErrorInvalidValue;  // (fast_gemv_plan.h's accounting and this layout agree)
    if ((diag & (kGemvWgmmaSkipX | kGemvWgmmaOneWaiter)) && !(diag & kGemvWgmmaSkipMath))
        return cudaErrorInvalidValue;  // (y would be wrong)
    if ((diag & kGemvWgmmaRowTileRuns) &&
        (!(diag & kGemvWgmmaSkipMath) || C::MT != 1 || per % 4 != 0 || KT % per != 0 || w.n % C::BM != 0))
        return cudaErrorInvalidValue;
    if (const cudaError_t e = prepare<C>(); e != cudaSuccess) return e;
    GemvWgmmaMaps maps;
    if (!packed_tiles_tma_maps(w, uint64_t(w.n / 16), C::kTiles, &maps.codes, &maps.scales, &maps.biases) ||
        (R > 1 && !packed_tiles_tma_maps_3d(w, uint64_t(w.n / 16), C::kTiles, R, &maps.codes3, &maps.scales3,
                                            &maps.biases3)))
        return cudaErrorInvalidValue;
    const int64_t row_blocks = (w.n + C::BM - 1) / C::BM;
    const dim3 grid(unsigned(row_blocks * C::KS));
    const bool vec2 = reinterpret_cast<uintptr_t>(x) % 8 == 0 && ldx % 2 == 0;
    const int gpt = int(kBK / w.group);
    const bool biases = w.biases != nullptr;
    const GemvWgmmaRaw raw{w.codes, reinterpret_cast<const uint8_t*>(w.scales),
                           reinterpret_cast<const uint8_t*>(w.biases), w.n / 16};
    if constexpr (C::KS == 1) {
        gemv_wgmma_kernel<C><<<grid, C::kThreads, smem, stream>>>(maps, y, ldy, x, ldx, int(T), w.n, w.k, KT, per,
                                                                   S, R, gpt, biases, vec2, raw, diag);
        return cudaGetLastError();
    } else {
        return pdl::launch_cluster_serial(gemv_wgmma_kernel<C>, grid, dim3(C::kThreads), smem, stream,
                                          dim3(C::KS, 1, 1), maps, y, ldy, x, ldx, int(T), w.n, w.k, KT, per, S, R,
                                          gpt, biases, vec2, raw, diag);
    }
}

template <int MT>
cudaError_t launch_mt(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, int diag, cudaStream_t stream) {
    switch (plan.cluster) {
        case 1: return launch<GemvWgmmaTile<MT, 1>>(plan, y, ldy, x, ldx, T, w, diag, stream);
        case 2: return launch<GemvWgmmaTile<MT, 2>>(plan, y, ldy, x, ldx, T, w, diag, stream);
        case 4: return launch<GemvWgmmaTile<MT, 4>>(plan, y, ldy, x, ldx, T, w, diag, stream);
        case 8: return launch<GemvWgmmaTile<MT, 8>>(plan, y, ldy, x, ldx, T, w, diag, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

cudaError_t launch_gemv_wgmma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                              const PackedMatrix& w, cudaStream_t stream) {
    return launch_gemv_wgmma_diag(plan, 0, y, ldy, x, ldx, T, w, stream);
}

cudaError_t launch_gemv_wgmma_diag(const GemvPlan& plan, int diag, float* y, int64_t ldy, const float* x,
                                   int64_t ldx, int64_t T, const PackedMatrix& w, cudaStream_t stream) {
    if (!gemv_wgmma_fits(w, T, plan.mtiles, plan.cluster, plan.runs)) return cudaErrorInvalidValue;
    return plan.mtiles == 2 ? launch_mt<2>(plan, y, ldy, x, ldx, T, w, diag, stream)
                            : launch_mt<1>(plan, y, ldy, x, ldx, T, w, diag, stream);
}

}  // namespace tessera::cuda::fast::detail
