// Stream: an owned, non-blocking CUDA stream (does not synchronise with the legacy default
// stream). Movable, not copyable.
#pragma once
#include <cuda_runtime_api.h>

namespace tessera::cuda {

class Stream {
public:
    Stream();  // cudaStreamCreateWithFlags(cudaStreamNonBlocking) on the current device
    ~Stream();
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    cudaStream_t get() const { return s_; }
    operator cudaStream_t() const { return s_; }
    void synchronize() const;  // waits for the queued work; throws Error if any of it failed

private:
    cudaStream_t s_ = nullptr;
};

}  // namespace tessera::cuda
