// The int8-x decode GEMV (fast::gemv_q8, TESSERA_GEMV=int8) on GGUF weights repacked by
// kernels/packed_repack.h: against its own definition emulated in double (tight) and the CPU
// backend's matmul on the original weight (loose), on test_fast_gemv.cpp's awkward shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gemv_q8.h"
#include "kernels/cuda/stream.h"
#include "kernels/packed_repack.h"

#include "gemv_test_util.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using namespace tessera::cuda::gemvtest;
using reftest::random_rows;
using reftest::to_device;
using reftest::to_host;

namespace {

// y as the kernel defines it, in double: x rounded to int8 per 32 columns exactly as the kernel
// rounds it (f32 ops), the integer dot product per 16-byte chunk, then scale · dx · Σ + bias · sx.
// Returns y [T, N] and, per element, Σ of the terms' magnitudes (for a relative bound).
void emulate_q8(const PackedHost& w, const std::vector<float>& x, int64_t ldx, int64_t T, std::vector<double>* y,
                std::vector<double>* mag) {
    const int64_t K = w.k, N = w.n, ng = K / 32, G = w.group;
    std::vector<int> q(size_t(T * K));
    std::vector<float> dx(size_t(T * ng)), sx(size_t(T * ng));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < ng; ++g) {
            const float* xr = x.data() + t * ldx + g * 32;
            float amax = 0.f;
            for (int c = 0; c < 32; ++c) amax = std::max(amax, std::fabs(xr[c]));
            int sum = 0;
            for (int c = 0; c < 32; ++c) {
                const int v = amax > 0.f ? int(std::nearbyint(xr[c] * (127.f / amax))) : 0;
                q[size_t(t * K + g * 32 + c)] = v;
                sum += v;
            }
            dx[size_t(t * ng + g)] = amax / 127.f;
            sx[size_t(t * ng + g)] = dx[size_t(t * ng + g)] * float(sum);
        }
    const bool int4 = w.kind == PackedKind::Int4;
    const int64_t chunk = int4 ? 32 : 16;
    y->assign(size_t(T * N), 0.0);
    mag->assign(size_t(T * N), 0.0);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c0 = 0; c0 < K; c0 += chunk) {
            const int64_t gi = n * (K / G) + c0 / G;
            const double s = f16_to_f32(w.scales[size_t(gi)]);
            const double b = int4 ? (w.biases.empty() ? -8.0 * s : double(f16_to_f32(w.biases[size_t(gi)]))) : 0.0;
            for (int64_t t = 0; t < T; ++t) {
                long long isum = 0;
                for (int64_t c = c0; c < c0 + chunk; ++c) {
                    const int code = int4 ? (w.codes[size_t(n * (K / 2) + c / 2)] >> (4 * (c % 2))) & 15
                                          : int(int8_t(w.codes[size_t(n * K + c)]));
                    isum += (long long)code * q[size_t(t * K + c)];
                }
                const double d = dx[size_t(t * ng + c0 / 32)];
                const double term = s * d * double(isum), bias = int4 ? b * sx[size_t(t * ng + c0 / 32)] : 0.0;
                (*y)[size_t(t * N + n)] += term + bias;
                (*mag)[size_t(t * N + n)] += std::fabs(term) + std::fabs(bias);
            }
        }
}

}  // namespace

class FastGemvQ8 : public ::testing::TestWithParam<DType> {};

// The kernel against its own definition (tight) and against the CPU backend's matmul on the
// ORIGINAL GGUF weight (which rounds x to q8 too: loose), on the awkward shapes above.
TEST_P(FastGemvQ8, MatchesItsEmulationAndTheCpu) {
    REQUIRE_CUDA();
    const DType type = GetParam();
    uint32_t seed = 500;
    for (const Case& c : cases(type)) {
        const std::string what = std::string(dtype_name(type)) + " T=" + std::to_string(c.T) + " N=" +
                                 std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.pad ? " strided" : "");
        SCOPED_TRACE(what);
        seed += 7;
        Gguf g = make_gguf(type, c.N, c.K, seed);
        const PackedHost ph = repack(g.host());
        DevicePacked dp = upload(ph);
        const int64_t ldx = c.K + (c.pad ? 3 : 0), ldy = c.N + (c.pad ? 5 : 0);
        const std::vector<float> x = random_rows(c.T, c.K, ldx, seed + 1);
        DeviceBuffer xd = to_device(x), yd = to_device(std::vector<float>(size_t(c.T * ldy), reftest::kPad));
        DeviceBuffer sc(fast::gemv_q8_scratch(c.T, c.K));
        TS_CUDA_CHECK(cudaDeviceSynchronize());
        Stream s;
        fast::gemv_q8(yd.as<float>(), ldy, xd.as<float>(), ldx, c.T, dp.m, sc.data(), s.get());
        s.synchronize();
        const std::vector<float> y = to_host<float>(yd);
        std::vector<double> want, mag;
        emulate_q8(ph, x, ldx, c.T, &want, &mag);
        int bad = 0;
        for (int64_t t = 0; t < c.T; ++t)
            for (int64_t n = 0; n < ldy; ++n) {
                const float got = y[size_t(t * ldy + n)];
                if (n >= c.N) {
                    if (got != reftest::kPad && ++bad <= 3) ADD_FAILURE() << "padding [" << t << ", " << n << "] written";
                    continue;
                }
                const double d = std::fabs(double(got) - want[size_t(t * c.N + n)]);
                if (!(d <= 1e-5 * mag[size_t(t * c.N + n)] + 1e-30) && ++bad <= 5)
                    ADD_FAILURE() << "[" << t << ", " << n << "] got " << got << " want " << want[size_t(t * c.N + n)];
            }
        EXPECT_EQ(bad, 0);
        std::vector<float> yc(size_t(c.T * ldy), reftest::kPad), xc = x;
        make_cpu_backend()->matmul(reftest::rows_view(yc.data(), c.T, c.N, ldy),
                                   reftest::rows_view(xc.data(), c.T, c.K, ldx), g.host());
        if (c.T * c.N >= 16) {
            EXPECT_LE(norm_err(y, ldy, yc, ldy, c.T, c.N), 3e-2) << what << " vs the CPU backend";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, FastGemvQ8, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(FastGemvQ8, RejectsBadArguments) {
    REQUIRE_CUDA();
    Gguf g = make_gguf(DType::Q4_0, 4, 64, 3);
    DevicePacked dp = upload(repack(g.host()));
    DeviceBuffer xd(9 * 64 * 4), yd(9 * 4 * 4), sc(fast::gemv_q8_scratch(8, 64));
    Stream s;
    EXPECT_THROW(fast::gemv_q8(yd.as<float>(), 4, xd.as<float>(), 64, 9, dp.m, sc.data(), s.get()), Error);
    EXPECT_THROW(fast::gemv_q8(yd.as<float>(), 4, xd.as<float>(), 64, 1, dp.m, nullptr, s.get()), Error);
    EXPECT_THROW(fast::gemv_q8(yd.as<float>(), 4, xd.as<float>(), 32, 2, dp.m, sc.data(), s.get()), Error);
}

TEST(FastGemvQ8, XSlotsArePermutations) {
    for (PackedKind kind : {PackedKind::Int4, PackedKind::Int8}) {
        std::vector<int> seen(32, 0);
        for (int c = 0; c < 32; ++c) ++seen[size_t(fast::gemv_q8_x_slot(kind, c))];
        for (int v : seen) EXPECT_EQ(v, 1);
    }
    EXPECT_EQ(fast::gemv_q8_x_slot(PackedKind::Int4, 1), 4);  // odd columns after the evens of their word
    EXPECT_EQ(fast::gemv_q8_x_slot(PackedKind::Int4, 10), 9);
}
