// Argument checks for the embedding reference kernel (ref_embed.cu holds the device code).
#include "kernels/cuda/ref_embed.h"

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::ref {

bool embed_supports(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0:
        case DType::Q4_K: case DType::Q6_K: case DType::MXFP4:
            return true;
        default:
            return false;
    }
}

void embed(float* y, int64_t ldy, const void* table, DType dtype, int64_t table_stride, int64_t n_rows,
           const int32_t* ids, int64_t T, int64_t H, cudaStream_t stream) {
    detail::check_shape("embed", T, H);
    TS_CHECK(n_rows >= 0, "embed: bad table row count {}", n_rows);
    if (!embed_supports(dtype)) fail(ErrorKind::Unsupported, "embed: cuda cannot read {} tables", dtype_name(dtype));
    if (T == 0 || H == 0) return;
    const DTypeInfo& info = dtype_info(dtype);
    TS_CHECK(H % info.block_elems == 0, "embed: width {} is not a whole number of {} blocks of {}", H, info.name,
             info.block_elems);
    const int64_t row_bytes = H / info.block_elems * info.block_bytes;
    detail::check_rows("embed", "y", y, ldy, T, H);
    TS_CHECK(ids != nullptr, "embed: ids are null for {} tokens", T);
    TS_CHECK(n_rows > 0 && table != nullptr, "embed: the table is empty or null");
    TS_CHECK(n_rows == 1 || table_stride >= row_bytes, "embed: table row stride {} bytes is less than a row of {}",
             table_stride, row_bytes);
    // The block structs are read in place: their f16 scales (or f32 values) must be aligned.
    const int64_t align = dtype == DType::F32 ? 4 : dtype == DType::MXFP4 ? 1 : 2;
    TS_CHECK(reinterpret_cast<uintptr_t>(table) % uintptr_t(align) == 0 && table_stride % align == 0,
             "embed: {} table rows must be {}-byte aligned (stride {})", info.name, align, table_stride);
    TS_CUDA_CHECK(detail::launch_embed(y, ldy, table, dtype, table_stride, n_rows, ids, T, H, stream));
}

}  // namespace tessera::cuda::ref
