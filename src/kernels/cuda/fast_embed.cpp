// Argument checks for the packed-row dequantization (fast_embed.cu holds the kernel).
#include "kernels/cuda/fast_embed.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace detail {
void check_packed(const char* op, const PackedMatrix& w);  // fast_gemv.cpp
cudaError_t launch_dequant_rows(float* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids, int64_t rows,
                                cudaStream_t stream);  // fast_embed.cu
cudaError_t launch_dequant_rows_bf16(uint16_t* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids,
                                     int64_t rows, cudaStream_t stream);  // fast_embed.cu
}  // namespace detail

void dequant_rows(float* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids, int64_t rows,
                  cudaStream_t stream) {
    detail::check_packed("dequant_rows", w);
    TS_CHECK(rows >= 0, "dequant_rows: {} rows", rows);
    if (rows == 0 || w.k == 0) return;
    TS_CHECK(w.n > 0, "dequant_rows: the packed matrix has no rows to read");
    TS_CHECK(rows <= INT32_MAX, "dequant_rows: {} rows exceed a grid", rows);
    ref::detail::check_rows("dequant_rows", "y", y, ldy, rows, w.k);
    TS_CUDA_CHECK(detail::launch_dequant_rows(y, ldy, w, ids, rows, stream));
}

void dequant_rows_bf16(uint16_t* y, int64_t ldy, const PackedMatrix& w, int64_t rows, cudaStream_t stream) {
    detail::check_packed("dequant_rows_bf16", w);
    TS_CHECK(rows >= 0 && rows <= w.n && rows <= INT32_MAX, "dequant_rows_bf16: {} rows of [{}, {}]", rows, w.n, w.k);
    if (rows == 0 || w.k == 0) return;
    TS_CHECK(y != nullptr && ldy >= w.k, "dequant_rows_bf16: null y or row stride {} < {}", ldy, w.k);
    TS_CUDA_CHECK(detail::launch_dequant_rows_bf16(y, ldy, w, nullptr, rows, stream));
}

}  // namespace tessera::cuda::fast
