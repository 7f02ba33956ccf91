// Reference CUDA kernel for the embed Backend op: gathers table rows by token id and converts
// them to f32 on the device. Tables may be f32, f16, bf16 or quantized blocks (Q4_0, Q8_0,
// Q4_K, Q6_K, MXFP4; layouts in core/quant_blocks.h), dequantized exactly as formats/quants.cpp
// does. Raw device pointers; queued on `stream` (asynchronous); throws Error on bad arguments
// or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace tessera::cuda::ref {

// Whether embed() reads tables of dtype t.
bool embed_supports(DType t);

// y[T, H] (row stride ldy, elements) = table[ids[t], :] converted to f32. table [n_rows, H] of
// `dtype`, rows table_stride bytes apart (H a multiple of the dtype's block size); ids[T] on the
// device. The ids cannot be checked on the host without a sync: an id outside [0, n_rows)
// fills its row of y with NaN (so it cannot pass unnoticed) and reads nothing.
void embed(float* y, int64_t ldy, const void* table, DType dtype, int64_t table_stride, int64_t n_rows,
           const int32_t* ids, int64_t T, int64_t H, cudaStream_t stream);

namespace detail {
// The entry point into ref_embed.cu (no fmt there). Arguments are already checked.
cudaError_t launch_embed(float* y, int64_t ldy, const void* table, DType dtype, int64_t table_stride,
                         int64_t n_rows, const int32_t* ids, int64_t T, int64_t H, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
