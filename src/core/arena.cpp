#include "core/arena.h"

#include <cstdlib>
#include <utility>

#include "core/status.h"

namespace tessera {

Arena::Arena(std::string name, size_t capacity, MemoryResource& mem)
    : name_(std::move(name)), mem_(&mem), capacity_(capacity) {
    if (capacity_ == 0) return;
    base_ = static_cast<char*>(
        with_context(fmt::format("arena '{}'", name_), [&] { return mem.allocate((capacity_ + 63) / 64 * 64); }));
}

Arena::~Arena() {
    if (base_) mem_->deallocate(base_);
}

Arena::Arena(Arena&& o) noexcept { *this = std::move(o); }

Arena& Arena::operator=(Arena&& o) noexcept {
    if (this != &o) {
        if (base_) mem_->deallocate(base_);
        name_ = std::move(o.name_);
        mem_ = o.mem_;
        base_ = std::exchange(o.base_, nullptr);
        capacity_ = std::exchange(o.capacity_, 0);
        used_ = std::exchange(o.used_, 0);
        peak_ = std::exchange(o.peak_, 0);
    }
    return *this;
}

void* Arena::alloc(size_t bytes, size_t align) {
    const size_t start = aligned_used(align);
    if (!fits(bytes, align))
        fail(ErrorKind::OutOfMemory, "arena '{}': need {} bytes at offset {}, capacity {}", name_, bytes, start,
             capacity_);
    used_ = start + bytes;
    if (used_ > peak_) peak_ = used_;
    return base_ + start;
}

Tensor Arena::tensor(DType dtype, std::initializer_list<int64_t> shape) {
    int64_t rows = 1, cols = 1;
    int i = 0;
    for (int64_t d : shape) (++i == int(shape.size()) ? cols : rows) *= d;
    if (shape.size() == 0) rows = 1;
    const size_t bytes = size_t(rows) * dtype_row_bytes(dtype, cols);
    return Tensor(alloc(bytes), dtype, shape, mem_ ? mem_->device() : Device::CPU);
}

}  // namespace tessera
