// Host side of the prefill GEMM (fast_gemm.cu holds the kernels): argument checks, the scratch
// size, and the choice of tile configuration.
#include "kernels/cuda/fast_gemm.h"

#include <algorithm>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_matmul.h"

namespace tessera::cuda::fast {

namespace {

void check_args(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                const void* scratch) {
    const bool int4 = w.kind == PackedKind::Int4;
    TS_CHECK(T >= 0 && w.n >= 0 && w.k >= 0, "gemm_packed: bad shape T={} N={} K={}", T, w.n, w.k);
    TS_CHECK(int4 ? (w.group == 32 || w.group == 64 || w.group == 128) : (w.group == 16 || w.group == 32),
             "gemm_packed: group {} not supported for {} (Int4: 32, 64, 128; Int8: 16, 32)", w.group,
             int4 ? "Int4" : "Int8");
    TS_CHECK(w.k % 32 == 0 && w.k % w.group == 0, "gemm_packed: K={} is not a multiple of 32 and of the group {}", w.k,
             w.group);
    TS_CHECK(ldx >= w.k && ldy >= w.n, "gemm_packed: row strides ldx={} (K={}) ldy={} (N={}) too small", ldx, w.k,
             ldy, w.n);
    TS_CHECK(T <= (int64_t(1) << 31) / 128 * 128 && w.n <= int64_t(65535) * 128,
             "gemm_packed: T={} N={} exceed the grid", T, w.n);
    if (T == 0 || w.n == 0) return;
    TS_CHECK(y != nullptr, "gemm_packed: null y for T={} N={}", T, w.n);
    if (w.k == 0) return;
    TS_CHECK(y != nullptr && x != nullptr && scratch != nullptr && w.codes != nullptr && w.scales != nullptr,
             "gemm_packed: null pointer (y {}, x {}, scratch {}, codes {}, scales {}) for T={} N={} K={}",
             static_cast<const void*>(y), static_cast<const void*>(x), scratch, static_cast<const void*>(w.codes),
             static_cast<const void*>(w.scales), T, w.n, w.k);
    TS_CHECK(reinterpret_cast<uintptr_t>(w.codes) % 16 == 0 && reinterpret_cast<uintptr_t>(scratch) % 16 == 0,
             "gemm_packed: codes {} and scratch {} must be 16-byte aligned", static_cast<const void*>(w.codes),
             scratch);
    TS_CHECK(int4 || w.biases == nullptr, "gemm_packed: Int8 matrices have no biases");
    TS_CHECK(!w.tiles || packed_tiles_fit(w.kind, w.n, w.k, w.group),
             "gemm_packed: a [{}, {}] matrix of group {} cannot be in 16-row tiles", w.n, w.k, w.group);
}

}  // namespace

size_t gemm_packed_scratch(int64_t T, int64_t K) {
    // x in bf16, T rounded up to 16 for the pair-row layout, K up to 128 for the wgmma order
    return size_t(T > 0 ? (T + 15) / 16 * 16 : 0) * size_t(K > 0 ? (K + 127) / 128 * 128 : 0) * sizeof(uint16_t);
}

GemmPlan gemm_pick(int64_t T, int64_t N, int64_t K, PackedKind kind, bool tiles) {
    // Least estimated time: waves of resident blocks × each block's work / the config's speed,
    // the work counted in k-tiles plus ~3 for the pipeline's fill and the epilogue. Splitting K in
    // two doubles the blocks and halves their k-tiles: it pays for long K on a grid that leaves
    // SMs idle (4096×14336 at 512 tokens), not for K = 2048 (measured on the H200).
    const int64_t k_tiles = (K + 127) / 128;
    GemmPlan best;
    double best_cost = 0;
    for (int c = 0; c < detail::kGemmConfigCount; ++c) {
        const detail::GemmConfig& g = detail::kGemmConfigs[c];
        if (g.eff <= 0 || (g.tma_cluster > 0 && !tiles)) continue;
        const int per_sm = detail::gemm_blocks_per_sm(c, kind);
        if (per_sm <= 0) continue;
        // The wgmma tiles lose with K = 2048 split (16 k-tiles: 4096×2048 at 512 tokens 32.6 against
        // 25.3 µs whole) and win with K = 4096 (2048×4096: 29.6 against 42.3).
        const int64_t min_split_tiles = g.wgmma ? 24 : 8;
        for (int splits = 1; splits <= (k_tiles >= min_split_tiles ? 2 : 1); ++splits) {
            const int64_t blocks = ((T + g.bm - 1) / g.bm) * ((N + g.bn - 1) / g.bn) * splits;
            const int64_t slots = int64_t(current_sm_count()) * per_sm;
            const int64_t waves = (blocks + slots - 1) / slots;
            const double block_tiles = double((k_tiles + splits - 1) / splits) + 3.0;
            // An SM holding fewer than 8 warps (Int8's 64x128: one block of 4) runs them slower.
            const double speed = g.eff * std::min(1.0, double(per_sm) * g.threads / 256.0);
            const double cost = double(waves) * g.bm * g.bn * per_sm / speed * block_tiles;
            if (best_cost == 0 || cost < best_cost) best = GemmPlan{c, splits}, best_cost = cost;
        }
    }
    return best;
}

void gemm_packed_plan(GemmPlan plan, bool convert_x, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, void* scratch, cudaStream_t stream) {
    TS_CHECK(plan.config >= 0 && plan.config < detail::kGemmConfigCount && plan.splits >= 1 && plan.splits <= 2,
             "gemm_packed: no tile configuration {} with {} splits of K", plan.config, plan.splits);
    const detail::GemmConfig& cfg = detail::kGemmConfigs[plan.config];
    TS_CHECK(!cfg.wgmma || w.kind == PackedKind::Int4, "gemm_packed: tile configuration {} takes Int4 matrices only",
             cfg.name);
    TS_CHECK(cfg.tma_cluster == 0 || w.tiles,
             "gemm_packed: tile configuration {} takes matrices in 16-row tiles only (a [{}, {}] row-major matrix "
             "given)",
             cfg.name, w.n, w.k);
    TS_CHECK(!cfg.wgmma || (T + cfg.bm - 1) / cfg.bm <= 65535,
             "gemm_packed: T = {} tokens exceed the grid of tile configuration {} (65535 tiles of {})", T, cfg.name,
             cfg.bm);
    check_args(y, ldy, x, ldx, T, w, scratch);
    if (T == 0 || w.n == 0) return;
    if (w.k == 0 || plan.splits > 1)  // y = 0 (K = 0), or the sum of two halves added into zeros
        TS_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * sizeof(float), 0, size_t(w.n) * sizeof(float), size_t(T),
                                        stream));
    if (w.k == 0) return;
    uint16_t* xb = static_cast<uint16_t*>(scratch);  // [T, K] bf16
    if (convert_x)
        TS_CUDA_CHECK(detail::launch_convert_x(xb, x, ldx, T, w.k, detail::x_order(detail::kGemmConfigs[plan.config]),
                                               stream));
    TS_CUDA_CHECK(detail::launch_gemm(plan.config, detail::GemmArgs{y, ldy, xb, w, T, plan.splits}, stream));
}

void gemm_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w, void* scratch,
                 cudaStream_t stream) {
    gemm_packed_plan(gemm_pick(T, w.n, w.k, w.kind, w.tiles), true, y, ldy, x, ldx, T, w, scratch, stream);
}

}  // namespace tessera::cuda::fast
