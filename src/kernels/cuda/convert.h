// Row-wise float conversions on the device: f32 <-> bf16 and f32 <-> f16, round to nearest
// even (the CUDA intrinsics; core/half.h is the CPU counterpart the tests compare against).
// Raw device pointers; 16-bit values are their bit patterns (uint16_t). Row strides are in
// elements (ld >= cols). Queued on `stream` (asynchronous); throws Error on bad arguments or
// a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda {

// y[rows, cols] (stride ldy) = x[rows, cols] (stride ldx) converted
void f32_to_bf16_rows(uint16_t* y, int64_t ldy, const float* x, int64_t ldx, int64_t rows, int64_t cols,
                      cudaStream_t stream);
void bf16_to_f32_rows(float* y, int64_t ldy, const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols,
                      cudaStream_t stream);
void f32_to_f16_rows(uint16_t* y, int64_t ldy, const float* x, int64_t ldx, int64_t rows, int64_t cols,
                     cudaStream_t stream);
void f16_to_f32_rows(float* y, int64_t ldy, const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols,
                     cudaStream_t stream);

namespace detail {
// The one entry point into convert.cu (which includes no fmt: nvcc rejects its consteval
// format strings). Arguments are already checked; returns the launch's error.
enum class ConvertOp { F32ToBf16, Bf16ToF32, F32ToF16, F16ToF32 };
cudaError_t launch_convert_rows(ConvertOp op, void* y, int64_t ldy, const void* x, int64_t ldx, int64_t rows,
                                int64_t cols, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda
