// Argument checks for the row-wise top-k (fast_topk.cu holds the kernel).
#include "kernels/cuda/fast_topk.h"

#include <limits>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

void edit_logits(float* x, int64_t ldx, const LogitEdit* edits, int64_t n, cudaStream_t stream) {
    TS_CHECK(n >= 0 && n <= std::numeric_limits<int32_t>::max(), "edit_logits: {} edits", n);
    if (n == 0) return;
    TS_CHECK(x && edits, "edit_logits: null logits or edits");
    TS_CUDA_CHECK(detail::launch_edit_logits(x, ldx, edits, n, stream));
}

void top_k(const float* x, int64_t ldx, int64_t rows, int64_t cols, int k, float* values, int32_t* ids,
           void* scratch, cudaStream_t stream) {
    TS_CHECK(k >= 1 && k <= kTopKMax, "top_k: k = {} out of [1, {}]", k, kTopKMax);
    TS_CHECK(rows >= 0 && cols >= 1, "top_k: bad shape [{}, {}]", rows, cols);
    TS_CHECK(cols <= std::numeric_limits<int32_t>::max() && rows <= std::numeric_limits<int32_t>::max(),
             "top_k: [{}, {}] is too large", rows, cols);
    if (rows == 0) return;
    ref::detail::check_rows("top_k", "x", x, ldx, rows, cols);
    TS_CHECK(values && ids, "top_k: null outputs");
    TS_CHECK(rows <= 65535, "top_k: {} rows (at most 65535)", rows);
    TS_CHECK(scratch || top_k_scratch_bytes(rows, cols, k) == 0, "top_k: [{}, {}] needs {} bytes of scratch", rows,
             cols, top_k_scratch_bytes(rows, cols, k));
    TS_CUDA_CHECK(detail::launch_top_k(x, ldx, rows, cols, k, values, ids, scratch, stream));
}

void argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, void* scratch,
            cudaStream_t stream) {
    TS_CHECK(rows >= 0 && rows <= 65535 && cols >= 1 && cols <= std::numeric_limits<int32_t>::max(),
             "argmax: bad shape [{}, {}]", rows, cols);
    if (rows == 0) return;
    ref::detail::check_rows("argmax", "x", x, ldx, rows, cols);
    TS_CHECK(out, "argmax: null output");
    TS_CHECK(scratch || argmax_scratch_bytes(rows, cols) == 0, "argmax: [{}, {}] needs {} bytes of scratch", rows,
             cols, argmax_scratch_bytes(rows, cols));
    TS_CUDA_CHECK(detail::launch_argmax(x, ldx, rows, cols, out, scratch, stream));
}

}  // namespace tessera::cuda::fast
