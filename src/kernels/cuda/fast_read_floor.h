// The floor a weight-streaming kernel can reach: a pure read of `bytes` bytes (128-bit streamed
// loads, as the GEMV and MoE kernels read weights, four in flight a thread, a grid of 8 blocks
// an SM), nothing computed but an XOR that keeps the loads alive. bench_fast_gemv times it next
// to every GEMV at the same bytes with the same timer, so a GEMV's distance from it is the
// kernel's own, not the timer's or the launch's. Raw pointers; queued on `stream`.
#pragma once
#include <cstddef>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

// p: 16-byte aligned device memory of `bytes` bytes (a multiple of 16; the rest is not read);
// sink: one device float, written only if the XOR of everything read is a fixed improbable value.
void read_floor(const void* p, size_t bytes, float* sink, cudaStream_t stream);

// The decode GEMV's (MmaRows') weight reads of w — codes and scales, the same grid, occupancy and
// loads in flight — with nothing computed: how much of the GEMV's time its access pattern costs.
// tiled: the same bytes read as if each (16-row, 128-column) tile were stored contiguously (a
// layout candidate; the bytes read are not the matrix's). w: Int4, G = 32, no biases, n a multiple
// of 16, k of 128.
void read_pattern(const PackedMatrix& w, bool tiled, float* sink, cudaStream_t stream);

}  // namespace tessera::cuda::fast
