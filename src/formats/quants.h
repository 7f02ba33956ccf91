// Quantized block codecs (Q4_0, Q8_0, Q4_K, Q6_K, MXFP4) and f32/f16/bf16 rows, bit-exact with
// ggml's reference C code (ggml-quants.c) and llama.cpp's Python `gguf.quants`.
// Block layouts are in core/quant_blocks.h. A "row" is n elements, n a multiple of the block size.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"
#include "core/tensor.h"

namespace tessera {

// Which dtypes the generic entry points accept.
bool can_dequantize(DType t);  // F32 F16 BF16 Q4_0 Q8_0 Q4_K Q6_K MXFP4
bool can_quantize(DType t);    // the same set

// src: dtype_row_bytes(t, n) bytes of t; dst: n floats. Throws Error on an unsupported dtype or
// an n that is not a whole number of blocks.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);
// src: n floats; dst: dtype_row_bytes(t, n) bytes. Follows ggml's quantize_row_*_ref exactly.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

// Whole tensors [rows, cols], rows contiguous, split over ThreadPool::global().
void dequantize_tensor(DType t, const void* src, float* dst, int64_t rows, int64_t cols);
void quantize_tensor(DType t, const float* src, void* dst, int64_t rows, int64_t cols);
// Tensor views: src any supported dtype (rows may be strided), dst f32 of the same shape,
// contiguous; or src f32 contiguous and dst of a quantized/plain dtype with the same shape.
void dequantize_tensor(const Tensor& src, const Tensor& dst);
void quantize_tensor(const Tensor& src, const Tensor& dst);

// Per-type block codecs (nb = number of blocks); the generic functions above dispatch to these.
void dequantize_blocks_q4_0(const BlockQ4_0* x, float* y, int64_t nb);
void dequantize_blocks_q8_0(const BlockQ8_0* x, float* y, int64_t nb);
void dequantize_blocks_q4_k(const BlockQ4_K* x, float* y, int64_t nb);
void dequantize_blocks_q6_k(const BlockQ6_K* x, float* y, int64_t nb);
void dequantize_blocks_mxfp4(const BlockMXFP4* x, float* y, int64_t nb);
void quantize_blocks_q4_0(const float* x, BlockQ4_0* y, int64_t nb);
void quantize_blocks_q8_0(const float* x, BlockQ8_0* y, int64_t nb);
void quantize_blocks_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_blocks_q6_k(const float* x, BlockQ6_K* y, int64_t nb);
void quantize_blocks_mxfp4(const float* x, BlockMXFP4* y, int64_t nb);

// Helpers shared with the kernels.
// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K block (ggml get_scale_min_k4).
inline void q4_k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = uint8_t((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}
// E8M0 exponent -> half of its power of two (ggml_e8m0_to_fp32_half); MXFP4 values are stored doubled.
float mxfp4_e8m0_to_f32_half(uint8_t e);
// E2M1 code (0..15) -> value times two.
extern const int8_t kMxfp4Values[16];

}  // namespace tessera
