// PinnedMemory: page-locked host memory (cudaHostAlloc) — what the device copies to and from at
// full PCIe speed and truly asynchronously. The CUDA backend's staging_memory(). Mapped into the
// device's address space, so a kernel can read and write it too (small_copy.h).
#pragma once
#include <map>
#include <mutex>

#include "core/memory.h"

namespace tessera::cuda {

class PinnedMemory final : public MemoryResource {
public:
    Device device() const override { return Device::CPU; }
    void* allocate(size_t bytes) override;  // throws Error(OutOfMemory) naming the size
    void deallocate(void* p) noexcept override;
    // The device address of [p, p + bytes) when it lies inside one allocation of this resource,
    // else null.
    void* device_view(const void* p, size_t bytes) const;

private:
    struct Block {
        size_t bytes;
        char* device;
    };
    mutable std::mutex lock_;
    std::map<const char*, Block> blocks_;  // by host address
};

}  // namespace tessera::cuda
