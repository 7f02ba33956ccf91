// y = x · wᵀ for f32 x and f32 w on the tensor cores at f32's accuracy class (3×TF32): the prefill's
// f32 matrices — the MoE router (and its stacked shared-expert gate row), f32 checkpoints' small
// projections — which otherwise take cuBLAS's SIMT f32 GEMM (5 % of an 8K prefill of the flagship:
// ~70 µs for 2,048 tokens × 257 rows × 2,048 on an H100, session 46; 26 µs here). Raw device
// pointers, element strides, row-major; queued on `stream`; bad host-side arguments throw Error.
// CudaBackend takes it for f32 matrices of up to kGemmF32MaxWeights from kGemmF32MinTokens tokens
// (TESSERA_F32_GEMM=cublas: cuBLAS's everywhere); measured in fast_gemm_f32.cu's header.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

// Tokens from which the backend takes gemm_f32_tf32x3 over cuBLAS. K whole, its few blocks (a
// 64-token tile × 72 rows each) left most SMs idle below 512 tokens (~24 µs at 16–512 tokens of the
// router, session 47); split over K (gemm_f32_split, session 48) it leads from 128 — bench_fast_gemm
// --kinds f32, router 257 × 2,048, w's split included, H100, µs against cuBLAS: 16 tokens 12.03 /
// 12.42, 64 13.73 / 13.22, 128 15.10 / 18.59, 256 16.32 / 19.97, 512 18.69 / 28.48.
constexpr int64_t kGemmF32MinTokens = 128;
// The largest w (N·K weights) the backend splits into scratch for it (64 MiB of halves): the
// router's 257 × 2,048 and the like; an f32 checkpoint's big projections keep cuBLAS rather than
// twice their bytes of scratch and a split a call.
constexpr int64_t kGemmF32MaxWeights = int64_t(8) << 20;

// Whether gemm_f32_tf32x3 takes these operands: K and ldx multiples of 4 and x, w 16-byte aligned
// (its tiles arrive by TMA), every size within the grid's and the tensor maps' ranges.
bool gemm_f32_tf32x3_fits(const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K);
// K split over the blocks where the tiles leave SMs idle (few tokens): `splits` parts of `per`
// k-steps (of 32 columns) each, summed in split order after the product — the pick,
// gemm_f32_split, a pure function of the shape and the SM count.
struct GemmF32Split {
    int splits = 1, per = 1;
};
// The kernel's k-step (columns of x and w: a 128-byte row of floats) and a block's tile (tokens ×
// rows of w), which fast_gemm_f32.cu builds on.
constexpr int kGemmF32KStep = 32, kGemmF32TileTokens = 64, kGemmF32TileRows = 72;
constexpr int64_t gemm_f32_k_steps(int64_t K) { return (K + kGemmF32KStep - 1) / kGemmF32KStep; }
constexpr int kGemmF32MaxSplits = 16, kGemmF32MinSplitSteps = 4;
constexpr GemmF32Split gemm_f32_split(int64_t T, int64_t N, int64_t K, int sms) {
    const int64_t n_k = gemm_f32_k_steps(K), tiles = ((T + kGemmF32TileTokens - 1) / kGemmF32TileTokens) *
                                                     ((N + kGemmF32TileRows - 1) / kGemmF32TileRows);
    if (n_k < 1 || tiles < 1) return {};
    // Splits while the tiles still fit the SMs once (a block an SM: its ring fills the shared memory),
    // each at least kGemmF32MinSplitSteps k-steps.
    int64_t want = tiles >= sms / 2 ? 1 : std::min<int64_t>(sms / tiles, kGemmF32MaxSplits);
    want = std::max<int64_t>(1, std::min(want, n_k / kGemmF32MinSplitSteps));
    const int64_t per = (n_k + want - 1) / want;
    return {int((n_k + per - 1) / per), int(per)};  // (no split left empty)
}
// Scratch bytes gemm_f32_tf32x3 needs for x [T, K] · w [N, K]ᵀ: w's TF32 hi and lo halves, and with a
// K split the parts [splits][T][N] (on the current device's SM count).
size_t gemm_f32_tf32x3_scratch(int64_t T, int64_t N, int64_t K);
// y[T, N] (rows ldy apart) = x[T, K] (rows ldx apart) · w[N, K]ᵀ (contiguous rows), each product
// a·b as lo_a·hi_b + hi_a·lo_b + hi_a·hi_b over TF32 halves (fast_mma.cuh, tf32_split): within
// 3·2^-20 of each product (~7e-7 on average), f32-class — the tests hold every element within 4e-6
// of Σ|x·w| of the exact sum — f32 accumulators, the same bits every call. `scratch` (16-byte
// aligned, gemm_f32_tf32x3_scratch bytes) receives w's halves first (and the split parts). K = 0
// writes zeros (as cuBLAS with beta 0); T or N = 0 does nothing.
void gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N,
                     int64_t K, void* scratch, size_t scratch_bytes, cudaStream_t stream);

namespace detail {
// w's TF32 halves (hi = w with its low 13 mantissa bits cleared, lo = w − hi: exact), n floats (n %
// 4 == 0, every pointer 16-byte aligned).
cudaError_t launch_tf32_split(const float* w, float* hi, float* lo, int64_t n, cudaStream_t stream);
// The product on w's halves (T, N, K ≥ 1), K split as `split` says (parts: [splits][T][N] floats
// where splits > 1).
cudaError_t launch_gemm_f32_tf32x3_tma(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w_hi,
                                       const float* w_lo, int T, int N, int K, GemmF32Split split, float* parts,
                                       cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
