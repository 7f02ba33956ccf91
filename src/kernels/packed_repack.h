// Host-side repacking of GGUF quantized matrices into the kernel pack's packed layout
// (kernels/cuda/packed_weight.h): Q4_0, Q4_K → Int4 (G = 32); Q8_0 → Int8 (G = 32), Q6_K → Int8
// (G = 16). Codes in natural column order, one f16 scale (and bias) per group: Q4_0 / Q8_0 copy
// their f16 scales (exact); Q4_K's d·sc and dmin·m and Q6_K's d·sc are exact f32 products rounded
// once to f16. Plain C++ and header-only: the CUDA backend (libtessera_cuda, which links only
// core) uses it, and the CPU build tests it (tests/kernels/test_packed_repack.cpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"
#include "formats/quants.h"
#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda {

// Whether repack() takes matrices of dtype t.
inline bool can_repack(DType t);
// The packed kind of a repackable dtype (throws Error(Unsupported) for others).
inline PackedKind packed_kind_of(DType t);
// host: a 2-D [n, k] CPU tensor of a repackable dtype, rows possibly strided (rows are repacked
// in parallel on ThreadPool::global()). Throws Error on an unsupported dtype, a k that is not a
// whole number of blocks, or a scale that does not fit f16.
inline PackedHost repack(const Tensor& host);
// Row `row` of a packed matrix as f32 (scale · code + bias, the kernels' dequantization), k floats
// (either order: row-major or 16-row tiles).
inline void unpack_row_f32(const PackedHost& w, int64_t row, float* out);
// The same matrix in 16-row tiles (packed_weight.h; packed_tiles_fit must hold): codes, scales and
// biases reordered, nothing else changed. Throws Error if the shape does not fit.
inline void tile_packed(PackedHost& w);
// The addressing of a host matrix (its order, shape and group; no pointers).
inline PackedLayout packed_layout(const PackedHost& w);

// ---- implementation

inline bool can_repack(DType t) { return t == DType::Q4_0 || t == DType::Q4_K || t == DType::Q8_0 || t == DType::Q6_K; }

inline PackedKind packed_kind_of(DType t) {
    switch (t) {
        case DType::Q4_0: case DType::Q4_K: return PackedKind::Int4;
        case DType::Q8_0: case DType::Q6_K: return PackedKind::Int8;
        default: fail(ErrorKind::Unsupported, "packed weights: no packed layout for {}", dtype_name(t));
    }
}

namespace repack_detail {

// A product rounded to f16; an overflow is an error (the packed form could not represent it).
inline uint16_t to_f16(float v, const Tensor& host, int64_t row, int64_t group) {
    const uint16_t h = f32_to_f16(v);
    if (std::isfinite(v) && !std::isfinite(f16_to_f32(h)))
        fail(ErrorKind::Unsupported, "packed weights: {} row {} group {}: scale {} overflows f16", host.describe(), row,
             group, v);
    return h;
}

// Int4 codes of one group of 32: column c of the group is code[c]; byte j = code[2j] | code[2j+1] << 4.
inline void put_int4(uint8_t* dst, const uint8_t* code32) {
    for (int j = 0; j < 16; ++j) dst[j] = uint8_t(code32[2 * j] | (code32[2 * j + 1] << 4));
}

inline void repack_row(const Tensor& host, DType t, const uint8_t* src, int64_t row, int64_t k, PackedHost& p) {
    const int64_t gpr = k / p.group;
    uint8_t* codes = p.codes.data() + size_t(row) * size_t(p.kind == PackedKind::Int4 ? k / 2 : k);
    uint16_t* scales = p.scales.data() + size_t(row * gpr);
    uint16_t* biases = p.biases.empty() ? nullptr : p.biases.data() + size_t(row * gpr);
    uint8_t code[32];
    switch (t) {
        case DType::Q4_0: {
            const auto* b = reinterpret_cast<const BlockQ4_0*>(src);
            for (int64_t g = 0; g < gpr; ++g) {
                for (int j = 0; j < 16; ++j) {
                    code[j] = b[g].qs[j] & 0xF;
                    code[j + 16] = b[g].qs[j] >> 4;
                }
                put_int4(codes + g * 16, code);
                scales[g] = b[g].d;
            }
            break;
        }
        case DType::Q4_K: {
            const auto* b = reinterpret_cast<const BlockQ4_K*>(src);
            for (int64_t s = 0; s < k / QK_K; ++s) {
                const float d = f16_to_f32(b[s].d), dmin = f16_to_f32(b[s].dmin);
                for (int sub = 0; sub < 8; ++sub) {  // sub-block pairs share 32 bytes: low nibbles, then high
                    const uint8_t* q = b[s].qs + 32 * (sub / 2);
                    for (int l = 0; l < 32; ++l) code[l] = (sub % 2) ? (q[l] >> 4) : (q[l] & 0xF);
                    uint8_t sc, m;
                    q4_k_scale_min(sub, b[s].scales, &sc, &m);
                    const int64_t g = s * 8 + sub;
                    put_int4(codes + g * 16, code);
                    scales[g] = to_f16(d * float(sc), host, row, g);
                    biases[g] = to_f16(-(dmin * float(m)), host, row, g);
                }
            }
            break;
        }
        case DType::Q8_0: {
            const auto* b = reinterpret_cast<const BlockQ8_0*>(src);
            for (int64_t g = 0; g < gpr; ++g) {
                std::memcpy(codes + g * 32, b[g].qs, 32);
                scales[g] = b[g].d;
            }
            break;
        }
        case DType::Q6_K: {
            const auto* b = reinterpret_cast<const BlockQ6_K*>(src);
            for (int64_t s = 0; s < k / QK_K; ++s) {
                const float d = f16_to_f32(b[s].d);
                auto* out = reinterpret_cast<int8_t*>(codes + s * QK_K);
                for (int n = 0; n < 2; ++n) {  // two halves of 128: ql 64 bytes, qh 32 bytes, 8 scales each
                    const uint8_t* ql = b[s].ql + 64 * n;
                    const uint8_t* qh = b[s].qh + 32 * n;
                    int8_t* o = out + 128 * n;
                    for (int l = 0; l < 32; ++l) {
                        o[l] = int8_t(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                        o[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                        o[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                        o[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
                    }
                }
                for (int g = 0; g < 16; ++g)  // group g of 16 columns takes scales[g]
                    scales[s * 16 + g] = to_f16(d * float(b[s].scales[g]), host, row, s * 16 + g);
            }
            break;
        }
        default: TS_ASSERT(false);
    }
}

}  // namespace repack_detail

inline PackedHost repack(const Tensor& host) {
    TS_CHECK(host.device == Device::CPU && !host.empty(), "repack: {} is not in host memory", host.describe());
    if (!can_repack(host.dtype))
        fail(ErrorKind::Unsupported, "repack: {} has no packed layout (Q4_0, Q4_K, Q8_0, Q6_K)", host.describe());
    TS_CHECK(host.ndim == 2, "repack: {} is not a matrix", host.describe());
    const int64_t n = host.rows(), k = host.cols();
    const int blk = dtype_info(host.dtype).block_elems;
    TS_CHECK(k > 0 && k % blk == 0, "repack: {}: rows of {} are not a whole number of {}-element blocks",
             host.describe(), k, blk);
    PackedHost p;
    p.kind = packed_kind_of(host.dtype);
    p.n = n;
    p.k = k;
    p.group = host.dtype == DType::Q6_K ? 16 : 32;
    p.codes.resize(size_t(n) * size_t(p.kind == PackedKind::Int4 ? k / 2 : k));
    p.scales.resize(size_t(n * (k / p.group)));
    if (host.dtype == DType::Q4_K) p.biases.resize(p.scales.size());
    ThreadPool::global().parallel_for(n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
            repack_detail::repack_row(host, host.dtype, static_cast<const uint8_t*>(host.row_ptr(r)), r, k, p);
    }, 64);
    return p;
}

inline PackedLayout packed_layout(const PackedHost& w) {
    PackedMatrix m;
    m.kind = w.kind, m.n = w.n, m.k = w.k, m.group = w.group, m.tiles = w.tiles;
    return packed_layout(m);
}

inline void unpack_row_f32(const PackedHost& w, int64_t row, float* out) {
    TS_CHECK(row >= 0 && row < w.n, "unpack_row_f32: row {} of {}", row, w.n);
    const PackedLayout l = packed_layout(w);
    const bool int4 = w.kind == PackedKind::Int4;
    const int64_t chunk_cols = int4 ? 32 : 16;
    const uint8_t* codes = w.codes.data() + l.code_row(row);
    const uint16_t* sc = w.scales.data() + l.scale_row(row);
    const uint16_t* bi = w.biases.empty() ? nullptr : w.biases.data() + l.scale_row(row);
    for (int64_t c = 0; c < w.k; ++c) {
        const int64_t gi = l.scale_group(c / w.group);
        const float s = f16_to_f32(sc[gi]);
        const int64_t in_chunk = c % chunk_cols;
        const uint8_t* chunk = codes + l.chunk(c / chunk_cols);
        float code, bias;
        if (int4) {
            const uint8_t byte = chunk[in_chunk / 2];
            code = float((in_chunk % 2) ? (byte >> 4) : (byte & 0xF));
            bias = bi ? f16_to_f32(bi[gi]) : -8.f * s;
        } else {
            code = float(static_cast<int8_t>(chunk[in_chunk]));
            bias = 0.f;
        }
        out[c] = s * code + bias;
    }
}

inline void tile_packed(PackedHost& w) {
    TS_CHECK(!w.tiles, "tile_packed: the matrix is already in tiles");
    TS_CHECK(packed_tiles_fit(w.kind, w.n, w.k, w.group),
             "tile_packed: a {} [{}, {}] matrix of group {} does not fit 16-row tiles (Int4, n a multiple of 16, k "
             "of 128, G 32 / 64 / 128)",
             w.kind == PackedKind::Int4 ? "Int4" : "Int8", w.n, w.k, w.group);
    const int64_t rb = w.k / 2, gpr = w.k / w.group;
    PackedHost t = w;
    t.tiles = true;
    const PackedLayout l = packed_layout(t);
    ThreadPool::global().parallel_for(w.n, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            for (int64_t ch = 0; ch < rb / 16; ++ch)
                std::memcpy(t.codes.data() + l.code_row(r) + l.chunk(ch), w.codes.data() + r * rb + 16 * ch, 16);
            for (int64_t gi = 0; gi < gpr; ++gi) {
                const size_t to = size_t(l.scale_row(r) + l.scale_group(gi)), from = size_t(r * gpr + gi);
                t.scales[to] = w.scales[from];
                if (!w.biases.empty()) t.biases[to] = w.biases[from];
            }
        }
    }, 64);
    w = std::move(t);
}

}  // namespace tessera::cuda
