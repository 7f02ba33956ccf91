// y = x · wᵀ for f32 x and f32 w on the tensor cores at f32's accuracy class (3×TF32): the prefill's
// f32 matrices — the MoE router (and its stacked shared-expert gate row), f32 checkpoints' small
// projections — which otherwise take cuBLAS's SIMT f32 GEMM (5 % of an 8K prefill of the flagship:
// ~70 µs for 2,048 tokens × 257 rows × 2,048 on an H100, session 46; 26 µs here). Raw device
// pointers, element strides, row-major; queued on `stream`; bad host-side arguments throw Error.
// CudaBackend takes it for f32 matrices of up to kGemmF32MaxWeights from kGemmF32MinTokens tokens
// (TESSERA_F32_GEMM=cublas: cuBLAS's everywhere); measured in fast_gemm_f32.cu's header.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

// Tokens from which the backend takes gemm_f32_tf32x3 over cuBLAS. Below, its few blocks (a 64-token
// tile × 72 rows each) leave most SMs idle and each walks all of K: ~24 µs at 16–512 tokens of the
// router against cuBLAS's 12.8 / 12.4 / 17.6 / 27.6 at 16 / 64 / 128 / 512 (H100, session 47).
constexpr int64_t kGemmF32MinTokens = 512;
// The largest w (N·K weights) the backend splits into scratch for it (64 MiB of halves): the
// router's 257 × 2,048 and the like; an f32 checkpoint's big projections keep cuBLAS rather than
// twice their bytes of scratch and a split a call.
constexpr int64_t kGemmF32MaxWeights = int64_t(8) << 20;

// Whether gemm_f32_tf32x3 takes these operands: K and ldx multiples of 4 and x, w 16-byte aligned
// (its tiles arrive by TMA), every size within the grid's and the tensor maps' ranges.
bool gemm_f32_tf32x3_fits(const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K);
// Scratch bytes gemm_f32_tf32x3 needs for w [N, K]: its TF32 hi and lo halves.
size_t gemm_f32_tf32x3_scratch(int64_t N, int64_t K);
// y[T, N] (rows ldy apart) = x[T, K] (rows ldx apart) · w[N, K]ᵀ (contiguous rows), each product
// a·b as lo_a·hi_b + hi_a·lo_b + hi_a·hi_b over TF32 halves (fast_mma.cuh, tf32_split): within
// 3·2^-20 of each product (~7e-7 on average), f32-class — the tests hold every element within 4e-6
// of Σ|x·w| of the exact sum — f32 accumulators, the same bits every call. `scratch` (16-byte
// aligned, gemm_f32_tf32x3_scratch bytes) receives w's halves first. K = 0 writes zeros (as cuBLAS
// with beta 0); T or N = 0 does nothing.
void gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N,
                     int64_t K, void* scratch, size_t scratch_bytes, cudaStream_t stream);

namespace detail {
// w's TF32 halves (hi = w with its low 13 mantissa bits cleared, lo = w − hi: exact), n floats (n %
// 4 == 0, every pointer 16-byte aligned).
cudaError_t launch_tf32_split(const float* w, float* hi, float* lo, int64_t n, cudaStream_t stream);
// The product on w's halves (T, N, K ≥ 1).
cudaError_t launch_gemm_f32_tf32x3_tma(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w_hi,
                                       const float* w_lo, int T, int N, int K, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
