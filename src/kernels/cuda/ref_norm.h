// Reference CUDA kernels for the normalisation Backend ops: rms_norm over rows, and the
// per-head l2_norm and rms_norm_gated of the Gated DeltaNet layers. One block per row (head);
// the sum of squares is an f32 block reduction. Same semantics and argument order as the ops
// in kernels/backend.h. Raw f32 device pointers; row strides in elements. Queued on `stream`
// (asynchronous); throws Error on bad arguments or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::ref {

// y[rows, cols] = x · rsqrt(mean(x²) + eps) · w[cols]   per row (y may alias x)
void rms_norm(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t rows, int64_t cols,
              float eps, cudaStream_t stream);

// x[rows, cols] += d; y = x · rsqrt(mean(x²) + eps) · w[cols] per row — bit for bit add then
// rms_norm, in one pass. y and d must not overlap x. parts > 1: d holds that many [rows, cols]
// parts part_stride floats apart, added in order (x ← ((x + d[0]) + d[1]) + …; cols ≤ 16384).
void add_rms_norm(float* x, int64_t ldx, const float* d, int64_t ldd, float* y, int64_t ldy, const float* w,
                  int64_t rows, int64_t cols, float eps, cudaStream_t stream, int parts = 1, int64_t part_stride = 0);

// x[T, n_heads, D] in place (element strides tok_stride, head_stride):
// x · rsqrt(Σ x² + eps) · scale per head.
void l2_norm(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D, float eps,
             float scale, cudaStream_t stream);

// rms_norm on every head row of x [T, n_heads, D] (token and head strides of its own: e.g. the q
// heads inside a stacked q | k | v projection, whose token stride is not n_heads · head stride)
// into y likewise; the arithmetic of rms_norm. y may be x itself (same pointer and strides).
void rms_norm_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                    const float* w, int64_t T, int64_t n_heads, int64_t D, float eps, cudaStream_t stream);

// y[T, n_heads, D] = w[D] ⊙ x · rsqrt(mean(x²) + eps) ⊙ silu(z)   per head; x, z [T, n_heads, D]
// with their own strides. y may be x or z itself (same pointer and strides).
void rms_norm_gated(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok, int64_t x_head,
                    const float* z, int64_t z_tok, int64_t z_head, const float* w, int64_t T, int64_t n_heads,
                    int64_t D, float eps, cudaStream_t stream);

namespace detail {
// The entry points into ref_norm.cu (no fmt there). Arguments are already checked.
cudaError_t launch_rms_norm(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t rows,
                            int64_t cols, float eps, cudaStream_t stream);
cudaError_t launch_add_rms_norm(float* x, int64_t ldx, const float* d, int64_t ldd, float* y, int64_t ldy,
                                const float* w, int64_t rows, int64_t cols, float eps, cudaStream_t stream, int parts,
                                int64_t part_stride);
cudaError_t launch_rms_norm_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                  int64_t x_head, const float* w, int64_t T, int64_t n_heads, int64_t D, float eps,
                                  cudaStream_t stream);
cudaError_t launch_l2_norm(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D,
                           float eps, float scale, cudaStream_t stream);
cudaError_t launch_rms_norm_gated(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                  int64_t x_head, const float* z, int64_t z_tok, int64_t z_head, const float* w,
                                  int64_t T, int64_t n_heads, int64_t D, float eps, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
