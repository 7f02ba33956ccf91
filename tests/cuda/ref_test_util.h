// Helpers for the reference-kernel tests (test_ref_*.cpp): the GPU skip, random host data with
// padded (strided) layouts, Tensor views for the CPU backend over the same host data, device
// round trips, and the normalised comparison every test reports.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ref_attention.h"

#define REQUIRE_CUDA()                                                                        \
    do {                                                                                      \
        std::string why_;                                                                     \
        if (::tessera::cuda::device_count(&why_) == 0) GTEST_SKIP() << "no CUDA device: " << why_; \
    } while (0)

namespace tessera::reftest {

// A paged cache [n_blocks, block_size, n_kv, D] packed densely at data (element strides).
inline cuda::ref::PagedCache dense_cache(const void* data, bool f16, int64_t n_blocks, int64_t block_size,
                                         int64_t n_kv, int64_t D) {
    cuda::ref::PagedCache c;
    c.data = data;
    c.f16 = f16;
    c.n_blocks = n_blocks;
    c.block_size = block_size;
    c.n_kv = n_kv;
    c.D = D;
    c.head_stride = D;
    c.row_stride = n_kv * D;
    c.block_stride = block_size * n_kv * D;
    return c;
}

// Value of every element outside a view (row padding): a kernel that writes there shows up.
constexpr float kPad = -777.25f;

// n normal floats (mean 0, standard deviation scale) from seed.
inline std::vector<float> normal_floats(size_t n, uint32_t seed, float scale = 1.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, scale);
    std::vector<float> v(n);
    for (auto& f : v) f = dist(rng);
    return v;
}

// Host data [rows, ld] with the first `cols` of each row uniform in [lo, hi) and the rest kPad.
inline std::vector<float> random_rows(int64_t rows, int64_t cols, int64_t ld, uint32_t seed, float lo = -2.f,
                                      float hi = 2.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(size_t(rows * ld), kPad);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) v[size_t(r * ld + c)] = u(rng);
    return v;
}

// Host data [T, n_heads, D] in a buffer of T * tok_stride floats, padding kPad.
inline std::vector<float> random_heads(int64_t T, int64_t n, int64_t D, int64_t tok_stride, int64_t head_stride,
                                       uint32_t seed, float lo = -2.f, float hi = 2.f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(size_t(T * tok_stride), kPad);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < n; ++h)
            for (int64_t i = 0; i < D; ++i) v[size_t(t * tok_stride + h * head_stride + i)] = u(rng);
    return v;
}

// A CPU f32 Tensor [rows, cols] with row stride ld (elements) over host data.
inline Tensor rows_view(float* p, int64_t rows, int64_t cols, int64_t ld) {
    Tensor t(p, DType::F32, {rows, ld});
    t.shape[1] = cols;
    return t;
}
// A CPU f32 Tensor [T, n, D] with element strides per token and per head.
inline Tensor heads_view(float* p, int64_t T, int64_t n, int64_t D, int64_t tok_stride, int64_t head_stride) {
    Tensor t(p, DType::F32, {T, n, D});
    t.stride[0] = tok_stride * 4;
    t.stride[1] = head_stride * 4;
    return t;
}

template <typename T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
    cuda::DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    return b;
}
template <typename T>
std::vector<T> to_host(const cuda::DeviceBuffer& b) {
    std::vector<T> v(b.size() / sizeof(T));
    b.download(v.data(), v.size() * sizeof(T));
    return v;
}

// Expects |got - want| <= tol · max(1, |want|) everywhere (NaN only where want is NaN, infinities
// equal); reports the worst normalised error and the first few misses.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double worst = 0;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const float g = got[i], w = want[i];
        double err;
        if (std::isnan(w) || std::isnan(g)) err = std::isnan(w) && std::isnan(g) ? 0 : INFINITY;
        else if (std::isinf(w) || std::isinf(g)) err = g == w ? 0 : INFINITY;
        else err = std::fabs(double(g) - double(w)) / std::max(1.0, std::fabs(double(w)));
        worst = std::max(worst, err);
        if (err > tol && ++bad <= 5)
            ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w << " (error " << err
                          << " > " << tol << ")";
    }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off; worst " << worst;
}

// Bit-for-bit equality of two host buffers.
template <typename T>
void expect_same_bytes(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && ++bad <= 5)
            ADD_FAILURE() << what << ": element " << i << " differs";
    EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements differ";
}

}  // namespace tessera::reftest
