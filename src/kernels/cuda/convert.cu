// Row-wise float conversions: one grid-stride loop over rows * cols elements.
#include "kernels/cuda/convert.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tessera::cuda::detail {

namespace {

struct F32ToBf16 {
    __device__ uint16_t operator()(float v) const { return __bfloat16_as_ushort(__float2bfloat16_rn(v)); }
};
struct Bf16ToF32 {
    __device__ float operator()(uint16_t v) const { return __bfloat162float(__ushort_as_bfloat16(v)); }
};
struct F32ToF16 {
    __device__ uint16_t operator()(float v) const { return __half_as_ushort(__float2half_rn(v)); }
};
struct F16ToF32 {
    __device__ float operator()(uint16_t v) const { return __half2float(__ushort_as_half(v)); }
};

// y[rows, cols] (stride ldy) = Op(x[rows, cols] (stride ldx))
template <typename Out, typename In, typename Op>
__global__ void convert_rows_kernel(Out* y, int64_t ldy, const In* x, int64_t ldx, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
        const int64_t r = i / cols, c = i - r * cols;
        y[r * ldy + c] = Op{}(x[r * ldx + c]);
    }
}

template <typename Out, typename In, typename Op>
cudaError_t launch(void* y, int64_t ldy, const void* x, int64_t ldx, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
    constexpr int threads = 256;
    int64_t blocks = (rows * cols + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536;  // grid-stride loop covers the rest
    convert_rows_kernel<Out, In, Op><<<unsigned(blocks), threads, 0, stream>>>(
        static_cast<Out*>(y), ldy, static_cast<const In*>(x), ldx, rows, cols);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_convert_rows(ConvertOp op, void* y, int64_t ldy, const void* x, int64_t ldx, int64_t rows,
                                int64_t cols, cudaStream_t stream) {
    switch (op) {
        case ConvertOp::F32ToBf16: return launch<uint16_t, float, F32ToBf16>(y, ldy, x, ldx, rows, cols, stream);
        case ConvertOp::Bf16ToF32: return launch<float, uint16_t, Bf16ToF32>(y, ldy, x, ldx, rows, cols, stream);
        case ConvertOp::F32ToF16: return launch<uint16_t, float, F32ToF16>(y, ldy, x, ldx, rows, cols, stream);
        case ConvertOp::F16ToF32: return launch<float, uint16_t, F16ToF32>(y, ldy, x, ldx, rows, cols, stream);
    }
    return cudaErrorInvalidValue;
}

}  // namespace tessera::cuda::detail
