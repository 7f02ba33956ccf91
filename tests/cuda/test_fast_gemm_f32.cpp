// fast::gemm_f32_tf32x3 (fast_gemm_f32.cu) against a double-precision product on the CPU: every
// element within 4e-6 of Σ_k |x·w| — 3×TF32's class (each product within 3·2^-20 of itself, ~7e-7
// on average; a single TF32 pass, ~2^-11 a product, misses the bound several times over) — on the
// router's shape (257 rows: one past a tile), a token count of 9 (one past the dense GEMV's), tiles
// cut in every dimension (T 65 / 130, N 1 / 7 / 33, K 4 / 36 / 100: a partial k-step), padded row
// strides whose padding must stay untouched, values spanning six decades; the same bits on a second
// call; K = 0 gives zeros; shapes it cannot take are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gemm_f32.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"  // REQUIRE_CUDA, to_device, to_host

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;

namespace {

constexpr float kPad = 0.3125f;

struct Case {
    int64_t T, N, K, ldx_pad = 0, ldy_pad = 0;
    bool wide = false;  // magnitudes over six decades
};

void check(const Case& c, uint32_t seed) {
    SCOPED_TRACE("T=" + std::to_string(c.T) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f), e(-3.f, 3.f);
    const int64_t ldx = c.K + c.ldx_pad, ldy = c.N + c.ldy_pad;
    auto value = [&] { return c.wide ? u(rng) * std::pow(10.f, e(rng)) : u(rng); };
    std::vector<float> x(size_t(c.T * ldx)), w(size_t(c.N * c.K));
    for (auto& v : x) v = value();
    for (auto& v : w) v = value();
    DeviceBuffer dx = to_device(x), dw = to_device(w), dy = to_device(std::vector<float>(size_t(c.T * ldy), kPad));
    Stream stream;
    ASSERT_TRUE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K));
    fast::gemm_f32_tf32x3(dy.as<float>(), ldy, dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K, stream);
    stream.synchronize();
    const std::vector<float> y = to_host<float>(dy);
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t n = 0; n < c.N; ++n) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < c.K; ++k) {
                ref += double(x[size_t(t * ldx + k)]) * double(w[size_t(n * c.K + k)]);
                mag += std::fabs(double(x[size_t(t * ldx + k)]) * double(w[size_t(n * c.K + k)]));
            }
            const double err = std::fabs(double(y[size_t(t * ldy + n)]) - ref) / std::max(mag, 1e-30);
            worst = std::max(worst, std::isnan(err) ? INFINITY : err);
            if (!(err <= 4e-6) && bad++ == 0) first = t * c.N + n;
        }
        for (int64_t n = c.N; n < ldy; ++n) EXPECT_EQ(y[size_t(t * ldy + n)], kPad) << "padding of row " << t;
    }
    EXPECT_EQ(bad, 0) << bad << " elements off by more than 4e-6 of sum |x w|; first (token, row) ("
                      << (first < 0 ? -1 : first / c.N) << ", " << (first < 0 ? -1 : first % c.N) << "), worst "
                      << worst;
    // The same bits on a second call.
    fast::gemm_f32_tf32x3(dy.as<float>(), ldy, dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K, stream);
    stream.synchronize();
    const std::vector<float> y2 = to_host<float>(dy);
    EXPECT_EQ(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)), 0) << "a second call's bits";
}

}  // namespace

TEST(FastGemmF32, MatchesDoubleProducts) {
    REQUIRE_CUDA();
    check({9, 257, 2048}, 1);        // the router, one token past the dense GEMV
    check({300, 257, 2048, 4, 3}, 2);  // padded strides
    check({65, 33, 36}, 3);
    check({130, 7, 100, 8, 1}, 4);
    check({1, 1, 4}, 5);
    check({64, 32, 32}, 6);          // exactly one tile
    check({70, 40, 96, 0, 0, true}, 7);  // six decades of magnitude
}

TEST(FastGemmF32, EdgesAndErrors) {
    REQUIRE_CUDA();
    Stream stream;
    DeviceBuffer dx(64 * 4), dw(64 * 4), dy = to_device(std::vector<float>(12, kPad));
    fast::gemm_f32_tf32x3(dy.as<float>(), 4, dx.as<float>(), 4, dw.as<float>(), 3, 4, 0, stream);  // K = 0
    stream.synchronize();
    EXPECT_EQ(to_host<float>(dy), std::vector<float>(12, 0.f));
    EXPECT_NO_THROW(fast::gemm_f32_tf32x3(nullptr, 4, nullptr, 8, nullptr, 0, 4, 8, stream));  // T = 0
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), 8, dw.as<float>(), 2, 2, 6));      // K % 4
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>() + 1, 8, dw.as<float>(), 2, 2, 8));  // alignment
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), 6, dw.as<float>(), 2, 2, 4));      // ldx % 4
    EXPECT_THROW(fast::gemm_f32_tf32x3(dy.as<float>(), 4, dx.as<float>(), 8, dw.as<float>(), 2, 2, 6, stream), Error);
    EXPECT_THROW(fast::gemm_f32_tf32x3(dy.as<float>(), 1, dx.as<float>(), 8, dw.as<float>(), 2, 2, 8, stream), Error);
}
