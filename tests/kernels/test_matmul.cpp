// matmul on every weight dtype against a double-precision reference built from formats/quants.h
// (ggml-exact dequantization), for the SIMD and the scalar kernels, on awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "core/half.h"
#include "core/status.h"
#include "formats/quants.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/quant_dot.h"

using namespace tessera;
using test::random_floats;

namespace {

struct Weights {
    DType dtype;
    int64_t N, K;
    std::vector<uint8_t> bytes;   // [N, row_bytes]
    std::vector<float> deq;       // [N, K] what the bytes decode to (the reference's weights)
    Tensor tensor() { return Tensor(bytes.data(), dtype, {N, K}); }
};

Weights make_weights(DType t, int64_t N, int64_t K, uint64_t seed) {
    Weights w{t, N, K, {}, {}};
    const auto src = random_floats(size_t(N * K), seed);
    w.bytes.resize(dtype_row_bytes(t, K) * size_t(N));
    quantize_tensor(t, src.data(), w.bytes.data(), N, K);
    w.deq.resize(size_t(N * K));
    dequantize_tensor(t, w.bytes.data(), w.deq.data(), N, K);
    return w;
}

// Per-output tolerance for q8-quantized activations: element k of x is rounded to a step
// Δ = amax(block)/127 (error ≤ Δ/2) whose scale is stored as f16 (relative error ≤ 2^-11), so
// |y - y_ref| ≤ Σ_k |w_k|·(Δ_k/2 + 2^-11·(|x_k| + Δ_k/2)) + 1e-5·Σ_k |w_k·x_k| (f32 accumulation).
double q8_bound(const float* w, const float* x, int64_t K, int block) {
    double b = 0.0, mag = 0.0;
    for (int64_t k0 = 0; k0 < K; k0 += block) {
        double amax = 0.0;
        for (int64_t k = k0; k < k0 + block; ++k) amax = std::max(amax, std::fabs(double(x[k])));
        const double step = amax / 127.0;
        for (int64_t k = k0; k < k0 + block; ++k)
            b += std::fabs(w[k]) * (step / 2 + std::ldexp(std::fabs(x[k]) + step / 2, -11));
    }
    for (int64_t k = 0; k < K; ++k) mag += std::fabs(double(w[k]) * x[k]);
    return b + 1e-5 * mag + 1e-6;
}

int act_block(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: return 0;  // exact f32 activations
        case DType::Q4_K: case DType::Q6_K: return 256;
        default: return 32;
    }
}

void check_matmul(DType t, int64_t T, int64_t N, int64_t K, bool simd) {
    SCOPED_TRACE(::testing::Message() << dtype_name(t) << " T=" << T << " N=" << N << " K=" << K
                                      << (simd ? " simd" : " scalar"));
    test::SimdScope scope(simd);
    auto w = make_weights(t, N, K, 1000 + uint64_t(N * 7 + K));
    auto x = random_floats(size_t(T * K), 77 + uint64_t(T), -2.f, 2.f);
    std::vector<float> y(size_t(T * N), NAN);
    auto be = make_cpu_backend();
    be->matmul(Tensor(y.data(), DType::F32, {T, N}), Tensor(x.data(), DType::F32, {T, K}), w.tensor());
    const int blk = act_block(t);
    for (int64_t i = 0; i < T; ++i)
        for (int64_t n = 0; n < N; ++n) {
            const float* wr = &w.deq[size_t(n * K)];
            const float* xr = &x[size_t(i * K)];
            double ref = 0.0, mag = 0.0;
            for (int64_t k = 0; k < K; ++k) {
                ref += double(wr[k]) * xr[k];
                mag += std::fabs(double(wr[k]) * xr[k]);
            }
            const double tol = blk ? q8_bound(wr, xr, K, blk) : 2e-6 * mag + 1e-6;
            ASSERT_NEAR(y[size_t(i * N + n)], ref, tol) << "at t=" << i << " n=" << n;
        }
}

using Param = std::tuple<DType, bool>;
class MatmulTest : public ::testing::TestWithParam<Param> {};

TEST_P(MatmulTest, MatchesDoubleReferenceOnAwkwardShapes) {
    const auto [t, simd] = GetParam();
    const bool k_quant = t == DType::Q4_K || t == DType::Q6_K;
    const bool plain = !dtype_is_quantized(t);
    // K: a multiple of the block (32 / 256), or odd for the plain float types.
    const int64_t K1 = plain ? 37 : (k_quant ? 256 : 96), K2 = plain ? 300 : (k_quant ? 768 : 544);
    for (int64_t T : {1, 3, 17, 64, 65}) check_matmul(t, T, 37, K1, simd);
    check_matmul(t, 1, 131, K2, simd);
    check_matmul(t, 17, 131, K2, simd);
    // K long enough to be split into several cache chunks (with a short last one) for T > 1.
    check_matmul(t, 6, 9, plain ? 1100 : (k_quant ? 2048 : 4000), simd);
}

const DType kAll[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4};
INSTANTIATE_TEST_SUITE_P(AllDtypes, MatmulTest, ::testing::Combine(::testing::ValuesIn(kAll), ::testing::Bool()),
                         [](const auto& info) {
                             return std::string(dtype_name(std::get<0>(info.param))) +
                                    (std::get<1>(info.param) ? "_simd" : "_scalar");
                         });

// For q8_0-activation formats the integer kernels must equal Σ deq(w)·q·d up to f32 rounding,
// with q from ggml's reference q8_0 quantizer (formats/quants.h) and d = amax/127 kept in f32
// (the kernels keep the activation scale in f32; ggml rounds it to f16).
TEST(Matmul, Q8_0FormatsAreExactOnQuantizedActivations) {
    const int64_t N = 19, K = 320, T = 5;
    auto x = random_floats(size_t(T * K), 5, -3.f, 3.f);
    std::vector<float> xq(x.size());
    std::vector<BlockQ8_0> tmp(size_t(K / 32));
    for (int64_t i = 0; i < T; ++i) {
        quantize_row(DType::Q8_0, &x[size_t(i * K)], tmp.data(), K);
        for (int64_t b = 0; b < K / 32; ++b) {
            float amax = 0.f;
            for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[size_t(i * K + b * 32 + j)]));
            for (int j = 0; j < 32; ++j) xq[size_t(i * K + b * 32 + j)] = float(tmp[size_t(b)].qs[j]) * (amax / 127.f);
        }
    }
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::MXFP4})
        for (bool simd : {true, false}) {
            test::SimdScope scope(simd);
            auto w = make_weights(t, N, K, 9);
            std::vector<float> y(size_t(T * N));
            make_cpu_backend()->matmul(Tensor(y.data(), DType::F32, {T, N}), Tensor(x.data(), DType::F32, {T, K}),
                                       w.tensor());
            for (int64_t i = 0; i < T; ++i)
                for (int64_t n = 0; n < N; ++n) {
                    double ref = 0.0, mag = 0.0;
                    for (int64_t k = 0; k < K; ++k) {
                        ref += double(w.deq[size_t(n * K + k)]) * xq[size_t(i * K + k)];
                        mag += std::fabs(double(w.deq[size_t(n * K + k)]) * xq[size_t(i * K + k)]);
                    }
                    ASSERT_NEAR(y[size_t(i * N + n)], ref, 1e-5 * mag + 1e-6) << dtype_name(t) << " simd=" << simd;
                }
        }
}

// The SIMD and scalar row-dot kernels agree on every dtype (same integer sums, f32 rounding only).
TEST(Matmul, SimdAndScalarKernelsAgree) {
    for (DType t : kAll) {
        const int64_t K = 512, N = 7;
        auto w = make_weights(t, N, K, 3);
        const cpu::DotKernel* dk = cpu::dot_kernel(t);
        ASSERT_NE(dk, nullptr);
        auto x = random_floats(size_t(4 * K), 4);
        const size_t rb = cpu::act_row_bytes(dk->act, K);
        std::vector<char> act(rb * 4);
        for (int r = 0; r < 4; ++r) cpu::quantize_act(dk->act, &x[size_t(r * K)], act.data() + r * rb, K);
        for (int R = 1; R <= 4; ++R)
            for (int64_t n = 0; n < N; ++n) {
                float a[4], b[4];
                const void* row = w.bytes.data() + n * dtype_row_bytes(t, K);
                dk->scalar(row, act.data(), rb, R, K, a);
                dk->simd(row, act.data(), rb, R, K, b);
                for (int r = 0; r < R; ++r) ASSERT_NEAR(a[r], b[r], 1e-4 * (1 + std::fabs(a[r]))) << dtype_name(t);
            }
    }
}

TEST(Matmul, StridedRowsOfXAndY) {
    const int64_t T = 6, N = 9, K = 64;
    auto w = make_weights(DType::F32, N, K, 11);
    auto xbuf = random_floats(size_t(T * 2 * K), 12);
    std::vector<float> ybuf(size_t(T * 2 * N), 0.f);
    Tensor x(xbuf.data(), DType::F32, {T, 2 * K}), y(ybuf.data(), DType::F32, {T, 2 * N});
    x.shape[1] = K;  // the first K of each 2K-wide row
    y.shape[1] = N;
    make_cpu_backend()->matmul(y, x, w.tensor());
    for (int64_t i = 0; i < T; ++i)
        for (int64_t n = 0; n < N; ++n) {
            double ref = 0;
            for (int64_t k = 0; k < K; ++k) ref += double(w.deq[size_t(n * K + k)]) * xbuf[size_t(i * 2 * K + k)];
            ASSERT_NEAR(ybuf[size_t(i * 2 * N + n)], ref, 1e-4);
            ASSERT_EQ(ybuf[size_t(i * 2 * N + N + n)], 0.f);  // untouched
        }
}

TEST(Matmul, RejectsBadShapesAndDtypes) {
    auto be = make_cpu_backend();
    std::vector<float> x(64), y(64), w(64);
    EXPECT_THROW(be->matmul(Tensor(y.data(), DType::F32, {2, 4}), Tensor(x.data(), DType::F32, {2, 8}),
                            Tensor(w.data(), DType::F32, {4, 4})), Error);  // K mismatch
    EXPECT_THROW(be->matmul(Tensor(y.data(), DType::F32, {2, 3}), Tensor(x.data(), DType::F32, {2, 4}),
                            Tensor(w.data(), DType::F32, {4, 4})), Error);  // N mismatch
    EXPECT_THROW(be->matmul(Tensor(y.data(), DType::F32, {2, 4}), Tensor(x.data(), DType::F32, {2, 4}),
                            Tensor(w.data(), DType::I32, {4, 4})), Error);  // unsupported weights
    EXPECT_THROW(be->matmul(Tensor(y.data(), DType::F32, {2, 4}), Tensor(x.data(), DType::F16, {2, 4}),
                            Tensor(w.data(), DType::F32, {4, 4})), Error);  // x not f32
    EXPECT_THROW(be->matmul(Tensor(x.data(), DType::F32, {2, 4}), Tensor(x.data(), DType::F32, {2, 4}),
                            Tensor(w.data(), DType::F32, {4, 4})), Error);  // y aliases x
}

}  // namespace
