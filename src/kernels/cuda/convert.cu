// Row-wise float conversions: a block per row and span of 1024 columns, four columns a thread
// (one 16- / 8-byte load and store where the rows are aligned for them).
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

// Four consecutive elements of a row, moved as one aligned load / store.
template <typename T>
struct alignas(4 * sizeof(T)) Vec4 {
    T v[4];
};

// y[rows, cols] (stride ldy) = Op(x[rows, cols] (stride ldx)): a block of 256 threads per row and
// span of 1024 columns (grid-stride over both), four consecutive columns a thread — one load and
// one store of four where `vec` (every row of x and y aligned for them, cols a multiple of 4),
// else element by element.
constexpr int kThreads = 256;
template <typename Out, typename In, typename Op>
__global__ void __launch_bounds__(kThreads)
    convert_rows_kernel(Out* y, int64_t ldy, const In* x, int64_t ldx, int64_t rows, int64_t cols, bool vec) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const In* xr = x + r * ldx;
        Out* yr = y + r * ldy;
        for (int64_t c = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * 4; c < cols;
             c += int64_t(gridDim.x) * kThreads * 4) {
            if (vec) {
                const Vec4<In> a = *reinterpret_cast<const Vec4<In>*>(xr + c);
                Vec4<Out> b;
#pragma unroll
                for (int e = 0; e < 4; ++e) b.v[e] = Op{}(a.v[e]);
                *reinterpret_cast<Vec4<Out>*>(yr + c) = b;
            } else {
                for (int64_t e = c; e < c + 4 && e < cols; ++e) yr[e] = Op{}(xr[e]);
            }
        }
    }
}

template <typename Out, typename In, typename Op>
cudaError_t launch(void* y, int64_t ldy, const void* x, int64_t ldx, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
    auto aligned = [](const void* p, int64_t ld, size_t elem) {
        return reinterpret_cast<uintptr_t>(p) % (4 * elem) == 0 && ld % 4 == 0;
    };
    const bool vec = cols % 4 == 0 && aligned(x, ldx, sizeof(In)) && aligned(y, ldy, sizeof(Out));
    const int64_t spans = (cols + 4 * kThreads - 1) / (4 * kThreads);
    const dim3 grid(unsigned(spans < 65535 ? spans : 65535), unsigned(rows < 65535 ? rows : 65535));
    convert_rows_kernel<Out, In, Op><<<grid, kThreads, 0, stream>>>(static_cast<Out*>(y), ldy,
                                                                    static_cast<const In*>(x), ldx, rows, cols, vec);
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
