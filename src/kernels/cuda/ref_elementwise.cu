// Elementwise reference kernels: one grid-stride loop over rows * cols, f32 math written in
// the same order as the CPU ops (kernels/cpu/elementwise.cpp, gating.cpp), expf not __expf.
#include "kernels/cuda/ref_elementwise.h"

#include "kernels/cuda/ref_reduce.cuh"

namespace tessera::cuda::ref::detail {

namespace {

__device__ inline float sigmoid(float v) { return 1.f / (1.f + expf(-v)); }

// y[rows, cols] = silu(g) ⊙ u
__global__ void swiglu_kernel(float* y, int64_t ldy, const float* g, int64_t ldg, const float* u, int64_t ldu,
                              int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int64_t r = i / cols, c = i - r * cols;
        const float gv = g[r * ldg + c];
        y[r * ldy + c] = gv / (1.f + expf(-gv)) * u[r * ldu + c];
    }
}

// y[rows, cols] = a + b
__global__ void add_kernel(float* y, int64_t ldy, const float* a, int64_t lda, const float* b, int64_t ldb,
                           int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int64_t r = i / cols, c = i - r * cols;
        y[r * ldy + c] = a[r * lda + c] + b[r * ldb + c];
    }
}

// y[rows, cols] += bias[cols]
__global__ void add_bias_kernel(float* y, int64_t ldy, const float* bias, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int64_t r = i / cols, c = i - r * cols;
        y[r * ldy + c] += bias[c];
    }
}

// y[rows, cols] = x ⊙ σ(g); g [rows, cols] or [rows, 1]
__global__ void sigmoid_mul_kernel(float* y, int64_t ldy, const float* x, int64_t ldx, const float* g, int64_t ldg,
                                   bool per_row, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    for (int64_t i = global_thread(); i < n; i += grid_threads()) {
        const int64_t r = i / cols, c = i - r * cols;
        const float gv = per_row ? g[r * ldg] : g[r * ldg + c];
        y[r * ldy + c] = x[r * ldx + c] * sigmoid(gv);
    }
}

// The same over [T, n, D] views with their own token and head strides; element i = (t·n + h)·D + c.
__global__ void sigmoid_mul_heads_kernel(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                         int64_t x_head, const float* g, int64_t g_tok, int64_t g_head, int64_t T,
                                         int64_t n, int64_t D) {
    const int64_t total = T * n * D;
    for (int64_t i = global_thread(); i < total; i += grid_threads()) {
        const int64_t r = i / D, c = i - r * D, t = r / n, h = r - t * n;
        y[t * y_tok + h * y_head + c] = x[t * x_tok + h * x_head + c] * sigmoid(g[t * g_tok + h * g_head + c]);
    }
}

unsigned blocks_for(int64_t rows, int64_t cols) { return grid_for(rows * cols, kElemThreads); }

}  // namespace

cudaError_t launch_swiglu(float* y, int64_t ldy, const float* g, int64_t ldg, const float* u, int64_t ldu,
                          int64_t rows, int64_t cols, cudaStream_t stream) {
    swiglu_kernel<<<blocks_for(rows, cols), kElemThreads, 0, stream>>>(y, ldy, g, ldg, u, ldu, rows, cols);
    return cudaGetLastError();
}

cudaError_t launch_add(float* y, int64_t ldy, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
                       int64_t cols, cudaStream_t stream) {
    add_kernel<<<blocks_for(rows, cols), kElemThreads, 0, stream>>>(y, ldy, a, lda, b, ldb, rows, cols);
    return cudaGetLastError();
}

cudaError_t launch_add_bias(float* y, int64_t ldy, const float* bias, int64_t rows, int64_t cols,
                            cudaStream_t stream) {
    add_bias_kernel<<<blocks_for(rows, cols), kElemThreads, 0, stream>>>(y, ldy, bias, rows, cols);
    return cudaGetLastError();
}

cudaError_t launch_sigmoid_mul(float* y, int64_t ldy, const float* x, int64_t ldx, const float* g, int64_t ldg,
                               bool per_row, int64_t rows, int64_t cols, cudaStream_t stream) {
    sigmoid_mul_kernel<<<blocks_for(rows, cols), kElemThreads, 0, stream>>>(y, ldy, x, ldx, g, ldg, per_row, rows,
                                                                           cols);
    return cudaGetLastError();
}

cudaError_t launch_sigmoid_mul_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                     int64_t x_head, const float* g, int64_t g_tok, int64_t g_head, int64_t T,
                                     int64_t n, int64_t D, cudaStream_t stream) {
    sigmoid_mul_heads_kernel<<<blocks_for(T * n, D), kElemThreads, 0, stream>>>(y, y_tok, y_head, x, x_tok, x_head, g,
                                                                               g_tok, g_head, T, n, D);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::ref::detail
