// The floor a weight-streaming kernel can reach: a pure read of `bytes` bytes (128-bit streamed
// loads, as the GEMV and MoE kernels read weights, four in flight a thread, a grid of 8 blocks
// an SM), nothing computed but an XOR that keeps the loads alive. bench_fast_gemv times it next
// to every GEMV at the same bytes with the same timer, so a GEMV's distance from it is the
// kernel's own, not the timer's or the launch's. Raw pointers; queued on `stream`.
#pragma once
#include <cstddef>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

// p: 16-byte aligned device memory of `bytes` bytes (a multiple of 16; the rest is not read);
// sink: one device float, written only if the XOR of everything read is a fixed improbable value.
void read_floor(const void* p, size_t bytes, float* sink, cudaStream_t stream);

}  // namespace tessera::cuda::fast
