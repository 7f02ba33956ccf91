// Argument checks for the int8-x decode GEMV (fast_gemv_q8.cu holds the kernels).
#include "kernels/cuda/fast_gemv_q8.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace detail {
void check_packed(const char* op, const PackedMatrix& w);  // fast_gemv.cpp
cudaError_t launch_gemv_q8(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                           void* scratch, cudaStream_t stream);
}  // namespace detail

size_t gemv_q8_scratch(int64_t T, int64_t K) {
    const size_t codes = (size_t(T * K) + 255) / 256 * 256;
    return codes + size_t(T * (K / kGemvQ8Group)) * 2 * sizeof(float);
}

void gemv_q8(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w, void* scratch,
             cudaStream_t stream) {
    detail::check_packed("gemv_q8", w);
    TS_CHECK(T >= 0 && T <= kGemvQ8MaxTokens, "gemv_q8: T = {} tokens (1..{})", T, kGemvQ8MaxTokens);
    if (T == 0 || w.n == 0) return;
    ref::detail::check_rows("gemv_q8", "y", y, ldy, T, w.n);
    if (w.k == 0) {
        TS_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * sizeof(float), 0, size_t(w.n) * sizeof(float), size_t(T),
                                        stream));
        return;
    }
    TS_CHECK(w.k % kGemvQ8Group == 0, "gemv_q8: K = {} is not a multiple of {}", w.k, kGemvQ8Group);
    ref::detail::check_rows("gemv_q8", "x", x, ldx, T, w.k);
    const ref::detail::Span ys = ref::detail::span_of(y, ldy, T, w.n), xs = ref::detail::span_of(x, ldx, T, w.k);
    TS_CHECK(!ref::detail::overlaps(ys, xs), "gemv_q8: y overlaps x");
    TS_CHECK(scratch && reinterpret_cast<uintptr_t>(scratch) % 256 == 0, "gemv_q8: scratch must be 256-byte aligned");
    TS_CUDA_CHECK(detail::launch_gemv_q8(y, ldy, x, ldx, T, w, scratch, stream));
}

}  // namespace tessera::cuda::fast
