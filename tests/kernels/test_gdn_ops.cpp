// The elementwise Gated DeltaNet ops (l2_norm, rms_norm_gated, gdn_gates) and the causal conv1d
// with state slots, against hand-written double-precision formulas; conv states carried across
// calls must equal one call over the concatenation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

double silu(double x) { return x / (1 + std::exp(-x)); }

// A [T, n, D] view into rows of `row` floats (a slice of a wider packed activation).
Tensor heads(std::vector<float>& buf, int64_t off, int64_t T, int64_t n, int64_t D, int64_t row) {
    Tensor t(buf.data() + off, DType::F32, {T, n, D});
    t.stride[0] = row * 4;
    return t;
}

TEST(GdnOps, L2NormOnAStridedView) {
    auto be = make_cpu_backend();
    for (int64_t D : {1, 5, 128}) {
        const int64_t T = 3, n = 4, row = n * D + 3;  // 3 floats after each token's heads stay untouched
        auto buf = random_floats(size_t(T * row), uint64_t(D), -2.f, 2.f);
        const auto orig = buf;
        const float scale = 1.f / std::sqrt(float(D));
        be->l2_norm(heads(buf, 0, T, n, D, row), 1e-6f, scale);
        for (int64_t t = 0; t < T; ++t) {
            for (int64_t h = 0; h < n; ++h) {
                const float* x = orig.data() + t * row + h * D;
                double ss = 0;
                for (int64_t i = 0; i < D; ++i) ss += double(x[i]) * x[i];
                for (int64_t i = 0; i < D; ++i)
                    ASSERT_NEAR(buf[size_t(t * row + h * D + i)], x[i] / std::sqrt(ss + 1e-6) * scale, 1e-6);
            }
            for (int64_t i = n * D; i < row; ++i) EXPECT_EQ(buf[size_t(t * row + i)], orig[size_t(t * row + i)]);
        }
    }
    // eps keeps a zero head finite (FLA / HF: x · rsqrt(Σx² + eps)).
    std::vector<float> z(8, 0.f);
    be->l2_norm(Tensor(z.data(), DType::F32, {1, 1, 8}), 1e-6f, 1.f);
    for (float v : z) EXPECT_EQ(v, 0.f);
}

TEST(GdnOps, RmsNormGated) {
    auto be = make_cpu_backend();
    for (int64_t D : {1, 7, 128}) {
        const int64_t T = 5, n = 3;
        auto x = random_floats(size_t(T * n * D), uint64_t(D) + 1, -3.f, 3.f);
        auto z = random_floats(size_t(T * n * D), uint64_t(D) + 2, -6.f, 6.f);
        auto w = random_floats(size_t(D), uint64_t(D) + 3, 0.5f, 1.5f);
        std::vector<float> y(x.size());
        auto t = [&](std::vector<float>& v) { return Tensor(v.data(), DType::F32, {T, n, D}); };
        be->rms_norm_gated(t(y), t(x), t(z), Tensor(w.data(), DType::F32, {D}), 1e-6f);
        for (int64_t r = 0; r < T * n; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < D; ++i) ss += double(x[size_t(r * D + i)]) * x[size_t(r * D + i)];
            const double inv = 1 / std::sqrt(ss / double(D) + 1e-6);
            for (int64_t i = 0; i < D; ++i) {
                const size_t e = size_t(r * D + i);
                ASSERT_NEAR(y[e], w[size_t(i)] * x[e] * inv * silu(z[e]), 2e-5 * (1 + std::abs(y[e])));
            }
        }
        auto x2 = x;
        be->rms_norm_gated(t(x2), t(x2), t(z), Tensor(w.data(), DType::F32, {D}), 1e-6f);  // in place
        EXPECT_EQ(x2, y);
    }
    std::vector<float> a(12), w(3);
    EXPECT_THROW(be->rms_norm_gated(Tensor(a.data(), DType::F32, {1, 3, 4}), Tensor(a.data(), DType::F32, {1, 3, 4}),
                                    Tensor(a.data(), DType::F32, {1, 3, 4}), Tensor(w.data(), DType::F32, {3}), 1e-6f),
                 Error);  // w is [3], heads have D = 4
}

TEST(GdnOps, Gates) {
    auto be = make_cpu_backend();
    const int64_t T = 6, nv = 5;
    auto b = random_floats(size_t(T * nv), 1, -30.f, 30.f);
    auto a = random_floats(size_t(T * nv), 2, -30.f, 30.f);
    a[0] = 19.9f;  // both sides of torch's softplus threshold (20)
    a[1] = 20.5f;
    a[2] = -90.f;
    a[3] = 95.f;  // exp overflows f32 here: the threshold keeps g finite
    b[0] = -100.f;  // σ saturates to 0 and 1 without NaN
    b[1] = 100.f;
    std::vector<float> dt_bias = {0.f, 0.f, 0.5f, -1.f, 2.f}, A_log = {0.f, 0.f, -1.f, 1.5f, 0.3f};
    std::vector<float> neg_exp_a(static_cast<size_t>(nv));
    for (size_t h = 0; h < size_t(nv); ++h) neg_exp_a[h] = -std::exp(A_log[h]);
    std::vector<float> beta(size_t(T * nv)), g(size_t(T * nv));
    auto tv = [&](std::vector<float>& v) { return Tensor(v.data(), DType::F32, {T, nv}); };
    be->gdn_gates(tv(beta), tv(g), tv(b), tv(a), Tensor(neg_exp_a.data(), DType::F32, {nv}),
                  Tensor(dt_bias.data(), DType::F32, {nv}));
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nv; ++h) {
            const size_t e = size_t(t * nv + h);
            const double x = double(a[e]) + dt_bias[size_t(h)];
            const double sp = x > 20 ? x : std::log1p(std::exp(x));
            const double want_g = -std::exp(double(A_log[size_t(h)])) * sp;
            EXPECT_NEAR(g[e], want_g, 1e-6 * (1 + std::abs(want_g))) << "a " << a[e];
            EXPECT_NEAR(beta[e], 1 / (1 + std::exp(-double(b[e]))), 1e-7) << "b " << b[e];
        }
    // In place: beta over b, g over a.
    be->gdn_gates(tv(b), tv(a), tv(b), tv(a), Tensor(neg_exp_a.data(), DType::F32, {nv}),
                  Tensor(dt_bias.data(), DType::F32, {nv}));
    EXPECT_EQ(b, beta);
    EXPECT_EQ(a, g);
    EXPECT_THROW(be->gdn_gates(tv(beta), tv(g), tv(b), tv(a), Tensor(neg_exp_a.data(), DType::F32, {nv - 1}),
                               Tensor(dt_bias.data(), DType::F32, {nv})),
                 Error);
}

// ---- conv1d_silu ------------------------------------------------------------------------

// y[t, c] = silu(Σ_i w[c, i] · in[t − K + 1 + i, c]) over the stream `in` = state rows then x rows.
std::vector<double> ref_conv(const std::vector<float>& stream, const std::vector<float>& w, int64_t C, int64_t K) {
    const int64_t n = int64_t(stream.size()) / C - (K - 1);
    std::vector<double> y(size_t(n * C));
    for (int64_t t = 0; t < n; ++t)
        for (int64_t c = 0; c < C; ++c) {
            double acc = 0;
            for (int64_t i = 0; i < K; ++i) acc += double(w[size_t(c * K + i)]) * stream[size_t((t + i) * C + c)];
            y[size_t(t * C + c)] = silu(acc);
        }
    return y;
}

// Sequences of lengths `lens` (some shorter than K − 1, one empty) in shuffled slots, fed over
// `n_calls` calls (each call carries every sequence's next piece), against one pass per sequence.
void check_conv(int64_t C, int64_t K, const std::vector<int64_t>& lens, int n_calls) {
    SCOPED_TRACE(::testing::Message() << "C=" << C << " K=" << K << " calls=" << n_calls);
    auto be = make_cpu_backend();
    const int64_t n_seqs = int64_t(lens.size()), n_slots = n_seqs + 1;
    const std::vector<int32_t> slot = [&] {
        std::vector<int32_t> s;
        for (int64_t i = 0; i < n_seqs; ++i) s.push_back(int32_t(n_seqs - i));  // reversed; 0 stays free
        return s;
    }();
    auto w = random_floats(size_t(C * K), uint64_t(C * K), -1.f, 1.f);
    const auto init = random_floats(size_t(n_slots * (K - 1) * C), 3, -2.f, 2.f);
    std::vector<std::vector<float>> xs;  // [seq] its inputs [len, C]
    for (int64_t s = 0; s < n_seqs; ++s)
        xs.push_back(random_floats(size_t(lens[size_t(s)] * C), 10 + uint64_t(s), -2.f, 2.f));

    std::vector<float> state = init;
    std::vector<std::vector<float>> ys(static_cast<size_t>(n_seqs));
    std::vector<int64_t> done(static_cast<size_t>(n_seqs), 0);
    for (int call = 0; call < n_calls; ++call) {
        // Piece of each sequence in this call: an uneven split (the last call takes the rest).
        std::vector<int32_t> q_start = {0};
        std::vector<float> x;
        std::vector<int64_t> take(static_cast<size_t>(n_seqs));
        for (int64_t s = 0; s < n_seqs; ++s) {
            const int64_t left = lens[size_t(s)] - done[size_t(s)];
            take[size_t(s)] = call + 1 == n_calls ? left : std::min(left, int64_t((call * 3 + s) % 4));
            x.insert(x.end(), xs[size_t(s)].begin() + done[size_t(s)] * C,
                     xs[size_t(s)].begin() + (done[size_t(s)] + take[size_t(s)]) * C);
            q_start.push_back(q_start.back() + int32_t(take[size_t(s)]));
        }
        const int64_t T = q_start.back();
        std::vector<float> y(size_t(T * C), -7.f);
        be->conv1d_silu(Tensor(y.data(), DType::F32, {T, C}), Tensor(x.data(), DType::F32, {T, C}),
                        Tensor(w.data(), DType::F32, {C, K}), Tensor(state.data(), DType::F32, {n_slots, K - 1, C}),
                        SeqPlan{int(n_seqs), q_start.data(), slot.data()});
        for (int64_t s = 0; s < n_seqs; ++s) {
            ys[size_t(s)].insert(ys[size_t(s)].end(), y.begin() + q_start[size_t(s)] * C,
                                 y.begin() + q_start[size_t(s + 1)] * C);
            done[size_t(s)] += take[size_t(s)];
        }
    }
    for (int64_t s = 0; s < n_seqs; ++s) {
        SCOPED_TRACE(::testing::Message() << "sequence " << s << " of " << lens[size_t(s)] << " tokens");
        const float* st0 = init.data() + slot[size_t(s)] * (K - 1) * C;
        std::vector<float> stream(st0, st0 + (K - 1) * C);
        stream.insert(stream.end(), xs[size_t(s)].begin(), xs[size_t(s)].end());
        const auto want = ref_conv(stream, w, C, K);
        ASSERT_EQ(ys[size_t(s)].size(), want.size());
        for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(ys[size_t(s)][i], want[i], 1e-5) << "at " << i;
        // The state holds the last K − 1 inputs of the stream (old state rows for short sequences).
        const float* st = state.data() + slot[size_t(s)] * (K - 1) * C;
        EXPECT_TRUE(std::equal(stream.end() - (K - 1) * C, stream.end(), st));
    }
    const float* free_slot = state.data();  // slot 0 belongs to no sequence
    EXPECT_TRUE(std::equal(free_slot, free_slot + (K - 1) * C, init.data()));
}

TEST(GdnOps, Conv1dSiluStatesAcrossCalls) {
    for (int64_t K : {2, 3, 4, 5})
        for (int n_calls : {1, 3, 6}) {
            check_conv(37, K, {1, 0, 2, 9, 30}, n_calls);
            check_conv(300, K, {3, 17}, n_calls);  // more channels than one work block
        }
}

// x and y as row slices of wider buffers (as a projection's output columns would be).
TEST(GdnOps, Conv1dOnStridedRows) {
    auto be = make_cpu_backend();
    const int64_t T = 9, C = 37, K = 4, xs = C + 5, ys = C + 3;
    auto xbuf = random_floats(size_t(T * xs), 41, -2.f, 2.f), w = random_floats(size_t(C * K), 42);
    std::vector<float> ybuf(size_t(T * ys), -7.f), st(size_t((K - 1) * C), 0.f);
    Tensor x(xbuf.data() + 2, DType::F32, {T, C}), y(ybuf.data() + 1, DType::F32, {T, C});
    x.stride[0] = xs * 4;
    y.stride[0] = ys * 4;
    const int32_t qs[] = {0, int32_t(T)}, sl[] = {0};
    be->conv1d_silu(y, x, Tensor(w.data(), DType::F32, {C, K}), Tensor(st.data(), DType::F32, {1, K - 1, C}),
                    SeqPlan{1, qs, sl});
    std::vector<float> stream(size_t((K - 1) * C), 0.f);  // a new sequence: zeros before it
    for (int64_t t = 0; t < T; ++t)
        stream.insert(stream.end(), xbuf.begin() + t * xs + 2, xbuf.begin() + t * xs + 2 + C);
    const auto want = ref_conv(stream, w, C, K);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < C; ++c) ASSERT_NEAR(ybuf[size_t(t * ys + 1 + c)], want[size_t(t * C + c)], 1e-5);
        EXPECT_EQ(ybuf[size_t(t * ys)], -7.f);  // the columns around the slice stay untouched
        EXPECT_EQ(ybuf[size_t(t * ys + 1 + C)], -7.f);
    }
}

TEST(GdnOps, Conv1dBadInputs) {
    auto be = make_cpu_backend();
    std::vector<float> x(4 * 6), y(4 * 6), w(6 * 4), st(2 * 3 * 6);
    const int32_t qs[] = {0, 4}, sl[] = {1}, bad[] = {2};
    auto call = [&](int64_t K, int64_t st_rows, const int32_t* slot) {
        be->conv1d_silu(Tensor(y.data(), DType::F32, {4, 6}), Tensor(x.data(), DType::F32, {4, 6}),
                        Tensor(w.data(), DType::F32, {6, K}), Tensor(st.data(), DType::F32, {2, st_rows, 6}),
                        SeqPlan{1, qs, slot});
    };
    EXPECT_NO_THROW(call(4, 3, sl));
    EXPECT_THROW(call(4, 2, sl), Error);   // state rows must be K − 1
    EXPECT_THROW(call(4, 3, bad), Error);  // slot 2 of 2
    EXPECT_THROW(be->conv1d_silu(Tensor(x.data(), DType::F32, {4, 6}), Tensor(x.data(), DType::F32, {4, 6}),
                                 Tensor(w.data(), DType::F32, {6, 4}), Tensor(st.data(), DType::F32, {2, 3, 6}),
                                 SeqPlan{1, qs, sl}),
                 Error);  // in place is refused: the conv reads earlier inputs
}

}  // namespace
