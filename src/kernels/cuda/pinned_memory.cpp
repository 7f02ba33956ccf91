#include "kernels/cuda/pinned_memory.h"

#include <cuda_runtime_api.h>

#include "core/memlog.h"
#include "core/status.h"

namespace tessera::cuda {

void* PinnedMemory::allocate(size_t bytes) {
    void* p = nullptr;
    const cudaError_t err = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (err != cudaSuccess) {
        cudaGetLastError();
        fail(ErrorKind::OutOfMemory, "cannot allocate {} of page-locked host memory: {}", format_bytes(int64_t(bytes)),
             cudaGetErrorString(err));
    }
    return p;
}

void PinnedMemory::deallocate(void* p) noexcept {
    if (p) cudaFreeHost(p);
}

}  // namespace tessera::cuda
