// Argument checks of fast::gemm_f32_tf32x3 (fast_gemm_f32.cu holds the device code).
#include "kernels/cuda/fast_gemm_f32.h"

#include <climits>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda::fast {

bool gemm_f32_tf32x3_fits(const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K) {
    // (grid: 64-token tiles along x (2^31 − 1 blocks), 72-row tiles along y (65,535))
    return T >= 0 && N >= 0 && K >= 0 && T <= INT_MAX && N <= int64_t(65535) * 72 && K <= INT_MAX && K % 4 == 0 &&
           ldx % 4 == 0 && ldx >= K && (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
}

namespace {

// w's halves, then (split) the parts [splits][T][N].
size_t bytes_for(GemmF32Split sp, int64_t T, int64_t N, int64_t K) {
    return (size_t(2) * size_t(N) * size_t(K) + (sp.splits > 1 ? size_t(sp.splits) * size_t(T) * size_t(N) : 0)) *
           sizeof(float);
}

}  // namespace

size_t gemm_f32_tf32x3_scratch(int64_t T, int64_t N, int64_t K) {
    return bytes_for(gemm_f32_split(T, N, K, current_sm_count()), T, N, K);
}

void gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N,
                     int64_t K, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
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
    const GemmF32Split split = gemm_f32_split(T, N, K, current_sm_count());
    const size_t need = bytes_for(split, T, N, K);
    TS_CHECK(scratch && reinterpret_cast<uintptr_t>(scratch) % 16 == 0 && scratch_bytes >= need,
             "gemm_f32_tf32x3: scratch of {} bytes at {} for w's halves and the split parts: needs {}, 16-byte "
             "aligned",
             scratch_bytes, scratch, need);
    float* const hi = static_cast<float*>(scratch);
    float* const lo = hi + N * K;
    TS_CUDA_CHECK(detail::launch_tf32_split(w, hi, lo, N * K, stream));
    TS_CUDA_CHECK(detail::launch_gemm_f32_tf32x3_tma(y, ldy, x, ldx, hi, lo, int(T), int(N), int(K), split,
                                                     lo + N * K, stream));
}

}  // namespace tessera::cuda::fast
