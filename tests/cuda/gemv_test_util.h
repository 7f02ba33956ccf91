// Shared by the decode GEMV's tests (test_fast_gemv.cpp, test_fast_gemv_q8.cpp): GGUF weights made
// and decoded by the CPU codec, packed matrices on the device, the awkward shapes, and the checks
// of a product against its double-precision reference.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"
#include "formats/quants.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/packed_repack.h"

#include "ref_test_util.h"

namespace tessera::cuda::gemvtest {

using reftest::random_rows;
using reftest::to_device;

inline const DType kTypes[] = {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K};

inline bool is_kquant(DType t) { return t == DType::Q4_K || t == DType::Q6_K; }

inline bool getenv_is(const char* name, const char* value) {
    const char* v = std::getenv(name);
    return v && std::string(v) == value;
}

struct Gguf {
    DType type;
    int64_t N, K;
    std::vector<uint8_t> bytes;  // [N, row bytes]
    std::vector<float> deq;      // the CPU codec's dequantization [N, K]
    Tensor host() { return Tensor(bytes.data(), type, {N, K}); }
};

inline Gguf make_gguf(DType t, int64_t N, int64_t K, uint32_t seed) {
    Gguf g{t, N, K, {}, {}};
    const std::vector<float> w = random_rows(N, K, K, seed, -1.f, 1.f);
    g.bytes.resize(dtype_row_bytes(t, K) * size_t(N));
    quantize_tensor(t, w.data(), g.bytes.data(), N, K);
    g.deq.resize(size_t(N * K));
    dequantize_tensor(t, g.bytes.data(), g.deq.data(), N, K);
    return g;
}

// A packed matrix on the device (owning its buffers).
struct DevicePacked {
    DeviceBuffer codes, scales, biases;
    PackedMatrix m;
};

inline DevicePacked upload(const PackedHost& p) {
    DevicePacked d;
    d.codes = to_device(p.codes);
    d.scales = to_device(p.scales);
    if (!p.biases.empty()) d.biases = to_device(p.biases);
    d.m.kind = p.kind;
    d.m.n = p.n;
    d.m.k = p.k;
    d.m.group = p.group;
    d.m.codes = d.codes.as<uint8_t>();
    d.m.scales = d.scales.as<uint16_t>();
    d.m.biases = p.biases.empty() ? nullptr : d.biases.as<uint16_t>();
    d.m.tiles = p.tiles;
    return d;
}

// Compares y [T, N] (row stride ldy) with Σ_k w[n,k]·x[t,k] in double: per element within
// rel · Σ|w·x|, and max|diff| / max|ref| within norm. Padding must stay kPad.
inline void check_product(const std::vector<float>& y, int64_t ldy, const std::vector<float>& w, const std::vector<float>& x,
                   int64_t ldx, int64_t T, int64_t N, int64_t K, double rel, double norm, const std::string& what) {
    SCOPED_TRACE(what);
    double max_diff = 0, max_ref = 0;
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < ldy; ++n) {
            const float got = y[size_t(t * ldy + n)];
            if (n >= N) {
                if (got != reftest::kPad && ++bad <= 3) ADD_FAILURE() << "padding [" << t << ", " << n << "] written";
                continue;
            }
            double s = 0, a = 0;
            for (int64_t k = 0; k < K; ++k) {
                const double p = double(w[size_t(n * K + k)]) * double(x[size_t(t * ldx + k)]);
                s += p;
                a += std::fabs(p);
            }
            const double d = std::fabs(double(got) - s);
            max_diff = std::max(max_diff, d);
            max_ref = std::max(max_ref, std::fabs(s));
            if (!(d <= rel * a + 1e-30) && ++bad <= 5)
                ADD_FAILURE() << "[" << t << ", " << n << "] got " << got << " want " << s << " (|diff| " << d
                              << " > " << rel << " · " << a << ")";
        }
    EXPECT_EQ(bad, 0);
    // A few outputs can all cancel (max|ref| ≪ Σ|w·x|): the normalised form needs enough of them.
    if (T * N >= 16) {
        EXPECT_LE(max_diff, norm * max_ref) << "normalised error " << max_diff / std::max(max_ref, 1e-30);
    }
}

// max|a - b| / max|b| over [T, N] views.
inline double norm_err(const std::vector<float>& a, int64_t lda, const std::vector<float>& b, int64_t ldb, int64_t T,
                int64_t N) {
    double d = 0, m = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            const double va = a[size_t(t * lda + n)], vb = b[size_t(t * ldb + n)];
            d = std::max(d, std::fabs(va - vb));
            m = std::max(m, std::fabs(vb));
        }
    return d / std::max(m, 1e-30);
}

struct Case {
    int64_t T, N, K;
    bool pad;
};

inline std::vector<Case> cases(DType t) {
    const std::vector<int64_t> ks = is_kquant(t) ? std::vector<int64_t>{256, 768, 2304}
                                                 : std::vector<int64_t>{32, 96, 160, 544, 1056, 4128};
    std::vector<Case> out;
    size_t i = 0;
    for (int64_t T = 1; T <= 8; ++T)
        for (int64_t N : {1, 3, 17, 33, 257}) {
            out.push_back({T, N, ks[i % ks.size()], i % 2 == 1});
            ++i;
        }
    // 2 and 4 rows per warp (N past 16 and 32 rows per SM), and x in several slices.
    for (int64_t T : {1, 3, 8}) {
        out.push_back({T, 2200, is_kquant(t) ? 256 : 96, T == 3});
        out.push_back({T, 4500, is_kquant(t) ? 512 : 160, T != 3});
        out.push_back({T, 33, is_kquant(t) ? 14336 : 14336, T == 8});
    }
    return out;
}

// ---- synthetic packed matrices (every layout the GEMV variants take) and their references

struct Layout {
    PackedKind kind;
    int group;
    bool biases;
    const char* name;
};

inline const Layout kLayouts[] = {
    {PackedKind::Int4, 32, false, "int4 g32"},  {PackedKind::Int4, 64, true, "int4 g64 biases"},
    {PackedKind::Int4, 128, true, "int4 g128 biases"}, {PackedKind::Int4, 128, false, "int4 g128"},
    {PackedKind::Int8, 16, false, "int8 g16"},  {PackedKind::Int8, 32, false, "int8 g32"},
};

// Random codes, f16 scales (and biases); every 5th row all zero (scales, biases and codes).
inline PackedHost random_packed(const Layout& l, int64_t N, int64_t K, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> us(0.001f, 0.05f), ub(-0.2f, 0.2f);
    PackedHost p;
    p.kind = l.kind;
    p.n = N;
    p.k = K;
    p.group = l.group;
    const int64_t rb = l.kind == PackedKind::Int4 ? K / 2 : K, gpr = K / l.group;
    p.codes.resize(size_t(N * rb));
    for (auto& b : p.codes) b = uint8_t(rng());
    p.scales.resize(size_t(N * gpr));
    for (auto& v : p.scales) v = f32_to_f16(rng() & 1 ? us(rng) : -us(rng));
    if (l.biases) {
        p.biases.resize(size_t(N * gpr));
        for (auto& v : p.biases) v = f32_to_f16(ub(rng));
    }
    for (int64_t n = 0; n < N; n += 5) {
        std::fill_n(p.codes.begin() + n * rb, rb, uint8_t(0));
        std::fill_n(p.scales.begin() + n * gpr, gpr, uint16_t(0));
        if (l.biases) std::fill_n(p.biases.begin() + n * gpr, gpr, uint16_t(0));
    }
    return p;
}

// The packed formula in double: y[t, n] = Σ_k (s·code + b)·x[t, k] with x as given; mag = Σ|w·x|,
// off = Σ (offset·|s| + |b|)·|x| — the size of the terms the tensor-core kernel accumulates
// (128 + code against x, then s·P + (b − 128 s)·S; Int8 adds 16·hi nibbles: offset 2432).
// w_f16: each weight rounded to f16 first (BulkMma dequantizes into f16, one rounding of the exact
// s·code + b).
// w_f16: each weight rounded to f16 (BulkMma); w_bf16: as the wgmma tiles fold it (Int4): scale and
// bias rounded to bf16, w = code·s + b (b = −8·s without biases) rounded once to bf16 (WgmmaTma).
inline void packed_reference(const PackedHost& p, const std::vector<float>& x, int64_t ldx, int64_t T,
                      std::vector<double>* y, std::vector<double>* mag, std::vector<double>* off,
                      bool w_f16 = false, bool w_bf16 = false) {
    const int64_t N = p.n, K = p.k, gpr = K / p.group;
    const bool int4 = p.kind == PackedKind::Int4;
    const double offset = int4 ? 144.0 : 2432.0;
    y->assign(size_t(T * N), 0.0);
    mag->assign(size_t(T * N), 0.0);
    off->assign(size_t(T * N), 0.0);
    std::vector<double> w(static_cast<size_t>(K)), o(static_cast<size_t>(K));
    for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) {
            const size_t gi = size_t(n * gpr + k / p.group);
            const double s = f16_to_f32(p.scales[gi]);
            const double b = !int4 ? 0.0 : p.biases.empty() ? -8.0 * s : double(f16_to_f32(p.biases[gi]));
            const int code = int4 ? (p.codes[size_t(n * (K / 2) + k / 2)] >> (4 * (k % 2))) & 15
                                  : int(int8_t(p.codes[size_t(n * K + k)]));
            w[size_t(k)] = s * code + b;  // exact in double (and in float: ≤ 24 significant bits here)
            if (w_f16) w[size_t(k)] = f16_to_f32(f32_to_f16(float(w[size_t(k)])));
            if (w_bf16 && int4) {
                const double sb = bf16_to_f32(f32_to_bf16(float(s)));
                const double bb = p.biases.empty() ? -8.0 * sb : double(bf16_to_f32(f32_to_bf16(float(b))));
                w[size_t(k)] = bf16_to_f32(f32_to_bf16(float(sb * code + bb)));  // sb·code + bb: exact in f32
            }
            o[size_t(k)] = offset * std::fabs(s) + std::fabs(b);
        }
        for (int64_t t = 0; t < T; ++t) {
            double acc = 0, m = 0, f = 0;
            for (int64_t k = 0; k < K; ++k) {
                const double xv = x[size_t(t * ldx + k)];
                acc += w[size_t(k)] * xv;
                m += std::fabs(w[size_t(k)] * xv);
                f += o[size_t(k)] * std::fabs(xv);
            }
            (*y)[size_t(t * N + n)] = acc;
            (*mag)[size_t(t * N + n)] = m;
            (*off)[size_t(t * N + n)] = f;
        }
    }
}

// What Dp4a's two int8 limbs may move y by: Σ_k |w[n, k]| · max|x[t, group of k]| / (127 · 508)
// (|x − x̃| ≤ dx / 508 per value, dx = max / 127 over its 32 columns), with 1 % to spare.
inline std::vector<double> dp4a_bound(const PackedHost& p, const std::vector<float>& x, int64_t ldx, int64_t T) {
    const int64_t N = p.n, K = p.k, gpr = K / p.group;
    std::vector<double> amax(size_t(T * (K / 32)), 0.0), out(size_t(T * N), 0.0);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k) {
            double& m = amax[size_t(t * (K / 32) + k / 32)];
            m = std::max(m, double(std::fabs(x[size_t(t * ldx + k)])));
        }
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k) {
            const size_t gi = size_t(n * gpr + k / p.group);
            const double sc = f16_to_f32(p.scales[gi]);
            const double b = p.biases.empty() ? -8.0 * sc : double(f16_to_f32(p.biases[gi]));
            const int code = (p.codes[size_t(n * (K / 2) + k / 2)] >> (4 * (k % 2))) & 15;
            const double aw = std::fabs(sc * code + b);
            for (int64_t t = 0; t < T; ++t)
                out[size_t(t * N + n)] += aw * amax[size_t(t * (K / 32) + k / 32)] / (127.0 * 508.0) * 1.01;
        }
    return out;
}

}  // namespace tessera::cuda::gemvtest
