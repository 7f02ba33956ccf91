// The elementwise reference kernels (swiglu, add, add_bias, sigmoid_mul) against the CPU
// backend on awkward shapes, strided rows and in-place aliasing. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/ref_elementwise.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;
namespace ref = tessera::cuda::ref;

namespace {

// rows, cols: one row, odd widths, one past a warp (33) / block (257) / 4096.
const std::vector<std::tuple<int64_t, int64_t>> kShapes = {{1, 1},   {1, 3},   {3, 127}, {2, 129},
                                                           {5, 257}, {1, 4097}, {33, 33}, {7, 1000}};

// Elementwise f32 ops: the only difference from the CPU is expf against glibc's expf (a few
// ulp, ~5e-7 relative after the division), so 1e-5 of max(1, |ref|) is ample; add is exact.
constexpr double kTol = 1e-5;

std::string shape_name(int64_t r, int64_t c, int64_t pad) {
    std::string s = "[";  // built with += (GCC 12 warns falsely on "[" + std::to_string(...))
    s += std::to_string(r);
    s += ", ";
    s += std::to_string(c);
    s += "] pad ";
    s += std::to_string(pad);
    return s;
}

enum class Alias { None, First, Second };  // y separate, y is the first input, y is the second

// Runs a binary row op y = f(p, q) on both backends. cpu_op(y, p, q) takes Tensors; gpu_op
// takes device pointers (y, ldy, p, ldp, q, ldq, rows, cols, stream).
template <typename CpuOp, typename GpuOp>
void check_binary(const char* name, CpuOp cpu_op, GpuOp gpu_op, double tol) {
    for (auto [R, C] : kShapes)
        for (int64_t pad : {0, 3})
            for (Alias alias : {Alias::None, Alias::First, Alias::Second}) {
                const int64_t ldp = C + pad, ldq = C + 2 * pad, ldy = C + pad + 1;
                std::vector<float> p = random_rows(R, C, ldp, uint32_t(R * 31 + C));
                std::vector<float> q = random_rows(R, C, ldq, uint32_t(R * 37 + C + 5));
                std::vector<float> y = random_rows(R, C, ldy, 99);  // overwritten
                std::string what = std::string(name) + " " + shape_name(R, C, pad);
                if (alias != Alias::None) what += alias == Alias::First ? " y=first" : " y=second";
                cuda::Stream s;
                cuda::DeviceBuffer dp = to_device(p), dq = to_device(q), dy = to_device(y);
                auto cpu = make_cpu_backend();
                if (alias == Alias::None) {
                    cpu_op(*cpu, rows_view(y.data(), R, C, ldy), rows_view(p.data(), R, C, ldp),
                           rows_view(q.data(), R, C, ldq));
                    gpu_op(dy.as<float>(), ldy, dp.as<float>(), ldp, dq.as<float>(), ldq, R, C, s.get());
                    s.synchronize();
                    expect_close(to_host<float>(dy), y, tol, what);
                } else {
                    std::vector<float>& out = alias == Alias::First ? p : q;
                    cuda::DeviceBuffer& dout = alias == Alias::First ? dp : dq;
                    const int64_t ldo = alias == Alias::First ? ldp : ldq;
                    cpu_op(*cpu, rows_view(out.data(), R, C, ldo), rows_view(p.data(), R, C, ldp),
                           rows_view(q.data(), R, C, ldq));
                    gpu_op(dout.as<float>(), ldo, dp.as<float>(), ldp, dq.as<float>(), ldq, R, C, s.get());
                    s.synchronize();
                    expect_close(to_host<float>(dout), out, tol, what);
                }
            }
}

}  // namespace

TEST(CudaRefElementwise, SwigluMatchesCpu) {
    REQUIRE_CUDA();
    check_binary(
        "swiglu", [](Backend& b, const Tensor& y, const Tensor& g, const Tensor& u) { b.swiglu(y, g, u); },
        ref::swiglu, kTol);
}

TEST(CudaRefElementwise, AddMatchesCpu) {
    REQUIRE_CUDA();
    // One f32 addition per element on both sides: exact.
    check_binary(
        "add", [](Backend& b, const Tensor& y, const Tensor& a, const Tensor& c) { b.add(y, a, c); }, ref::add, 0.0);
}

TEST(CudaRefElementwise, SigmoidMulPerElementMatchesCpu) {
    REQUIRE_CUDA();
    check_binary(
        "sigmoid_mul", [](Backend& b, const Tensor& y, const Tensor& x, const Tensor& g) { b.sigmoid_mul(y, x, g); },
        [](float* y, int64_t ldy, const float* x, int64_t ldx, const float* g, int64_t ldg, int64_t R, int64_t C,
           cudaStream_t s) { ref::sigmoid_mul(y, ldy, x, ldx, g, ldg, /*per_row=*/false, R, C, s); },
        kTol);
}

TEST(CudaRefElementwise, SigmoidMulPerRowMatchesCpu) {
    REQUIRE_CUDA();
    for (auto [R, C] : kShapes)
        for (bool in_place : {false, true}) {
            if (C == 1) continue;  // a [R, 1] gate of a [R, 1] x is the per-element case
            const int64_t ldx = C + 2, ldg = 3, ldy = C + 5;
            std::vector<float> x = random_rows(R, C, ldx, uint32_t(R + C));
            std::vector<float> g = random_rows(R, 1, ldg, uint32_t(R * 3 + C), -12.f, 12.f);
            std::vector<float> y = random_rows(R, C, ldy, 7);
            const std::string what = "sigmoid_mul per row " + shape_name(R, C, 2) + (in_place ? " in place" : "");
            cuda::Stream s;
            cuda::DeviceBuffer dx = to_device(x), dg = to_device(g), dy = to_device(y);
            auto cpu = make_cpu_backend();
            Tensor gv = rows_view(g.data(), R, 1, ldg);
            if (in_place) {
                cpu->sigmoid_mul(rows_view(x.data(), R, C, ldx), rows_view(x.data(), R, C, ldx), gv);
                ref::sigmoid_mul(dx.as<float>(), ldx, dx.as<float>(), ldx, dg.as<float>(), ldg, true, R, C, s);
                s.synchronize();
                expect_close(to_host<float>(dx), x, kTol, what);
            } else {
                cpu->sigmoid_mul(rows_view(y.data(), R, C, ldy), rows_view(x.data(), R, C, ldx), gv);
                ref::sigmoid_mul(dy.as<float>(), ldy, dx.as<float>(), ldx, dg.as<float>(), ldg, true, R, C, s);
                s.synchronize();
                expect_close(to_host<float>(dy), y, kTol, what);
            }
        }
}

// The output gate read from inside a stacked q | gate | k | v projection: [T, n, D] views whose
// token strides are not n · head stride, against the CPU backend's sigmoid_mul on the same views.
TEST(CudaRefElementwise, SigmoidMulHeadsMatchesCpu) {
    REQUIRE_CUDA();
    const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {{1, 1, 1}, {1, 16, 256}, {3, 2, 127},
                                                                       {33, 3, 64}, {5, 16, 257}};
    for (auto [T, n, D] : shapes)
        for (bool in_place : {false, true}) {
            const int64_t gh = 2 * D, gt = n * gh + 3 * D + 1, xh = D, xt = n * D + (in_place ? 0 : 5);
            std::vector<float> g = random_heads(T, n, D, gt, gh, uint32_t(T + n * 7 + D), -8.f, 8.f);
            std::vector<float> x = random_heads(T, n, D, xt, xh, uint32_t(T * 3 + D));
            std::vector<float> y = random_heads(T, n, D, xt, xh, 9);
            const std::string what = "sigmoid_mul_heads [" + std::to_string(T) + ", " + std::to_string(n) + ", " +
                                     std::to_string(D) + "]" + (in_place ? " in place" : "");
            cuda::Stream s;
            cuda::DeviceBuffer dg = to_device(g), dx = to_device(x), dy = to_device(y);
            auto cpu = make_cpu_backend();
            const Tensor gv = heads_view(g.data(), T, n, D, gt, gh), xv = heads_view(x.data(), T, n, D, xt, xh);
            float* out = in_place ? x.data() : y.data();
            cpu->sigmoid_mul(heads_view(out, T, n, D, xt, xh), xv, gv);
            float* dout = in_place ? dx.as<float>() : dy.as<float>();
            ref::sigmoid_mul_heads(dout, xt, xh, dx.as<float>(), xt, xh, dg.as<float>(), gt, gh, T, n, D, s);
            s.synchronize();
            expect_close(to_host<float>(in_place ? dx : dy), in_place ? x : y, kTol, what);
        }
}

TEST(CudaRefElementwise, AddBiasMatchesCpu) {
    REQUIRE_CUDA();
    for (auto [R, C] : kShapes)
        for (int64_t pad : {0, 5}) {
            const int64_t ldy = C + pad;
            std::vector<float> y = random_rows(R, C, ldy, uint32_t(R * 11 + C));
            std::vector<float> bias = random_rows(1, C, C, uint32_t(C));
            cuda::Stream s;
            cuda::DeviceBuffer dy = to_device(y), db = to_device(bias);
            make_cpu_backend()->add_bias(rows_view(y.data(), R, C, ldy), Tensor(bias.data(), DType::F32, {C}));
            ref::add_bias(dy.as<float>(), ldy, db.as<float>(), R, C, s);
            s.synchronize();
            expect_close(to_host<float>(dy), y, 0.0, "add_bias " + shape_name(R, C, pad));  // one addition: exact
        }
}

TEST(CudaRefElementwise, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float* n = nullptr;
    float buf[32] = {};
    float* p = buf;
    EXPECT_NO_THROW(ref::swiglu(n, 0, n, 0, n, 0, 0, 7, nullptr));  // empty: nothing to do
    EXPECT_THROW(ref::swiglu(p, 4, n, 4, p, 4, 2, 4, nullptr), Error);  // null gate
    EXPECT_THROW(ref::add(p, 4, p, 3, p, 4, 2, 4, nullptr), Error);     // lda < cols
    EXPECT_THROW(ref::add(p, 4, p, 4, p, 4, -1, 4, nullptr), Error);    // negative rows
    EXPECT_THROW(ref::add_bias(p, 4, n, 2, 4, nullptr), Error);         // null bias
    // A per-row gate inside y would be overwritten while its row still reads it.
    EXPECT_THROW(ref::sigmoid_mul(p, 4, p + 8, 4, p, 4, true, 2, 4, nullptr), Error);
    // y partly over x (shifted by one element).
    EXPECT_THROW(ref::sigmoid_mul(p + 1, 4, p, 4, p + 16, 4, false, 2, 4, nullptr), Error);
}
