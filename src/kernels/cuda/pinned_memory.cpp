#include "kernels/cuda/pinned_memory.h"

#include <cuda_runtime_api.h>

#include "core/memlog.h"
#include "core/status.h"

namespace tessera::cuda {

void* PinnedMemory::allocate(size_t bytes) {
    void* p = nullptr;
    const size_t n = bytes ? bytes : 1;
    // Mapped where the device can map host memory; else (or if mapping fails) a plain block that
    // only the copy engine reaches (device_view answers null for it).
    cudaError_t err = cudaHostAlloc(&p, n, cudaHostAllocMapped | cudaHostAllocPortable);
    if (err != cudaSuccess) {
        cudaGetLastError();
        p = nullptr;
        err = cudaHostAlloc(&p, n, cudaHostAllocDefault);
    }
    if (err != cudaSuccess) {
        cudaGetLastError();
        fail(ErrorKind::OutOfMemory, "cannot allocate {} of page-locked host memory: {}", format_bytes(int64_t(bytes)),
             cudaGetErrorString(err));
    }
    void* dev = nullptr;
    if (cudaHostGetDevicePointer(&dev, p, 0) != cudaSuccess) {
        cudaGetLastError();
        dev = nullptr;
    }
    std::lock_guard<std::mutex> g(lock_);
    blocks_[static_cast<const char*>(p)] = Block{n, static_cast<char*>(dev)};
    return p;
}

void PinnedMemory::deallocate(void* p) noexcept {
    if (!p) return;
    {
        std::lock_guard<std::mutex> g(lock_);
        blocks_.erase(static_cast<const char*>(p));
    }
    cudaFreeHost(p);
}

void* PinnedMemory::device_view(const void* p, size_t bytes) const {
    const char* c = static_cast<const char*>(p);
    std::lock_guard<std::mutex> g(lock_);
    auto it = blocks_.upper_bound(c);
    if (it == blocks_.begin()) return nullptr;
    --it;
    const size_t off = size_t(c - it->first);
    if (!it->second.device || off >= it->second.bytes || bytes > it->second.bytes - off) return nullptr;
    return it->second.device + off;
}

}  // namespace tessera::cuda
