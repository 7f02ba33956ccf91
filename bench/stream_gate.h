// StreamGate: holds a CUDA stream at a point until the host opens it, so that everything queued
// behind the gate runs back to back. Timing a call between two events without it measures the
// host's launch latency too (the GPU reaches the first event, then idles until the launch
// arrives): ~5–7 µs per timed call on the H200 machine, more than many kernels take.
//   gate.close(s); record(a); call(); record(b); gate.open(); sync(b)
// The gate is a host function on the stream that spins until open() — or for at most 50 ms, so a
// call that waits on the stream from the host (a sync, a copy from pageable memory) delays, not
// hangs; timed_out() then says the figure includes the wait, and the caller times it ungated.
// CUDA builds only.
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kernels/cuda/cuda_check.h"

namespace tessera::bench {

class StreamGate {
public:
    StreamGate() = default;
    StreamGate(const StreamGate&) = delete;
    StreamGate& operator=(const StreamGate&) = delete;
    ~StreamGate() { open(); }

    void close(cudaStream_t s) {
        open_.store(false);
        timed_out_.store(false);
        TS_CUDA_CHECK(cudaLaunchHostFunc(s, &StreamGate::wait, this));
    }
    void open() { open_.store(true); }
    // Whether the last closing ran out of time before open() (valid once the stream passed it).
    bool timed_out() const { return timed_out_.load(); }

private:
    static void CUDART_CB wait(void* self) {
        auto* g = static_cast<StreamGate*>(self);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
        while (!g->open_.load())
            if (std::chrono::steady_clock::now() > deadline) {
                g->timed_out_.store(true);
                return;
            } else {
                std::this_thread::yield();
            }
    }
    std::atomic<bool> open_{true}, timed_out_{false};
};

}  // namespace tessera::bench
