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
//
// 16-row tiles (`tiles`, Int4 only; the backend stores matrices this way where n is a multiple
// of 16 and k of 128 — MoE experts too since session 19): the same codes and scales in another
// order. Tile (R, kt) — rows 16R … 16R + 15, columns 128kt … 128kt + 127 — is its 16 rows' 64
// code bytes each, row after row (1 KB); tiles follow each other k-tile after k-tile, then row
// tile after row tile. Scales (biases) likewise: a tile's 16 rows' 128/G halves each, row after
// row. So a warp of a GEMV that reads 16-byte chunk t of rows g and g + 8 (lane (g, t)) reads two
// runs of 512 contiguous bytes, where the row-major order gives 16 runs of 64 bytes 16 rows apart
// — bench_fast_gemv's loads-only rows at 4096x14336: 10.9 against 17.2 µs (a pure stream 10.5).
// PackedLayout below addresses both orders, so every kernel reads either.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.h"

#ifdef __CUDACC__
#define TS_PACKED_HD __host__ __device__ __forceinline__
#else
#define TS_PACKED_HD inline
#endif

namespace tessera::cuda {

enum class PackedKind : uint8_t { Int4, Int8 };

// Columns of a tile of the 16-row-tile order, and its rows.
constexpr int64_t kPackedTileCols = 128, kPackedTileRows = 16;

// Device pointers of a packed matrix (what kernels take, by value).
struct PackedMatrix {
    PackedKind kind = PackedKind::Int4;
    int64_t n = 0, k = 0;             // rows (outputs), columns (inputs)
    int group = 32;                   // G
    const uint8_t* codes = nullptr;   // Int4 [n, k/2] bytes; Int8 [n, k] int8
    const uint16_t* scales = nullptr; // [n, k/G] f16
    const uint16_t* biases = nullptr; // [n, k/G] f16, or null (see above)
    bool tiles = false;               // 16-row tiles (Int4; see above), else row-major

    TS_PACKED_HD int64_t row_code_bytes() const { return kind == PackedKind::Int4 ? k / 2 : k; }
    TS_PACKED_HD int64_t groups_per_row() const { return k / group; }
};

// Where row r's 16-byte code chunk ch and its scale group gi are, in either order:
//   codes + code_row(r) + chunk(ch)      scales (biases) + scale_row(r) + scale_group(gi)
// Row-major: r·row_bytes + 16·ch and r·gpr + gi. Tiles: see above.
struct PackedLayout {
    int64_t row_tile = 0, row = 0;    // code bytes: (r >> 4)·row_tile + (r & 15)·row
    int64_t ktile = 64;               // code bytes from one k-tile (4 chunks) of a row to the next
    int64_t s_row_tile = 0, s_row = 0;  // halves: (r >> 4)·s_row_tile + (r & 15)·s_row
    int s_lg = 0;                     // groups a k-tile = 1 << s_lg (tiles), 1 (row-major: s_lg 0)
    int64_t s_ktile = 1;              // halves from one k-tile's groups of a row to the next

    TS_PACKED_HD int64_t code_row(int64_t r) const { return (r >> 4) * row_tile + (r & 15) * row; }
    TS_PACKED_HD int64_t chunk(int64_t ch) const { return (ch >> 2) * ktile + (ch & 3) * 16; }
    TS_PACKED_HD int64_t scale_row(int64_t r) const { return (r >> 4) * s_row_tile + (r & 15) * s_row; }
    TS_PACKED_HD int64_t scale_group(int64_t gi) const {
        return (gi >> s_lg) * s_ktile + (gi & ((int64_t(1) << s_lg) - 1));
    }
};

// The layout of w (tiles: Int4, G dividing 128, n a multiple of 16, k of 128 — packed_tiles_fit).
TS_PACKED_HD PackedLayout packed_layout(const PackedMatrix& w) {
    PackedLayout l;
    const int64_t rb = w.row_code_bytes(), gpr = w.groups_per_row();
    l.s_row_tile = 16 * gpr;
    if (!w.tiles) {
        l.row_tile = 16 * rb, l.row = rb;
        l.s_row = gpr;
        return l;
    }
    const int64_t gpt = kPackedTileCols / w.group;  // groups a tile row: 4, 2 or 1
    l.row_tile = 16 * rb, l.row = kPackedTileCols / 2, l.ktile = 16 * (kPackedTileCols / 2);
    l.s_row = gpt, l.s_ktile = 16 * gpt;
    l.s_lg = gpt == 4 ? 2 : gpt == 2 ? 1 : 0;
    return l;
}

// packed_layout in 32-bit index math, from a matrix's group size, order and k (kernels that know
// k as their own H or I, checked against the descriptors on the host): no 64-bit division on the
// way to a first weight load, and none at all: G is a power of two (32, 64 or 128 for Int4, 16 or
// 32 for Int8), so k / G is a shift.
TS_PACKED_HD PackedLayout packed_layout_k32(int group, bool tiles, int k) {
#ifdef __CUDA_ARCH__
    const int lgg = __ffs(group) - 1;  // G is a power of two (32·2^j; Int8 16 or 32)
#else
    const int lgg = __builtin_ctz(unsigned(group));
#endif
    const unsigned rb = unsigned(k) / 2u, gpr = unsigned(k) >> lgg;
    PackedLayout l;
    l.row_tile = 16u * rb, l.s_row_tile = 16u * gpr;
    if (!tiles) {
        l.row = rb, l.s_row = gpr;
        return l;
    }
    const unsigned gpt = unsigned(kPackedTileCols) >> lgg;  // groups a tile row: 4, 2 or 1
    l.row = kPackedTileCols / 2, l.ktile = 16 * (kPackedTileCols / 2);
    l.s_row = gpt, l.s_ktile = 16u * gpt;
    l.s_lg = gpt == 4 ? 2 : gpt == 2 ? 1 : 0;
    return l;
}

// PackedLayout's in-row steps (chunk, scale_group) in 32-bit math, for kernels that keep them a
// row: offsets within a row fit, and the fields are at most 1024.
struct PackedRowSteps {
    int ktile = 64, s_lg = 0, s_ktile = 1;
    TS_PACKED_HD int chunk(int ch) const { return (ch >> 2) * ktile + (ch & 3) * 16; }
    TS_PACKED_HD int scale_group(int gi) const { return (gi >> s_lg) * s_ktile + (gi & ((1 << s_lg) - 1)); }
};
TS_PACKED_HD PackedRowSteps packed_row_steps(const PackedLayout& l) {
    return {int(l.ktile), l.s_lg, int(l.s_ktile)};
}

// Whether a matrix of this kind and shape can be stored as 16-row tiles.
TS_PACKED_HD bool packed_tiles_fit(PackedKind kind, int64_t n, int64_t k, int group) {
    return kind == PackedKind::Int4 && n > 0 && n % kPackedTileRows == 0 && k > 0 && k % kPackedTileCols == 0 &&
           (group == 32 || group == 64 || group == 128);
}

// The same on the host, owning its arrays (what the repacking produces and tests build).
struct PackedHost {
    PackedKind kind = PackedKind::Int4;
    int64_t n = 0, k = 0;
    int group = 32;
    std::vector<uint8_t> codes;
    std::vector<uint16_t> scales;
    std::vector<uint16_t> biases;  // empty: bias = −8·scale (Int4) / none (Int8)
    bool tiles = false;            // 16-row tiles (see above)
};

}  // namespace tessera::cuda
