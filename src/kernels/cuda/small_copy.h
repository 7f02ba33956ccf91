// Small copies between page-locked host memory and device memory as a kernel instead of a
// copy-engine operation. On the H200 a copy-engine op queued between kernels costs ~4–6 µs of
// idle before and after it (scripts/gpu/gpu_gap.py over a decode step: the argmax ids out and the
// next step's plan in were ~17 µs of a ~1,875 µs step), a kernel ~1.5. The kernel reaches the
// host side through its mapped device address (PinnedMemory::device_view), reading it with
// cache-volatile loads, so a buffer the host rewrote between two copies is read afresh.
#pragma once
#include <cstddef>

#include <cuda_runtime_api.h>

namespace tessera::cuda {

inline constexpr size_t kSmallCopyMax = size_t(64) << 10;  // larger copies go to the copy engine

// dst, src: device addresses (either may be a mapped host address); any alignment. Queued on s.
void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t s);

}  // namespace tessera::cuda
