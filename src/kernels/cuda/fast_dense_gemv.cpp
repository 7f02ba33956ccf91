// Argument checks for the dense decode GEMV (fast_dense_gemv.cu holds the kernel).
#include "kernels/cuda/fast_dense_gemv.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace detail {
cudaError_t launch_dense_gemv(float* y, int64_t ldy, const float* x, int64_t ldx, int T, const void* w, bool w_bf16,
                              int64_t N, int64_t K, cudaStream_t stream);  // fast_dense_gemv.cu
}

bool dense_gemv_supported(int64_t T, int64_t K, bool w_bf16, const float* x, int64_t ldx) {
    return T >= 1 && T <= kDenseGemvMaxTokens && K > 0 && K % (w_bf16 ? 8 : 4) == 0 &&
           reinterpret_cast<uintptr_t>(x) % 16 == 0 && (T == 1 || ldx % 4 == 0);
}

void dense_gemv(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const void* w, bool w_bf16, int64_t N,
                int64_t K, cudaStream_t stream) {
    TS_CHECK(N >= 0 && K >= 0 && T >= 0, "dense_gemv: bad shape T {} N {} K {}", T, N, K);
    if (T == 0 || N == 0) return;
    TS_CHECK(dense_gemv_supported(T, K, w_bf16, x, ldx),
             "dense_gemv: T {} K {} ({}) with x row stride {} is not supported (T <= {}, 16-byte rows and x)", T, K,
             w_bf16 ? "bf16" : "f32", ldx, kDenseGemvMaxTokens);
    TS_CHECK(w != nullptr, "dense_gemv: w is null for [{}, {}]", N, K);
    TS_CHECK(reinterpret_cast<uintptr_t>(w) % 16 == 0, "dense_gemv: w is not 16-byte aligned");
    TS_CHECK(N <= INT32_MAX, "dense_gemv: {} rows exceed a grid", N);
    ref::detail::check_rows("dense_gemv", "x", x, ldx, T, K);
    ref::detail::check_rows("dense_gemv", "y", y, ldy, T, N);
    TS_CUDA_CHECK(detail::launch_dense_gemv(y, ldy, x, ldx, int(T), w, w_bf16, N, K, stream));
}

}  // namespace tessera::cuda::fast
