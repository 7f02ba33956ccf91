// Argument checks for the reference dequantization (ref_dequant.cu holds the device code).
#include "kernels/cuda/ref_dequant.h"

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::ref {

bool can_dequantize_to_bf16(DType type) {
    switch (type) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0:
        case DType::Q4_K: case DType::Q6_K: case DType::MXFP4:
            return true;
        default:
            return false;
    }
}

void dequantize_to_bf16(uint16_t* out, const void* src, DType type, int64_t rows, int64_t cols, cudaStream_t stream) {
    if (!can_dequantize_to_bf16(type))
        fail(ErrorKind::Unsupported, "dequantize_to_bf16: weights of dtype {} are not supported", dtype_name(type));
    TS_CHECK(rows >= 0 && cols >= 0, "dequantize_to_bf16: bad shape [{}, {}]", rows, cols);
    const DTypeInfo& info = dtype_info(type);
    TS_CHECK(cols % info.block_elems == 0, "dequantize_to_bf16: {} rows of {} elements are not whole {}-element blocks",
             dtype_name(type), cols, info.block_elems);
    if (rows == 0 || cols == 0) return;
    TS_CHECK(out != nullptr && src != nullptr, "dequantize_to_bf16: null pointer for {} [{}, {}]", dtype_name(type),
             rows, cols);
    // The kernels read blocks through their structs: f32 needs 4-byte alignment, the f16 scales 2.
    const uintptr_t align = type == DType::F32 ? 4 : type == DType::MXFP4 ? 1 : 2;
    TS_CHECK(reinterpret_cast<uintptr_t>(src) % align == 0 && reinterpret_cast<uintptr_t>(out) % 2 == 0,
             "dequantize_to_bf16: {} source {} or output {} is misaligned", dtype_name(type), src,
             static_cast<const void*>(out));
    TS_CUDA_CHECK(detail::launch_dequantize_to_bf16(out, src, type, rows, cols, stream));
}

}  // namespace tessera::cuda::ref
