// The prefill GEMM's tile configurations and its kernel-level entry points (fast_gemm.cu), for
// fast_gemm.cpp's dispatch, the tests and bench_fast_gemm. Everyone else calls
// fast::gemm_packed (fast_matmul.h).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast::detail {

// A block of `threads` computes y[bm tokens, bn outputs], k in stages of 128, `stages` deep.
// eff: relative speed per SM for the dispatch's cost model (fast_gemm.cpp), fitted to
// bench_fast_gemm on the H200 (2026-11-30); 0 = benchmark only, never picked — those results
// were not yet checked on the GPU (FastGemm.EveryConfig covers them; enable after it passes).
struct GemmConfig {
    const char* name;
    int bm, bn, threads, stages;
    float eff;
    bool paired = false;  // x staged in pair-rows: A fragments without register moves (fast_gemm.cu)
    bool wgmma = false;   // Hopper wgmma, Int4 only (fast_gemm_wgmma.cu): bm tokens, bn = 64·warpgroups rows
    // The warp-specialised wgmma tiles fed by TMA (fast_gemm_wgmma_tma.cu; matrices in 16-row tiles
    // only): clusters of this many blocks sharing x's boxes, 0 for the other configurations.
    int tma_cluster = 0;
    // The TMA tiles' k-tiles a stage: 1, or 2 / 4 — one box of x (written k-block-major), one of
    // codes and one of scales for that many (fewer, larger copies: docs/cuda-rounds.md, thirty-third round).
    int tma_runs = 1;
};

// The order launch_convert_x writes x in, per configuration: plain / paired rows (mma.sync),
// the wgmma order a row ([T][K128]: each k-tile's 128 columns as wgmma's B reads them), or the
// same k-block-major ([K128 / 64][T][64]: a k-block's rows one after another, so that one TMA box
// takes several k-blocks of a token tile).
enum class XOrder { plain, paired, wgmma, wgmma_kblocks };
constexpr XOrder x_order(const GemmConfig& c) {
    return c.tma_runs > 1 ? XOrder::wgmma_kblocks : c.wgmma ? XOrder::wgmma : c.paired ? XOrder::paired : XOrder::plain;
}

inline constexpr GemmConfig kGemmConfigs[] = {
    {"128x128 w2x4 s4", 128, 128, 256, 4, 1.00f},  // warp tile 64 x 32
    {"64x256 w1x8 s4", 64, 256, 256, 4, 0.f},      // warp tile 64 x 32
    {"128x256 w2x4 s3", 128, 256, 256, 3, 0.f},    // warp tile 64 x 64 (spills)
    {"256x128 w4x2 s3", 256, 128, 256, 3, 0.f},    // warp tile 64 x 64 (spills)
    {"64x128 w1x4 s4", 64, 128, 128, 4, 0.95f},    // warp tile 64 x 32, 2 blocks per SM (Int4)
    {"128x128 w4x2 s4", 128, 128, 256, 4, 0.f},    // warp tile 32 x 64
    {"32x128 w1x4 s4", 32, 128, 128, 4, 0.60f},    // warp tile 32 x 32: few tokens
    {"256x128 w2x4 s3", 256, 128, 256, 3, 1.10f},  // warp tile 128 x 32: B dequantized once per 8 m-tiles
    {"128x256 w1x8 s3", 128, 256, 256, 3, 0.f},    // warp tile 128 x 32: fastest on big shapes (+5-8%), unchecked
    {"128x128 w1x4 s4", 128, 128, 128, 4, 0.f},    // warp tile 128 x 32, 4 warps
    // The same tiles with x in pair-rows (not yet run on the GPU).
    {"128x128 w2x4 s4 paired", 128, 128, 256, 4, 0.f, true},
    {"256x128 w2x4 s3 paired", 256, 128, 256, 3, 0.f, true},
    {"128x256 w1x8 s3 paired", 128, 256, 256, 3, 0.f, true},
    {"64x128 w1x4 s4 paired", 64, 128, 128, 4, 0.f, true},
    // wgmma (fast_gemm_wgmma.cu): bm tokens × bn weight rows; eff from bench_fast_gemm at 4096×14336,
    // 2048 tokens (session 13: 538 / 460 / 746 / 617 µs against 1,071 for the first row's).
    {"wgmma 128x128 s4", 128, 128, 256, 4, 2.0f, false, true},
    {"wgmma 256x128 s3", 256, 128, 256, 3, 2.3f, false, true},
    {"wgmma 64x128 s4", 64, 128, 256, 4, 1.4f, false, true},
    {"wgmma 128x256 s4", 128, 256, 512, 4, 1.7f, false, true},  // 4 warpgroups: 128 registers, spills
    // The warp-specialised tiles (bm tokens × bn weight rows, a producer warpgroup + two consumers;
    // 128x256: two m-tiles a warpgroup), alone and in clusters of two multicasting x; eff from
    // bench_fast_gemm at 4096×14336 (session 35: 2,048 tokens 299 / 334 µs, 512 split 87.5 / 91.6
    // against the wgmma 256x128's 438 / 125). The clusters measured slower everywhere (eff 0).
    {"wgmma tma 256x128 s3", 256, 128, 384, 3, 3.3f, false, true, 1},
    {"wgmma tma 256x128 s3 cl2", 256, 128, 384, 3, 0.f, false, true, 2},
    {"wgmma tma 128x256 s4", 128, 256, 384, 4, 3.0f, false, true, 1},
    {"wgmma tma 128x256 s4 cl2", 128, 256, 384, 4, 0.f, false, true, 2},
    // Fewer tokens a block, for fewer tokens (4096×14336: 64 tokens 34.7 µs split, 128 36.2 split,
    // 256 50.8 split (the 128x128), against the wgmma tiles' 49.4 / 51.7 / 75.7).
    {"wgmma tma 128x128 s5", 128, 128, 384, 5, 2.75f, false, true, 1},
    {"wgmma tma 64x128 s8", 64, 128, 384, 8, 1.8f, false, true, 1},
    // The same tiles with stages of 2 or 4 k-tiles (not yet run on the GPU; eff 0: never picked).
    {"wgmma tma 64x128 s4 r2", 64, 128, 384, 4, 0.f, false, true, 1, 2},
    {"wgmma tma 64x128 s2 r4", 64, 128, 384, 2, 0.f, false, true, 1, 4},
    {"wgmma tma 128x128 s2 r2", 128, 128, 384, 2, 0.f, false, true, 1, 2},
};
inline constexpr int kGemmMmaConfigCount = 14;  // the mma.sync configurations come first
inline constexpr int kGemmConfigCount = int(sizeof(kGemmConfigs) / sizeof(kGemmConfigs[0]));

// Device arguments of one GEMM (already checked by fast_gemm.cpp).
struct GemmArgs {
    float* y;            // [T, ldy] f32
    int64_t ldy;
    const uint16_t* xb;  // launch_convert_x's output for the config's layout
    PackedMatrix w;
    int64_t T;
    int splits = 1;      // split-K: > 1 adds the partial sums into y, which must be zero
};

// x [T, K] f32 (row stride ldx) → xb bf16 in the order the kernel pairs its columns: plain [T, K]
// rows, each 8 columns as (0,4,1,5,2,6,3,7); paired [ceil(T/16)·8, 2K] pair-rows (rows g and g+8
// of each 16 interleaved); wgmma [T, K rounded up to 128] in fast_gemm_wgmma.cu's k-step order.
cudaError_t launch_convert_x(uint16_t* xb, const float* x, int64_t ldx, int64_t T, int64_t K, XOrder order,
                             cudaStream_t stream);
// y = xb · wᵀ (or y += the partial sums, a.splits > 1) with tile configuration `config`
// (index into kGemmConfigs).
cudaError_t launch_gemm(int config, const GemmArgs& a, cudaStream_t stream);
// Benchmark probe (Int4 shapes, configs 0, 1 and 7): the same kernel with the raw code bits as B
// — no dequantization, wrong results — to show what the dequantization costs.
cudaError_t launch_gemm_probe(int config, const GemmArgs& a, cudaStream_t stream);
// Resident blocks per SM of `config` for `kind` (occupancy calculator, cached), 0 on error or
// where the configuration does not take the kind (wgmma: Int4 only).
int gemm_blocks_per_sm(int config, PackedKind kind);

// fast_gemm_wgmma.cu's halves of the above.
cudaError_t launch_convert_x_wgmma(uint16_t* xb, const float* x, int64_t ldx, int64_t T, int64_t K,
                                   cudaStream_t stream, bool kblocks = false);
cudaError_t launch_gemm_wgmma(int config, const GemmArgs& a, cudaStream_t stream);
int gemm_wgmma_blocks_per_sm(int config, PackedKind kind);
// fast_gemm_wgmma_tma.cu's (configurations with tma_cluster > 0; a.w in 16-row tiles).
cudaError_t launch_gemm_wgmma_tma(int config, const GemmArgs& a, cudaStream_t stream);
int gemm_wgmma_tma_blocks_per_sm(int config, PackedKind kind);

// The blocks of `kernel` an SM holds at `threads` threads and `smem` bytes of dynamic shared memory,
// once its attributes are set (`prepared`: the launcher's prepare<C>()); 0 where either fails. The
// three GEMM files' blocks_per_sm<C>() keep it in a function-local static.
template <class Kernel>
int occupancy_blocks(cudaError_t prepared, Kernel kernel, int threads, size_t smem) {
    int b = 0;
    if (prepared != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, reinterpret_cast<const void*>(kernel), threads, smem) !=
            cudaSuccess)
        return 0;
    return b;
}

}  // namespace tessera::cuda::fast::detail

namespace tessera::cuda::fast {
// What gemm_packed runs: a tile configuration and the split of K (1 or 2; 2 zeroes y first and
// adds two halves into it — fills the GPU when the tiles alone leave SMs idle).
struct GemmPlan {
    int config = 0, splits = 1;
};
// tiles: the matrix is in 16-row tiles (packed_weight.h), which the TMA configurations need.
GemmPlan gemm_pick(int64_t T, int64_t N, int64_t K, PackedKind kind, bool tiles = false);
// gemm_packed with a chosen plan; convert_x = false skips the x → bf16 pass and uses the scratch
// as already converted (benchmarks of the GEMM kernel alone).
void gemm_packed_plan(GemmPlan plan, bool convert_x, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, void* scratch, cudaStream_t stream);
}  // namespace tessera::cuda::fast
