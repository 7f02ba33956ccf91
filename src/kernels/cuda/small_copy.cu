// small_copy's kernel (small_copy.cpp checks the arguments and launches it).
#include <cstdint>

#include <cuda_runtime.h>

namespace tessera::cuda::detail {

namespace {

// 16 bytes a thread where both ends are 16-byte aligned, the rest byte by byte.
__global__ void small_copy_kernel(uint8_t* __restrict__ dst, const uint8_t* __restrict__ src, size_t bytes) {
    const size_t tid = size_t(blockIdx.x) * blockDim.x + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
    size_t done = 0;
    if (((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) & 15) == 0) {
        const size_t n16 = bytes / 16;
        auto* d = reinterpret_cast<uint4*>(dst);
        const auto* s = reinterpret_cast<const uint4*>(src);
        for (size_t i = tid; i < n16; i += stride) d[i] = __ldcv(s + i);
        done = n16 * 16;
    }
    for (size_t i = done + tid; i < bytes; i += stride) dst[i] = __ldcv(src + i);
}

}  // namespace

cudaError_t launch_small_copy(void* dst, const void* src, size_t bytes, int threads, cudaStream_t s) {
    const size_t per_block = size_t(threads) * 16;
    const unsigned blocks = unsigned((bytes + per_block - 1) / per_block);
    small_copy_kernel<<<blocks, threads, 0, s>>>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), bytes);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::detail
