// The kernel pack's dense decode GEMV (fast::dense_gemv: f32 / bf16 weights, 1 ≤ T ≤ 8) against
// a double-precision product on the host: T = 1..8, N = 1, 3, 263 (one row per block), 600 (two)
// and 1100 (four rows per block: the choice depends on N against the SM count), K = 4, 8, 36,
// 2048, 2056; strided x and y with their padding left untouched; the unsupported cases refused.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_dense_gemv.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::random_rows;
using reftest::to_device;
using reftest::to_host;

namespace {

void run_case(bool bf16, int64_t T, int64_t N, int64_t K) {
    const int64_t ldx = K + 4, ldy = N + 3;
    const std::vector<float> x = random_rows(T, K, ldx, uint32_t(7 * T + N + K), -2.f, 2.f);
    std::vector<float> w = random_rows(N, K, K, uint32_t(3 * N + K), -1.f, 1.f);
    std::vector<uint16_t> wb;
    if (bf16) {
        wb.resize(w.size());
        for (size_t i = 0; i < w.size(); ++i) {
            wb[i] = f32_to_bf16(w[i]);
            w[i] = bf16_to_f32(wb[i]);  // the reference multiplies the weights the kernel sees
        }
    }
    std::vector<float> y0(size_t(T * ldy), 12345.f);
    DeviceBuffer dx = to_device(x), dy = to_device(y0);
    DeviceBuffer dw = bf16 ? to_device(wb) : to_device(w);
    fast::dense_gemv(static_cast<float*>(dy.data()), ldy, static_cast<const float*>(dx.data()), ldx, T, dw.data(),
                     bf16, N, K, nullptr);
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> y = to_host<float>(dy);
    const std::string what = fmt::format("{} T {} N {} K {}", bf16 ? "bf16" : "f32", T, N, K);
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < ldy; ++j) {
            const float got = y[size_t(t * ldy + j)];
            if (j >= N) {  // padding: untouched
                if (got != 12345.f && ++bad <= 5) ADD_FAILURE() << what << ": padding y[" << t << ", " << j << "] written";
                continue;
            }
            double want = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
                const double p = double(x[size_t(t * ldx + k)]) * double(w[size_t(j * K + k)]);
                want += p;
                mag += std::fabs(p);
            }
            // f32 accumulation in a different order: a few ulps of Σ|w·x|.
            if (std::fabs(double(got) - want) > 1e-5 * (mag + 1e-30) && ++bad <= 5)
                ADD_FAILURE() << what << ": y[" << t << ", " << j << "] = " << got << ", want " << want;
        }
    EXPECT_EQ(bad, 0) << what;
}

class FastDenseGemv : public ::testing::TestWithParam<bool> {
protected:
    void SetUp() override {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
    }
};

TEST_P(FastDenseGemv, MatchesADoubleProduct) {
    const bool bf16 = GetParam();
    for (int64_t T : {1, 2, 3, 5, 8})
        for (int64_t N : {1, 3, 263, 600, 1100})
            for (int64_t K : {8, 40, 2048, 2056}) run_case(bf16, T, N, K);
    if (!bf16) run_case(false, 4, 17, 4);  // f32 rows of one 16-byte vector
}

TEST_P(FastDenseGemv, RefusesWhatItDoesNotTake) {
    const bool bf16 = GetParam();
    DeviceBuffer dx(64 * 64 * 4), dy(64 * 64 * 4), dw(64 * 64 * 4);
    const auto* x = static_cast<const float*>(dx.data());
    auto* y = static_cast<float*>(dy.data());
    EXPECT_FALSE(fast::dense_gemv_supported(9, 64, bf16, x, 64));      // too many tokens
    EXPECT_FALSE(fast::dense_gemv_supported(1, 6, bf16, x, 64));       // rows not 16-byte multiples
    EXPECT_FALSE(fast::dense_gemv_supported(2, 64, bf16, x + 1, 64));  // x misaligned
    EXPECT_FALSE(fast::dense_gemv_supported(2, 64, bf16, x, 66));      // x row stride misaligned
    EXPECT_TRUE(fast::dense_gemv_supported(2, 64, bf16, x, 64));
    EXPECT_THROW(fast::dense_gemv(y, 64, x, 64, 9, dw.data(), bf16, 8, 64, nullptr), Error);
    EXPECT_THROW(fast::dense_gemv(y, 64, x, 64, 1, nullptr, bf16, 8, 64, nullptr), Error);
    EXPECT_THROW(fast::dense_gemv(y, 4, x, 64, 2, dw.data(), bf16, 8, 64, nullptr), Error);  // y stride < N
    fast::dense_gemv(y, 64, x, 64, 0, dw.data(), bf16, 8, 64, nullptr);                     // nothing to do
}

INSTANTIATE_TEST_SUITE_P(Weights, FastDenseGemv, ::testing::Values(false, true),
                         [](const auto& i) { return i.param ? std::string("bf16") : std::string("f32"); });

}  // namespace
