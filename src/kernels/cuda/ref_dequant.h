// Reference dequantization on the device: a weight matrix of any matmul dtype (F32 F16 BF16
// Q8_0 Q4_0 Q4_K Q6_K MXFP4; block layouts in core/quant_blocks.h) to bf16, for the plain
// dequantize + cuBLAS path. Each element is computed in f32 exactly as formats/quants.cpp's
// dequantize_row does (same operations, same order, no FMA contraction), then rounded to bf16
// as core/half.h rounds: the output equals f32_to_bf16(dequantize_row(...)) bit for bit (NaNs
// may differ in payload). Raw device pointers; queued on `stream`, no host synchronisation.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace tessera::cuda::ref {

// out[rows, cols] (bf16 bits, contiguous) = src[rows, cols] of `type`, rows contiguous
// (dtype_row_bytes(type, cols) bytes each). cols must be a whole number of blocks. Throws Error
// on an unsupported dtype, a bad shape, a null or misaligned pointer, or a failed launch.
void dequantize_to_bf16(uint16_t* out, const void* src, DType type, int64_t rows, int64_t cols, cudaStream_t stream);

// Whether dequantize_to_bf16 accepts `type`.
bool can_dequantize_to_bf16(DType type);

namespace detail {
// The one entry point into ref_dequant.cu (which includes no fmt: nvcc rejects its consteval
// format strings). Arguments are already checked; returns the launch's error.
cudaError_t launch_dequantize_to_bf16(uint16_t* out, const void* src, DType type, int64_t rows, int64_t cols,
                                      cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
