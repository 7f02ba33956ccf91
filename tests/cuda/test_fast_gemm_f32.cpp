// fast::gemm_f32_tf32x3 (fast_gemm_f32.cu) against a double-precision product on the CPU: every
// element within 4e-6 of Σ_k |x·w| — 3×TF32's class (each product within 3·2^-20 of itself, ~7e-7
// on average; a single TF32 pass, ~2^-11 a product, misses the bound several times over) — on the
// router's shape (257 rows: one past a tile), a token count of 9 (one past the dense GEMV's), tiles
// cut in every dimension (T 65 / 130, N 1 / 7 / 33, K 4 / 36 / 100: a partial k-step), padded row
// strides whose padding must stay untouched, values spanning six decades; the same bits on a second
// call (few tokens: K split over the blocks, its parts summed in order — the pick's splits at 9 and
// 300 tokens); K = 0 gives zeros; shapes it cannot take, and scratch short of w's halves, are
// errors; the split's pick. Then
// CudaBackend's matmul on an f32 weight (fast mode) on either side of kGemmF32MinTokens against the
// same double products.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
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

// Every element of y [T, ldy] against x [T, ldx] · w [N, K]ᵀ in double, within 4e-6 of Σ|x·w|.
void expect_products(const std::vector<float>& y, int64_t ldy, const std::vector<float>& x, int64_t ldx,
                     const std::vector<float>& w, int64_t T, int64_t N, int64_t K) {
    int64_t bad = 0, first = -1;
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
                ref += double(x[size_t(t * ldx + k)]) * double(w[size_t(n * K + k)]);
                mag += std::fabs(double(x[size_t(t * ldx + k)]) * double(w[size_t(n * K + k)]));
            }
            const double err = std::fabs(double(y[size_t(t * ldy + n)]) - ref) / std::max(mag, 1e-30);
            worst = std::max(worst, std::isnan(err) ? INFINITY : err);
            if (!(err <= 4e-6) && bad++ == 0) first = t * N + n;
        }
    EXPECT_EQ(bad, 0) << bad << " elements off by more than 4e-6 of sum |x w|; first (token, row) ("
                      << (first < 0 ? -1 : first / N) << ", " << (first < 0 ? -1 : first % N) << "), worst " << worst;
}

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
    const size_t sb = fast::gemm_f32_tf32x3_scratch(c.T, c.N, c.K);
    DeviceBuffer scratch{sb};
    Stream stream;
    ASSERT_TRUE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K));
    fast::gemm_f32_tf32x3(dy.as<float>(), ldy, dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K, scratch.data(), sb,
                          stream);
    stream.synchronize();
    const std::vector<float> y = to_host<float>(dy);
    expect_products(y, ldy, x, ldx, w, c.T, c.N, c.K);
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t n = c.N; n < ldy; ++n) EXPECT_EQ(y[size_t(t * ldy + n)], kPad) << "padding of row " << t;
    // The same bits on a second call.
    fast::gemm_f32_tf32x3(dy.as<float>(), ldy, dx.as<float>(), ldx, dw.as<float>(), c.T, c.N, c.K, scratch.data(), sb,
                          stream);
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
    check({64, 72, 32}, 6);          // exactly one tile
    check({70, 40, 96, 0, 0, true}, 7);  // six decades of magnitude
    check({129, 145, 2052}, 8);      // one past a tile in every dimension, a partial last k-step
}

TEST(FastGemmF32, EdgesAndErrors) {
    REQUIRE_CUDA();
    Stream stream;
    DeviceBuffer dx(64 * 4), dw(64 * 4), dy = to_device(std::vector<float>(12, kPad)), scratch(1024);
    auto run = [&](float* y, int64_t ldy, int64_t ldx, int64_t T, int64_t N, int64_t K, size_t sb) {
        fast::gemm_f32_tf32x3(y, ldy, dx.as<float>(), ldx, dw.as<float>(), T, N, K, scratch.data(), sb, stream);
    };
    run(dy.as<float>(), 4, 4, 3, 4, 0, 1024);  // K = 0
    stream.synchronize();
    EXPECT_EQ(to_host<float>(dy), std::vector<float>(12, 0.f));
    EXPECT_NO_THROW(fast::gemm_f32_tf32x3(nullptr, 4, nullptr, 8, nullptr, 0, 4, 8, nullptr, 0, stream));  // T = 0
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), 8, dw.as<float>(), 2, 2, 6));      // K % 4
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>() + 1, 8, dw.as<float>(), 2, 2, 8));  // alignment
    EXPECT_FALSE(fast::gemm_f32_tf32x3_fits(dx.as<float>(), 6, dw.as<float>(), 2, 2, 4));      // ldx % 4
    // (2,048 tokens: K whole on any SM count up to 256; 2 × 2 × 8: one k-step, K whole)
    EXPECT_EQ(fast::gemm_f32_tf32x3_scratch(2048, 257, 2048), size_t(2 * 257 * 2048 * 4));
    EXPECT_THROW(run(dy.as<float>(), 4, 8, 2, 2, 6, 1024), Error);   // K % 4
    EXPECT_THROW(run(dy.as<float>(), 1, 8, 2, 2, 8, 1024), Error);   // ldy < N
    EXPECT_THROW(run(dy.as<float>(), 4, 8, 2, 2, 8, 127), Error);    // scratch short of w's halves (128 bytes)
    EXPECT_NO_THROW(run(dy.as<float>(), 4, 8, 2, 2, 8, 128));
    stream.synchronize();
}

// The K split's pick: splits while the tiles fit the SMs once, at least 4 k-steps each, at most 16,
// none empty, together all of K.
TEST(FastGemmF32, SplitPick) {
    using fast::GemmF32Split;
    auto same = [](GemmF32Split a, GemmF32Split b) { return a.splits == b.splits && a.per == b.per; };
    EXPECT_TRUE(same(fast::gemm_f32_split(9, 257, 2048, 132), {16, 4}));    // 4 tiles
    EXPECT_TRUE(same(fast::gemm_f32_split(512, 257, 2048, 132), {4, 16}));  // 32 tiles
    EXPECT_TRUE(same(fast::gemm_f32_split(1024, 257, 2048, 132), {2, 32}));
    EXPECT_TRUE(same(fast::gemm_f32_split(2048, 257, 2048, 132), {1, 64}));  // 128 tiles: K whole
    EXPECT_TRUE(same(fast::gemm_f32_split(64, 257, 36, 132), {1, 2}));       // 2 k-steps: no split
    EXPECT_TRUE(same(fast::gemm_f32_split(300, 257, 2052, 132), {6, 11}));   // 65 k-steps over 6
    for (int64_t T : {1, 9, 64, 100, 511, 700, 4096})
        for (int64_t K : {4, 128, 1000, 2048, 2052, 8192}) {
            const GemmF32Split sp = fast::gemm_f32_split(T, 257, K, 132);
            const int64_t n_k = fast::gemm_f32_k_steps(K);
            EXPECT_TRUE(sp.splits >= 1 && sp.splits <= fast::kGemmF32MaxSplits && (sp.splits - 1) * sp.per < n_k &&
                        sp.splits * sp.per >= n_k && (sp.splits == 1 || sp.per >= fast::kGemmF32MinSplitSteps))
                << "T " << T << " K " << K << ": " << sp.splits << " × " << sp.per;
        }
}

// CudaBackend (fast mode) on an f32 matrix — the MoE router's kind — from 9 tokens (past the dense
// GEMV) to either side of kGemmF32MinTokens: cuBLAS's f32 GEMM below, gemm_f32_tf32x3 from there
// (unless TESSERA_F32_GEMM=cublas), both within 4e-6 of Σ|x·w|; matrices of two shapes in turn (the
// scratch of w's halves reused across them).
TEST(FastGemmF32, BackendMatmulOnF32Weights) {
    REQUIRE_CUDA();
    auto be = make_cuda_backend(0, CudaKernels::Fast);
    uint32_t seed = 40;
    static_assert(257 * 512 <= fast::kGemmF32MaxWeights);
    for (const auto& [N, K] : {std::pair<int64_t, int64_t>{257, 512}, {33, 2048}, {257, 512}}) {
        std::mt19937 rng(++seed);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        std::vector<float> w(size_t(N * K));
        for (auto& v : w) v = u(rng);
        const Tensor wd = be->place_weight(Tensor(w.data(), DType::F32, {N, K}, Device::CPU), WeightUse::Matrix);
        ASSERT_EQ(wd.dtype, DType::F32);
        for (const int64_t T : {int64_t(9), fast::kGemmF32MinTokens - 1, fast::kGemmF32MinTokens, int64_t(600)}) {
            SCOPED_TRACE("N=" + std::to_string(N) + " K=" + std::to_string(K) + " T=" + std::to_string(T));
            std::vector<float> x(size_t(T * K));
            for (auto& v : x) v = u(rng);
            void* xd = be->memory().allocate(x.size() * 4);
            void* yd = be->memory().allocate(size_t(T * N) * 4);
            be->copy_in(xd, x.data(), x.size() * 4);
            be->matmul(Tensor(yd, DType::F32, {T, N}, Device::CUDA), Tensor(xd, DType::F32, {T, K}, Device::CUDA), wd);
            std::vector<float> y(size_t(T * N));
            be->copy_out(y.data(), yd, y.size() * 4);
            be->memory().deallocate(xd);
            be->memory().deallocate(yd);
            expect_products(y, N, x, K, w, T, N, K);
        }
    }
}
