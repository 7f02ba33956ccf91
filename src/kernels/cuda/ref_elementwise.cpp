// Argument checks for the elementwise reference kernels (ref_elementwise.cu holds the device code).
#include "kernels/cuda/ref_elementwise.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::ref {

using detail::check_rows;
using detail::check_shape;

void swiglu(float* y, int64_t ldy, const float* gate, int64_t ldg, const float* up, int64_t ldu, int64_t rows,
            int64_t cols, cudaStream_t stream) {
    check_shape("swiglu", rows, cols);
    if (rows == 0 || cols == 0) return;
    check_rows("swiglu", "y", y, ldy, rows, cols);
    check_rows("swiglu", "gate", gate, ldg, rows, cols);
    check_rows("swiglu", "up", up, ldu, rows, cols);
    TS_CUDA_CHECK(detail::launch_swiglu(y, ldy, gate, ldg, up, ldu, rows, cols, stream));
}

void add(float* y, int64_t ldy, const float* a, int64_t lda, const float* b, int64_t ldb, int64_t rows,
         int64_t cols, cudaStream_t stream) {
    check_shape("add", rows, cols);
    if (rows == 0 || cols == 0) return;
    check_rows("add", "y", y, ldy, rows, cols);
    check_rows("add", "a", a, lda, rows, cols);
    check_rows("add", "b", b, ldb, rows, cols);
    TS_CUDA_CHECK(detail::launch_add(y, ldy, a, lda, b, ldb, rows, cols, stream));
}

void add_bias(float* y, int64_t ldy, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream) {
    check_shape("add_bias", rows, cols);
    if (rows == 0 || cols == 0) return;
    check_rows("add_bias", "y", y, ldy, rows, cols);
    check_rows("add_bias", "bias", bias, cols, 1, cols);
    TS_CUDA_CHECK(detail::launch_add_bias(y, ldy, bias, rows, cols, stream));
}

void sigmoid_mul(float* y, int64_t ldy, const float* x, int64_t ldx, const float* gate, int64_t ldg, bool per_row,
                 int64_t rows, int64_t cols, cudaStream_t stream) {
    check_shape("sigmoid_mul", rows, cols);
    if (rows == 0 || cols == 0) return;
    const int64_t gcols = per_row ? 1 : cols;
    check_rows("sigmoid_mul", "y", y, ldy, rows, cols);
    check_rows("sigmoid_mul", "x", x, ldx, rows, cols);
    check_rows("sigmoid_mul", "gate", gate, ldg, rows, gcols);
    // Each element is read then written by one thread, so y may be x (or gate) itself; a per-row
    // gate is read by every element of its row and must not be overwritten by any of them.
    const auto ys = detail::span_of(y, ldy, rows, cols);
    const bool y_is_gate = y == gate && ldy == ldg && !per_row;
    TS_CHECK(y_is_gate || !detail::overlaps(ys, detail::span_of(gate, ldg, rows, gcols)),
             "sigmoid_mul: y [{}, {}] overlaps the gate{}", rows, cols, per_row ? " (one per row)" : "");
    TS_CHECK((y == x && ldy == ldx) || !detail::overlaps(ys, detail::span_of(x, ldx, rows, cols)),
             "sigmoid_mul: y must be x itself or not overlap it");
    TS_CUDA_CHECK(detail::launch_sigmoid_mul(y, ldy, x, ldx, gate, ldg, per_row, rows, cols, stream));
}

void sigmoid_mul_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                       const float* g, int64_t g_tok, int64_t g_head, int64_t T, int64_t n, int64_t D,
                       cudaStream_t stream) {
    const char* op = "sigmoid_mul_heads";
    TS_CHECK(T >= 0 && n >= 0 && D >= 0, "{}: bad shape [{}, {}, {}]", op, T, n, D);
    if (T == 0 || n == 0 || D == 0) return;
    detail::check_heads(op, "y", y, y_tok, y_head, T, n, D);
    detail::check_heads(op, "x", x, x_tok, x_head, T, n, D);
    detail::check_heads(op, "g", g, g_tok, g_head, T, n, D);
    // Each element is read then written by one thread: y may be x itself. y must not be the gate
    // (checked); partial overlaps are the caller's to rule out (the Backend passes separate buffers).
    TS_CHECK(y != g, "{}: y must not be the gate", op);
    TS_CUDA_CHECK(detail::launch_sigmoid_mul_heads(y, y_tok, y_head, x, x_tok, x_head, g, g_tok, g_head, T, n, D,
                                                   stream));
}

}  // namespace tessera::cuda::ref
