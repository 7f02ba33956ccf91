// DeviceBuffer: one cudaMalloc'd block of device memory, freed by its destructor. Movable,
// not copyable. upload returns with the data on the device, download with it on the host;
// copy_from and fill are queued on `stream` (default: the legacy default stream) like
// cudaMemcpyAsync / cudaMemsetAsync.
// Every transfer is bounds-checked: a range past the end is an Error, not a corrupted heap.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda {

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    // Allocates `bytes` on the current device (0 bytes: no allocation, data() == nullptr).
    // Throws Error(OutOfMemory) with the size asked for and the device's free memory.
    explicit DeviceBuffer(size_t bytes);
    ~DeviceBuffer();

    DeviceBuffer(DeviceBuffer&& other) noexcept;
    DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;

    void* data() { return ptr_; }
    const void* data() const { return ptr_; }
    template <typename T> T* as() { return static_cast<T*>(ptr_); }
    template <typename T> const T* as() const { return static_cast<const T*>(ptr_); }
    size_t size() const { return bytes_; }
    bool empty() const { return bytes_ == 0; }

    // host[bytes] -> this[offset, offset + bytes)
    void upload(const void* host, size_t bytes, size_t offset = 0);
    // this[offset, offset + bytes) -> host[bytes]
    void download(void* host, size_t bytes, size_t offset = 0) const;
    // src[src_offset, +bytes) -> this[dst_offset, +bytes), device to device.
    void copy_from(const DeviceBuffer& src, size_t bytes, size_t dst_offset = 0, size_t src_offset = 0,
                   cudaStream_t stream = nullptr);
    // this[offset, offset + bytes) = byte value
    void fill(uint8_t value, size_t bytes, size_t offset = 0, cudaStream_t stream = nullptr);
    void fill(uint8_t value) { fill(value, bytes_, 0); }

    void reset();  // frees the memory now; the buffer becomes empty

private:
    void check_range(const char* what, size_t offset, size_t bytes) const;

    void* ptr_ = nullptr;
    size_t bytes_ = 0;
};

}  // namespace tessera::cuda
