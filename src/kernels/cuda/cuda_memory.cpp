#include "kernels/cuda/cuda_memory.h"

#include <cuda_runtime_api.h>

#include "core/memlog.h"
#include "core/status.h"

namespace tessera::cuda {

void* CudaMemory::allocate(size_t bytes) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        fail(ErrorKind::OutOfMemory, "cannot allocate {} of device memory ({} free of {}): {}",
             format_bytes(int64_t(bytes)), format_bytes(int64_t(free_b)), format_bytes(int64_t(total_b)),
             cudaGetErrorString(err));
    }
    std::lock_guard<std::mutex> lock(mu_);
    sizes_[p] = bytes;
    allocated_ += int64_t(bytes);
    MemLog::global().set("device_allocated", allocated_);
    MemLog::global().peak("device_allocated_peak", allocated_);
    return p;
}

void CudaMemory::deallocate(void* p) noexcept {
    if (!p) return;
    cudaFree(p);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sizes_.find(p);
    if (it == sizes_.end()) return;
    allocated_ -= int64_t(it->second);
    sizes_.erase(it);
    MemLog::global().set("device_allocated", allocated_);
}

int64_t CudaMemory::allocated_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_;
}

}  // namespace tessera::cuda
