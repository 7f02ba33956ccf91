// Reference matmul: row-major y = x · wᵀ as one column-major cuBLAS GEMM. To cuBLAS a row-major
// [R, C] matrix with row stride ld is the column-major [C, R] matrix with leading dimension ld,
// so y = x·wᵀ becomes yᵀ = w·xᵀ: C [N, T] (ldc = ldy) = Aᵀ·B with A = w seen as [K, N]
// (lda = K) and B = x seen as [K, T] (ldb = ldx); m = N, n = T, k = K.
#include "kernels/cuda/ref_matmul.h"

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::ref {

namespace {

void check_args(const char* op, const float* y, int64_t ldy, const float* x, int64_t ldx, const void* w, int64_t T,
                int64_t N, int64_t K) {
    TS_CHECK(T >= 0 && N >= 0 && K >= 0, "{}: bad shape T={} N={} K={}", op, T, N, K);
    TS_CHECK(T <= INT32_MAX && N <= INT32_MAX && K <= INT32_MAX, "{}: T={} N={} K={} exceed cuBLAS's int sizes", op,
             T, N, K);
    TS_CHECK(ldx >= K && ldy >= N && ldx <= INT32_MAX && ldy <= INT32_MAX,
             "{}: row strides ldx={} (K={}) ldy={} (N={}) out of range", op, ldx, K, ldy, N);
    if (T == 0 || N == 0) return;
    TS_CHECK(y != nullptr && (K == 0 || (x != nullptr && w != nullptr)), "{}: null pointer for T={} N={} K={}", op, T,
             N, K);
}

// y[T, N] = 0: cuBLAS with k = 0 and beta = 0 would do it too, but spell it out.
void zero_rows(float* y, int64_t ldy, int64_t T, int64_t N, cudaStream_t stream) {
    TS_CUDA_CHECK(cudaMemset2DAsync(y, size_t(ldy) * sizeof(float), 0, size_t(N) * sizeof(float), size_t(T), stream));
}

void gemm(CublasHandle& handle, cudaStream_t stream, float* y, int64_t ldy, const void* x, int64_t ldx,
          const void* w, int64_t T, int64_t N, int64_t K, cudaDataType_t in_type) {
    handle.bind(stream);
    const float alpha = 1.f, beta = 0.f;
    TS_CUBLAS_CHECK(cublasGemmEx(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &alpha, w, in_type,
                                 int(K), x, in_type, int(ldx), &beta, y, CUDA_R_32F, int(ldy), CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void matmul_bf16(float* y, int64_t ldy, const float* x, int64_t ldx, const uint16_t* w_bf16, int64_t T, int64_t N,
                 int64_t K, CublasHandle& handle, uint16_t* x_scratch, cudaStream_t stream) {
    check_args("matmul_bf16", y, ldy, x, ldx, w_bf16, T, N, K);
    if (T == 0 || N == 0) return;
    if (K == 0) return zero_rows(y, ldy, T, N, stream);
    TS_CHECK(x_scratch != nullptr, "matmul_bf16: null scratch for x [{}, {}]", T, K);
    f32_to_bf16_rows(x_scratch, K, x, ldx, T, K, stream);  // x_scratch [T, K] contiguous
    gemm(handle, stream, y, ldy, x_scratch, K, w_bf16, T, N, K, CUDA_R_16BF);
}

void matmul_f32(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t T, int64_t N, int64_t K,
                CublasHandle& handle, cudaStream_t stream) {
    check_args("matmul_f32", y, ldy, x, ldx, w, T, N, K);
    if (T == 0 || N == 0) return;
    if (K == 0) return zero_rows(y, ldy, T, N, stream);
    gemm(handle, stream, y, ldy, x, ldx, w, T, N, K, CUDA_R_32F);
}

}  // namespace tessera::cuda::ref
