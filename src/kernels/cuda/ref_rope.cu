// RoPE reference kernel: one thread per rotated pair (token, head, i < rot_dims / 2). The angle
// is pos · inv_freq in f32 and its cos/sin are taken in double then rounded to f32, exactly as
// kernels/cpu/rope.cpp does, so both backends rotate by the same f32 cos/sin.
#include "kernels/cuda/ref_rope.h"

#include "kernels/cuda/ref_reduce.cuh"

namespace tessera::cuda::ref::detail {

namespace {

// x[T, n_heads, D] in place; pairs (i, i + half) for NeoX, (2i, 2i + 1) for GPT-J
__global__ void rope_kernel(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads,
                            const int32_t* pos, const float* inv_freq, int half, bool neox) {
    const int64_t n = T * n_heads * half;
    for (int64_t k = global_thread(); k < n; k += grid_threads()) {
        const int i = int(k % half);
        const int64_t th = k / half, h = th % n_heads, t = th / n_heads;
        const float angle = float(pos[t]) * inv_freq[i];
        const float cs = float(cos(double(angle))), sn = float(sin(double(angle)));
        float* v = x + t * tok_stride + h * head_stride;
        const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const float a = v[i0], c = v[i1];
        v[i0] = a * cs - c * sn;
        v[i1] = c * cs + a * sn;
    }
}

}  // namespace

cudaError_t launch_rope(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads,
                        const int32_t* pos, const float* inv_freq, int rot_dims, bool neox, cudaStream_t stream) {
    const int half = rot_dims / 2;
    rope_kernel<<<grid_for(T * n_heads * half, kElemThreads), kElemThreads, 0, stream>>>(
        x, tok_stride, head_stride, T, n_heads, pos, inv_freq, half, neox);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::ref::detail
