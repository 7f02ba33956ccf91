// Argument checks for the normalisation reference kernels (ref_norm.cu holds the device code).
#include "kernels/cuda/ref_norm.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::ref {

void rms_norm(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t rows, int64_t cols,
              float eps, cudaStream_t stream) {
    detail::check_shape("rms_norm", rows, cols);
    if (rows == 0 || cols == 0) return;
    detail::check_rows("rms_norm", "y", y, ldy, rows, cols);
    detail::check_rows("rms_norm", "x", x, ldx, rows, cols);
    detail::check_rows("rms_norm", "w", w, cols, 1, cols);
    TS_CHECK((y == x && ldy == ldx) ||
                 !detail::overlaps(detail::span_of(y, ldy, rows, cols), detail::span_of(x, ldx, rows, cols)),
             "rms_norm: y must be x itself or not overlap it");
    TS_CUDA_CHECK(detail::launch_rms_norm(y, ldy, x, ldx, w, rows, cols, eps, stream));
}

void add_rms_norm(float* x, int64_t ldx, const float* d, int64_t ldd, float* y, int64_t ldy, const float* w,
                  int64_t rows, int64_t cols, float eps, cudaStream_t stream, int parts, int64_t part_stride) {
    detail::check_shape("add_rms_norm", rows, cols);
    if (rows == 0 || cols == 0) return;
    TS_CHECK(parts >= 1 && (parts == 1 || cols <= 16384), "add_rms_norm: {} parts of rows of {}", parts, cols);
    detail::check_rows("add_rms_norm", "x", x, ldx, rows, cols);
    for (int p = 0; p < parts; ++p) detail::check_rows("add_rms_norm", "d", d + p * part_stride, ldd, rows, cols);
    detail::check_rows("add_rms_norm", "y", y, ldy, rows, cols);
    detail::check_rows("add_rms_norm", "w", w, cols, 1, cols);
    const auto xs = detail::span_of(x, ldx, rows, cols);
    bool apart = !detail::overlaps(xs, detail::span_of(y, ldy, rows, cols));
    for (int p = 0; p < parts; ++p)
        apart = apart && !detail::overlaps(xs, detail::span_of(d + p * part_stride, ldd, rows, cols));
    TS_CHECK(apart, "add_rms_norm: y and d must not overlap x");
    TS_CUDA_CHECK(detail::launch_add_rms_norm(x, ldx, d, ldd, y, ldy, w, rows, cols, eps, stream, parts, part_stride));
}

void rms_norm_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                    const float* w, int64_t T, int64_t n_heads, int64_t D, float eps, cudaStream_t stream) {
    const char* op = "rms_norm_heads";
    TS_CHECK(T >= 0 && n_heads >= 0 && D >= 0, "{}: bad shape [{}, {}, {}]", op, T, n_heads, D);
    if (T == 0 || n_heads == 0 || D == 0) return;
    detail::check_heads(op, "y", y, y_tok, y_head, T, n_heads, D);
    detail::check_heads(op, "x", x, x_tok, x_head, T, n_heads, D);
    detail::check_rows(op, "w", w, D, 1, D);
    // y == x in place is safe: a head is reduced (all reads, then barriers) before it is written.
    TS_CUDA_CHECK(detail::launch_rms_norm_heads(y, y_tok, y_head, x, x_tok, x_head, w, T, n_heads, D, eps, stream));
}

void l2_norm(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D, float eps,
             float scale, cudaStream_t stream) {
    TS_CHECK(T >= 0 && n_heads >= 0 && D >= 0, "l2_norm: bad shape [{}, {}, {}]", T, n_heads, D);
    if (T == 0 || n_heads == 0 || D == 0) return;
    detail::check_heads("l2_norm", "x", x, tok_stride, head_stride, T, n_heads, D);
    TS_CUDA_CHECK(detail::launch_l2_norm(x, tok_stride, head_stride, T, n_heads, D, eps, scale, stream));
}

void rms_norm_gated(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                    const float* z, int64_t z_tok, int64_t z_head, const float* w, int64_t T, int64_t n_heads,
                    int64_t D, float eps, cudaStream_t stream) {
    const char* op = "rms_norm_gated";
    TS_CHECK(T >= 0 && n_heads >= 0 && D >= 0, "{}: bad shape [{}, {}, {}]", op, T, n_heads, D);
    if (T == 0 || n_heads == 0 || D == 0) return;
    detail::check_heads(op, "y", y, y_tok, y_head, T, n_heads, D);
    detail::check_heads(op, "x", x, x_tok, x_head, T, n_heads, D);
    detail::check_heads(op, "z", z, z_tok, z_head, T, n_heads, D);
    detail::check_rows(op, "w", w, D, 1, D);
    // y == x in place is safe: a head is reduced (all reads, then barriers) before it is written.
    // Partial overlaps are the caller's to rule out (the Backend checks spans on its Tensors).
    TS_CUDA_CHECK(detail::launch_rms_norm_gated(y, y_tok, y_head, x, x_tok, x_head, z, z_tok, z_head, w, T, n_heads,
                                                D, eps, stream));
}

}  // namespace tessera::cuda::ref
