// The decode GEMV's kernel variants (fast::gemv_packed, fast_matmul.h) and the one pure function
// that picks among them; the benchmark (bench/fast_gemv.cpp) and the tests run every variant.
//   Simt: fast_gemv.cu — a warp streams whole rows, x staged as f32, fp32 FMAs (exact x).
//   Mma:  fast_gemv_mma.cu — 16-row tiles on the tensor cores (mma.sync bf16 → f32, x rounded to
//         bf16, codes exact), split-K over the blocks of a thread-block cluster.
//   MmaRows: the same tile math, split-K over the 8 warps of a block (x read straight from
//         L1/L2, no cluster, any K).
//   MmaStaged: one row tile a block, split-K over 4 warps, the block's whole weight slab copied
//         into shared memory by cp.async first (all of it in flight at once, no registers held
//         for it), x staged once a block as bf16 B fragments with each chunk's Σ x while it lands
//         (a k-tile: the transpose, 8 mma and the scaling); K up to what kGemvStagedMaxSmem holds.
//   MmaChunks: fast_gemv_chunks.cu — Int4, T ≤ 2: the mma's columns are (token, scale group), so
//         no transpose and no shuffles (8 mma a k-tile); x staged once a block in shared memory as
//         the B registers. Not picked yet (TESSERA_GEMV=chunks replaces MmaRows with it): H200,
//         T = 1, tiles, cold: 24.5 against MmaRows' 27.1 us at 4096x14336, 8.5 against 10.0 at
//         2048x4096, but 13.0 / 17.3 against MmaStaged's 12.5 / 15.7 at 8192 / 12352 x 2048.
//   Dp4a: fast_gemv_dp4a.cu — Int4, T ≤ 8: x quantized by each block into two int8 limbs
//         (|x − x̃| ≤ max|x| / 64516 per 32 columns), dp4a on the nibbles as they lie; a lane keeps
//         one row's 64 columns of every k-tile, S warps split a row tile's k-tiles (plan.splits).
//   Imma: fast_gemv_imma.cu — Int4 in 16-row tiles, T ≤ 8: the same two int8 limbs of x and the
//         same exact integer sums as Dp4a, on the tensor cores (mma.sync m16n8k32 u8 × s8), so its
//         work a weight is flat in T; the weights stream through a shared-memory ring (cp.async)
//         and K is split over the blocks of a cluster (plan.cluster), each quantizing only its
//         slice of x; S warps a row tile (plan.splits). With plan.regs the weights come through
//         registers as Dp4a loads them (no ring; lane (g, t) holds chunk t of rows g, g + 8).
//         Picked (gemv_pick_packed) at one token for K ≥ kGemvImmaMinK with the registers;
//         TESSERA_GEMV=imma / imma_regs take it wherever it fits, for A/B.
//   Bulk: fast_gemv_bulk.cu — Int4 in 16-row tiles, T ≤ 8: the weights stream into a ring of
//         shared-memory stages by the bulk-copy engine (one producer lane, mbarriers), so the bytes
//         in flight do not depend on registers or warps; consumer warps take a k-tile each a stage
//         on Imma's (chunk, limb) columns (Dp4a's two int8 limbs of x, the same exact sums). One
//         block an SM, row tiles in turn.
//   WgmmaTma: fast_gemv_wgmma.cu — Int4 in 16-row tiles, T ≤ 8: the prefill GEMM's
//         warp-specialised tiles at 8 tokens (wgmma m64n8k16, weights dequantized into A, a TMA
//         ring of whole row-tile boxes), x converted to bf16 by each block for its slice of K, K
//         split over the blocks of a cluster (plan.cluster) summed in rank order and over the
//         block's two consumer warpgroups (every other stage); plan.mtiles m64 tiles a block;
//         plan.runs k-tiles a stage (2-D boxes of one, 3-D boxes of 2 or 4). Never picked
//         (TESSERA_GEMV=wgmma_tma).
//   BulkMma: fast_gemv_bulk_mma.cu — Bulk's stream with its arithmetic on the tensor cores
//         (mma.sync f16 → f32, the chunk's scale folded into the dequantized f16 weights, x as f16
//         scaled by a power of two a token), so its work a weight is flat in T; K split over the
//         blocks of a cluster (plan.cluster), each staging only its slice of x.
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

enum class GemvVariant : uint8_t { Simt, Mma, MmaRows, MmaStaged, MmaChunks, Dp4a, Imma, Bulk, BulkMma, WgmmaTma };

struct GemvPlan {
    GemvVariant variant = GemvVariant::Simt;
    int mtiles = 1;  // Mma, MmaRows: 16-row tiles per warp (1 or 2)
    int splits = 1;  // Mma: K split over the blocks of one cluster (1..kGemvMaxSplits); Dp4a,
                     // Imma: warps on one row tile (1, 2, 4 or 8)
    int cluster = 1;  // Dp4a: blocks a thread-block cluster that quantize x together (1 or
                      // kGemvDp4aCluster); Imma: blocks a cluster, each on its own slice of K
                      // (1, 2, 4 or 8); BulkMma: blocks a cluster, each on its own slice of K
                      // (1, 2, 4 or 8); 1 for the other variants
    int regs = 0;     // Imma: 1 = the weights through registers (two batches of two k-tiles a
                      // warp, as Dp4a; the (chunk, limb) columns for every token count), 0 =
                      // through the shared-memory ring
    int xwarp = 0;    // Bulk: 1 = each consumer warp stages x's columns of its own k-tiles
                      // (fast_gemv_bulk.cu's XJIT; at 1–2 tokens, more stage x whole), 0 = the
                      // consumers stage the whole of x first
    int reducer = 0;  // BulkMma: 1 = a warp of its own sums each row tile's fragments, the
                      // consumers going on at once; 0 = 16·T consumer threads sum them after a
                      // barrier of the consumer warps (fast_gemv_bulk_mma.cu)
    int runs = 1;     // WgmmaTma: k-tiles a stage — 1: 2-D boxes of the block's row tiles, a
                      // k-tile; 2 or 4: 3-D boxes of that many k-tiles × the block's row tiles
                      // (fewer, larger copies), each consumer warpgroup a stage at a time
                      // (fast_gemv_wgmma.cu)
};

// Mma's geometry (fast_gemv_mma.cu): kGemvMmaWarps warps a block, each its own 16·mtiles rows;
// a k-tile is 4 chunks of 16 code bytes a row (Int4 128 columns, Int8 64); a block stages the
// bf16 x fragments of its k-tiles in shared memory (Int4 2 KiB, Int8 1 KiB a k-tile). MmaRows:
// kGemvMmaRowWarps warps a block on the same 16·mtiles rows (4 warps on K = 2048, each with all
// its 4 k-tiles in flight, measured slower at every shape but 8192x2048 on the H200: 9.1 against
// 8.2 us at 4096x2048, 7.6 against 5.1 at 2048x512).
constexpr int kGemvMmaWarps = 4;
constexpr int kGemvMmaRowWarps = 8;
constexpr int kGemvMaxSplits = 8;  // portable cluster size
constexpr int64_t kGemvXSmemBytes = 40 * 1024;
constexpr int64_t gemv_tile_cols(PackedKind kind) { return kind == PackedKind::Int4 ? 128 : 64; }
constexpr int64_t gemv_tile_smem(PackedKind kind) { return kind == PackedKind::Int4 ? 2048 : 1024; }
constexpr int64_t gemv_k_tiles(int64_t K, PackedKind kind) {
    return (K + gemv_tile_cols(kind) - 1) / gemv_tile_cols(kind);
}
// MmaStaged: warps a block, and the slab of 16 rows in shared memory — codes, f16 scales and
// biases (Int4 K = 2048: 18 KiB; K = 4096: 36 KiB); with the kernel's 2 KiB of static shared
// memory at most the 48 KiB a launch takes without an opt-in (Int4 group 32: K ≤ 5216; Int8
// group 32: K ≤ 2768).
constexpr int kGemvStagedWarps = 4;
constexpr int64_t kGemvStagedMaxSmem = 46 * 1024;
constexpr int64_t gemv_staged_smem(int64_t K, PackedKind kind, bool biases, int64_t group) {
    return 16 * (kind == PackedKind::Int4 ? K / 2 : K) + 32 * (K / group) * (biases ? 2 : 1);
}
constexpr bool gemv_staged_fits(int64_t K, PackedKind kind, bool biases, int64_t group) {
    return gemv_staged_smem(K, kind, biases, group) <= kGemvStagedMaxSmem;
}

// MmaChunks: warps a block (on one 16-row tile), tokens, and its shared memory — per k-tile and
// token 16 uint4 of x fragments and 4 f32 sums, plus one zero uint4 (K = 14336, T = 2: 60 KiB).
constexpr int kGemvChunksWarps = 8;
constexpr int64_t kGemvChunksMaxTokens = 2;
constexpr int64_t kGemvChunksMaxSmem = 100 * 1024;
constexpr int64_t gemv_chunks_smem(int64_t K, int64_t T) {
    return ((K / 32 + 3) / 4) * T * (16 * 16 + 4 * 4) + 16;
}
constexpr bool gemv_chunks_fits(int64_t K, int64_t T, PackedKind kind) {
    return kind == PackedKind::Int4 && T >= 1 && T <= kGemvChunksMaxTokens && gemv_chunks_smem(K, T) <= kGemvChunksMaxSmem;
}

// Dp4a: warps a block, and its shared memory — per token both limbs of x and (dx, sx) per 32
// columns, K rounded up to whole k-tiles (K = 14336, T = 1: 31.5 KiB; T = 3: 94.5 KiB).
constexpr int kGemvDp4aWarps = 8;
constexpr int kGemvDp4aCluster = 8;  // plan.cluster's other value (a portable cluster size)
constexpr int64_t kGemvDp4aMaxSmem = 100 * 1024;
constexpr int64_t gemv_dp4a_smem(int64_t K, int64_t T) { return T * ((K + 127) / 128) * (2 * 128 + 4 * 8); }
constexpr bool gemv_dp4a_fits(int64_t K, int64_t T, PackedKind kind) {
    return kind == PackedKind::Int4 && T >= 1 && T <= 8 && gemv_dp4a_smem(K, T) <= kGemvDp4aMaxSmem;
}
// Dp4a finds a chunk's scale group by a shift: groups of a power of two columns.
constexpr bool gemv_dp4a_takes_group(int group) { return group > 0 && (group & (group - 1)) == 0; }
// Dp4a's warps a row tile: the fewest (the most rows a block, x quantized the fewest times) that
// still launch 1.5 blocks an SM, else 8 (H200, T = 1: 8192x2048 S = 4 7.9 µs, S = 8 9.9; 12352 x
// 2048 S = 4 9.4, S = 2 10.2; lm_head S = 1 81, S = 2 88; 4096x14336 S = 8 18.2, S = 4 20.1).
constexpr int gemv_dp4a_splits(int64_t N, int sms) {
    const int64_t row_tiles = (N + 15) / 16;
    for (int s = 1; s < kGemvDp4aWarps; s *= 2)
        if (2 * ((row_tiles * s + kGemvDp4aWarps - 1) / kGemvDp4aWarps) >= int64_t(3) * sms) return s;
    return kGemvDp4aWarps;
}

// Imma: warps a block (8 / S row tiles), ring stages a warp, and the block's shared memory — the
// ring (a stage: one k-tile of a row tile, 1 KiB of codes and its scales and biases), both limbs
// of its slice of x a token (rows padded by 16 bytes: the B loads free of bank conflicts) and
// (dx / 254, sx) per 32 columns for 8 token slots.
constexpr int kGemvImmaWarps = 8;
constexpr int kGemvImmaStages = 4;
constexpr int64_t kGemvImmaMaxSmem = 160 * 1024;
constexpr int64_t gemv_imma_stage_bytes(int64_t group, bool biases) {
    return 1024 + 32 * (128 / group) * (biases ? 2 : 1);
}
constexpr int64_t gemv_imma_slice_cols(int64_t K, int cluster) { return 128 * ((K / 128 + cluster - 1) / cluster); }
constexpr int64_t gemv_imma_smem(int64_t K, int64_t T, int64_t group, bool biases, int cluster, int regs = 0) {
    const int64_t kc = gemv_imma_slice_cols(K, cluster);
    const int64_t ring = regs ? 0 : kGemvImmaWarps * kGemvImmaStages * gemv_imma_stage_bytes(group, biases);
    return ring + 32 + 2 * T * (kc + 16) + 2 * kc;
}
constexpr bool gemv_imma_takes(const PackedMatrix& w, int64_t T) {
    return w.kind == PackedKind::Int4 && w.tiles && T >= 1 && T <= 8 &&
           (w.group == 32 || w.group == 64 || w.group == 128);
}
constexpr bool gemv_imma_fits(const PackedMatrix& w, int64_t T, int cluster) {
    return gemv_imma_takes(w, T) && gemv_imma_smem(w.k, T, w.group, w.biases != nullptr, cluster) <= kGemvImmaMaxSmem;
}
// Imma's shape: K split over the fewest blocks (then row tiles over the fewest warps) that launch
// 1.5 blocks an SM, each warp keeping a k-tile at least; cluster 0 where nothing fits.
constexpr GemvPlan gemv_imma_plan(const PackedMatrix& w, int64_t T, int sms) {
    GemvPlan p{GemvVariant::Imma, 1, 1, 1};
    while (p.cluster < 8 && !gemv_imma_fits(w, T, p.cluster)) p.cluster *= 2;
    if (!gemv_imma_fits(w, T, p.cluster)) return {GemvVariant::Imma, 1, 1, 0};
    const int64_t row_tiles = w.n / 16, nkt = w.k / 128;
    auto blocks = [&] {
        const int64_t rt = kGemvImmaWarps / p.splits;
        return (row_tiles + rt - 1) / rt * p.cluster;
    };
    while (2 * blocks() < int64_t(3) * sms) {
        if (p.cluster < 8 && nkt >= int64_t(2) * p.cluster * p.splits) p.cluster *= 2;
        else if (p.splits < kGemvImmaWarps && nkt >= int64_t(2) * p.cluster * p.splits) p.splits *= 2;
        else break;
    }
    return p;
}

// Bulk: consumer warps (a stage is one k-tile each), ring stages, stages asked for before
// pdl::wait, and the block's shared memory — the ring (a stage: kGemvBulkWarps k-tiles of one row
// tile, their codes, scales and biases), then x's two int8 limbs and (dx, sx) per 32 columns in
// Dp4a's layout (gemv_dp4a_smem; K = 14336, T = 1: 72 + 31.5 KiB). One stage before the wait
// (H200, session 28, µs back to back, 1 / 4 / 0 stages before it: 4096x14336 12.32 / 12.22 /
// 12.64, 8192x2048 6.30 / 7.37 / 6.27, 12352x2048 7.52 / 8.56 / 7.48, lm_head 74.3 / 75.2 / 73.8:
// a deep prefetch by the next kernel's blocks takes bandwidth from the running one).
constexpr int kGemvBulkWarps = 16;
constexpr int kGemvBulkStages = 4, kGemvBulkPrewait = 1;
// One token from K = kGemvBulkMinK (the pick's own reach), a ring of 8 stages where it fits (one
// block an SM): the copies want them (alone 9.0 → 8.7 µs back to back at 4096x14336); H200, session
// 29, 4 → 8 stages: 12.32 → 11.46–11.55 µs back to back, 15.10 → 14.75–14.78 cold.
constexpr int kGemvBulkDeepStages = 8;
// The kernel template's default for x's staging (fast_gemv_bulk.cu, XJIT): the whole of x first.
// A launch takes GemvPlan::xwarp (gemv_bulk_xwarp below; TESSERA_BULK_X overrides it).
constexpr bool kGemvBulkXJit = false;
constexpr int64_t kGemvBulkMaxSmem = 200 * 1024;  // + ≤ 16.5 KiB static: within 227
constexpr int64_t gemv_bulk_stage_bytes(int64_t group, bool biases) {
    return kGemvBulkWarps * (1024 + 32 * (128 / group) * (biases ? 2 : 1));
}
constexpr int64_t gemv_bulk_x_bytes(int64_t K, int64_t T) { return gemv_dp4a_smem(K, T); }
constexpr int64_t gemv_bulk_smem(int64_t K, int64_t T, int64_t group, bool biases, int stages = kGemvBulkStages) {
    return stages * gemv_bulk_stage_bytes(group, biases) + gemv_bulk_x_bytes(K, T);
}
// The layout it reads (the copies want 16-byte aligned scales and biases), and whether x fits.
inline bool gemv_bulk_layout_ok(const PackedMatrix& w, int64_t T) {
    const auto a16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    return w.kind == PackedKind::Int4 && w.tiles && T >= 1 && T <= 8 &&
           (w.group == 32 || w.group == 64 || w.group == 128) && a16(w.scales) && a16(w.biases);
}
inline bool gemv_bulk_takes(const PackedMatrix& w, int64_t T) {
    return gemv_bulk_layout_ok(w, T) && gemv_bulk_smem(w.k, T, w.group, w.biases != nullptr) <= kGemvBulkMaxSmem;
}

// BulkMma: Bulk's ring (gemv_bulk_stage_bytes a stage), then x's slice as f16 (T rows of per·256 +
// 64 bytes, per = the k-tiles a slice, and 256 zero bytes), the warps' fragments at a row tile's end
// (16 KiB), and with S > 1 the block's parts until the cluster sums them (16·T floats a row tile it
// walks). A consumer thread stages at most 4 items of 8 columns of x: T · per · 128 ≤ 16384 (8
// tokens of K = 14336 over 8 blocks, one token of 14336 in one).
constexpr int64_t kGemvBulkMmaMaxXCols = 16384;
constexpr int64_t gemv_bulk_mma_per(int64_t K, int S) { return (K / 128 + S - 1) / S; }
constexpr int64_t gemv_bulk_mma_smem(int64_t K, int64_t T, int64_t group, bool biases, int S, int stages,
                                     int64_t part_rts) {
    return stages * gemv_bulk_stage_bytes(group, biases) + T * (gemv_bulk_mma_per(K, S) * 256 + 64) + 256 +
           int64_t(2) * kGemvBulkWarps * 32 * 16 + (S > 1 ? part_rts * T * 16 * 4 : 0);
}
// The parts' rows a launch may need: the row tiles over half the clusters an SM count holds (the
// launch takes the clusters resident, which GPC boundaries can make fewer than SMs / S).
constexpr int64_t gemv_bulk_mma_part_rts(int64_t N, int S, int sms) {
    const int64_t ncl = std::max<int64_t>(1, sms / S / 2);
    return S > 1 ? (N / 16 + ncl - 1) / ncl : 0;
}
inline bool gemv_bulk_mma_fits(const PackedMatrix& w, int64_t T, int S, int sms) {
    if (!gemv_bulk_layout_ok(w, T)) return false;
    if (!(S == 1 || S == 2 || S == 4 || S == 8) || w.k < 128 || S > w.k / 128) return false;
    if (T * gemv_bulk_mma_per(w.k, S) * 128 > kGemvBulkMmaMaxXCols) return false;
    return gemv_bulk_mma_smem(w.k, T, w.group, w.biases != nullptr, S, kGemvBulkStages,
                              gemv_bulk_mma_part_rts(w.n, S, sms)) <= kGemvBulkMaxSmem;
}
// Its cluster: the fewest blocks whose slices of x fit (0: none does).
inline int gemv_bulk_mma_cluster(const PackedMatrix& w, int64_t T, int sms) {
    for (int S = 1; S <= 8; S *= 2)
        if (gemv_bulk_mma_fits(w, T, S, sms)) return S;
    return 0;
}
// Its ring: kGemvBulkStages (fast_gemv_bulk_mma.cu: deeper measured slower).

// Whether Mma with `splits` blocks along K fits its shared-memory budget.
constexpr bool gemv_mma_fits(int64_t K, PackedKind kind, int splits) {
    if (splits < 1 || splits > kGemvMaxSplits) return false;
    const int64_t per = (gemv_k_tiles(K, kind) + splits - 1) / splits;
    return per * gemv_tile_smem(kind) <= kGemvXSmemBytes;
}

// y[T, N] = x[T, K] · w[N, K]ᵀ on a device with `sms` SMs. Up to kGemvRowsMaxN rows: MmaRows,
// one row tile a block (H200, session 5, cold weights: 28.0 against Mma's 29.7 us at 4096x14336
// T = 1, 30.5 / 34.1 at T = 8; 8.2 / 10.1 at 4096x2048; 5.1 / 6.8 at 2048x512 — Mma's cluster
// staging of x is a fixed cost these shapes do not earn back). Beyond (lm_head: 145 against 245):
// Mma whenever K fits (up to 20480 columns), 2 row tiles a warp, K split until about 2 blocks an
// SM. Int8 below 4 tokens: Simt (43 us against MmaRows' 46 and Mma's 66 at 4096x14336, 203
// against 386 / 359 at lm_head, T = 1; the tensor-core variants are flat in T, Simt grows ~9 us a
// token there). One token, Int4, 8192+ rows of K ≤ 2048 (the flagship's q+gate | k | v and GDN
// in-projections): MmaStaged (session 7, cold, T = 1, 16-row tiles: 12.45 against 13.22 us at
// 8192x2048, 15.90 against 17.57 at 12352x2048; row-major 12.26 / 12.86 and 15.46 / 17.28; but
// 9.15 against 8.70 at 4096x2048 and 11.42 against 9.89 at 2048x4096: fewer rows, MmaRows).
//
// One token, Int4 (session 10): Dp4a wherever x's limbs fit (K ≤ ~44K), its warps a row tile by
// gemv_dp4a_splits (H200, cold, 16-row tiles, µs, against the previous pick): 4096x14336 18.2
// (27.1), 8192x2048 7.9 (11.3), 12352x2048 9.4 (14.2), 2048x4096 7.2 (9.9), 512x2048 5.5 (6.7),
// lm_head 81.2 (149.4). At 8 tokens it is 2–3x slower than MmaRows (its dp4a work grows with T).
// `dp4a` false leaves it out (TESSERA_GEMV=mma; groups that are not a power of two).
constexpr int64_t kGemvRowsMaxN = 16384;
constexpr int64_t kGemvStagedMinN = 8192, kGemvStagedMaxK = 2048;
constexpr GemvPlan gemv_pick(int64_t T, int64_t N, int64_t K, PackedKind kind, int sms, bool dp4a = true) {
    GemvPlan p;
    if (dp4a && T == 1 && gemv_dp4a_fits(K, T, kind)) {
        p.variant = GemvVariant::Dp4a;
        p.splits = gemv_dp4a_splits(N, sms);
        return p;
    }
    if (kind == PackedKind::Int8 && T <= 3) return p;  // Simt
    if (N <= kGemvRowsMaxN) {
        // K ≤ 2048 Int4 always fits MmaStaged's slab (18 KiB, 20 with biases).
        const bool staged = T == 1 && kind == PackedKind::Int4 && N >= kGemvStagedMinN && K <= kGemvStagedMaxK;
        p.variant = staged ? GemvVariant::MmaStaged : GemvVariant::MmaRows;
        return p;
    }
    int min_splits = 1;
    while (min_splits <= kGemvMaxSplits && !gemv_mma_fits(K, kind, min_splits)) ++min_splits;
    if (min_splits > kGemvMaxSplits) return p;  // Simt
    p.variant = GemvVariant::Mma;
    p.mtiles = 2;
    const int64_t rows = int64_t(16) * p.mtiles * kGemvMmaWarps;
    const int64_t bx = (N + rows - 1) / rows;
    const int64_t want = (int64_t(2) * sms + bx - 1) / bx;
    const int64_t tiles = gemv_k_tiles(K, kind);
    int64_t s = want < kGemvMaxSplits ? want : kGemvMaxSplits;
    if (s > tiles) s = tiles;
    if (s < min_splits) s = min_splits;
    p.splits = int(s);
    return p;
}

// gemv_pick for a packed matrix, whose layout decides what else runs. One or two tokens, Int4 in
// 16-row tiles with K ≥ kGemvBulkMinK: Bulk (H200, session 27, 4096x14336, µs cold / 16 calls
// back to back: one token 15.5 / 12.6 against Imma's register pipeline 18.2 / 14.8, two tokens
// 19.4 / 17.1 against MmaRows 25.4 / 22.3). It loses at four tokens (27.9 against 22.7 back to
// back) and at K = 2048–4096 (8192x2048 one token 9.4 / 8.1 against Dp4a's 8.3 / 6.9; lm_head
// 103 / 101 against 86 / 85; the flagship's decode at 4K with it at every shape: 491 against 553
// tok/s), so not there; from Imma's threshold (K between 4096 and 14336 not measured). Then, at
// one token with K ≥ kGemvImmaMinK where Bulk does not fit, Imma through registers at
// gemv_imma_plan's shape (session 18, µs cold / back to back: 4096x14336 18.2 / 14.7 against
// Dp4a's 19.3 / 20.4; at K = 2048 it loses: 8192x2048 11.1 / 7.0 against 8.4 / 6.9, and the
// flagship's decode at 4K with it at every shape ran 490 against 539 tok/s). More tokens: its
// register pipeline at 2–8 tokens is slower than MmaRows (61.8 against 29.5 at 8 tokens).
constexpr int64_t kGemvImmaMinK = 8192;
constexpr int64_t kGemvBulkMinK = kGemvImmaMinK, kGemvBulkMaxTokens = 2;
// The ring's stages Bulk launches at T tokens and this K (gemv_bulk_takes held): kGemvBulkDeepStages.
constexpr int gemv_bulk_stages(int64_t K, int64_t T, int64_t group, bool biases) {
    return T == 1 && K >= kGemvBulkMinK &&
                   gemv_bulk_smem(K, T, group, biases, kGemvBulkDeepStages) <= kGemvBulkMaxSmem
               ? kGemvBulkDeepStages
               : kGemvBulkStages;
}
// Bulk's x at T tokens (GemvPlan::xwarp): staged by each consumer warp for its own k-tiles at two
// tokens, whole first at one — H200, 4096x14336, µs back to back / cold: two tokens 15.94 / 18.69
// by warp (session 29) against 17.14 / 20.10 whole (session 28; 17.05 / 19.42 in session 27); one
// token with 8 stages 14.28 / 17.22 by warp against 11.46 / 14.75 whole (session 29).
constexpr int gemv_bulk_xwarp(int64_t T) { return T == 2 ? 1 : 0; }
// From 2 tokens on matrices of 16 Mi weights or more in 16-row tiles (where Bulk does not take two
// tokens): BulkMma in the fewest blocks a cluster that fit (H200, session 30, µs, 16 calls back to
// back, against the pick before): 4096x14336 4 tokens 18.8 (MmaRows 22.5), 8 tokens 20.6 (24.7);
// 8192x2048 2 / 4 / 8 tokens 6.0 / 7.2 / 8.5 (9.5 / 9.6 / 10.0); 12352x2048 7.5 / 8.9 / 10.7 (13.7
// / 13.8 / 14.6); lm_head 87 / 89 / 94 (Mma 184 / 194 / 213). Smaller matrices keep MmaRows (its
// x read per k-tile, no staging): 4096x2048 5.4 against 5.0 at 4 tokens, 2048x4096 7.9 against
// 6.5 at 8, 512x2048 3.9 against 3.6. Two tokens from K = 8192 take BulkMma too since its 4-stage
// ring and batched x loads (session 32: 4096x14336 15.30 against Bulk's 15.93; session 30, 8
// stages, 16.6 against 15.9); Bulk keeps two tokens where BulkMma does not fit.
constexpr int64_t kGemvBulkMmaMinTokens = 2;
constexpr int64_t kGemvBulkMmaMinWeights = int64_t(16) << 20;
// BulkMma's form (GemvPlan::reducer; the same sums in the same order either way): the reducer warp
// where a block walks kGemvBulkMmaReducerRowTiles row tiles or more (H200, session 31, µs back to
// back, barrier against reducer: 4096x14336 3 / 4 / 8 tokens 18.34 / 18.84 / 20.77 against 18.00 /
// 18.46 / 19.86, lm_head 2 / 4 / 8 tokens 87.4 / 88.8 / 94.6 against 85.3 / 87.7 / 88.9), else the
// barrier (8192x2048 2 / 4 tokens 6.02 / 7.15 against 6.22 / 7.42, 12352x2048 7.53 / 8.73 against
// 7.75 / 9.10, 8 tokens level).
constexpr int64_t kGemvBulkMmaReducerRowTiles = 8;
constexpr int gemv_bulk_mma_reducer(const PackedMatrix& w, int S, int sms) {
    const int64_t clusters = std::max(1, sms / std::max(1, S));
    return (w.n / 16 + clusters - 1) / clusters >= kGemvBulkMmaReducerRowTiles ? 1 : 0;
}
// WgmmaTma: a stage (the block's 4·mt row tiles' codes, scales and biases, `runs` k-tiles of
// them), the block's shared memory — x's slice in bf16 (2 KiB a k-tile), the ring, two
// warpgroups' accumulators (for the block's and the cluster's sums), 1 KiB to align — and the
// ring's stages: as many as the rest of the shared memory holds, at most kGemvWgmmaMaxStages (21
// of 5 KiB at 4096x14336 in slices of 2; 5 of 20 KiB with runs of 4).
constexpr int kGemvWgmmaMaxStages = 32, kGemvWgmmaMinStages = 4;
constexpr int64_t kGemvWgmmaMaxSmem = 226 * 1024;  // dynamic, + its static barriers: within 227
constexpr int gemv_wgmma_stage_bytes(int mt, int runs = 1) {
    return (4 * mt * runs * 1024 + 2 * 4 * mt * runs * 128 + 1023) / 1024 * 1024;
}
constexpr int gemv_wgmma_red_bytes(int mt) { return 2 * 128 * mt * 4 * 4; }
constexpr int64_t gemv_wgmma_fixed_smem(int64_t K, int mt, int cluster) {
    return 1024 + (K / 128 + cluster - 1) / cluster * 2048 + gemv_wgmma_red_bytes(mt);
}
constexpr int gemv_wgmma_stages(int64_t K, int mt, int cluster, int runs = 1) {
    const int64_t left = kGemvWgmmaMaxSmem - gemv_wgmma_fixed_smem(K, mt, cluster);
    return left < 0 ? 0 : int(std::min<int64_t>(kGemvWgmmaMaxStages, left / gemv_wgmma_stage_bytes(mt, runs)));
}
constexpr int64_t gemv_wgmma_smem(int64_t K, int mt, int cluster, int runs = 1) {
    return gemv_wgmma_fixed_smem(K, mt, cluster) +
           int64_t(gemv_wgmma_stages(K, mt, cluster, runs)) * gemv_wgmma_stage_bytes(mt, runs);
}
inline bool gemv_wgmma_fits(const PackedMatrix& w, int64_t T, int mt, int cluster, int runs = 1) {
    return gemv_bulk_layout_ok(w, T) && packed_tiles_fit(w.kind, w.n, w.k, w.group) && (mt == 1 || mt == 2) &&
           (cluster == 1 || cluster == 2 || cluster == 4 || cluster == 8) && cluster <= w.k / 128 &&
           (runs == 1 || runs == 2 || runs == 4) && gemv_wgmma_stages(w.k, mt, cluster, runs) >= kGemvWgmmaMinStages;
}
// Its shape: one m-tile (64 rows a block), K split over the fewest blocks a cluster that launch
// 90 % of a block an SM (4096x14336: 2, 128 blocks; 8192x2048: 1; 2048x4096: 4) — or, where none
// does, the most that fit; cluster 0 where nothing fits.
inline GemvPlan gemv_wgmma_plan(const PackedMatrix& w, int64_t T, int sms) {
    GemvPlan p{GemvVariant::WgmmaTma, 1, 1, 0};
    const int64_t row_blocks = (w.n + 63) / 64;
    for (int c : {1, 2, 4, 8}) {
        if (!gemv_wgmma_fits(w, T, 1, c)) continue;
        p.cluster = c;
        if (10 * row_blocks * c >= int64_t(9) * sms) break;
    }
    return p;
}

// bulk_mma false leaves BulkMma out (TESSERA_GEMV=no_bulk_mma, for A/B).
inline GemvPlan gemv_pick_packed(int64_t T, const PackedMatrix& w, int sms, bool dp4a = true, bool bulk_mma = true) {
    if (bulk_mma && T >= kGemvBulkMmaMinTokens && w.n * w.k >= kGemvBulkMmaMinWeights) {
        const int C = gemv_bulk_mma_cluster(w, T, sms);
        if (C > 0) {
            GemvPlan p{GemvVariant::BulkMma, 1, 1, C};
            p.reducer = gemv_bulk_mma_reducer(w, C, sms);
            return p;
        }
    }
    if (dp4a && T <= kGemvBulkMaxTokens && w.k >= kGemvBulkMinK && gemv_bulk_takes(w, T)) {
        GemvPlan p{GemvVariant::Bulk};
        p.xwarp = gemv_bulk_xwarp(T);
        return p;
    }
    if (dp4a && T == 1 && w.k >= kGemvImmaMinK && gemv_imma_takes(w, T)) {
        GemvPlan p = gemv_imma_plan(w, T, sms);
        if (p.cluster > 0) {
            p.regs = 1;
            return p;
        }
    }
    return gemv_pick(T, w.n, w.k, w.kind, sms, dp4a);
}

// Runs `plan` (bench, tests): the checks of gemv_packed plus the plan's own.
void gemv_packed_plan(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream);
// The SM count of the current device (cached), what gemv_packed passes to gemv_pick.
int gemv_sm_count();

namespace detail {
// Arguments already checked (fast_gemv.cpp).
cudaError_t launch_gemv_simt(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                             cudaStream_t stream);
cudaError_t launch_gemv_mma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                            const PackedMatrix& w, cudaStream_t stream);
cudaError_t launch_gemv_chunks(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                               cudaStream_t stream);
cudaError_t launch_gemv_imma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream);
int gemv_imma_resident_blocks(const GemvPlan& plan, const PackedMatrix& w, int64_t T);
// Imma with parts left out (bench_fast_gemv's diagnosis; one token, no biases, cluster 1, 2 or 8):
// `diag` one of the three bits, or all of them. y is garbage.
constexpr int kGemvImmaDiagNoMath = 1;    // the ring and ldmatrix only, no mma or scaling
constexpr int kGemvImmaDiagNoStage = 2;   // x not staged (the loop reads what shared memory holds)
constexpr int kGemvImmaDiagNoReduce = 4;  // no cluster sum: each block writes its own part
cudaError_t launch_gemv_imma_diag(const GemvPlan& plan, int diag, float* y, int64_t ldy, const float* x, int64_t ldx,
                                  const PackedMatrix& w, cudaStream_t stream);
cudaError_t launch_gemv_bulk(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream);
// Bulk in other shapes (bench_fast_gemv's diagnosis; one token, no biases): its ring stages (2, 4
// or 8), its arithmetic or none (y garbage: the floor of its copies), the grid (0: Bulk's own),
// shared memory enough to keep a second block off an SM, a warp's k-tiles of one stage a step
// (Bulk's own) or of two (with the arithmetic only), and (8 stages, with the arithmetic) x's staging
// left out (skip 1) or the consumers' arithmetic (skip 2), or staged by each warp for its own
// k-tiles (x_by_warp: XJIT).
struct GemvBulkDiag {
    int stages = kGemvBulkStages;
    bool math = true;
    int grid = 0;
    bool exclusive = false;
    bool pairs = false;
    int skip = 0;
    bool x_by_warp = false;
};
cudaError_t launch_gemv_bulk_diag(const GemvBulkDiag& d, float* y, const float* x, const PackedMatrix& w,
                                  cudaStream_t stream);
cudaError_t launch_gemv_bulk_mma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                                 const PackedMatrix& w, cudaStream_t stream);
// The blocks BulkMma launches for w at T tokens (its clusters resident × plan.cluster; -1: none).
int gemv_bulk_mma_grid(const GemvPlan& plan, const PackedMatrix& w, int64_t T);
// BulkMma with parts left out (bench_fast_gemv's diagnosis; no biases, ldx = K, ldy = N; y
// garbage): `skip` 0 (the launched kernel) or a combination of the bits below that it builds —
// x's staging, the consumers' arithmetic (they still wait for each stage, read their B and
// release it), the row tiles' sums (no barrier a row tile, nothing written); all three leave the
// ring's copies, the cluster's waits and the launch. stages: the ring's (4, 6 or 8; 0: the
// launch's, kGemvBulkStages). A part left out wants plan.reducer 0.
constexpr int kGemvBulkMmaSkipX = 1, kGemvBulkMmaSkipMath = 2, kGemvBulkMmaSkipSums = 4;
cudaError_t launch_gemv_bulk_mma_diag(const GemvPlan& plan, int skip, int stages, float* y, const float* x,
                                      int64_t T, const PackedMatrix& w, cudaStream_t stream);
cudaError_t launch_gemv_wgmma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                              const PackedMatrix& w, cudaStream_t stream);
// WgmmaTma in a diagnosis form (bench_fast_gemv --diag): kGemvWgmmaSkipMath — the consumers only
// wait for each stage and release it (the stream alone; y zero); kGemvWgmmaBulkCopies — the
// producer copies each row tile's codes and scales by its own bulk copy (1 KB + 32·128/G bytes,
// or runs of plan.runs k-tiles) instead of the tensor maps' boxes (the same y); with the arithmetic left out,
// kGemvWgmmaRowTileRuns — the block's bytes walked a row tile at a time, a stage one 4 KB copy of
// a row tile's 4 k-tiles and one of their scales (Bulk's order; one m-tile, slices of a multiple
// of 4 k-tiles), kGemvWgmmaSkipX (x not staged), kGemvWgmmaOneWaiter (one warp a warpgroup waits
// for each stage, the others idle); in any form kGemvWgmmaEvictFirst (the boxes with Bulk's
// L2::evict_first hint) and kGemvWgmmaPrefetchMaps (the maps prefetched before the first boxes).
// 0: launch_gemv_wgmma.
constexpr int kGemvWgmmaSkipMath = 1, kGemvWgmmaBulkCopies = 2, kGemvWgmmaRowTileRuns = 4;
constexpr int kGemvWgmmaEvictFirst = 8, kGemvWgmmaSkipX = 16, kGemvWgmmaOneWaiter = 32, kGemvWgmmaPrefetchMaps = 64;
cudaError_t launch_gemv_wgmma_diag(const GemvPlan& plan, int diag, float* y, int64_t ldy, const float* x,
                                   int64_t ldx, int64_t T, const PackedMatrix& w, cudaStream_t stream);
cudaError_t launch_gemv_dp4a(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream);
int gemv_dp4a_resident_blocks(const PackedMatrix& w, int64_t T);
// The clusters of S blocks of `kernel` (threads a block, smem bytes of dynamic shared memory)
// resident at once on the current device (cudaOccupancyMaxActiveClusters; cached: the query costs
// microseconds, and it is not a stream operation, so graph capture is safe; 0 on failure).
int gemv_resident_clusters(const void* kernel, int threads, int S, size_t smem);
// Blocks of `plan`'s kernel resident on the device at once (occupancy query; -1 for Simt or on
// failure), and the blocks it launches for w — the bench's diagnosis.
int gemv_resident_blocks(const GemvPlan& plan, const PackedMatrix& w);
constexpr int64_t gemv_grid_blocks(const GemvPlan& plan, int64_t N) {
    if (plan.variant == GemvVariant::WgmmaTma) return (N + 64 * plan.mtiles - 1) / (64 * plan.mtiles) * plan.cluster;
    if (plan.variant == GemvVariant::MmaStaged || plan.variant == GemvVariant::MmaChunks) return (N + 15) / 16;
    if (plan.variant == GemvVariant::Bulk) return std::min<int64_t>((N + 15) / 16, gemv_sm_count());
    if (plan.variant == GemvVariant::Imma) {
        const int64_t rows = int64_t(16) * (kGemvImmaWarps / plan.splits);
        return (N + rows - 1) / rows * plan.cluster;
    }
    if (plan.variant == GemvVariant::Dp4a) {
        const int64_t rows = int64_t(16) * (kGemvDp4aWarps / plan.splits), cl = plan.cluster;
        return ((N + rows - 1) / rows + cl - 1) / cl * cl;  // whole clusters: the last may hold no rows
    }
    const int64_t rows = int64_t(16) * plan.mtiles * (plan.variant == GemvVariant::MmaRows ? 1 : kGemvMmaWarps);
    return (N + rows - 1) / rows * (plan.variant == GemvVariant::Mma ? plan.splits : 1);
}
}  // namespace detail

}  // namespace tessera::cuda::fast
