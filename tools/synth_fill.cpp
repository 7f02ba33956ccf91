// Random codes and floats for synthetic tensors (see synth_fill.h).
#include "synth_fill.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/status.h"
#include "formats/quants.h"

namespace tessera::cli {
namespace {

// splitmix64: one independent stream per row, a few ns per 8 random bytes.
struct Rng {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform() { return float(next() >> 40) * (1.f / 16777216.f); }  // [0, 1)
    // Zero mean, unit variance, bell-shaped: the sum of four 16-bit uniforms (Irwin-Hall), rescaled.
    float normal() {
        const uint64_t r = next();
        const float s = float(r & 0xFFFF) + float((r >> 16) & 0xFFFF) + float((r >> 32) & 0xFFFF) + float(r >> 48);
        return (s * (1.f / 65536.f) - 2.f) * 1.7320508f;
    }
};

Rng row_rng(uint64_t key, int64_t row) {
    Rng g{key ^ (uint64_t(row) * 0xD1B54A32D192ED03ull)};
    g.next();
    return g;
}

// The float recipe of one row.
void float_row(const SynthTensor& t, Rng& g, float* dst, int64_t cols) {
    for (int64_t i = 0; i < cols; ++i) {
        switch (t.init) {
            case SynthInit::Normal: dst[i] = t.std * g.normal(); break;
            case SynthInit::Norm: dst[i] = 1.f + 0.1f * g.normal(); break;
            case SynthInit::NegA: dst[i] = -(0.5f + 7.5f * g.uniform()); break;
            case SynthInit::LogA: dst[i] = std::log(0.5f + 7.5f * g.uniform()); break;
        }
    }
}

// Q4_K sub-block scales are drawn from [16, 31], mins set to round(1.875·sc) with dmin = 4·d so
// each sub-block's mean is near zero: y = d·(sc·q − 4·m), q uniform on 0..15.
constexpr int kScLo = 16, kScHi = 31;
int q4k_min(int sc) { return int(std::lround(1.875 * sc)); }

// E[y²]/d² of the codes of each type (codes uniform; a random sign on d zeroes the mean).
double code_mean_square(DType t) {
    switch (t) {
        case DType::Q4_0: return 21.25 + 0.25;          // q − 8, q uniform on 0..15
        case DType::Q8_0: return 5461.25 + 0.25;        // int8 uniform on −128..127
        case DType::Q4_K: {
            double s = 0;
            for (int sc = kScLo; sc <= kScHi; ++sc) {
                const double mean = 7.5 * sc - 4.0 * q4k_min(sc);
                s += 21.25 * sc * sc + mean * mean;
            }
            return s / (kScHi - kScLo + 1);
        }
        default: fail(ErrorKind::Internal, "no random codes for {}", dtype_name(t));
    }
}

void put_f16(uint16_t* dst, float v) { *dst = f32_to_f16(v); }

void code_row(DType type, float std, Rng& g, void* dst, int64_t cols) {
    const float d = float(std / std::sqrt(code_mean_square(type)));
    // The two signed scales, rounded to f16 once.
    const uint16_t dp = f32_to_f16(d), dn = f32_to_f16(-d);
    if (type == DType::Q4_0) {
        auto* b = static_cast<BlockQ4_0*>(dst);
        for (int64_t i = 0; i < cols / QK4_0; ++i) {
            const uint64_t r0 = g.next(), r1 = g.next();
            b[i].d = (g.next() & 1) ? dn : dp;
            std::memcpy(b[i].qs, &r0, 8);
            std::memcpy(b[i].qs + 8, &r1, 8);
        }
    } else if (type == DType::Q8_0) {
        auto* b = static_cast<BlockQ8_0*>(dst);
        for (int64_t i = 0; i < cols / QK8_0; ++i) {
            b[i].d = (g.next() & 1) ? dn : dp;
            for (int k = 0; k < 4; ++k) {
                const uint64_t r = g.next();
                std::memcpy(b[i].qs + 8 * k, &r, 8);
            }
        }
    } else {
        auto* b = static_cast<BlockQ4_K*>(dst);
        for (int64_t i = 0; i < cols / QK_K; ++i) {
            uint64_t r = g.next();
            const bool neg = r & 1;
            r >>= 1;
            const float dd = f16_to_f32(neg ? dn : dp);
            put_f16(&b[i].d, dd);
            put_f16(&b[i].dmin, 4.f * dd);
            std::memset(b[i].scales, 0, sizeof(b[i].scales));
            for (int j = 0; j < 8; ++j) {
                const int sc = kScLo + int(r & 15), m = q4k_min(sc);
                r >>= 4;
                uint8_t* q = b[i].scales;  // ggml's 6-bit packing (see q4_k_scale_min)
                if (j < 4) {
                    q[j] = uint8_t(sc);
                    q[j + 4] = uint8_t(m);
                } else {
                    q[j + 4] = uint8_t((sc & 0xF) | ((m & 0xF) << 4));
                    q[j - 4] |= uint8_t((sc >> 4) << 6);
                    q[j] |= uint8_t((m >> 4) << 6);
                }
            }
            for (int k = 0; k < QK_K / 2; k += 8) {
                const uint64_t c = g.next();
                std::memcpy(b[i].qs + k, &c, 8);
            }
        }
    }
}

}  // namespace

uint64_t synth_tensor_key(uint64_t seed, const SynthTensor& t) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a of the name
    for (unsigned char ch : t.name) h = (h ^ ch) * 1099511628211ull;
    Rng g{h ^ (seed * 0x9E3779B97F4A7C15ull)};
    return g.next();
}

bool synth_random_codes(DType type) { return type == DType::Q4_0 || type == DType::Q8_0 || type == DType::Q4_K; }

void synth_rows(const SynthTensor& t, DType type, uint64_t key, int64_t r0, int64_t n, void* dst) {
    const int64_t cols = t.cols();
    const size_t row_bytes = dtype_row_bytes(type, cols);
    auto* out = static_cast<uint8_t*>(dst);
    if (synth_random_codes(type)) {
        TS_CHECK(t.init == SynthInit::Normal, "tensor {}: random codes need a zero-mean normal recipe", t.name);
        for (int64_t r = 0; r < n; ++r) {
            Rng g = row_rng(key, r0 + r);
            code_row(type, t.std, g, out + size_t(r) * row_bytes, cols);
        }
        return;
    }
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < n; ++r) {
        Rng g = row_rng(key, r0 + r);
        float_row(t, g, row.data(), cols);
        quantize_row(type, row.data(), out + size_t(r) * row_bytes, cols);
    }
}

void synth_mlx_codes(uint64_t key, int bits, int64_t r0, int64_t n, int64_t cols, uint32_t* dst) {
    const int64_t words = cols * bits / 32;
    for (int64_t r = 0; r < n; ++r) {
        Rng g = row_rng(key, r0 + r);
        uint32_t* w = dst + r * words;
        for (int64_t i = 0; i < words; i += 2) {
            const uint64_t x = g.next();
            w[i] = uint32_t(x);
            if (i + 1 < words) w[i + 1] = uint32_t(x >> 32);
        }
    }
}

SynthAffine synth_mlx_affine(const SynthTensor& t, int bits) {
    TS_CHECK(t.init == SynthInit::Normal && (bits == 4 || bits == 8), "tensor {}: no {}-bit affine recipe", t.name, bits);
    const double levels = double(1 << bits), var = (levels * levels - 1) / 12;  // codes uniform on 0..levels-1
    const uint16_t scale = f32_to_bf16(float(t.std / std::sqrt(var)));
    const uint16_t bias = f32_to_bf16(float(-(levels - 1) / 2 * bf16_to_f32(scale)));
    return {scale, bias};
}

}  // namespace tessera::cli
