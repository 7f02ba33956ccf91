// fast_read_floor.h's kernel: a grid-stride loop of 128-bit streamed loads, 4 a thread in flight.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fast_device.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kThreads = 256, kUnroll = 4;

__global__ void __launch_bounds__(kThreads) read_floor_kernel(const uint8_t* __restrict__ p, int64_t n16,
                                                              float* __restrict__ sink) {
    const int64_t stride = int64_t(gridDim.x) * kThreads;
    uint32_t acc = 0;
    int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = dev::load_stream(p + 16 * (i + u * stride));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = dev::load_stream(p + 16 * i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = 1.f;  // practically never: the loads cannot be dropped
}

}  // namespace

cudaError_t launch_read_floor(const void* p, int64_t n16, int blocks, float* sink, cudaStream_t stream) {
    read_floor_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(static_cast<const uint8_t*>(p), n16, sink);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
