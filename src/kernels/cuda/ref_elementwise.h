// Reference CUDA kernels for the elementwise Backend ops (swiglu, add, add_bias, sigmoid_mul):
// plain, obviously correct code that stays as the baseline the fast kernel pack is tested
// against. Same semantics and argument order as the ops in kernels/backend.h.
// Raw f32 device pointers; [rows, cols] views with row strides in elements (ld >= cols).
// Queued on `stream` (asynchronous, no host sync); throws Error on bad arguments or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::ref {

// y[rows, cols] = silu(gate) ⊙ up   (y may alias gate or up)
void swiglu(float* y, int64_t ldy, const float* gate, int64_t ldg, const float* up, int64_t ldu, int64_t rows,
            int64_t cols, cudaStream_t stream);

// y[rows, cols] = a + b   (y may alias a or b)
void add(float* y, int64_t ldy, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
         int64_t cols, cudaStream_t stream);

// y[rows, cols] += bias[cols] for every row
void add_bias(float* y, int64_t ldy, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

// y[rows, cols] = x ⊙ σ(gate); gate [rows, cols] (per_row false) or [rows, 1] (per_row true:
// gate[r * ldg] for row r). y may be x itself, or gate itself when not per_row; it must not
// overlap gate otherwise (checked).
void sigmoid_mul(float* y, int64_t ldy, const float* x, int64_t ldx, const float* gate, int64_t ldg, bool per_row,
                 int64_t rows, int64_t cols, cudaStream_t stream);

// y[T, n, D] = x ⊙ σ(g) over [T, n, D] views with token and head strides of their own (the
// attention output gate inside a stacked q | gate | k | v projection). y may be x itself; it must
// not overlap g.
void sigmoid_mul_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                       const float* g, int64_t g_tok, int64_t g_head, int64_t T, int64_t n, int64_t D,
                       cudaStream_t stream);

namespace detail {
// The entry points into ref_elementwise.cu (no fmt there). Arguments are already checked;
// each returns the launch's error.
cudaError_t launch_swiglu(float* y, int64_t ldy, const float* g, int64_t ldg, const float* u, int64_t ldu,
                          int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t launch_add(float* y, int64_t ldy, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
                       int64_t cols, cudaStream_t stream);
cudaError_t launch_add_bias(float* y, int64_t ldy, const float* bias, int64_t rows, int64_t cols,
                            cudaStream_t stream);
cudaError_t launch_sigmoid_mul(float* y, int64_t ldy, const float* x, int64_t ldx, const float* g, int64_t ldg,
                               bool per_row, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t launch_sigmoid_mul_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                     int64_t x_head, const float* g, int64_t g_tok, int64_t g_head, int64_t T,
                                     int64_t n, int64_t D, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
