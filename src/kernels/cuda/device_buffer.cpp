// DeviceBuffer: RAII over cudaMalloc/cudaFree with bounds-checked transfers.
#include "kernels/cuda/device_buffer.h"

#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

DeviceBuffer::DeviceBuffer(size_t bytes) {
    if (bytes == 0) return;
    const cudaError_t err = cudaMalloc(&ptr_, bytes);
    if (err != cudaSuccess) {
        ptr_ = nullptr;
        (void)cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) (void)cudaGetLastError();
        fail(err == cudaErrorMemoryAllocation ? ErrorKind::OutOfMemory : ErrorKind::Internal,
             "cudaMalloc of {} bytes failed: {} ({}); device has {} of {} bytes free", bytes,
             cudaGetErrorName(err), cudaGetErrorString(err), free_b, total_b);
    }
    bytes_ = bytes;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

void DeviceBuffer::reset() {
    // cudaFree can only fail on a broken context; a destructor must not throw.
    if (ptr_ && cudaFree(ptr_) != cudaSuccess) (void)cudaGetLastError();
    ptr_ = nullptr;
    bytes_ = 0;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        ptr_ = std::exchange(other.ptr_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void DeviceBuffer::check_range(const char* what, size_t offset, size_t bytes) const {
    TS_CHECK(offset <= bytes_ && bytes <= bytes_ - offset,
             "DeviceBuffer::{}: {} bytes at offset {} do not fit a {}-byte buffer", what, bytes, offset,
             bytes_);
}

void DeviceBuffer::upload(const void* host, size_t bytes, size_t offset) {
    check_range("upload", offset, bytes);
    if (bytes == 0) return;
    TS_CHECK(host != nullptr, "DeviceBuffer::upload: null host pointer for {} bytes", bytes);
    TS_CUDA_CHECK(cudaMemcpy(static_cast<char*>(ptr_) + offset, host, bytes, cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy returns once the last piece is staged, before its DMA lands,
    // and work on a non-blocking stream (Stream) is not ordered after it: without this wait a
    // kernel launched next could write the buffer first and have its end overwritten.
    TS_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

void DeviceBuffer::download(void* host, size_t bytes, size_t offset) const {
    check_range("download", offset, bytes);
    if (bytes == 0) return;
    TS_CHECK(host != nullptr, "DeviceBuffer::download: null host pointer for {} bytes", bytes);
    TS_CUDA_CHECK(cudaMemcpy(host, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost));
}

void DeviceBuffer::copy_from(const DeviceBuffer& src, size_t bytes, size_t dst_offset, size_t src_offset,
                             cudaStream_t stream) {
    check_range("copy_from (destination)", dst_offset, bytes);
    src.check_range("copy_from (source)", src_offset, bytes);
    if (bytes == 0) return;
    TS_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(ptr_) + dst_offset,
                                  static_cast<const char*>(src.ptr_) + src_offset, bytes,
                                  cudaMemcpyDeviceToDevice, stream));
}

void DeviceBuffer::fill(uint8_t value, size_t bytes, size_t offset, cudaStream_t stream) {
    check_range("fill", offset, bytes);
    if (bytes == 0) return;
    TS_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(ptr_) + offset, value, bytes, stream));
}

}  // namespace tessera::cuda
