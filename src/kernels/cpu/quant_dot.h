// Row dot products behind the CPU matmul: one weight row (any DType) against R <= 4 activation
// rows. Quantized weights are dotted ggml-style against activations quantized to q8 blocks
// (q8_0 for Q4_0/Q8_0/MXFP4, q8_K for Q4_K/Q6_K) with integer inner loops; f32/f16/bf16 weights
// are converted on the fly against f32 activations. Every kernel has a scalar and an AVX2 form.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace tessera::cpu {

// Activation block for Q4_0 / Q8_0 / MXFP4 weights: ggml's q8_0 with an f32 scale (no f16
// conversion in the inner loop).
struct BlockQ8A {
    float d;
    int8_t qs[32];
};

// Activation block for the K-quants: f32 scale, 256 int8 values, and the sum of each 16.
struct BlockQ8K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};

enum class ActFormat : uint8_t { F32, Q8_0, Q8_K };
constexpr int kMaxDotRows = 4;

// out[r] = Σ_k w[k]·x_r[k] for r < R (1 <= R <= kMaxDotRows), K elements per row;
// x_r starts x + r*x_stride bytes and is in the kernel's activation format. Row r's result is
// the same bits for any R and any other rows (what makes cpu::matmul batch-invariant): the
// kernels keep separate accumulators per row, and their scalar multiply-adds in R-templated code
// are explicit std::fma, so the compiler cannot contract them differently per instantiation.
using RowDotFn = void (*)(const void* w, const void* x, size_t x_stride, int R, int64_t K, float* out);

struct DotKernel {
    ActFormat act;
    RowDotFn scalar;
    RowDotFn simd;  // == scalar when the build has no SIMD form
};
// The kernel for weights of type w, or nullptr when matmul does not support it.
const DotKernel* dot_kernel(DType w);

// Activation quantization (K a multiple of 32 / 256): d = amax/127, q = round(x/d) like ggml.
void quantize_row_q8_0(const float* x, BlockQ8A* y, int64_t K);
void quantize_row_q8_K(const float* x, BlockQ8K* y, int64_t K);
size_t act_row_bytes(ActFormat f, int64_t K);
void quantize_act(ActFormat f, const float* x, void* y, int64_t K);  // F32: a copy

// The per-format kernels (float_dot.cpp, quant_dot.cpp, kquant_dot.cpp).
void dot_f32_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_f32_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_f16_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_f16_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_bf16_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_bf16_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_q4_0_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_q4_0_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_q8_0_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_q8_0_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_mxfp4_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_mxfp4_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_q4_K_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_q4_K_avx2(const void*, const void*, size_t, int, int64_t, float*);
void dot_q6_K_scalar(const void*, const void*, size_t, int, int64_t, float*);
void dot_q6_K_avx2(const void*, const void*, size_t, int, int64_t, float*);

// MXFP4 E2M1 codes as doubled integers, and the E8M0 scale halved to match (ggml's convention).
constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
float e8m0_to_f32_half(uint8_t e);

}  // namespace tessera::cpu
