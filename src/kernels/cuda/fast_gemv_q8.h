// The decode GEMV with x rounded to int8 (llama.cpp's q8_1 idea): y[T, N] = x[T, K] · w[N, K]ᵀ
// for 1 ≤ T ≤ 8 over packed Int4 / Int8 weights, the products on the integer dot-product units.
//
//   1. quantize: x, per token and per 32 columns, becomes int8 codes q = rint(x · 127 / max|x|)
//      with dx = max|x| / 127 and sx = dx · Σq (f32), written to `scratch` — for Int4 weights
//      in the order the nibbles unpack (per 8 columns: the even columns, then the odd ones).
//   2. gemv: one warp per row (or 2 / 4 rows when K is short), lane l streams the row's 16-byte
//      chunks l, l + 32, … (8 in flight per lane); per chunk and token one integer dot product
//      (dp4a on the nibbles or bytes), then y += scale · dx · Σ code·q + bias · sx in f32.
//
// Accuracy: exact up to the rounding of x to int8 — a normalised error of ~4e-3 on random data
// (the emulation test checks the kernel to 1e-5 against the same rounding done on the host). That
// error compounds through a model's layers, so the backend uses it only with TESSERA_GEMV=int8.
// No allocation, no host sync (CUDA-graph safe); raw device pointers, queued on `stream`.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

constexpr int64_t kGemvQ8MaxTokens = 8;
constexpr int64_t kGemvQ8Group = 32;  // columns per x scale

// Bytes of scratch gemv_q8 needs for T tokens of K columns (K a multiple of 32).
size_t gemv_q8_scratch(int64_t T, int64_t K);
void gemv_q8(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w, void* scratch,
             cudaStream_t stream);

// How step 1 stores column c of a 32-column group for weights of `kind` (byte offset in the group).
constexpr int gemv_q8_x_slot(PackedKind kind, int c) {
    if (kind == PackedKind::Int8) return c;
    const int block = c / 8, i = c % 8;  // 8 columns = one 32-bit word of nibbles
    return block * 8 + (i % 2 ? 4 + i / 2 : i / 2);
}

}  // namespace tessera::cuda::fast
