// Reference matmul on the device through cuBLAS: y[T, N] = x[T, K] · w[N, K]ᵀ with f32
// activations and outputs, weights already dequantized to bf16 (ref_dequant.h) or kept in f32.
// Row-major tensors, row strides in elements; raw device pointers; queued on `stream` (the
// handle is bound to it), no host synchronisation. Throws Error on bad arguments or a cuBLAS
// failure.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/cublas_handle.h"

namespace tessera::cuda::ref {

// x is rounded to bf16 into x_scratch [T, K] (contiguous; cuBLAS takes no bf16 × f32 GEMM),
// then one cublasGemmEx: bf16 inputs, f32 accumulation (CUBLAS_COMPUTE_32F), f32 output.
// w_bf16: [N, K] contiguous bf16 bits. ldx >= K, ldy >= N; y must not overlap x or the scratch.
void matmul_bf16(float* y, int64_t ldy, const float* x, int64_t ldx, const uint16_t* w_bf16, int64_t T, int64_t N,
                 int64_t K, CublasHandle& handle, uint16_t* x_scratch, cudaStream_t stream);

// The same with f32 weights w [N, K] contiguous, in plain f32 (CUBLAS_COMPUTE_32F, TF32 off):
// the reference for models whose weights are f32 (the test fixtures).
void matmul_f32(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K,
                CublasHandle& handle, cudaStream_t stream);

}  // namespace tessera::cuda::ref
