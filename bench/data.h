// Random inputs for the kernel benchmarks: f32 activations and weights quantized to any dtype.
// Timing needs realistic values (no NaN, no denormals) and distinct memory, not distinct values,
// so big weights repeat one quantized tile of rows (fast to make even for the 248K-row lm_head).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "formats/quants.h"

namespace tessera::bench {

// Cheap reproducible random bits (xorshift64): 100+ MB of packed weights build in a blink.
struct XorShift {
    uint64_t s;
    uint32_t next() {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        return uint32_t(s >> 11);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * float(next() & 0xffffff) / float(0x1000000); }
};

inline std::vector<float> random_f32(size_t n, float lo, float hi, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// A [rows, cols] matrix in dtype t (host bytes): uniform(-1, 1) values quantized as a tile of up
// to 256 rows, repeated down the matrix.
inline std::vector<uint8_t> random_weight(DType t, int64_t rows, int64_t cols, uint64_t seed) {
    const int64_t tile = std::min<int64_t>(rows, 256);
    const size_t row_bytes = dtype_row_bytes(t, cols);
    const std::vector<float> src = random_f32(size_t(tile * cols), -1.f, 1.f, seed);
    std::vector<uint8_t> out(row_bytes * size_t(rows));
    quantize_tensor(t, src.data(), out.data(), tile, cols);
    for (int64_t r = tile; r < rows; r += tile)
        std::memcpy(out.data() + size_t(r) * row_bytes, out.data(), size_t(std::min(tile, rows - r)) * row_bytes);
    return out;
}

// Rows of x [rows, d] scaled to unit L2 norm (times `scale`), as the GDN layer feeds q and k.
inline void normalize_rows(std::vector<float>& x, int64_t d, float scale) {
    for (size_t r = 0; r + size_t(d) <= x.size(); r += size_t(d)) {
        double ss = 0;
        for (int64_t i = 0; i < d; ++i) ss += double(x[r + size_t(i)]) * x[r + size_t(i)];
        const float s = float(scale / std::sqrt(ss + 1e-12));
        for (int64_t i = 0; i < d; ++i) x[r + size_t(i)] *= s;
    }
}

}  // namespace tessera::bench
