// CudaMemory: device memory for arenas, KV / state pools and placed weights (cudaMalloc on the
// current device; live bytes are tracked for the memory log: "device_allocated").
#pragma once
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "core/memory.h"

namespace tessera::cuda {

class CudaMemory final : public MemoryResource {
public:
    Device device() const override { return Device::CUDA; }
    void* allocate(size_t bytes) override;  // throws Error(OutOfMemory) with the size and free memory
    void deallocate(void* p) noexcept override;
    int64_t allocated_bytes() const;

private:
    mutable std::mutex mu_;
    std::unordered_map<void*, size_t> sizes_;
    int64_t allocated_ = 0;
};

}  // namespace tessera::cuda
