// Random tensor contents for `tessera synth`, deterministic per (seed, tensor name, row) whatever
// the thread count. Quantized types are written as random codes with block scales chosen so the
// dequantized values have the float recipe's standard deviation — no quantization search, so
// writing is I/O-bound. Float and other types are drawn as floats (bell-shaped) and converted.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "synth_tensors.h"

namespace tessera::cli {

// The tensor's random stream key (from the seed and its name).
uint64_t synth_tensor_key(uint64_t seed, const SynthTensor& t);

// True where `type` is written as random codes (Q4_0, Q8_0, Q4_K), not from floats.
bool synth_random_codes(DType type);

// Rows [r0, r0 + n) of `t` in `type` (rows of t.cols() elements), ggml layout, into dst.
void synth_rows(const SynthTensor& t, DType type, uint64_t key, int64_t r0, int64_t n, void* dst);

// MLX affine quantization: rows [r0, r0 + n) of random `bits`-bit codes packed in u32 words, and
// the one (scale, bias) pair (bf16 bits) every group of `t` gets so that w = scale·q + bias has
// zero mean and t.std.
void synth_mlx_codes(uint64_t key, int bits, int64_t r0, int64_t n, int64_t cols, uint32_t* dst);
struct SynthAffine {
    uint16_t scale, bias;
};
SynthAffine synth_mlx_affine(const SynthTensor& t, int bits);

}  // namespace tessera::cli
