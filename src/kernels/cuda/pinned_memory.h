// PinnedMemory: page-locked host memory (cudaHostAlloc) — what the device copies to and from at
// full PCIe speed and truly asynchronously. The CUDA backend's staging_memory().
#pragma once
#include "core/memory.h"

namespace tessera::cuda {

class PinnedMemory final : public MemoryResource {
public:
    Device device() const override { return Device::CPU; }
    void* allocate(size_t bytes) override;  // throws Error(OutOfMemory) naming the size
    void deallocate(void* p) noexcept override;
};

}  // namespace tessera::cuda
