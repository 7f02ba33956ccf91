// RMSNorm, RoPE (NeoX / GPT-J, partial, llama3 / linear scaling), SwiGLU, add, add_bias, softmax,
// argmax and embed against hand-written double-precision formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "core/half.h"
#include "core/status.h"
#include "formats/quants.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"

using namespace tessera;
using test::random_floats;

namespace {

TEST(RmsNorm, MatchesFormulaAndAliases) {
    auto be = make_cpu_backend();
    for (int64_t C : {1, 7, 64, 1000}) {
        const int64_t R = 5;
        auto x = random_floats(size_t(R * C), uint64_t(C), -3.f, 3.f);
        auto w = random_floats(size_t(C), 2 * uint64_t(C));
        std::vector<float> y(x.size());
        be->rms_norm(Tensor(y.data(), DType::F32, {R, C}), Tensor(x.data(), DType::F32, {R, C}),
                     Tensor(w.data(), DType::F32, {C}), 1e-6f);
        for (int64_t r = 0; r < R; ++r) {
            double ss = 0;
            for (int64_t c = 0; c < C; ++c) ss += double(x[size_t(r * C + c)]) * x[size_t(r * C + c)];
            const double inv = 1.0 / std::sqrt(ss / double(C) + 1e-6);
            for (int64_t c = 0; c < C; ++c)
                ASSERT_NEAR(y[size_t(r * C + c)], x[size_t(r * C + c)] * inv * w[size_t(c)], 1e-5);
        }
        be->rms_norm(Tensor(x.data(), DType::F32, {R, C}), Tensor(x.data(), DType::F32, {R, C}),
                     Tensor(w.data(), DType::F32, {C}), 1e-6f);  // in place
        EXPECT_EQ(x, y);
    }
    std::vector<float> x(8), w(3);
    EXPECT_THROW(be->rms_norm(Tensor(x.data(), DType::F32, {2, 4}), Tensor(x.data(), DType::F32, {2, 4}),
                              Tensor(w.data(), DType::F32, {3}), 1e-6f), Error);
}

// add_rms_norm with a delta of P parts [P, R, C] (what a fused GDN decode step's out-projection
// leaves): x gets ((x + d[0]) + d[1]) + … in f32, y the RMSNorm of that x — the same bits as P adds
// and rms_norm.
TEST(AddRmsNorm, PartsAreAddedInOrder) {
    auto be = make_cpu_backend();
    const int64_t P = 5, R = 3, C = 67;
    const auto x0 = random_floats(size_t(R * C), 1, -3.f, 3.f), d = random_floats(size_t(P * R * C), 2, -3.f, 3.f);
    auto w = random_floats(size_t(C), 3);
    std::vector<float> x = x0, y(x.size()), want_x = x0, want_y(x.size());
    be->add_rms_norm(Tensor(x.data(), DType::F32, {R, C}), Tensor(y.data(), DType::F32, {R, C}),
                     Tensor(const_cast<float*>(d.data()), DType::F32, {P, R, C}), Tensor(w.data(), DType::F32, {C}),
                     1e-6f);
    for (int64_t p = 0; p < P; ++p)
        for (int64_t i = 0; i < R * C; ++i) want_x[size_t(i)] = want_x[size_t(i)] + d[size_t(p * R * C + i)];
    be->rms_norm(Tensor(want_y.data(), DType::F32, {R, C}), Tensor(want_x.data(), DType::F32, {R, C}),
                 Tensor(w.data(), DType::F32, {C}), 1e-6f);
    EXPECT_EQ(x, want_x);
    EXPECT_EQ(y, want_y);
    EXPECT_NE(x, x0);
}

// [T, heads, D] views whose token stride is not heads · head stride (q / k heads and the output
// gate inside a stacked q | gate | k | v projection): rms_norm and sigmoid_mul give, bit for bit,
// what they give on a compact copy of the same heads, and leave the columns between them alone.
TEST(RmsNorm, HeadsOfAStackedProjection) {
    auto be = make_cpu_backend();
    const int64_t T = 3, n = 4, D = 6, hs = 2 * D, ts = n * hs + 5;  // q | gate per head, then more
    auto buf = random_floats(size_t(T * ts), 71, -3.f, 3.f);
    auto w = random_floats(size_t(D), 72, 0.5f, 1.5f);
    std::vector<float> compact(size_t(T * n * D)), gate(size_t(T * n * D));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < n; ++h)
            for (int64_t c = 0; c < D; ++c) {
                compact[size_t((t * n + h) * D + c)] = buf[size_t(t * ts + h * hs + c)];
                gate[size_t((t * n + h) * D + c)] = buf[size_t(t * ts + h * hs + D + c)];
            }
    auto heads = [&](float* p, int64_t tok, int64_t head) {
        Tensor v(p, DType::F32, {T, n, D});
        v.stride = {tok * 4, head * 4, 4, 0};
        return v;
    };
    const Tensor wt(w.data(), DType::F32, {D});
    std::vector<float> ref_out(compact.size()), out = buf;
    be->rms_norm(Tensor(ref_out.data(), DType::F32, {T * n, D}), Tensor(compact.data(), DType::F32, {T * n, D}), wt,
                 1e-6f);
    be->rms_norm(heads(out.data(), ts, hs), heads(out.data(), ts, hs), wt, 1e-6f);  // in place
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < ts; ++j) {
            const int64_t h = j / hs, c = j % hs;
            const float want = h < n && c < D ? ref_out[size_t((t * n + h) * D + c)] : buf[size_t(t * ts + j)];
            ASSERT_EQ(out[size_t(t * ts + j)], want) << "rms_norm t " << t << " col " << j;
        }
    // y = x ⊙ σ(gate): x compact, the gate inside the stacked buffer.
    std::vector<float> y(compact.size()), want(compact.size());
    be->sigmoid_mul(heads(y.data(), n * D, D), heads(compact.data(), n * D, D), heads(buf.data() + D, ts, hs));
    be->sigmoid_mul(Tensor(want.data(), DType::F32, {T * n, D}), Tensor(compact.data(), DType::F32, {T * n, D}),
                    Tensor(gate.data(), DType::F32, {T * n, D}));
    EXPECT_EQ(y, want);
}

// ---- RoPE ---------------------------------------------------------------------------------
// HF _compute_llama3_parameters in double.
std::vector<double> ref_inv_freq(const RopeParams& p, int rot) {
    std::vector<double> f(size_t(rot / 2));
    for (int i = 0; i < rot / 2; ++i) f[size_t(i)] = 1.0 / std::pow(double(p.theta), 2.0 * i / rot) / p.linear_factor;
    if (p.llama3_factor > 1.f) {
        const double factor = p.llama3_factor, lo = p.llama3_low_freq_factor, hi = p.llama3_high_freq_factor;
        const double old = p.llama3_original_ctx, low_wl = old / lo, high_wl = old / hi;
        for (auto& v : f) {
            const double wl = 2 * M_PI / v;
            if (wl < high_wl) continue;
            if (wl > low_wl) {
                v /= factor;
                continue;
            }
            const double s = (old / wl - lo) / (hi - lo);
            v = (1 - s) * v / factor + s * v;
        }
    }
    return f;
}

// Rotates one head by the hand-written formulas of each style.
std::vector<double> ref_rope_head(const float* x, int D, int rot, double pos, const std::vector<double>& f,
                                  RopeStyle style) {
    std::vector<double> y(x, x + D);
    for (int i = 0; i < rot / 2; ++i) {
        const double c = std::cos(pos * f[size_t(i)]), s = std::sin(pos * f[size_t(i)]);
        if (style == RopeStyle::NeoX) {  // x_i cos − x_{i+rot/2} sin,  x_{i+rot/2} cos + x_i sin
            y[size_t(i)] = x[i] * c - x[i + rot / 2] * s;
            y[size_t(i + rot / 2)] = x[i + rot / 2] * c + x[i] * s;
        } else {  // x_{2i} cos − x_{2i+1} sin,  x_{2i+1} cos + x_{2i} sin
            y[size_t(2 * i)] = x[2 * i] * c - x[2 * i + 1] * s;
            y[size_t(2 * i + 1)] = x[2 * i + 1] * c + x[2 * i] * s;
        }
    }
    return y;
}

void check_rope(RopeParams p, int D, int n_head) {
    const int T = 6;
    const int rot = p.rot_dims ? p.rot_dims : D;
    SCOPED_TRACE(::testing::Message() << "D=" << D << " rot=" << rot << " style=" << int(p.style));
    const std::vector<int32_t> pos = {0, 1, 5, 17, 100, 3};
    auto x = random_floats(size_t(T * n_head * D), uint64_t(D + rot));
    auto y = x;
    make_cpu_backend()->rope(Tensor(y.data(), DType::F32, {T, n_head, D}), pos.data(), p);
    const auto f = ref_inv_freq(p, rot);
    for (int t = 0; t < T; ++t)
        for (int h = 0; h < n_head; ++h) {
            const size_t off = size_t((t * n_head + h) * D);
            const auto ref = ref_rope_head(&x[off], D, rot, pos[size_t(t)], f, p.style);
            for (int i = 0; i < D; ++i) ASSERT_NEAR(y[off + size_t(i)], ref[size_t(i)], 2e-5 * (1 + pos[size_t(t)])) << "i=" << i;
            for (int i = rot; i < D; ++i) ASSERT_EQ(y[off + size_t(i)], x[off + size_t(i)]);  // untouched
        }
}

TEST(Rope, NeoXAndGptJFullAndPartial) {
    for (RopeStyle style : {RopeStyle::NeoX, RopeStyle::GptJ}) {
        RopeParams p;
        p.style = style;
        check_rope(p, 64, 3);  // rot_dims 0 = full
        p.rot_dims = 16;       // partial rotary 0.25
        check_rope(p, 64, 3);
        p.rot_dims = 6;
        p.theta = 1e6f;
        check_rope(p, 10, 1);
    }
}

TEST(Rope, StylesPairDifferentDims) {
    // pos 1, rot 4: NeoX rotates (x0, x2), (x1, x3); GPT-J rotates (x0, x1), (x2, x3).
    RopeParams p;
    p.rot_dims = 4;
    p.theta = 10000.f;
    const int32_t pos = 1;
    std::vector<float> neox = {1, 0, 0, 0}, gptj = {1, 0, 0, 0};
    auto be = make_cpu_backend();
    be->rope(Tensor(neox.data(), DType::F32, {1, 1, 4}), &pos, p);
    p.style = RopeStyle::GptJ;
    be->rope(Tensor(gptj.data(), DType::F32, {1, 1, 4}), &pos, p);
    EXPECT_NEAR(neox[0], std::cos(1.0), 1e-6);
    EXPECT_NEAR(neox[2], std::sin(1.0), 1e-6);
    EXPECT_EQ(neox[1], 0.f);
    EXPECT_NEAR(gptj[0], std::cos(1.0), 1e-6);
    EXPECT_NEAR(gptj[1], std::sin(1.0), 1e-6);
    EXPECT_EQ(gptj[2], 0.f);
}

TEST(Rope, Llama3AndLinearScaling) {
    RopeParams p;
    p.theta = 500000.f;
    p.llama3_factor = 8.f;
    p.llama3_low_freq_factor = 1.f;
    p.llama3_high_freq_factor = 4.f;
    p.llama3_original_ctx = 8192;
    std::vector<float> f(64);
    p.rot_dims = 128;
    rope_inv_freq(p, f.data());
    const auto ref = ref_inv_freq(p, 128);
    int scaled = 0, smoothed = 0;
    for (int i = 0; i < 64; ++i) {
        ASSERT_NEAR(f[size_t(i)], ref[size_t(i)], 2e-6 * ref[size_t(i)]) << i;
        const double plain = 1.0 / std::pow(500000.0, 2.0 * i / 128);
        if (std::fabs(ref[size_t(i)] - plain / 8) < 1e-9 * plain) {
            ++scaled;
        } else if (std::fabs(ref[size_t(i)] - plain) > 1e-9 * plain) {
            ++smoothed;
        }
    }
    EXPECT_GT(scaled, 0);    // all three regimes are exercised
    EXPECT_GT(smoothed, 0);
    check_rope(p, 128, 2);
    RopeParams lin;
    lin.linear_factor = 4.f;
    check_rope(lin, 32, 2);
}

TEST(Rope, PrecomputedInvFreqAndBadParams) {
    std::vector<float> inv = {1.f, 0.5f};
    RopeParams p;
    p.rot_dims = 4;
    p.inv_freq = inv.data();
    const int32_t pos = 2;
    std::vector<float> x = {1, 1, 0, 0};
    auto be = make_cpu_backend();
    be->rope(Tensor(x.data(), DType::F32, {1, 1, 4}), &pos, p);
    EXPECT_NEAR(x[0], std::cos(2.0), 1e-6);
    EXPECT_NEAR(x[1], std::cos(1.0), 1e-6);
    EXPECT_NEAR(x[2], std::sin(2.0), 1e-6);
    EXPECT_NEAR(x[3], std::sin(1.0), 1e-6);
    p.inv_freq = nullptr;
    p.rot_dims = 5;
    EXPECT_THROW(be->rope(Tensor(x.data(), DType::F32, {1, 1, 4}), &pos, p), Error);
    EXPECT_THROW(be->rope(Tensor(x.data(), DType::F32, {1, 4}), &pos, RopeParams{}), Error);
}

// ---- elementwise ---------------------------------------------------------------------------
TEST(Elementwise, SwigluAddAddBias) {
    auto be = make_cpu_backend();
    const int64_t R = 3, C = 37;
    auto g = random_floats(size_t(R * C), 1, -8.f, 8.f), u = random_floats(size_t(R * C), 2);
    auto b = random_floats(size_t(C), 3);
    std::vector<float> y(size_t(R * C));
    be->swiglu(Tensor(y.data(), DType::F32, {R, C}), Tensor(g.data(), DType::F32, {R, C}),
               Tensor(u.data(), DType::F32, {R, C}));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], g[i] / (1 + std::exp(-double(g[i]))) * u[i], 1e-6);
    be->add(Tensor(y.data(), DType::F32, {R, C}), Tensor(g.data(), DType::F32, {R, C}),
            Tensor(u.data(), DType::F32, {R, C}));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], g[i] + u[i]);
    auto y2 = y;
    be->add_bias(Tensor(y2.data(), DType::F32, {R, C}), Tensor(b.data(), DType::F32, {C}));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y2[i], y[i] + b[i % size_t(C)]);
    EXPECT_THROW(be->add(Tensor(y.data(), DType::F32, {R, C}), Tensor(g.data(), DType::F32, {C, R}),
                         Tensor(u.data(), DType::F32, {R, C})), Error);
    EXPECT_THROW(be->add_bias(Tensor(y.data(), DType::F32, {R, C}), Tensor(b.data(), DType::F32, {C - 1})), Error);
}

TEST(Elementwise, SoftmaxAndArgmax) {
    auto be = make_cpu_backend();
    const int64_t R = 4, C = 1001;
    auto x = random_floats(size_t(R * C), 9, -30.f, 30.f);
    x[5] = 1000.f;  // large values must not overflow
    auto y = x;
    be->softmax(Tensor(y.data(), DType::F32, {R, C}));
    for (int64_t r = 0; r < R; ++r) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, double(x[size_t(r * C + c)]));
        for (int64_t c = 0; c < C; ++c) s += std::exp(x[size_t(r * C + c)] - m);
        for (int64_t c = 0; c < C; ++c)
            ASSERT_NEAR(y[size_t(r * C + c)], std::exp(x[size_t(r * C + c)] - m) / s, 1e-6);
    }
    std::vector<float> a = {1, 3, 3, -1, NAN, 2, 5, 5, -INFINITY, -INFINITY, NAN, -INFINITY};
    std::vector<int32_t> out(4, -1);
    be->argmax(Tensor(a.data(), DType::F32, {4, 3}), out.data());
    EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 0, 0}));  // first index on ties; NaN never wins
}

TEST(Embed, GathersEveryDtype) {
    auto be = make_cpu_backend();
    const int64_t V = 10, H = 256;
    const std::vector<int32_t> ids = {3, 0, 9, 3};
    auto src = random_floats(size_t(V * H), 4);
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4}) {
        std::vector<uint8_t> table(dtype_row_bytes(t, H) * V);
        quantize_tensor(t, src.data(), table.data(), V, H);
        std::vector<float> y(ids.size() * H);
        be->embed(Tensor(y.data(), DType::F32, {int64_t(ids.size()), H}), Tensor(table.data(), t, {V, H}), ids.data());
        std::vector<float> row(static_cast<size_t>(H));
        for (size_t i = 0; i < ids.size(); ++i) {
            dequantize_row(t, table.data() + dtype_row_bytes(t, H) * size_t(ids[i]), row.data(), H);
            for (int64_t c = 0; c < H; ++c) ASSERT_EQ(y[i * H + size_t(c)], row[size_t(c)]) << dtype_name(t);
            if (t == DType::F32) {
                for (int64_t c = 0; c < H; ++c) ASSERT_EQ(y[i * H + size_t(c)], src[size_t(ids[i] * H + c)]);
            }
        }
    }
    std::vector<float> table(static_cast<size_t>(V * H)), y(static_cast<size_t>(H));
    const int32_t bad = int32_t(V);
    EXPECT_THROW(be->embed(Tensor(y.data(), DType::F32, {1, H}), Tensor(table.data(), DType::F32, {V, H}), &bad), Error);
}

}  // namespace
