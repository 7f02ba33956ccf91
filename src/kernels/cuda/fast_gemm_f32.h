// y = x · wᵀ for f32 x and f32 w on the tensor cores at f32's accuracy class (3×TF32): the prefill's
// f32 matrices — the MoE router (and its stacked shared-expert gate row), f32 checkpoints' small
// projections — which otherwise take cuBLAS's SIMT f32 GEMM (5 % of an 8K prefill of the flagship:
// 66 µs for 2,048 tokens × 257 rows × 2,048 on an H100, session 46). Raw device pointers, element
// strides, row-major; queued on `stream`; bad host-side arguments throw Error.
// Status: correct on the H100 (session 47: FastGemmF32.* and scripts/gpu/gemm_f32_check.cu, within
// 7e-7 of Σ|x·w| where cuBLAS's f32 is within 1e-7), but no faster than cuBLAS where the prefill
// uses it — 63.2 against 69.9 µs a 2,048-token chunk of the router, 31.4 against 27.6 at 512, the
// flagship's prefill level end to end (the first form: 41,859 against 42,008 tok/s at 8K, 35,985
// against 35,852 at 32K) — so CudaBackend takes it only under TESSERA_F32_GEMM=tf32x3; what would
// pay is the warpgroup MMA's TF32 (fast_gemm_f32.cu's header).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

// Whether gemm_f32_tf32x3 takes these operands: K and ldx multiples of 4 and x, w 16-byte aligned
// (its tiles arrive by 16-byte copies), every size within int range.
bool gemm_f32_tf32x3_fits(const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K);
// y[T, N] (rows ldy apart) = x[T, K] (rows ldx apart) · w[N, K]ᵀ (contiguous rows), each product
// a·b as lo_a·hi_b + hi_a·lo_b + hi_a·hi_b over TF32 halves (fast_mma.cuh, tf32_split): within
// 3·2^-20 of each product (~7e-7 on average), f32-class — the tests hold every element within 4e-6
// of Σ|x·w| of the exact sum — f32 accumulators, the same bits every call. Tiles of 64 tokens × 32
// rows, k-steps of 32 through a 3-stage cp.async ring, 4 warps of 32 × 16, fragments by ldmatrix.
// K = 0 writes zeros (as cuBLAS with beta 0); T or N = 0 does nothing.
void gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N,
                     int64_t K, cudaStream_t stream);

namespace detail {
cudaError_t launch_gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int T, int N,
                                   int K, cudaStream_t stream);
// The tile configurations (fast_gemm_f32.cu), 0 … kGemmF32Configs − 1, for the check's timings.
constexpr int kGemmF32Configs = 2, kGemmF32Default = 0;
cudaError_t launch_gemm_f32_tf32x3_config(int config, float* y, int64_t ldy, const float* x, int64_t ldx,
                                          const float* w, int T, int N, int K, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
