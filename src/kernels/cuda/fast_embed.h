// Rows of a packed matrix (packed_weight.h) dequantized to f32 on the device: the embedding
// gather on a packed table (token embeddings, a tied lm_head) and the whole-matrix unpack the
// fast path's many-token fallback multiplies with cuBLAS. Raw pointers; queued on `stream`.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

// y[i, :] (f32, row stride ldy ≥ w.k) = row ids[i] of w as scale · code + bias, for i < rows.
// ids on the device, or null for rows 0..rows-1. An id outside [0, w.n) fills its row with NaN
// (the ids cannot be checked on the host without a sync).
void dequant_rows(float* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids, int64_t rows, cudaStream_t stream);
// Rows 0..rows-1 of w as bf16 bits (the f32 value rounded once): the prefill path that hands
// the whole matrix to cuBLAS's bf16 tensor-core GEMM (CudaBackend::matmul_packed).
void dequant_rows_bf16(uint16_t* y, int64_t ldy, const PackedMatrix& w, int64_t rows, cudaStream_t stream);

}  // namespace tessera::cuda::fast
