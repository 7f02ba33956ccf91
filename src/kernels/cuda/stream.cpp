// Stream: RAII over cudaStreamCreate/cudaStreamDestroy.
#include "kernels/cuda/stream.h"

#include <utility>

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

Stream::Stream() { TS_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }

Stream::~Stream() {
    if (s_ && cudaStreamDestroy(s_) != cudaSuccess) (void)cudaGetLastError();
}

Stream::Stream(Stream&& other) noexcept : s_(std::exchange(other.s_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        if (s_ && cudaStreamDestroy(s_) != cudaSuccess) (void)cudaGetLastError();
        s_ = std::exchange(other.s_, nullptr);
    }
    return *this;
}

void Stream::synchronize() const { TS_CUDA_CHECK(cudaStreamSynchronize(s_)); }

Event::Event() { TS_CUDA_CHECK(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming)); }

Event::~Event() {
    if (e_ && cudaEventDestroy(e_) != cudaSuccess) (void)cudaGetLastError();
}

void Event::record(cudaStream_t s) { TS_CUDA_CHECK(cudaEventRecord(e_, s)); }

void Event::synchronize() const { TS_CUDA_CHECK(cudaEventSynchronize(e_)); }

}  // namespace tessera::cuda
