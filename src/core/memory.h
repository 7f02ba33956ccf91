// MemoryResource: where a buffer lives and how to get one — host memory, or a device's (the
// CUDA backend provides its own). Arenas, KV / state pools and placed weights allocate through
// one, so the same model code runs over host or device memory.
#pragma once
#include <cstddef>

#include "core/tensor.h"

namespace tessera {

class MemoryResource {
public:
    virtual ~MemoryResource() = default;
    virtual Device device() const = 0;
    // `bytes` (> 0) aligned to at least 256 bytes; throws Error(OutOfMemory) naming the size.
    // The memory is not initialised.
    virtual void* allocate(size_t bytes) = 0;
    virtual void deallocate(void* p) noexcept = 0;
};

MemoryResource& host_memory();  // aligned host memory (std::aligned_alloc)

}  // namespace tessera
