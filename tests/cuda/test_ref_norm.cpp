// The normalisation reference kernels (rms_norm, add_rms_norm, l2_norm, rms_norm_gated) against the CPU
// backend: one row, odd widths, rows just past a warp / block, strided views, in place.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/ref_elementwise.h"
#include "kernels/cuda/ref_norm.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;
namespace ref = tessera::cuda::ref;

namespace {

// The CPU sums squares in double, the kernels in f32 (per thread, then a block tree): over
// 4097 terms that is ~1e-6 relative in the sum, half that in rsqrt, plus expf's few ulp in
// silu; 1e-5 of max(1, |ref|) leaves a 10x margin.
constexpr double kTol = 1e-5;

std::string shape_name(std::initializer_list<int64_t> dims) {
    std::string s = "[";
    for (int64_t d : dims) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
    return s + "]";
}

// T, n_heads, D of the per-head ops.
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kHeadShapes = {
    {1, 1, 1}, {1, 1, 3}, {3, 2, 127}, {2, 4, 129}, {1, 1, 4097}, {33, 3, 64}, {5, 16, 257}};

}  // namespace

TEST(CudaRefNorm, RmsNormMatchesCpu) {
    REQUIRE_CUDA();
    const std::vector<std::tuple<int64_t, int64_t>> shapes = {{1, 1},   {1, 3},    {3, 127}, {2, 129},
                                                              {4, 257}, {5, 4097}, {33, 32}, {300, 96}};
    for (auto [R, C] : shapes)
        for (bool in_place : {false, true})
            for (int64_t pad : {0, 3}) {
                const int64_t ldx = C + pad, ldy = C + 2 * pad + 1;
                std::vector<float> x = random_rows(R, C, ldx, uint32_t(R * 13 + C), -3.f, 3.f);
                std::vector<float> y = random_rows(R, C, ldy, 5);
                std::vector<float> w = random_rows(1, C, C, uint32_t(C + 1), 0.5f, 1.5f);
                const float eps = 1e-6f;
                const std::string what = "rms_norm " + shape_name({R, C}) + " pad " + std::to_string(pad) +
                                         (in_place ? " in place" : "");
                cuda::Stream s;
                cuda::DeviceBuffer dx = to_device(x), dy = to_device(y), dw = to_device(w);
                auto cpu = make_cpu_backend();
                const Tensor wt(w.data(), DType::F32, {C});
                if (in_place) {
                    cpu->rms_norm(rows_view(x.data(), R, C, ldx), rows_view(x.data(), R, C, ldx), wt, eps);
                    ref::rms_norm(dx.as<float>(), ldx, dx.as<float>(), ldx, dw.as<float>(), R, C, eps, s);
                    s.synchronize();
                    expect_close(to_host<float>(dx), x, kTol, what);
                } else {
                    cpu->rms_norm(rows_view(y.data(), R, C, ldy), rows_view(x.data(), R, C, ldx), wt, eps);
                    ref::rms_norm(dy.as<float>(), ldy, dx.as<float>(), ldx, dw.as<float>(), R, C, eps, s);
                    s.synchronize();
                    expect_close(to_host<float>(dy), y, kTol, what);
                }
            }
}

// Head rows whose token stride is not n · head stride (q or k heads inside a stacked q | k | v
// projection): rms_norm_heads against the CPU backend's rms_norm on the same [T, n, D] views.
TEST(CudaRefNorm, RmsNormHeadsMatchesCpu) {
    REQUIRE_CUDA();
    for (auto [T, n, D] : kHeadShapes)
        for (bool in_place : {false, true}) {
            const int64_t xh = 2 * D, xt = n * xh + D + 3, yh = D + 1, yt = n * yh + 2;
            std::vector<float> x = random_heads(T, n, D, xt, xh, uint32_t(T * 11 + n + D), -3.f, 3.f);
            std::vector<float> y = random_heads(T, n, D, yt, yh, 7);
            std::vector<float> w = random_rows(1, D, D, uint32_t(D + 5), 0.5f, 1.5f);
            const float eps = 1e-6f;
            const std::string what =
                "rms_norm_heads " + shape_name({T, n, D}) + (in_place ? " in place" : "");
            cuda::Stream s;
            cuda::DeviceBuffer dx = to_device(x), dy = to_device(y), dw = to_device(w);
            auto cpu = make_cpu_backend();
            const Tensor wt(w.data(), DType::F32, {D});
            const Tensor xv = heads_view(x.data(), T, n, D, xt, xh);
            if (in_place) {
                cpu->rms_norm(xv, xv, wt, eps);
                ref::rms_norm_heads(dx.as<float>(), xt, xh, dx.as<float>(), xt, xh, dw.as<float>(), T, n, D, eps, s);
                s.synchronize();
                expect_close(to_host<float>(dx), x, kTol, what);
            } else {
                cpu->rms_norm(heads_view(y.data(), T, n, D, yt, yh), xv, wt, eps);
                ref::rms_norm_heads(dy.as<float>(), yt, yh, dx.as<float>(), xt, xh, dw.as<float>(), T, n, D, eps, s);
                s.synchronize();
                expect_close(to_host<float>(dy), y, kTol, what);
            }
        }
}

TEST(CudaRefNorm, L2NormMatchesCpu) {
    REQUIRE_CUDA();
    for (auto [T, n, D] : kHeadShapes)
        for (int64_t pad : {0, 2}) {
            const int64_t hs = D + pad, ts = n * hs + pad;
            std::vector<float> x = random_heads(T, n, D, ts, hs, uint32_t(T * 7 + n * 3 + D));
            const float eps = 1e-6f, scale = 1.f / std::sqrt(float(D));
            cuda::Stream s;
            cuda::DeviceBuffer dx = to_device(x);
            make_cpu_backend()->l2_norm(heads_view(x.data(), T, n, D, ts, hs), eps, scale);
            ref::l2_norm(dx.as<float>(), ts, hs, T, n, D, eps, scale, s);
            s.synchronize();
            expect_close(to_host<float>(dx), x, kTol,
                         "l2_norm " + shape_name({T, n, D}) + " pad " + std::to_string(pad));
        }
}

TEST(CudaRefNorm, RmsNormGatedMatchesCpu) {
    REQUIRE_CUDA();
    enum Out { Separate, IntoX, IntoZ };
    for (auto [T, n, D] : kHeadShapes)
        for (Out out : {Separate, IntoX, IntoZ}) {
            // x and z as column slices of one [T, n, 2D]-like buffer would be typical; here each
            // has its own padding so every stride differs.
            const int64_t xh = D + 1, xt = n * xh + 2, zh = D + 3, zt = n * zh, yh = D, yt = n * D + 5;
            std::vector<float> x = random_heads(T, n, D, xt, xh, uint32_t(T + n + D));
            std::vector<float> z = random_heads(T, n, D, zt, zh, uint32_t(T * 5 + n + D), -6.f, 6.f);
            std::vector<float> y = random_heads(T, n, D, yt, yh, 3);
            std::vector<float> w = random_rows(1, D, D, uint32_t(D * 3), 0.5f, 1.5f);
            const float eps = 1e-6f;
            const std::string what = "rms_norm_gated " + shape_name({T, n, D}) +
                                     (out == Separate ? "" : out == IntoX ? " y=x" : " y=z");
            cuda::Stream s;
            cuda::DeviceBuffer dx = to_device(x), dz = to_device(z), dy = to_device(y), dw = to_device(w);
            const Tensor xv = heads_view(x.data(), T, n, D, xt, xh), zv = heads_view(z.data(), T, n, D, zt, zh);
            const Tensor wt(w.data(), DType::F32, {D});
            auto cpu = make_cpu_backend();
            std::vector<float>* want = &y;
            cuda::DeviceBuffer* got = &dy;
            if (out == Separate) {
                cpu->rms_norm_gated(heads_view(y.data(), T, n, D, yt, yh), xv, zv, wt, eps);
                ref::rms_norm_gated(dy.as<float>(), yt, yh, dx.as<float>(), xt, xh, dz.as<float>(), zt, zh,
                                    dw.as<float>(), T, n, D, eps, s);
            } else if (out == IntoX) {
                cpu->rms_norm_gated(xv, xv, zv, wt, eps);
                ref::rms_norm_gated(dx.as<float>(), xt, xh, dx.as<float>(), xt, xh, dz.as<float>(), zt, zh,
                                    dw.as<float>(), T, n, D, eps, s);
                want = &x;
                got = &dx;
            } else {
                cpu->rms_norm_gated(zv, xv, zv, wt, eps);
                ref::rms_norm_gated(dz.as<float>(), zt, zh, dx.as<float>(), xt, xh, dz.as<float>(), zt, zh,
                                    dw.as<float>(), T, n, D, eps, s);
                want = &z;
                got = &dz;
            }
            s.synchronize();
            expect_close(to_host<float>(*got), *want, kTol, what);
        }
}

TEST(CudaRefNorm, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float buf[64] = {};
    float* p = buf;
    float* n = nullptr;
    EXPECT_NO_THROW(ref::rms_norm(n, 0, n, 0, n, 0, 5, 1e-6f, nullptr));
    EXPECT_THROW(ref::rms_norm(p, 4, p, 4, n, 2, 4, 1e-6f, nullptr), Error);       // null weight
    EXPECT_THROW(ref::rms_norm(p + 1, 4, p, 4, p, 2, 4, 1e-6f, nullptr), Error);   // y partly over x
    EXPECT_THROW(ref::rms_norm(p, 3, p, 3, p, 2, 4, 1e-6f, nullptr), Error);       // stride < cols
    EXPECT_THROW(ref::l2_norm(p, 8, 3, 2, 2, 4, 1e-6f, 1.f, nullptr), Error);      // heads overlap
    EXPECT_THROW(ref::l2_norm(n, 8, 4, 2, 2, 4, 1e-6f, 1.f, nullptr), Error);      // null x
    EXPECT_THROW(ref::rms_norm_gated(p, 8, 4, p, 8, 4, n, 8, 4, p, 2, 2, 4, 1e-6f, nullptr), Error);  // null z
}

// The fused residual step (add_rms_norm) gives bit for bit what add then rms_norm give on the GPU,
// for x and y — strided rows, odd widths, rows past a block, rows held in registers (up to 2048
// and up to 8192 columns) and rows past that (the looping kernel) — and refuses y overlapping x.
TEST(CudaRefNorm, AddRmsNormIsAddThenRmsNormBitForBit) {
    REQUIRE_CUDA();
    const std::vector<std::tuple<int64_t, int64_t>> shapes = {{1, 1},    {1, 3},    {3, 127},  {2, 2048}, {1, 2049},
                                                              {5, 4097}, {1, 8192}, {2, 8193}, {300, 96}};
    for (auto [R, C] : shapes) {
        const int64_t ldx = C + 3, ldd = C + 1, ldy = C + 5;
        const std::vector<float> x = random_rows(R, C, ldx, uint32_t(R * 7 + C), -3.f, 3.f);
        const std::vector<float> d = random_rows(R, C, ldd, uint32_t(C + 11), -3.f, 3.f);
        const std::vector<float> y = random_rows(R, C, ldy, 9);
        const std::vector<float> w = random_rows(1, C, C, uint32_t(C + 2), 0.5f, 1.5f);
        const std::string what = "add_rms_norm " + shape_name({R, C});
        cuda::Stream s;
        cuda::DeviceBuffer dw = to_device(w), dd = to_device(d);
        cuda::DeviceBuffer x1 = to_device(x), y1 = to_device(y), x2 = to_device(x), y2 = to_device(y);
        ref::add_rms_norm(x1.as<float>(), ldx, dd.as<float>(), ldd, y1.as<float>(), ldy, dw.as<float>(), R, C, 1e-6f, s);
        ref::add(x2.as<float>(), ldx, x2.as<float>(), ldx, dd.as<float>(), ldd, R, C, s);
        ref::rms_norm(y2.as<float>(), ldy, x2.as<float>(), ldx, dw.as<float>(), R, C, 1e-6f, s);
        s.synchronize();
        expect_same_bytes(to_host<float>(x1), to_host<float>(x2), what + " x");
        expect_same_bytes(to_host<float>(y1), to_host<float>(y2), what + " y");
    }
    cuda::DeviceBuffer b(64 * 4 * 4), w(64 * 4);
    EXPECT_THROW(ref::add_rms_norm(b.as<float>(), 64, b.as<float>() + 64, 64, b.as<float>() + 32, 64, w.as<float>(), 1,
                                   64, 1e-6f, nullptr),
                 Error);  // y overlaps x
    EXPECT_THROW(ref::add_rms_norm(b.as<float>(), 64, b.as<float>(), 64, b.as<float>() + 128, 64, w.as<float>(), 1, 64,
                                   1e-6f, nullptr),
                 Error);  // d is x
}

// add_rms_norm over P parts of the delta (the GDN decode step's fused out-projection): x gets the
// parts added in order bit for bit as P adds give it; y is rms_norm of that x (the parts kernel
// sums squares over 1024 threads, rms_norm over 256: kTol). Refuses a part on x, and rows past
// 16384 columns.
TEST(CudaRefNorm, AddRmsNormPartsAreAddsInOrder) {
    REQUIRE_CUDA();
    const std::vector<std::tuple<int64_t, int64_t, int>> shapes = {{1, 2048, 16}, {3, 127, 2},  {2, 4097, 9},
                                                                   {1, 16384, 3}, {5, 2048, 17}, {1, 1, 8}};
    for (auto [R, C, P] : shapes) {
        const int64_t ldx = C + 3, ldd = C + 1, ldy = C + 5, ps = R * ldd + 2;  // part stride past the rows
        const std::vector<float> x = random_rows(R, C, ldx, uint32_t(R * 7 + C), -3.f, 3.f);
        const std::vector<float> d = random_rows(P, ps, ps, uint32_t(C + 11 + P), -3.f, 3.f);
        const std::vector<float> y = random_rows(R, C, ldy, 9);
        const std::vector<float> w = random_rows(1, C, C, uint32_t(C + 2), 0.5f, 1.5f);
        const std::string what = "add_rms_norm " + shape_name({P, R, C});
        cuda::Stream s;
        cuda::DeviceBuffer dw = to_device(w), dd = to_device(d);
        cuda::DeviceBuffer x1 = to_device(x), y1 = to_device(y), x2 = to_device(x), y2 = to_device(y);
        ref::add_rms_norm(x1.as<float>(), ldx, dd.as<float>(), ldd, y1.as<float>(), ldy, dw.as<float>(), R, C, 1e-6f, s,
                          P, ps);
        for (int p = 0; p < P; ++p)
            ref::add(x2.as<float>(), ldx, x2.as<float>(), ldx, dd.as<float>() + p * ps, ldd, R, C, s);
        ref::rms_norm(y2.as<float>(), ldy, x2.as<float>(), ldx, dw.as<float>(), R, C, 1e-6f, s);
        s.synchronize();
        expect_same_bytes(to_host<float>(x1), to_host<float>(x2), what + " x");
        const std::vector<float> got = to_host<float>(y1), want = to_host<float>(y2);
        int bad = 0;
        for (size_t i = 0; i < got.size(); ++i)
            if (!(std::fabs(double(got[i]) - double(want[i])) <= kTol * std::max(1.0, std::fabs(double(want[i])))) &&
                ++bad <= 3)
                ADD_FAILURE() << what << " y[" << i << "]: " << got[i] << " vs " << want[i];
    }
    cuda::DeviceBuffer b(3 * 64 * 4), w(64 * 4), big(2 * 16385 * 4 * 3), wb(16385 * 4);
    EXPECT_THROW(ref::add_rms_norm(b.as<float>(), 64, b.as<float>() + 64, 64, b.as<float>() + 128, 64, w.as<float>(), 1,
                                   64, 1e-6f, nullptr, 2, -64),
                 Error);  // part 1 is x
    EXPECT_THROW(ref::add_rms_norm(big.as<float>(), 16385, big.as<float>() + 16385, 16385, big.as<float>() + 2 * 16385,
                                   16385, wb.as<float>(), 1, 16385, 1e-6f, nullptr, 2, 16385),
                 Error);  // rows past 16384 columns
}
