#include "core/memory.h"

#include <cstdlib>

#include "core/status.h"

namespace tessera {

namespace {
class HostMemory final : public MemoryResource {
public:
    Device device() const override { return Device::CPU; }
    void* allocate(size_t bytes) override {
        void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
        if (!p) fail(ErrorKind::OutOfMemory, "cannot allocate {} bytes of host memory", bytes);
        return p;
    }
    void deallocate(void* p) noexcept override { std::free(p); }
};
}  // namespace

MemoryResource& host_memory() {
    static HostMemory m;
    return m;
}

}  // namespace tessera
