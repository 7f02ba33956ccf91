// Argument checks for the conversion kernels (convert.cu holds the device code).
#include "kernels/cuda/convert.h"

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

namespace {
void convert_rows(const char* name, detail::ConvertOp op, void* y, int64_t ldy, const void* x, int64_t ldx,
                  int64_t rows, int64_t cols, cudaStream_t stream) {
    TS_CHECK(rows >= 0 && cols >= 0, "{}: bad shape [{}, {}]", name, rows, cols);
    if (rows == 0 || cols == 0) return;
    TS_CHECK(ldx >= cols && ldy >= cols, "{}: row strides ldx={} ldy={} smaller than cols={}", name, ldx, ldy,
             cols);
    TS_CHECK(x != nullptr && y != nullptr, "{}: null pointer for [{}, {}]", name, rows, cols);
    TS_CUDA_CHECK(detail::launch_convert_rows(op, y, ldy, x, ldx, rows, cols, stream));
}
}  // namespace

void f32_to_bf16_rows(uint16_t* y, int64_t ldy, const float* x, int64_t ldx, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
    convert_rows("f32_to_bf16_rows", detail::ConvertOp::F32ToBf16, y, ldy, x, ldx, rows, cols, stream);
}
void bf16_to_f32_rows(float* y, int64_t ldy, const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols,
                      cudaStream_t stream) {
    convert_rows("bf16_to_f32_rows", detail::ConvertOp::Bf16ToF32, y, ldy, x, ldx, rows, cols, stream);
}
void f32_to_f16_rows(uint16_t* y, int64_t ldy, const float* x, int64_t ldx, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
    convert_rows("f32_to_f16_rows", detail::ConvertOp::F32ToF16, y, ldy, x, ldx, rows, cols, stream);
}
void f16_to_f32_rows(float* y, int64_t ldy, const uint16_t* x, int64_t ldx, int64_t rows, int64_t cols,
                     cudaStream_t stream) {
    convert_rows("f16_to_f32_rows", detail::ConvertOp::F16ToF32, y, ldy, x, ldx, rows, cols, stream);
}

}  // namespace tessera::cuda
