// sigmoid_mul (per-element and per-row gates, in place, strided) and the MoE router moe_topk
// (softmax, top-k with ties to the lower index, renormalisation) against double-precision formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/status.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(SigmoidMul, PerElementGate) {
    auto be = make_cpu_backend();
    for (int64_t C : {1, 7, 256}) {
        const int64_t R = 9;
        auto x = random_floats(size_t(R * C), 1 + uint64_t(C), -3.f, 3.f);
        auto g = random_floats(size_t(R * C), 2 + uint64_t(C), -8.f, 8.f);
        g[0] = 100.f;  // σ = 1
        if (g.size() > 1) g[1] = -100.f;  // σ = 0 (exp overflows to inf)
        std::vector<float> y(x.size(), NAN);
        be->sigmoid_mul(Tensor(y.data(), DType::F32, {R, C}), Tensor(x.data(), DType::F32, {R, C}),
                        Tensor(g.data(), DType::F32, {R, C}));
        for (size_t i = 0; i < x.size(); ++i) {
            const double ref = double(x[i]) * sigmoid(g[i]);
            ASSERT_NEAR(y[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << "C=" << C << " i=" << i;
        }
        // In place: y is x.
        be->sigmoid_mul(Tensor(x.data(), DType::F32, {R, C}), Tensor(x.data(), DType::F32, {R, C}),
                        Tensor(g.data(), DType::F32, {R, C}));
        EXPECT_EQ(x, y);
    }
}

TEST(SigmoidMul, PerRowGateBroadcastsAndStridedViews) {
    auto be = make_cpu_backend();
    const int64_t R = 13, C = 40;
    auto x = random_floats(size_t(R * C), 5, -2.f, 2.f);
    const auto x0 = x;
    // The gate is column 3 of a [R, 5] buffer: a [R, 1] view with a 5-float row stride.
    auto gbuf = random_floats(size_t(R * 5), 6, -6.f, 6.f);
    Tensor g(gbuf.data() + 3, DType::F32, {R, 1});
    g.stride[0] = 5 * 4;
    be->sigmoid_mul(Tensor(x.data(), DType::F32, {R, C}), Tensor(x.data(), DType::F32, {R, C}), g);  // in place
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            const double ref = double(x0[size_t(r * C + c)]) * sigmoid(gbuf[size_t(r * 5 + 3)]);
            ASSERT_NEAR(x[size_t(r * C + c)], ref, 1e-6 * std::fabs(ref) + 1e-30);
        }

    // Qwen3.5's attention gate: [T, heads, D] views whose gate rows are interleaved with q rows
    // (per head [q | gate], 2D apart), applied to a contiguous [T, heads, D] output.
    const int64_t T = 3, nh = 4, D = 8;
    auto qg = random_floats(size_t(T * nh * 2 * D), 7, -4.f, 4.f);
    auto o = random_floats(size_t(T * nh * D), 8);
    std::vector<float> y(o.size(), NAN);
    Tensor gate(qg.data() + D, DType::F32, {T, nh, D});
    gate.stride[1] = 2 * D * 4;
    gate.stride[0] = nh * 2 * D * 4;
    be->sigmoid_mul(Tensor(y.data(), DType::F32, {T, nh, D}), Tensor(o.data(), DType::F32, {T, nh, D}), gate);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nh; ++h)
            for (int64_t d = 0; d < D; ++d) {
                const size_t i = size_t((t * nh + h) * D + d);
                const double ref = double(o[i]) * sigmoid(qg[size_t((t * nh + h) * 2 * D + D + d)]);
                ASSERT_NEAR(y[i], ref, 1e-6 * std::fabs(ref) + 1e-30);
            }
}

TEST(SigmoidMul, RejectsBadShapesAndOverlaps) {
    auto be = make_cpu_backend();
    std::vector<float> x(24), g(24), y(24);
    auto t = [](std::vector<float>& v, int64_t r, int64_t c, int64_t off = 0) {
        return Tensor(v.data() + off, DType::F32, {r, c});
    };
    EXPECT_THROW(be->sigmoid_mul(t(y, 4, 6), t(x, 4, 6), t(g, 4, 5)), Error);  // gate width
    EXPECT_THROW(be->sigmoid_mul(t(y, 4, 6), t(x, 4, 6), t(g, 3, 1)), Error);  // gate rows
    EXPECT_THROW(be->sigmoid_mul(t(y, 4, 6), t(x, 4, 5), t(g, 4, 6)), Error);  // y vs x
    EXPECT_THROW(be->sigmoid_mul(t(x, 4, 5), t(x, 4, 5, 1), t(g, 4, 5)), Error);  // y overlaps x, shifted
    EXPECT_THROW(be->sigmoid_mul(t(x, 4, 6), t(y, 4, 6), t(x, 4, 1)), Error);  // y overlaps a per-row gate
    std::vector<int32_t> iv(24);
    EXPECT_THROW(be->sigmoid_mul(t(y, 4, 6), t(x, 4, 6), Tensor(iv.data(), DType::I32, {4, 6})), Error);
}

// ---- moe_topk ------------------------------------------------------------------------------

// The expected routing of one row: probabilities in double, sorted by (p desc, index asc).
void check_row(const float* logits, int64_t E, int k, bool renorm, const int32_t* ids, const float* w,
               const std::string& where) {
    double m = -INFINITY;
    for (int64_t i = 0; i < E; ++i) m = std::max(m, double(logits[i]));
    std::vector<double> p(static_cast<size_t>(E));
    double sum = 0;
    for (int64_t i = 0; i < E; ++i) sum += p[size_t(i)] = std::exp(double(logits[i]) - m);
    for (auto& v : p) v /= sum;
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)]; });
    double top = 0;
    for (int j = 0; j < k; ++j) top += p[size_t(order[size_t(j)])];
    for (int j = 0; j < k; ++j) {
        ASSERT_EQ(ids[j], order[size_t(j)]) << where << " j=" << j;
        const double ref = p[size_t(order[size_t(j)])] / (renorm ? top : 1.0);
        ASSERT_NEAR(w[j], ref, 2e-6 * ref + 1e-12) << where << " j=" << j;
    }
}

TEST(MoeTopk, MatchesSoftmaxTopkReference) {
    auto be = make_cpu_backend();
    struct Case { int64_t T, E; int k; };
    for (const Case c : {Case{1, 4, 1}, Case{7, 4, 4}, Case{37, 16, 2}, Case{64, 256, 8}, Case{5, 512, 10},
                         Case{300, 128, 8}})
        for (bool renorm : {false, true}) {
            auto logits = random_floats(size_t(c.T * c.E), uint64_t(c.T * 31 + c.E), -4.f, 4.f);
            std::vector<int32_t> ids(size_t(c.T * c.k), -1);
            std::vector<float> w(size_t(c.T * c.k), NAN);
            be->moe_topk(Tensor(logits.data(), DType::F32, {c.T, c.E}), {c.k, renorm}, ids.data(), w.data());
            for (int64_t t = 0; t < c.T; ++t) {
                const std::string where = "T=" + std::to_string(c.T) + " E=" + std::to_string(c.E) +
                                          " k=" + std::to_string(c.k) + " renorm=" + std::to_string(renorm) +
                                          " t=" + std::to_string(t);
                check_row(&logits[size_t(t * c.E)], c.E, c.k, renorm, &ids[size_t(t * c.k)], &w[size_t(t * c.k)],
                          where);
                if (renorm) {
                    double s = 0;
                    for (int j = 0; j < c.k; ++j) s += w[size_t(t * c.k + j)];
                    ASSERT_NEAR(s, 1.0, 1e-6) << where;
                }
            }
        }
}

TEST(MoeTopk, TiesGoToTheLowerIndex) {
    auto be = make_cpu_backend();
    const int64_t E = 6;
    const float rows[][6] = {
        {1, 3, 3, 0, 3, 2},  // three-way tie at the top: 1, 2, 4 in that order
        {0, 0, 0, 0, 0, 0},  // all equal: 0, 1, 2
        {5, 1, 1, 1, 1, 5},  // tie at the top between the ends, then the lowest of the 1s
        {-1, 2, -1, -1, -1, -1},
    };
    const int32_t want[][3] = {{1, 2, 4}, {0, 1, 2}, {0, 5, 1}, {1, 0, 2}};
    const int64_t T = 4;
    const int k = 3;
    std::vector<int32_t> ids(size_t(T * k));
    std::vector<float> w(size_t(T * k));
    for (bool renorm : {false, true}) {
        be->moe_topk(Tensor(const_cast<float*>(&rows[0][0]), DType::F32, {T, E}), {k, renorm}, ids.data(), w.data());
        for (int64_t t = 0; t < T; ++t) {
            for (int j = 0; j < k; ++j) EXPECT_EQ(ids[size_t(t * k + j)], want[t][j]) << "row " << t << " j " << j;
            check_row(rows[t], E, k, renorm, &ids[size_t(t * k)], &w[size_t(t * k)], "tie row " + std::to_string(t));
        }
    }
    // Uniform logits, renormalised: every weight is 1/k.
    be->moe_topk(Tensor(const_cast<float*>(&rows[1][0]), DType::F32, {1, E}), {k, true}, ids.data(), w.data());
    for (int j = 0; j < k; ++j) EXPECT_NEAR(w[size_t(j)], 1.0 / k, 1e-7);
}

TEST(MoeTopk, KEqualsEAndStridedLogits) {
    auto be = make_cpu_backend();
    const int64_t T = 5, E = 8;
    auto buf = random_floats(size_t(T * 2 * E), 44, -3.f, 3.f);
    Tensor logits(buf.data(), DType::F32, {T, E});
    logits.stride[0] = 2 * E * 4;  // the first E of each 2E-wide row
    std::vector<int32_t> ids(size_t(T * E));
    std::vector<float> w(size_t(T * E));
    be->moe_topk(logits, {int(E), false}, ids.data(), w.data());
    for (int64_t t = 0; t < T; ++t) {
        check_row(&buf[size_t(t * 2 * E)], E, int(E), false, &ids[size_t(t * E)], &w[size_t(t * E)], "k=E");
        std::vector<int32_t> sorted(ids.begin() + t * E, ids.begin() + (t + 1) * E);
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < E; ++i) EXPECT_EQ(sorted[size_t(i)], i);  // a permutation
    }
}

// A shared expert as one more slot: logits [T, E + 1], the last column its gate g; each row of
// ids / weights [T, k + 1] is the routed top-k of the first E columns (as without it:
// renormalised over those k only) followed by (E, σ(g)).
TEST(MoeTopk, SharedExpertTakesTheLastSlot) {
    auto be = make_cpu_backend();
    const int64_t T = 6, E = 16;
    const int k = 4;
    auto buf = random_floats(size_t(T * (E + 1)), 45, -5.f, 5.f);
    buf[size_t(E)] = -200.f;                // σ underflows to 0
    buf[size_t(2 * (E + 1) - 1)] = 30.f;    // σ = 1
    for (bool renorm : {false, true}) {
        std::vector<int32_t> ids(size_t(T * (k + 1)), -1);
        std::vector<float> w(size_t(T * (k + 1)), NAN);
        be->moe_topk(Tensor(buf.data(), DType::F32, {T, E + 1}), {k, renorm, true}, ids.data(), w.data());
        std::vector<int32_t> ids0(size_t(T * k));
        std::vector<float> w0(size_t(T * k));
        Tensor routed(buf.data(), DType::F32, {T, E});
        routed.stride[0] = (E + 1) * 4;
        be->moe_topk(routed, {k, renorm}, ids0.data(), w0.data());
        for (int64_t t = 0; t < T; ++t) {
            const std::string where = "t=" + std::to_string(t) + " renorm=" + std::to_string(renorm);
            check_row(&buf[size_t(t * (E + 1))], E, k, renorm, &ids[size_t(t * (k + 1))], &w[size_t(t * (k + 1))],
                      where);
            for (int j = 0; j < k; ++j) {  // bit-identical to the routing without the shared slot
                EXPECT_EQ(ids[size_t(t * (k + 1) + j)], ids0[size_t(t * k + j)]) << where;
                EXPECT_EQ(w[size_t(t * (k + 1) + j)], w0[size_t(t * k + j)]) << where;
            }
            const double g = buf[size_t(t * (E + 1) + E)];
            EXPECT_EQ(ids[size_t(t * (k + 1) + k)], E) << where;
            EXPECT_NEAR(w[size_t(t * (k + 1) + k)], 1.0 / (1.0 + std::exp(-g)), 1e-7) << where;
        }
        EXPECT_EQ(w[size_t(k)], 0.f);
        EXPECT_EQ(w[size_t(2 * (k + 1) - 1)], 1.f);
    }
    std::vector<int32_t> ids(16);
    std::vector<float> w(16);
    // k counts the routed experts only: at most E = 3 of [2, 4] logits with a shared column.
    EXPECT_THROW(be->moe_topk(Tensor(buf.data(), DType::F32, {2, 4}), {4, true, true}, ids.data(), w.data()), Error);
    EXPECT_NO_THROW(be->moe_topk(Tensor(buf.data(), DType::F32, {2, 4}), {3, true, true}, ids.data(), w.data()));
}

TEST(MoeTopk, RejectsBadK) {
    auto be = make_cpu_backend();
    std::vector<float> l(8);
    std::vector<int32_t> ids(16);
    std::vector<float> w(16);
    EXPECT_THROW(be->moe_topk(Tensor(l.data(), DType::F32, {2, 4}), {0, true}, ids.data(), w.data()), Error);
    EXPECT_THROW(be->moe_topk(Tensor(l.data(), DType::F32, {2, 4}), {5, true}, ids.data(), w.data()), Error);
    EXPECT_THROW(be->moe_topk(Tensor(l.data(), DType::F32, {2, 4}), {2, true}, nullptr, w.data()), Error);
}

}  // namespace
