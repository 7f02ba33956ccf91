// The kernel pack's layout for quantized matrices on the GPU (TESSERA_KERNELS=fast). Every
// quantized source is converted into one of two layouts at load (packed_weight.cpp, on the host,
// then uploaded once):
//
//   Int4  ← GGUF Q4_0, Q4_K and MLX affine int4 (group 64 / 128)
//   Int8  ← GGUF Q8_0 and Q6_K
//
// For a matrix w [n, k] (n output rows, k inputs), group size G along k:
//
//   w[r, c] = scale[r, c/G] · code[r, c] + bias[r, c/G]
//
//   Int4: code unsigned 0..15. codes [n, k/2] bytes, row-major, rows contiguous (row stride k/2
//         bytes, a multiple of 16: k is a multiple of 32); byte j of a row holds column 2j in its
//         low nibble and column 2j+1 in its high nibble (natural order — a 32-bit word holds 8
//         consecutive columns, column 8w+i at bits 4i..4i+3). Kernels may permute k inside a
//         word as long as they pair the activations the same way.
//         bias: f16 [n, k/G], or null — then bias = −8·scale (Q4_0's symmetric form).
//   Int8: code signed int8, codes [n, k] bytes row-major (row stride k); bias always null.
//
//   scales, biases: f16 bits, [n, k/G] row-major. G: Int4 32 (Q4_0, Q4_K), 64 or 128 (MLX);
//   Int8 32 (Q8_0) or 16 (Q6_K).
//
// Exactness: Q4_0, Q8_0 and MLX (f16 or bf16 scales within f16's normal range) are exact. Q4_K's
// d·sc and dmin·m and Q6_K's d·sc are products rounded once to f16 (relative error ≤ 2⁻¹¹, far
// below the reference path's bf16 weights).
//
// The 16-byte alignment of every row start is what the kernels' 128-bit loads rely on.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace tessera::cuda {

enum class PackedKind : uint8_t { Int4, Int8 };

// Device pointers of a packed matrix (what kernels take, by value).
struct PackedMatrix {
    PackedKind kind = PackedKind::Int4;
    int64_t n = 0, k = 0;             // rows (outputs), columns (inputs)
    int group = 32;                   // G
    const uint8_t* codes = nullptr;   // Int4 [n, k/2] bytes; Int8 [n, k] int8
    const uint16_t* scales = nullptr; // [n, k/G] f16
    const uint16_t* biases = nullptr; // [n, k/G] f16, or null (see above)

    int64_t row_code_bytes() const { return kind == PackedKind::Int4 ? k / 2 : k; }
    int64_t groups_per_row() const { return k / group; }
};

// The same on the host, owning its arrays (what the repacking produces and tests build).
struct PackedHost {
    PackedKind kind = PackedKind::Int4;
    int64_t n = 0, k = 0;
    int group = 32;
    std::vector<uint8_t> codes;
    std::vector<uint16_t> scales;
    std::vector<uint16_t> biases;  // empty: bias = −8·scale (Int4) / none (Int8)
};

}  // namespace tessera::cuda
