// Argument checks of fast::gemm_f32_tf32x3 (fast_gemm_f32.cu holds the device code).
#include "kernels/cuda/fast_gemm_f32.h"

#include <climits>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::fast {

bool gemm_f32_tf32x3_fits(const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K) {
    return T >= 0 && N >= 0 && K >= 0 && T <= INT_MAX && N <= int64_t(65535) * 32 && K <= INT_MAX && K % 4 == 0 &&
           ldx % 4 == 0 && ldx >= K && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
}

void gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N,
                     int64_t K, cudaStream_t stream) {
    TS_CHECK(gemm_f32_tf32x3_fits(x, ldx, w, T, N, K) && ldy >= N,
             "gemm_f32_tf32x3: y [{}, {}] (ldy {}) = x [{}, {}] (ldx {}) · w [{}, {}]ᵀ: needs K and ldx "
             "multiples of 4, 16-byte aligned x and w, row strides covering the rows",
             T, N, ldy, T, K, ldx, N, K);
    if (T == 0 || N == 0) return;
    TS_CHECK(y && x && w, "gemm_f32_tf32x3: null y, x or w");
    if (K == 0) {  // cuBLAS with k = 0 and beta = 0 writes zeros
        TS_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * 4, 0, size_t(N) * 4, size_t(T), stream));
        return;
    }
    TS_CUDA_CHECK(detail::launch_gemm_f32_tf32x3(y, ldy, x, ldx, w, int(T), int(N), int(K), stream));
}

}  // namespace tessera::cuda::fast
