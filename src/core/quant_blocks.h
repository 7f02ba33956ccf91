// Quantized block layouts, byte-compatible with ggml (llama.cpp) and GGUF files.
// Codecs live in formats/quants.h; fast dot products in kernels/cpu/.
#pragma once
#include <cstdint>

namespace tessera {

constexpr int QK4_0 = 32;
struct BlockQ4_0 {
    uint16_t d;             // f16 scale
    uint8_t qs[QK4_0 / 2];  // y[j] = d*((qs[j]&15)-8), y[j+16] = d*((qs[j]>>4)-8)
};
static_assert(sizeof(BlockQ4_0) == 18);

constexpr int QK8_0 = 32;
struct BlockQ8_0 {
    uint16_t d;         // f16 scale
    int8_t qs[QK8_0];   // y = d*q
};
static_assert(sizeof(BlockQ8_0) == 34);

constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;
struct BlockQ4_K {
    uint16_t d;                    // f16 super-block scale for the 6-bit scales
    uint16_t dmin;                 // f16 super-block scale for the 6-bit mins
    uint8_t scales[K_SCALE_SIZE];  // 8 x (6-bit scale, 6-bit min), packed
    uint8_t qs[QK_K / 2];          // 4-bit quants
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ6_K {
    uint8_t ql[QK_K / 2];      // low 4 bits
    uint8_t qh[QK_K / 4];      // high 2 bits
    int8_t scales[QK_K / 16];  // 8-bit scales of 16-element groups
    uint16_t d;                // f16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210);

constexpr int QK_MXFP4 = 32;
struct BlockMXFP4 {
    uint8_t e;                   // E8M0 shared exponent
    uint8_t qs[QK_MXFP4 / 2];    // E2M1 codes: y[j] = lut[qs[j]&15], y[j+16] = lut[qs[j]>>4], times 2^(e-127)... see codec
};
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace tessera
