// moe_experts against a naive token-by-token double-precision MoE forward over the dequantized
// expert weights (formats/quants.h), on awkward routings, every weight layout (stacked slices,
// fused gate_up halves, separate tensors) and quantized dtypes; plus bit-exact batch invariance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "core/status.h"
#include "core/thread_pool.h"
#include "formats/quants.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

enum class Layout { Stacked, Fused, Separate };

// E experts: gate, up [I, H] and down [H, I] each, kept stacked, fused and as separate copies.
struct Experts {
    int64_t E, H, I;
    DType gu_t, down_t;
    std::vector<uint8_t> gate, up, down;          // stacked [E, I, H], [E, I, H], [E, H, I]
    std::vector<uint8_t> gate_up;                 // fused [E, 2I, H]: each expert's gate rows, then its up rows
    std::vector<std::vector<uint8_t>> separate;   // [E][gate, up, down]
    std::vector<float> gate_deq, up_deq, down_deq;  // what the bytes decode to: the reference's weights

    MoeWeights views(Layout l) {
        MoeWeights w;
        Tensor g(gate.data(), gu_t, {E, I, H}), u(up.data(), gu_t, {E, I, H}), d(down.data(), down_t, {E, H, I});
        Tensor gu(gate_up.data(), gu_t, {E, 2 * I, H});
        for (int64_t e = 0; e < E; ++e) {
            if (l == Layout::Separate) {
                w.gate.push_back(Tensor(separate[size_t(3 * e)].data(), gu_t, {I, H}));
                w.up.push_back(Tensor(separate[size_t(3 * e + 1)].data(), gu_t, {I, H}));
                w.down.push_back(Tensor(separate[size_t(3 * e + 2)].data(), down_t, {H, I}));
                continue;
            }
            if (l == Layout::Fused) {
                const Tensor ge = gu.slice_rows(e, e + 1).view({2 * I, H});
                w.gate.push_back(ge.slice_rows(0, I));
                w.up.push_back(ge.slice_rows(I, 2 * I));
            } else {
                w.gate.push_back(g.slice_rows(e, e + 1));  // [1, I, H]
                w.up.push_back(u.slice_rows(e, e + 1));
            }
            w.down.push_back(d.slice_rows(e, e + 1));
        }
        return w;
    }
};

void fill(DType t, int64_t rows, int64_t cols, uint64_t seed, std::vector<uint8_t>& bytes, std::vector<float>& deq) {
    const auto src = random_floats(size_t(rows * cols), seed);
    bytes.resize(dtype_row_bytes(t, cols) * size_t(rows));
    quantize_tensor(t, src.data(), bytes.data(), rows, cols);
    deq.resize(size_t(rows * cols));
    dequantize_tensor(t, bytes.data(), deq.data(), rows, cols);
}

Experts make_experts(DType gu_t, DType down_t, int64_t E, int64_t H, int64_t I, uint64_t seed) {
    Experts ex{E, H, I, gu_t, down_t, {}, {}, {}, {}, {}, {}, {}, {}};
    fill(gu_t, E * I, H, seed, ex.gate, ex.gate_deq);
    fill(gu_t, E * I, H, seed + 1, ex.up, ex.up_deq);
    fill(down_t, E * H, I, seed + 2, ex.down, ex.down_deq);
    const size_t gb = dtype_row_bytes(gu_t, H) * size_t(I), db = dtype_row_bytes(down_t, I) * size_t(H);
    ex.gate_up.resize(2 * gb * size_t(E));
    for (int64_t e = 0; e < E; ++e) {
        std::memcpy(&ex.gate_up[2 * gb * size_t(e)], &ex.gate[gb * size_t(e)], gb);
        std::memcpy(&ex.gate_up[2 * gb * size_t(e) + gb], &ex.up[gb * size_t(e)], gb);
        ex.separate.emplace_back(ex.gate.begin() + long(gb * size_t(e)), ex.gate.begin() + long(gb * size_t(e + 1)));
        ex.separate.emplace_back(ex.up.begin() + long(gb * size_t(e)), ex.up.begin() + long(gb * size_t(e + 1)));
        ex.separate.emplace_back(ex.down.begin() + long(db * size_t(e)), ex.down.begin() + long(db * size_t(e + 1)));
    }
    return ex;
}

struct Routing {
    std::vector<int32_t> ids;  // [T, k]
    std::vector<float> w;      // [T, k]
};

// k distinct experts per token drawn from experts [0, used), positive weights.
Routing random_routing(int64_t T, int k, int used, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> wd(0.05f, 1.f);
    Routing r;
    std::vector<int32_t> pool(static_cast<size_t>(used));
    for (int64_t t = 0; t < T; ++t) {
        std::iota(pool.begin(), pool.end(), 0);
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int j = 0; j < k; ++j) {
            r.ids.push_back(pool[size_t(j)]);
            r.w.push_back(wd(rng));
        }
    }
    return r;
}

// Activation block the matmul quantizes x to for weights of type t (0: f32 activations).
int act_block(DType t) {
    if (!dtype_is_quantized(t)) return 0;
    return t == DType::Q4_K || t == DType::Q6_K ? 256 : 32;
}

// Σ_k w_k²·Δ_k²/12: the variance of Σ w·x when x is rounded to q8 steps Δ = amax(block)/127
// (errors uniform in ±Δ/2, independent); 0 for f32 activations.
double q8_var(const float* w, const double* x, int64_t K, int block) {
    if (!block) return 0.0;
    double v = 0.0;
    for (int64_t k0 = 0; k0 < K; k0 += block) {
        double amax = 0.0;
        for (int64_t k = k0; k < k0 + block; ++k) amax = std::max(amax, std::fabs(x[k]));
        const double step = amax / 127.0;
        for (int64_t k = k0; k < k0 + block; ++k) v += double(w[k]) * w[k] * step * step / 12.0;
    }
    return v;
}

// The naive forward, token by token in double, and a per-output tolerance: 6σ of the q8
// activation rounding propagated through gate/up, SwiGLU and down (first order, errors of gate
// and up and of the k experts taken as fully correlated), plus 1e-5 of Σ|terms| for f32 sums.
struct Reference {
    std::vector<double> y, tol;  // [T, H]
};
Reference reference(const Experts& ex, const float* x, int64_t T, const Routing& r, int k) {
    const int64_t H = ex.H, I = ex.I;
    const int bgu = act_block(ex.gu_t), bd = act_block(ex.down_t);
    Reference ref{std::vector<double>(size_t(T * H), 0.0), std::vector<double>(size_t(T * H), 0.0)};
    std::vector<double> xt(static_cast<size_t>(H)), a(static_cast<size_t>(I)), sa(static_cast<size_t>(I));
    std::vector<double> sigma(static_cast<size_t>(H)), mag(static_cast<size_t>(H));
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t c = 0; c < H; ++c) xt[size_t(c)] = x[t * H + c];
        std::fill(sigma.begin(), sigma.end(), 0.0);
        std::fill(mag.begin(), mag.end(), 0.0);
        for (int j = 0; j < k; ++j) {
            const int64_t e = r.ids[size_t(t * k + j)];
            const double w = r.w[size_t(t * k + j)];
            for (int64_t i = 0; i < I; ++i) {
                const float* gw = &ex.gate_deq[size_t((e * I + i) * H)];
                const float* uw = &ex.up_deq[size_t((e * I + i) * H)];
                double h = 0, u = 0;
                for (int64_t c = 0; c < H; ++c) {
                    h += double(gw[c]) * xt[size_t(c)];
                    u += double(uw[c]) * xt[size_t(c)];
                }
                const double s = 1.0 / (1.0 + std::exp(-h)), silu = h * s, dsilu = s * (1.0 + h * (1.0 - s));
                a[size_t(i)] = silu * u;
                sa[size_t(i)] = std::fabs(dsilu * u) * std::sqrt(q8_var(gw, xt.data(), H, bgu)) +
                                std::fabs(silu) * std::sqrt(q8_var(uw, xt.data(), H, bgu));
            }
            for (int64_t n = 0; n < H; ++n) {
                const float* dw = &ex.down_deq[size_t((e * H + n) * I)];
                double o = 0, m = 0, var = q8_var(dw, a.data(), I, bd);
                for (int64_t i = 0; i < I; ++i) {
                    o += double(dw[i]) * a[size_t(i)];
                    m += std::fabs(double(dw[i]) * a[size_t(i)]);
                    var += double(dw[i]) * dw[i] * sa[size_t(i)] * sa[size_t(i)];
                }
                ref.y[size_t(t * H + n)] += w * o;
                sigma[size_t(n)] += w * std::sqrt(var);
                mag[size_t(n)] += w * m;
            }
        }
        for (int64_t n = 0; n < H; ++n)
            ref.tol[size_t(t * H + n)] = 6.0 * sigma[size_t(n)] + 1e-5 * mag[size_t(n)] + 1e-6;
    }
    return ref;
}

std::string layout_name(Layout l) {
    return l == Layout::Stacked ? "stacked" : l == Layout::Fused ? "fused" : "separate";
}

void check_moe(Experts& ex, int64_t T, int k, const Routing& r, Layout l, bool simd, uint64_t seed) {
    SCOPED_TRACE(::testing::Message() << dtype_name(ex.gu_t) << "/" << dtype_name(ex.down_t) << " T=" << T
                                      << " E=" << ex.E << " k=" << k << " H=" << ex.H << " I=" << ex.I << " "
                                      << layout_name(l) << (simd ? " simd" : " scalar"));
    test::SimdScope scope(simd);
    const int64_t H = ex.H;
    auto x = random_floats(size_t(T * H), seed, -1.f, 1.f);
    std::vector<float> y(size_t(T * H), NAN);
    make_cpu_backend()->moe_experts(Tensor(y.data(), DType::F32, {T, H}), Tensor(x.data(), DType::F32, {T, H}),
                                    ex.views(l), r.ids.data(), r.w.data(), k);
    const Reference ref = reference(ex, x.data(), T, r, k);
    double tol_sum = 0, mag_sum = 0;
    for (int64_t i = 0; i < T * H; ++i) {
        ASSERT_NEAR(y[size_t(i)], ref.y[size_t(i)], ref.tol[size_t(i)]) << "at t=" << i / H << " n=" << i % H;
        tol_sum += ref.tol[size_t(i)];
        mag_sum += std::fabs(ref.y[size_t(i)]);
    }
    // The bound must be able to fail: below the size of the outputs (q8 activations of SwiGLU
    // outputs are coarse: 6σ is 8-16% of |y| on these shapes, the errors seen stay under 3.5σ).
    EXPECT_LT(tol_sum, (act_block(ex.gu_t) || act_block(ex.down_t) ? 0.25 : 1e-3) * mag_sum);
}

TEST(MoeExperts, F32RoutingsAndLayouts) {
    struct Case { int64_t T, E; int k, used; int64_t H, I; };
    const Case cases[] = {
        {1, 4, 1, 4, 64, 32},      {1, 4, 2, 4, 64, 32},     {7, 4, 2, 4, 64, 32},    {64, 16, 8, 16, 48, 24},
        {300, 4, 2, 4, 40, 24},    {300, 256, 8, 256, 32, 16}, {1, 256, 8, 256, 32, 16},
        {64, 4, 1, 1, 64, 32},     // one expert receives every token, the others none
        {64, 16, 2, 4, 64, 32},    // twelve experts receive no token
        {7, 16, 8, 16, 37, 19},    // odd sizes
    };
    const Layout layouts[] = {Layout::Stacked, Layout::Fused, Layout::Separate};
    int n = 0;
    for (const Case& c : cases) {
        Experts ex = make_experts(DType::F32, DType::F32, c.E, c.H, c.I, 100 + uint64_t(n));
        const Routing r = random_routing(c.T, c.k, c.used, 200 + uint64_t(n));
        check_moe(ex, c.T, c.k, r, layouts[n % 3], n % 2 == 0, 300 + uint64_t(n));
        ++n;
    }
}

TEST(MoeExperts, QuantizedAndHalfWeights) {
    struct Case { DType gu, down; int64_t H, I; };
    const Case cases[] = {
        {DType::Q4_0, DType::Q4_0, 64, 32},   {DType::Q8_0, DType::Q8_0, 96, 64}, {DType::Q4_K, DType::Q4_K, 256, 256},
        {DType::Q4_K, DType::Q6_K, 256, 256}, {DType::BF16, DType::BF16, 40, 24}, {DType::F16, DType::Q8_0, 48, 32},
        {DType::MXFP4, DType::MXFP4, 64, 32},
    };
    int n = 0;
    for (const Case& c : cases) {
        Experts ex = make_experts(c.gu, c.down, 8, c.H, c.I, 400 + uint64_t(n));
        for (int64_t T : {1, 17}) {
            const Routing r = random_routing(T, 2, 8, 500 + uint64_t(n * 3 + T));
            for (bool simd : {true, false})
                check_moe(ex, T, 2, r, Layout(n % 3), simd, 600 + uint64_t(n * 5 + T));
        }
        ++n;
    }
    // q4_0 with many tokens per expert (several 64-token matmul tiles) and one expert taking all.
    Experts ex = make_experts(DType::Q4_0, DType::Q4_0, 4, 64, 32, 700);
    check_moe(ex, 300, 2, random_routing(300, 2, 4, 701), Layout::Fused, true, 702);
    check_moe(ex, 70, 1, random_routing(70, 1, 1, 703), Layout::Stacked, true, 704);
}

// Grouped equals token by token through the backend's own matmul and swiglu on the same
// (quantized) weights: the same activation quantization, so only f32 rounding may differ. A
// tighter check of the grouping, gather and weighted sum than the double reference allows.
TEST(MoeExperts, MatchesTokenByTokenBackendOps) {
    struct Case { DType gu, down; int64_t H, I; };
    for (const Case c : {Case{DType::Q4_0, DType::Q4_0, 64, 32}, Case{DType::Q4_K, DType::Q6_K, 256, 256},
                         Case{DType::Q8_0, DType::Q4_0, 2048, 64}}) {
        SCOPED_TRACE(dtype_name(c.gu));
        const int64_t T = 23, E = 8, H = c.H, I = c.I;
        const int k = 3;
        Experts ex = make_experts(c.gu, c.down, E, H, I, 1100);
        const MoeWeights w = ex.views(Layout::Fused);
        const Routing r = random_routing(T, k, 6, 1101);
        auto x = random_floats(size_t(T * H), 1102, -1.f, 1.f);
        auto be = make_cpu_backend();
        std::vector<float> y(size_t(T * H));
        be->moe_experts(Tensor(y.data(), DType::F32, {T, H}), Tensor(x.data(), DType::F32, {T, H}), w, r.ids.data(),
                        r.w.data(), k);
        std::vector<float> g(static_cast<size_t>(I)), u(static_cast<size_t>(I)), o(static_cast<size_t>(H));
        for (int64_t t = 0; t < T; ++t) {
            std::vector<double> ref(static_cast<size_t>(H), 0.0), mag(static_cast<size_t>(H), 0.0);
            for (int j = 0; j < k; ++j) {
                const size_t e = size_t(r.ids[size_t(t * k + j)]);
                const Tensor xt(&x[size_t(t * H)], DType::F32, {1, H});
                be->matmul(Tensor(g.data(), DType::F32, {1, I}), xt, w.gate[e]);
                be->matmul(Tensor(u.data(), DType::F32, {1, I}), xt, w.up[e]);
                be->swiglu(Tensor(g.data(), DType::F32, {1, I}), Tensor(g.data(), DType::F32, {1, I}),
                           Tensor(u.data(), DType::F32, {1, I}));
                be->matmul(Tensor(o.data(), DType::F32, {1, H}), Tensor(g.data(), DType::F32, {1, I}), w.down[e]);
                for (int64_t n = 0; n < H; ++n) {
                    ref[size_t(n)] += double(r.w[size_t(t * k + j)]) * o[size_t(n)];
                    mag[size_t(n)] += std::fabs(double(r.w[size_t(t * k + j)]) * o[size_t(n)]);
                }
            }
            for (int64_t n = 0; n < H; ++n)
                ASSERT_NEAR(y[size_t(t * H + n)], ref[size_t(n)], 1e-5 * mag[size_t(n)] + 1e-6)
                    << "t=" << t << " n=" << n;
        }
    }
}

// A token's output is identical bit for bit whatever else is in the batch, in which order, and
// with how many threads.
TEST(MoeExperts, BatchInvariant) {
    struct Case { DType gu, down; int64_t H, I; };
    // H = 1024 (f32) and 2048 (q4_0) are long enough for cpu::matmul to split K into chunks.
    for (const Case c : {Case{DType::F32, DType::F32, 64, 32}, Case{DType::F32, DType::F32, 1024, 32},
                         Case{DType::Q4_0, DType::Q4_0, 2048, 32}, Case{DType::Q4_K, DType::Q6_K, 256, 256}}) {
        SCOPED_TRACE(dtype_name(c.gu));
        const int64_t T = 64, E = 16, H = c.H;
        const int k = 4;
        Experts ex = make_experts(c.gu, c.down, E, c.H, c.I, 800);
        const MoeWeights w = ex.views(Layout::Stacked);
        Routing r = random_routing(T, k, 12, 801);
        r.ids[0] = 15;  // expert 15 gets a single token in the batch; 12..14 none
        auto x = random_floats(size_t(T * H), 802, -1.f, 1.f);
        auto be = make_cpu_backend();
        auto run = [&](const float* xs, const int32_t* ids, const float* ws, int64_t n) {
            std::vector<float> y(size_t(n * H));
            be->moe_experts(Tensor(y.data(), DType::F32, {n, H}), Tensor(const_cast<float*>(xs), DType::F32, {n, H}),
                            w, ids, ws, k);
            return y;
        };
        const std::vector<float> batch = run(x.data(), r.ids.data(), r.w.data(), T);
        for (int64_t t = 0; t < T; ++t) {
            const auto alone = run(&x[size_t(t * H)], &r.ids[size_t(t * k)], &r.w[size_t(t * k)], 1);
            ASSERT_EQ(0, std::memcmp(alone.data(), &batch[size_t(t * H)], size_t(H) * 4)) << "token " << t << " alone";
        }
        // The batch reversed.
        std::vector<float> xr(x.size()), wr(r.w.size());
        std::vector<int32_t> ir(r.ids.size());
        for (int64_t t = 0; t < T; ++t) {
            std::memcpy(&xr[size_t((T - 1 - t) * H)], &x[size_t(t * H)], size_t(H) * 4);
            std::copy_n(&r.ids[size_t(t * k)], k, &ir[size_t((T - 1 - t) * k)]);
            std::copy_n(&r.w[size_t(t * k)], k, &wr[size_t((T - 1 - t) * k)]);
        }
        const auto rev = run(xr.data(), ir.data(), wr.data(), T);
        for (int64_t t = 0; t < T; ++t)
            ASSERT_EQ(0, std::memcmp(&rev[size_t((T - 1 - t) * H)], &batch[size_t(t * H)], size_t(H) * 4)) << t;
        // Other thread counts split the work differently.
        for (int threads : {1, 3}) {
            ThreadPool::set_global_threads(threads);
            const auto again = run(x.data(), r.ids.data(), r.w.data(), T);
            ThreadPool::set_global_threads(0);
            ASSERT_EQ(0, std::memcmp(again.data(), batch.data(), batch.size() * 4)) << threads << " threads";
        }
    }
}

TEST(MoeExperts, InPlaceStridedAndEmpty) {
    const int64_t T = 9, H = 32, I = 16, E = 4;
    const int k = 2;
    Experts ex = make_experts(DType::F32, DType::F32, E, H, I, 900);
    const Routing r = random_routing(T, k, int(E), 901);
    auto buf = random_floats(size_t(T * 2 * H), 902);
    std::vector<float> x(size_t(T * H));
    for (int64_t t = 0; t < T; ++t) std::memcpy(&x[size_t(t * H)], &buf[size_t(t * 2 * H)], size_t(H) * 4);
    const Reference ref = reference(ex, x.data(), T, r, k);
    // y is x: the first H of each 2H-wide row, updated in place; the other half is untouched.
    Tensor xy(buf.data(), DType::F32, {T, H});
    xy.stride[0] = 2 * H * 4;
    const auto before = buf;
    auto be = make_cpu_backend();
    be->moe_experts(xy, xy, ex.views(Layout::Separate), r.ids.data(), r.w.data(), k);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < H; ++n) {
            ASSERT_NEAR(buf[size_t(t * 2 * H + n)], ref.y[size_t(t * H + n)], ref.tol[size_t(t * H + n)]);
            ASSERT_EQ(buf[size_t(t * 2 * H + H + n)], before[size_t(t * 2 * H + H + n)]);
        }
    // No tokens: nothing to do, nothing read.
    be->moe_experts(Tensor(buf.data(), DType::F32, {0, H}), Tensor(buf.data(), DType::F32, {0, H}),
                    ex.views(Layout::Stacked), nullptr, nullptr, k);
}

// A token may list the same expert twice (its two rows are computed and both weights applied).
TEST(MoeExperts, RepeatedExpertInOneToken) {
    const int64_t T = 5, H = 32, I = 32, E = 4;
    const int k = 3;
    Experts ex = make_experts(DType::Q8_0, DType::Q8_0, E, H, I, 950);
    Routing r = random_routing(T, k, int(E), 951);
    r.ids[0] = r.ids[1] = 2;
    r.ids[3 * k - 1] = r.ids[3 * k - 2];
    check_moe(ex, T, k, r, Layout::Stacked, true, 952);
}

TEST(MoeExperts, RejectsBadInput) {
    const int64_t T = 3, H = 32, I = 16, E = 4;
    const int k = 2;
    Experts ex = make_experts(DType::F32, DType::F32, E, H, I, 1000);
    Routing r = random_routing(T, k, int(E), 1001);
    std::vector<float> x(size_t(T * H)), y(size_t(T * H));
    auto be = make_cpu_backend();
    const Tensor xt(x.data(), DType::F32, {T, H}), yt(y.data(), DType::F32, {T, H});
    auto call = [&](const MoeWeights& w, const int32_t* ids, int kk, const Tensor& yy) {
        be->moe_experts(yy, xt, w, ids, r.w.data(), kk);
    };
    const MoeWeights good = ex.views(Layout::Stacked);
    EXPECT_NO_THROW(call(good, r.ids.data(), k, yt));
    Routing bad = r;
    bad.ids[3] = int32_t(E);
    EXPECT_THROW(call(good, bad.ids.data(), k, yt), Error);  // id past the experts
    bad.ids[3] = -1;
    EXPECT_THROW(call(good, bad.ids.data(), k, yt), Error);
    EXPECT_THROW(call(good, r.ids.data(), 0, yt), Error);       // k = 0
    EXPECT_THROW(call(good, nullptr, k, yt), Error);            // no ids
    EXPECT_THROW(call(good, r.ids.data(), k, Tensor(y.data(), DType::F32, {T, H - 1})), Error);  // y width
    MoeWeights w = good;
    w.down.pop_back();
    EXPECT_THROW(call(w, r.ids.data(), k, yt), Error);  // expert counts differ
    w = good;
    w.up[2] = w.up[2].view({I, H}).slice_rows(0, I - 1);
    EXPECT_THROW(call(w, r.ids.data(), k, yt), Error);  // up of expert 2 is [I-1, H]
    w = good;
    w.down[1] = Tensor(ex.down.data(), DType::F32, {I, H});
    EXPECT_THROW(call(w, r.ids.data(), k, yt), Error);  // down transposed
    w = good;
    w.gate[0].dtype = DType::I32;
    EXPECT_THROW(call(w, r.ids.data(), k, yt), Error);  // not a matmul dtype
    EXPECT_THROW(call(MoeWeights{}, r.ids.data(), k, yt), Error);  // no experts
    try {
        w = good;
        w.up[3] = Tensor(ex.up.data(), DType::F32, {I, H + 1});
        call(w, r.ids.data(), k, yt);
        FAIL() << "expected an Error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("expert 3"), std::string::npos) << e.what();
    }
}

}  // namespace
