// Argument checks for the RoPE reference kernel (ref_rope.cu holds the device code).
#include "kernels/cuda/ref_rope.h"

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::ref {

void rope(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D,
          const int32_t* pos, const float* inv_freq, int rot_dims, RopeStyle style, cudaStream_t stream) {
    TS_CHECK(T >= 0 && n_heads >= 0 && D >= 0, "rope: bad shape [{}, {}, {}]", T, n_heads, D);
    TS_CHECK(rot_dims > 0 && rot_dims % 2 == 0 && rot_dims <= D,
             "rope: rot_dims {} must be even and in (0, head dim {}]", rot_dims, D);
    TS_CHECK(style == RopeStyle::NeoX || style == RopeStyle::GptJ, "rope: unknown style {}", int(style));
    if (T == 0 || n_heads == 0) return;
    detail::check_heads("rope", "x", x, tok_stride, head_stride, T, n_heads, D);
    TS_CHECK(pos != nullptr && inv_freq != nullptr, "rope: positions or inverse frequencies are null");
    TS_CUDA_CHECK(detail::launch_rope(x, tok_stride, head_stride, T, n_heads, pos, inv_freq, rot_dims,
                                      style == RopeStyle::NeoX, stream));
}

}  // namespace tessera::cuda::ref
