// Arena: one buffer allocated up front, handed out by bumping an offset; reset() frees all.
// Per-step activations come from an arena so their memory is bounded and measured (peak).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/memory.h"
#include "core/tensor.h"

namespace tessera {

class Arena {
public:
    Arena() = default;
    // `capacity` bytes of `mem` (default: host memory); tensors carry mem's device.
    Arena(std::string name, size_t capacity, MemoryResource& mem = host_memory());
    ~Arena();
    Arena(Arena&& o) noexcept;
    Arena& operator=(Arena&& o) noexcept;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    // Throws Error(OutOfMemory) with the arena's name, the request and its capacity when full.
    void* alloc(size_t bytes, size_t align = 64);
    // Whether alloc(bytes, align) would succeed now.
    bool fits(size_t bytes, size_t align = 64) const { return aligned_used(align) + bytes <= capacity_; }
    Tensor tensor(DType dtype, std::initializer_list<int64_t> shape);
    void reset() { used_ = 0; }
    // Frees everything allocated since used() returned `mark` (scratch of one block).
    void rewind(size_t mark) { used_ = mark <= used_ ? mark : used_; }

    size_t used() const { return used_; }
    size_t peak() const { return peak_; }
    size_t capacity() const { return capacity_; }
    const std::string& name() const { return name_; }

private:
    // used_ rounded up to a multiple of align: where the next allocation starts.
    size_t aligned_used(size_t align) const { return (used_ + align - 1) / align * align; }

    std::string name_;
    MemoryResource* mem_ = nullptr;
    char* base_ = nullptr;
    size_t capacity_ = 0, used_ = 0, peak_ = 0;
};

}  // namespace tessera
