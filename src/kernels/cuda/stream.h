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

// Event: RAII over cudaEventCreateWithFlags(cudaEventDisableTiming) — a point in a stream the
// host can wait for (CudaBackend::mark / wait_mark), not a timer.
class Event {
public:
    Event();
    ~Event();
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;

    void record(cudaStream_t s);  // the point: every op queued on s so far
    void synchronize() const;     // waits for the point; throws Error if an op before it failed

private:
    cudaEvent_t e_ = nullptr;
};

}  // namespace tessera::cuda
