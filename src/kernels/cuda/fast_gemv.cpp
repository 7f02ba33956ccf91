// Argument checks and the variant pick of the packed GEMV (fast_gemv_plan.h); fast_gemv.cu and
// fast_gemv_mma.cu hold the kernels and their launches.
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace detail {
// A packed matrix's layout invariants (shared by the fast entry points).
void check_packed(const char* op, const PackedMatrix& w);
}  // namespace detail

void detail::check_packed(const char* op, const PackedMatrix& w) {
    TS_CHECK(w.n >= 0 && w.k >= 0, "{}: bad packed shape [{}, {}]", op, w.n, w.k);
    const bool int4 = w.kind == PackedKind::Int4;
    TS_CHECK(int4 || w.kind == PackedKind::Int8, "{}: unknown packed kind {}", op, int(w.kind));
    const int chunk = int4 ? 32 : 16;  // columns per 16-byte row chunk
    TS_CHECK(w.group > 0 && w.group % chunk == 0, "{}: {} group size {} is not a multiple of {}", op,
             int4 ? "Int4" : "Int8", w.group, chunk);
    TS_CHECK(w.k % w.group == 0, "{}: K = {} is not a whole number of groups of {}", op, w.k, w.group);
    TS_CHECK(!w.tiles || packed_tiles_fit(w.kind, w.n, w.k, w.group),
             "{}: a {} [{}, {}] matrix of group {} cannot be in 16-row tiles (Int4, n a multiple of 16, K of 128)", op,
             int4 ? "Int4" : "Int8", w.n, w.k, w.group);
    if (w.n == 0 || w.k == 0) return;
    TS_CHECK(w.codes && w.scales, "{}: packed [{}, {}] has null codes or scales", op, w.n, w.k);
    TS_CHECK(reinterpret_cast<uintptr_t>(w.codes) % 16 == 0, "{}: packed codes must be 16-byte aligned", op);
    TS_CHECK(int4 || !w.biases, "{}: Int8 packed weights take no biases", op);
}

int gemv_sm_count() { return current_sm_count(); }

namespace {
// A packed matrix's layout in the variants' errors.
const char* layout_name(const PackedMatrix& w) {
    return w.kind == PackedKind::Int4 ? (w.tiles ? "Int4 tiles" : "Int4 rows") : "Int8";
}
}  // namespace

void gemv_packed_plan(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream) {
    detail::check_packed("gemv_packed", w);
    TS_CHECK(T >= 0 && T <= kGemvMaxTokens, "gemv_packed: T = {} tokens (1..{})", T, kGemvMaxTokens);
    if (T == 0 || w.n == 0) return;
    ref::detail::check_rows("gemv_packed", "y", y, ldy, T, w.n);
    if (w.k == 0) {
        TS_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * sizeof(float), 0, size_t(w.n) * sizeof(float), size_t(T),
                                        stream));
        return;
    }
    ref::detail::check_rows("gemv_packed", "x", x, ldx, T, w.k);
    const ref::detail::Span ys = ref::detail::span_of(y, ldy, T, w.n), xs = ref::detail::span_of(x, ldx, T, w.k);
    TS_CHECK(!ref::detail::overlaps(ys, xs), "gemv_packed: y overlaps x");
    TS_CHECK(plan.cluster == 1 || plan.variant == GemvVariant::Dp4a || plan.variant == GemvVariant::Imma ||
                 plan.variant == GemvVariant::BulkMma || plan.variant == GemvVariant::WgmmaTma,
             "gemv_packed: only Dp4a, Imma, BulkMma and WgmmaTma run in clusters of their own (cluster {})",
             plan.cluster);
    if (plan.variant == GemvVariant::Simt) {
        TS_CUDA_CHECK(detail::launch_gemv_simt(y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::MmaChunks) {
        TS_CHECK(gemv_chunks_fits(w.k, T, w.kind),
                 "gemv_packed: MmaChunks takes Int4 and 1..{} tokens with its x in {} bytes of shared memory (got {} "
                 "tokens, K = {}: {} bytes)",
                 kGemvChunksMaxTokens, kGemvChunksMaxSmem, T, w.k, gemv_chunks_smem(w.k, T));
        TS_CUDA_CHECK(detail::launch_gemv_chunks(y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::Imma) {
        TS_CHECK(gemv_imma_takes(w, T),
                 "gemv_packed: Imma takes Int4 in 16-row tiles, groups of 32, 64 or 128 and 1..8 tokens (got {}, "
                 "group {}, {} tokens)",
                 layout_name(w), w.group, T);
        const auto pow2 = [](int v) { return v == 1 || v == 2 || v == 4 || v == 8; };
        TS_CHECK(pow2(plan.splits) && pow2(plan.cluster),
                 "gemv_packed: Imma takes 1, 2, 4 or 8 warps a row tile and blocks a cluster, not {} and {}",
                 plan.splits, plan.cluster);
        TS_CHECK(plan.regs == 0 || plan.regs == 1, "gemv_packed: Imma's regs is 0 (the ring) or 1 (registers), not {}",
                 plan.regs);
        TS_CHECK(gemv_imma_fits(w, T, plan.cluster),
                 "gemv_packed: Imma's ring and x slice ({} bytes at K = {}, {} tokens, cluster {}) exceed its {} bytes "
                 "of shared memory",
                 gemv_imma_smem(w.k, T, w.group, w.biases != nullptr, plan.cluster), w.k, T, plan.cluster,
                 kGemvImmaMaxSmem);
        TS_CUDA_CHECK(detail::launch_gemv_imma(plan, y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::Bulk) {
        TS_CHECK(gemv_bulk_takes(w, T),
                 "gemv_packed: Bulk takes Int4 in 16-row tiles, groups of 32, 64 or 128, 16-byte aligned scales and "
                 "biases and 1..8 tokens whose x fits its shared memory with the ring ({} bytes of {}; got {}, group "
                 "{}, {} tokens, K = {})",
                 gemv_bulk_smem(w.k, T, w.group, w.biases != nullptr), kGemvBulkMaxSmem,
                 layout_name(w), w.group, T, w.k);
        TS_CHECK(plan.xwarp == 0 || plan.xwarp == 1,
                 "gemv_packed: Bulk's xwarp is 0 (x staged whole) or 1 (by each warp), not {}", plan.xwarp);
        TS_CUDA_CHECK(detail::launch_gemv_bulk(plan, y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::BulkMma) {
        TS_CHECK(gemv_bulk_layout_ok(w, T),
                 "gemv_packed: BulkMma takes Int4 in 16-row tiles, groups of 32, 64 or 128, 16-byte aligned scales "
                 "and biases and 1..8 tokens (got {}, group {}, {} tokens)",
                 layout_name(w), w.group, T);
        TS_CHECK(gemv_bulk_mma_fits(w, T, plan.cluster, gemv_sm_count()),
                 "gemv_packed: BulkMma over a cluster of {} (1, 2, 4 or 8 blocks, at most K / 128) does not fit K = "
                 "{} at {} tokens: a block stages at most {} columns of x ({} a token here) with its ring in {} bytes "
                 "of shared memory ({} asked)",
                 plan.cluster, w.k, T, kGemvBulkMmaMaxXCols,
                 plan.cluster > 0 ? gemv_bulk_mma_per(w.k, plan.cluster) * 128 : w.k, kGemvBulkMaxSmem,
                 plan.cluster > 0 ? gemv_bulk_mma_smem(w.k, T, w.group, w.biases != nullptr, plan.cluster,
                                                       kGemvBulkStages,
                                                       gemv_bulk_mma_part_rts(w.n, plan.cluster, gemv_sm_count()))
                                  : 0);
        TS_CHECK(plan.reducer == 0 || plan.reducer == 1,
                 "gemv_packed: BulkMma sums a row tile's fragments after a barrier (reducer 0) or in a warp of their "
                 "own (1), not {}",
                 plan.reducer);
        TS_CUDA_CHECK(detail::launch_gemv_bulk_mma(plan, y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::WgmmaTma) {
        const int mt = plan.mtiles == 2 ? 2 : 1, cl = plan.cluster > 0 ? plan.cluster : 1;
        const int runs = plan.runs == 2 || plan.runs == 4 ? plan.runs : 1;
        TS_CHECK(gemv_wgmma_fits(w, T, plan.mtiles, plan.cluster, plan.runs),
                 "gemv_packed: WgmmaTma takes Int4 in 16-row tiles, groups of 32, 64 or 128, 16-byte aligned scales "
                 "and biases, 1..8 tokens, 1 or 2 m-tiles, 1, 2, 4 or 8 blocks a cluster (at most K / 128) and runs "
                 "of 1, 2 or 4 k-tiles, with room for {} stages of its ring beside x's slice in {} bytes of shared "
                 "memory (got {}, group {}, {} tokens, {} m-tiles, cluster {}, runs {}, K = {}: {} stages)",
                 kGemvWgmmaMinStages, kGemvWgmmaMaxSmem, layout_name(w), w.group, T, plan.mtiles, plan.cluster,
                 plan.runs, w.k, gemv_wgmma_stages(w.k, mt, cl, runs));
        TS_CUDA_CHECK(detail::launch_gemv_wgmma(plan, y, ldy, x, ldx, T, w, stream));
        return;
    }
    if (plan.variant == GemvVariant::Dp4a) {
        TS_CHECK(gemv_dp4a_fits(w.k, T, w.kind),
                 "gemv_packed: Dp4a takes Int4 and 1..8 tokens with its x in {} bytes of shared memory (got {} tokens, "
                 "K = {}: {} bytes)",
                 kGemvDp4aMaxSmem, T, w.k, gemv_dp4a_smem(w.k, T));
        TS_CHECK(gemv_dp4a_takes_group(w.group), "gemv_packed: Dp4a takes power-of-two groups, not {}", w.group);
        TS_CHECK(plan.splits == 1 || plan.splits == 2 || plan.splits == 4 || plan.splits == 8,
                 "gemv_packed: Dp4a splits a row tile over 1, 2, 4 or 8 warps, not {}", plan.splits);
        TS_CHECK(plan.cluster == 1 || plan.cluster == kGemvDp4aCluster,
                 "gemv_packed: Dp4a runs in clusters of 1 or {} blocks, not {}", kGemvDp4aCluster, plan.cluster);
        TS_CUDA_CHECK(detail::launch_gemv_dp4a(plan, y, ldy, x, ldx, T, w, stream));
        return;
    }
    TS_CHECK(plan.variant == GemvVariant::Mma || plan.variant == GemvVariant::MmaRows ||
                 plan.variant == GemvVariant::MmaStaged,
             "gemv_packed: unknown variant {}", int(plan.variant));
    TS_CHECK(plan.variant != GemvVariant::MmaStaged || gemv_staged_fits(w.k, w.kind, w.biases != nullptr, w.group),
             "gemv_packed: MmaStaged's slab of 16 rows ({} bytes at K = {}) exceeds its {} bytes of shared memory",
             gemv_staged_smem(w.k, w.kind, w.biases != nullptr, w.group), w.k, kGemvStagedMaxSmem);
    TS_CHECK(plan.mtiles == 1 || plan.mtiles == 2, "gemv_packed: Mma takes 1 or 2 row tiles a warp, not {}",
             plan.mtiles);
    TS_CHECK(plan.variant != GemvVariant::Mma || gemv_mma_fits(w.k, w.kind, plan.splits),
             "gemv_packed: Mma with {} K splits does not fit K = {} (shared memory for x, 1..{} splits)", plan.splits,
             w.k, kGemvMaxSplits);
    TS_CUDA_CHECK(detail::launch_gemv_mma(plan, y, ldy, x, ldx, T, w, stream));
}

void gemv_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                 cudaStream_t stream, int bulk_xwarp, int bulk_mma_reducer) {
    GemvPlan plan = gemv_pick_packed(T, w, gemv_sm_count(), gemv_dp4a_takes_group(w.group));
    if (plan.variant == GemvVariant::Bulk && bulk_xwarp >= 0) plan.xwarp = bulk_xwarp;
    if (plan.variant == GemvVariant::BulkMma && bulk_mma_reducer >= 0) plan.reducer = bulk_mma_reducer;
    gemv_packed_plan(plan, y, ldy, x, ldx, T, w, stream);
}

}  // namespace tessera::cuda::fast
