// Kernel of the fused q/k norm + RoPE + KV store (fast_qk_prep.h): a warp per (token, head row)
// of q | k | v, the row in registers (E = D / 32 consecutive elements a lane), the rotation
// through a per-warp row in shared memory (any pairing, any rotated width).
#include <cuda_fp16.h>

#include "core/half.h"
#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_qk_prep.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ref_reduce.cuh"  // rms_inverse

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kWarps = 4;

template <int E>
__global__ void __launch_bounds__(kWarps * 32) qk_prep_kernel(QkPrep a) {
    constexpr int D = 32 * E;
    __shared__ float row_s[kWarps][D];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int64_t rows_per_tok = a.nh + 2 * a.nkv;
    const int64_t item = int64_t(blockIdx.x) * kWarps + warp;
    pdl::wait();  // launched with PDL (pdl.cuh): q, k, v come from the kernel before
    pdl::trigger();
    if (item >= a.T * rows_per_tok) return;  // the whole warp
    const int64_t t = item / rows_per_tok, j = item - t * rows_per_tok;
    const int kind = j < a.nh ? 0 : j < a.nh + a.nkv ? 1 : 2;  // q, k, v
    const int64_t h = kind == 0 ? j : kind == 1 ? j - a.nh : j - a.nh - a.nkv;
    float* row = kind == 0 ? a.q + t * a.q_ts + h * a.q_hs : a.k + t * a.k_ts + h * a.k_hs;
    const float* src = kind == 2 ? a.v + t * a.v_ts + h * a.v_hs : row;
    float x[E];
#pragma unroll
    for (int i = 0; i < E; ++i) x[i] = src[lane * E + i];

    if (kind < 2) {
        if (const float* w = kind == 0 ? a.q_norm : a.k_norm) {  // ref::rms_norm's arithmetic
            float ss = 0.f;
#pragma unroll
            for (int i = 0; i < E; ++i) ss += x[i] * x[i];
            ss = dev::warp_sum(ss);
            const float inv = ref::detail::rms_inverse(ss, D, a.eps);
#pragma unroll
            for (int i = 0; i < E; ++i) x[i] = x[i] * inv * w[lane * E + i];
        }
        float* rs = row_s[warp];  // ref::rope's arithmetic, pairs from shared memory
#pragma unroll
        for (int i = 0; i < E; ++i) rs[lane * E + i] = x[i];
        __syncwarp();
        const int half = a.rot / 2;
        const float p = float(a.pos[t]);
        for (int i = lane; i < half; i += 32) {
            const float angle = p * a.inv_freq[i];
            double sd, cd;
            sincos(double(angle), &sd, &cd);  // one range reduction for both
            const float cs = float(cd), sn = float(sd);
            const int i0 = a.neox ? i : 2 * i, i1 = a.neox ? i + half : 2 * i + 1;
            const float u = rs[i0], w = rs[i1];
            rs[i0] = u * cs - w * sn;
            rs[i1] = w * cs + u * sn;
        }
        __syncwarp();
#pragma unroll
        for (int i = 0; i < E; ++i) row[lane * E + i] = x[i] = rs[lane * E + i];
    }
    if (kind == 0) return;
    // k and v into their cache at slot[t] (padding or a slot past the cache: skipped).
    const ref::KvCacheRef& c = kind == 1 ? a.k_cache : a.v_cache;
    const int64_t s = a.slot[t];
    if (s < 0 || s >= c.n_blocks * c.block_size) return;
    char* dst = static_cast<char*>(c.data) + (s / c.block_size) * c.block_stride + (s % c.block_size) * c.row_stride +
                h * c.head_stride;
    if (c.dtype == DType::F16) {
#pragma unroll
        for (int i = 0; i < E; ++i) reinterpret_cast<uint16_t*>(dst)[lane * E + i] = f32_to_f16(x[i]);
    } else {
#pragma unroll
        for (int i = 0; i < E; ++i) reinterpret_cast<float*>(dst)[lane * E + i] = x[i];
    }
}

template <int E>
cudaError_t launch(const QkPrep& a, cudaStream_t stream) {
    const int64_t items = a.T * (a.nh + 2 * a.nkv);
    return pdl::launch(qk_prep_kernel<E>, dim3(unsigned((items + kWarps - 1) / kWarps)), kWarps * 32, 0, stream, a);
}

}  // namespace

cudaError_t launch_qk_prep(const QkPrep& a, cudaStream_t stream) {
    switch (a.D / 32) {
        case 1: return launch<1>(a, stream);
        case 2: return launch<2>(a, stream);
        case 3: return launch<3>(a, stream);
        case 4: return launch<4>(a, stream);
        case 5: return launch<5>(a, stream);
        case 6: return launch<6>(a, stream);
        case 7: return launch<7>(a, stream);
        case 8: return launch<8>(a, stream);
        case 16: return launch<16>(a, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::fast::detail
