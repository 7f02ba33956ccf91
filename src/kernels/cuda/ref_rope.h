// Reference CUDA kernel for the rope Backend op: rotary position embedding in place, NeoX
// (rotate-half) or GPT-J (interleaved) pairs, full or partial (the first rot_dims of each head).
// The inverse frequencies come from tessera::rope_inv_freq (kernels/backend.h), computed on the
// host and uploaded, so every backend rotates by the same angles. Raw device pointers; queued
// on `stream` (asynchronous); throws Error on bad arguments or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/backend.h"

namespace tessera::cuda::ref {

// x[T, n_heads, D] (element strides tok_stride, head_stride) rotated in place at positions
// pos[T] (device); inv_freq[rot_dims / 2] (device). rot_dims even, in (0, D] (the op's 0 = D is
// resolved by the caller, who also needs it for rope_inv_freq).
void rope(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D,
          const int32_t* pos, const float* inv_freq, int rot_dims, RopeStyle style, cudaStream_t stream);

namespace detail {
// The entry point into ref_rope.cu (no fmt there). Arguments are already checked.
cudaError_t launch_rope(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads,
                        const int32_t* pos, const float* inv_freq, int rot_dims, bool neox, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
