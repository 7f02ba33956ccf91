// The gated delta rule, recurrent and chunked, against a double-precision token-by-token
// reference: lengths around the 64-token chunk, random nonzero starting states, prefill split
// over several calls, several sequences and slots per call, both head mappings, GQA ratios,
// strided q/k/v views, SIMD and scalar.
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

struct Shape {
    int64_t nk, nv, dk, dv;
    bool tiled = false;
};

// Inputs over T tokens: q, k l2-normed (q also scaled by 1/√dk) as the layer feeds them.
struct Inputs {
    Shape sh;
    int64_t T;
    std::vector<float> q, k, v, g, beta;  // [T, nk, dk] ×2, [T, nv, dv], [T, nv] ×2
    Inputs(Shape s, int64_t t, uint64_t seed) : sh(s), T(t) {
        q = random_floats(size_t(T * s.nk * s.dk), seed);
        k = random_floats(size_t(T * s.nk * s.dk), seed + 1);
        v = random_floats(size_t(T * s.nv * s.dv), seed + 2, -2.f, 2.f);
        // Decays from mild to strong (e^g in [0.05, 1)), writes in (0, 1).
        g = random_floats(size_t(T * s.nv), seed + 3, -3.f, -0.001f);
        beta = random_floats(size_t(T * s.nv), seed + 4, 0.f, 1.f);
        for (int64_t r = 0; r < T * s.nk; ++r) {
            double sq = 0, sk = 0;
            for (int64_t i = 0; i < s.dk; ++i) {
                sq += double(q[size_t(r * s.dk + i)]) * q[size_t(r * s.dk + i)];
                sk += double(k[size_t(r * s.dk + i)]) * k[size_t(r * s.dk + i)];
            }
            for (int64_t i = 0; i < s.dk; ++i) {
                q[size_t(r * s.dk + i)] = float(q[size_t(r * s.dk + i)] / std::sqrt(sq) / std::sqrt(double(s.dk)));
                k[size_t(r * s.dk + i)] = float(k[size_t(r * s.dk + i)] / std::sqrt(sk));
            }
        }
    }
    size_t state_size(int64_t n_slots) const { return size_t(n_slots * sh.nv * sh.dk * sh.dv); }
};

// The definition, in double: per sequence and value head, token by token,
// S ← e^g·S;  u = Sᵀk;  S += k ⊗ β(v − u);  o = Sᵀq.
void reference(const Inputs& in, const std::vector<int32_t>& q_start, const std::vector<int32_t>& slot,
               std::vector<double>& S, std::vector<double>& out) {
    const Shape& s = in.sh;
    out.assign(size_t(in.T * s.nv * s.dv), 0.0);
    std::vector<double> u(size_t(s.dv));
    for (size_t seq = 0; seq + 1 < q_start.size(); ++seq)
        for (int64_t h = 0; h < s.nv; ++h) {
            const int64_t hk = s.tiled ? h % s.nk : h / (s.nv / s.nk);
            double* st = S.data() + (int64_t(slot[seq]) * s.nv + h) * s.dk * s.dv;
            for (int64_t t = q_start[seq]; t < q_start[seq + 1]; ++t) {
                const float* q = in.q.data() + (t * s.nk + hk) * s.dk;
                const float* k = in.k.data() + (t * s.nk + hk) * s.dk;
                const float* v = in.v.data() + (t * s.nv + h) * s.dv;
                const double decay = std::exp(double(in.g[size_t(t * s.nv + h)])), b = in.beta[size_t(t * s.nv + h)];
                std::fill(u.begin(), u.end(), 0.0);
                for (int64_t i = 0; i < s.dk; ++i)
                    for (int64_t j = 0; j < s.dv; ++j) {
                        st[i * s.dv + j] *= decay;
                        u[size_t(j)] += st[i * s.dv + j] * k[i];
                    }
                for (int64_t i = 0; i < s.dk; ++i)
                    for (int64_t j = 0; j < s.dv; ++j) st[i * s.dv + j] += k[i] * b * (v[j] - u[size_t(j)]);
                for (int64_t j = 0; j < s.dv; ++j) {
                    double o = 0;
                    for (int64_t i = 0; i < s.dk; ++i) o += st[i * s.dv + j] * q[i];
                    out[size_t((t * s.nv + h) * s.dv + j)] = o;
                }
            }
        }
}

// max |a − b| / max |b|: the error relative to the scale of the expected values.
template <typename A, typename B>
double norm_err(const std::vector<A>& a, const std::vector<B>& b) {
    EXPECT_EQ(a.size(), b.size());
    double d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(double(a[i]) - double(b[i])));
    return d;
}
template <typename A, typename B>
double rel_err(const std::vector<A>& a, const std::vector<B>& b) {
    double m = 1e-30;
    for (const B& x : b) m = std::max(m, std::abs(double(x)));
    return norm_err(a, b) / m;
}

// Runs the backend over tokens [t0, t1) of `in` (one call, given sequence boundaries relative to t0).
void run(Backend& be, const Inputs& in, int64_t t0, int64_t t1, const std::vector<int32_t>& q_start,
         const std::vector<int32_t>& slot, std::vector<float>& state, int64_t n_slots, std::vector<float>& out,
         GdnMode mode, int chunk = 64) {
    const Shape& s = in.sh;
    const int64_t n = t1 - t0;
    auto f = [](const std::vector<float>& x) { return const_cast<float*>(x.data()); };
    GdnParams p;
    p.n_k_heads = int(s.nk);
    p.n_v_heads = int(s.nv);
    p.tiled_heads = s.tiled;
    p.mode = mode;
    p.chunk = chunk;
    SeqPlan plan{int(slot.size()), q_start.data(), slot.data()};
    be.gated_delta_rule(Tensor(out.data() + t0 * s.nv * s.dv, DType::F32, {n, s.nv, s.dv}),
                        Tensor(f(in.q) + t0 * s.nk * s.dk, DType::F32, {n, s.nk, s.dk}),
                        Tensor(f(in.k) + t0 * s.nk * s.dk, DType::F32, {n, s.nk, s.dk}),
                        Tensor(f(in.v) + t0 * s.nv * s.dv, DType::F32, {n, s.nv, s.dv}),
                        Tensor(f(in.g) + t0 * s.nv, DType::F32, {n, s.nv}),
                        Tensor(f(in.beta) + t0 * s.nv, DType::F32, {n, s.nv}),
                        Tensor(state.data(), DType::F32, {n_slots, s.nv, s.dk, s.dv}), plan, p);
}

const char* mode_name(GdnMode m) { return m == GdnMode::Chunked ? "chunked" : "recurrent"; }

// One sequence of T tokens from a random state in slot 1 of 2 (slot 0 must stay untouched).
void check_lengths(const Shape& s, std::initializer_list<int64_t> lengths, int chunk = 64) {
    auto be = make_cpu_backend();
    for (bool simd : {true, false}) {
        test::SimdScope scope(simd);
        for (int64_t T : lengths) {
            SCOPED_TRACE(::testing::Message() << "T=" << T << " nk=" << s.nk << " nv=" << s.nv << " dk=" << s.dk
                                              << " dv=" << s.dv << " chunk=" << chunk << (simd ? " simd" : " scalar"));
            const Inputs in(s, T, uint64_t(T) * 7 + uint64_t(s.dk));
            const auto init = random_floats(in.state_size(2), 99 + uint64_t(T));
            std::vector<double> ref_state(init.begin(), init.end()), ref_out;
            reference(in, {0, int32_t(T)}, {1}, ref_state, ref_out);
            std::vector<float> outs[2], states[2];
            for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
                SCOPED_TRACE(mode_name(mode));
                const int m = int(mode);
                states[m] = init;
                outs[m].assign(size_t(T * s.nv * s.dv), 0.f);
                run(*be, in, 0, T, {0, int32_t(T)}, {1}, states[m], 2, outs[m], mode, chunk);
                EXPECT_LT(rel_err(outs[m], ref_out), 5e-6);
                EXPECT_LT(rel_err(states[m], ref_state), 5e-6);
                const size_t half = in.state_size(1);
                EXPECT_TRUE(std::equal(init.begin(), init.begin() + long(half), states[m].begin()))
                    << "slot 0 changed";
            }
            // The two forms agree with each other to f32 rounding.
            EXPECT_LT(rel_err(outs[1], outs[0]), 5e-6);
            EXPECT_LT(rel_err(states[1], states[0]), 5e-6);
        }
    }
}

TEST(GatedDeltaRule, LengthsAroundTheChunk) { check_lengths({1, 2, 32, 48}, {1, 63, 64, 65, 1000}); }
TEST(GatedDeltaRule, FullSizeHeads) { check_lengths({1, 1, 128, 128}, {1, 65, 130}); }
TEST(GatedDeltaRule, OddHeadSizes) { check_lengths({1, 1, 5, 7}, {1, 63, 64, 65, 200}); }
TEST(GatedDeltaRule, OtherChunkSizes) {
    check_lengths({1, 1, 9, 16}, {1, 15, 16, 17, 100}, 16);
    check_lengths({1, 1, 9, 16}, {50}, 1);
}

// GQA r = 2 in both head orders, and nk = nv: value head h must read the right key head.
TEST(GatedDeltaRule, HeadMappings) {
    for (Shape s : {Shape{2, 4, 16, 8, false}, Shape{2, 4, 16, 8, true}, Shape{3, 3, 8, 12, false},
                    Shape{3, 6, 4, 4, true}})
        check_lengths(s, {1, 70});
    // The two orders really differ (else the test above could not tell them apart).
    auto be = make_cpu_backend();
    const Inputs grouped({2, 4, 16, 8, false}, 10, 5), tiled({2, 4, 16, 8, true}, 10, 5);
    std::vector<float> st_a(grouped.state_size(1), 0.f), st_b = st_a, out_a(size_t(10 * 4 * 8)), out_b = out_a;
    run(*be, grouped, 0, 10, {0, 10}, {0}, st_a, 1, out_a, GdnMode::Recurrent);
    run(*be, tiled, 0, 10, {0, 10}, {0}, st_b, 1, out_b, GdnMode::Recurrent);
    EXPECT_GT(rel_err(out_a, out_b), 1e-2);
}

// A prompt fed over several calls (splits mid-chunk and on chunk edges) equals one pass, in both
// modes, carrying the state through the slot.
TEST(GatedDeltaRule, SplitPrefillEqualsOnePass) {
    auto be = make_cpu_backend();
    const Shape s{2, 4, 16, 24, true};
    const Inputs in(s, 201, 17);
    const auto init = random_floats(in.state_size(3), 5);
    std::vector<double> ref_state(init.begin(), init.end()), ref_out;
    reference(in, {0, 201}, {2}, ref_state, ref_out);
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked})
        for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{0, 37, 101, 201},
                                                 std::vector<int64_t>{0, 64, 128, 201},
                                                 std::vector<int64_t>{0, 1, 2, 66, 200, 201}}) {
            SCOPED_TRACE(::testing::Message() << mode_name(mode) << " cuts after " << cuts[1]);
            std::vector<float> state = init, out(size_t(201 * s.nv * s.dv), 0.f);
            for (size_t c = 0; c + 1 < cuts.size(); ++c)
                run(*be, in, cuts[c], cuts[c + 1], {0, int32_t(cuts[c + 1] - cuts[c])}, {2}, state, 3, out, mode);
            EXPECT_LT(rel_err(out, ref_out), 5e-6);
            EXPECT_LT(rel_err(state, ref_state), 5e-6);
        }
}

// Several sequences of different lengths (one empty) and shuffled slots in one call; q/k/v are
// strided views into one packed [T, 2·nk·dk + nv·dv] buffer as the conv output gives them.
TEST(GatedDeltaRule, SeveralSequencesInOneCall) {
    auto be = make_cpu_backend();
    const Shape s{2, 4, 12, 10, false};
    const std::vector<int32_t> q_start = {0, 1, 66, 66, 69, 169}, slot = {4, 0, 2, 5, 1};
    const int64_t T = 169, n_slots = 6;
    const Inputs in(s, T, 23);
    const int64_t C = 2 * s.nk * s.dk + s.nv * s.dv;  // packed row: [q | k | v]
    std::vector<float> packed(size_t(T * C));
    for (int64_t t = 0; t < T; ++t) {
        std::copy_n(in.q.data() + t * s.nk * s.dk, s.nk * s.dk, packed.data() + t * C);
        std::copy_n(in.k.data() + t * s.nk * s.dk, s.nk * s.dk, packed.data() + t * C + s.nk * s.dk);
        std::copy_n(in.v.data() + t * s.nv * s.dv, s.nv * s.dv, packed.data() + t * C + 2 * s.nk * s.dk);
    }
    auto view = [&](int64_t off, int64_t n, int64_t d) {
        Tensor t(packed.data() + off, DType::F32, {T, n, d});
        t.stride[0] = C * 4;
        return t;
    };
    const auto init = random_floats(in.state_size(n_slots), 31);
    std::vector<double> ref_state(init.begin(), init.end()), ref_out;
    reference(in, q_start, slot, ref_state, ref_out);
    for (bool simd : {true, false})
        for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
            SCOPED_TRACE(::testing::Message() << mode_name(mode) << (simd ? " simd" : " scalar"));
            test::SimdScope scope(simd);
            std::vector<float> state = init, out(size_t(T * s.nv * s.dv), 0.f);
            GdnParams p;
            p.n_k_heads = int(s.nk);
            p.n_v_heads = int(s.nv);
            p.mode = mode;
            const SeqPlan plan{int(slot.size()), q_start.data(), slot.data()};
            be->gated_delta_rule(Tensor(out.data(), DType::F32, {T, s.nv, s.dv}), view(0, s.nk, s.dk),
                                 view(s.nk * s.dk, s.nk, s.dk), view(2 * s.nk * s.dk, s.nv, s.dv),
                                 Tensor(const_cast<float*>(in.g.data()), DType::F32, {T, s.nv}),
                                 Tensor(const_cast<float*>(in.beta.data()), DType::F32, {T, s.nv}),
                                 Tensor(state.data(), DType::F32, {n_slots, s.nv, s.dk, s.dv}), plan, p);
            EXPECT_LT(rel_err(out, ref_out), 5e-6);
            EXPECT_LT(rel_err(state, ref_state), 5e-6);
            // Slot 3 belongs to no sequence: untouched.
            const size_t per = in.state_size(1);
            EXPECT_TRUE(
                std::equal(init.begin() + long(3 * per), init.begin() + long(4 * per), state.begin() + long(3 * per)));
        }
}

TEST(GatedDeltaRule, BadInputsAreClearErrors) {
    auto be = make_cpu_backend();
    const Shape s{2, 4, 8, 8, false};
    const Inputs in(s, 5, 1);
    std::vector<float> state(in.state_size(2)), out(size_t(5 * 4 * 8));
    auto call = [&](std::vector<int32_t> q_start, std::vector<int32_t> slot, int nk, int nv, int64_t n_slots) {
        GdnParams p;
        p.n_k_heads = nk;
        p.n_v_heads = nv;
        auto f = [](const std::vector<float>& x) { return const_cast<float*>(x.data()); };
        const SeqPlan plan{int(slot.size()), q_start.data(), slot.data()};
        be->gated_delta_rule(Tensor(out.data(), DType::F32, {5, 4, 8}), Tensor(f(in.q), DType::F32, {5, 2, 8}),
                             Tensor(f(in.k), DType::F32, {5, 2, 8}), Tensor(f(in.v), DType::F32, {5, 4, 8}),
                             Tensor(f(in.g), DType::F32, {5, 4}), Tensor(f(in.beta), DType::F32, {5, 4}),
                             Tensor(state.data(), DType::F32, {n_slots, 4, 8, 8}), plan, p);
    };
    EXPECT_NO_THROW(call({0, 2, 5}, {0, 1}, 2, 4, 2));
    EXPECT_THROW(call({0, 2, 5}, {1, 1}, 2, 4, 2), Error);  // two sequences, one slot
    EXPECT_THROW(call({0, 2, 5}, {0, 2}, 2, 4, 2), Error);  // slot out of range
    EXPECT_THROW(call({0, 2, 4}, {0, 1}, 2, 4, 2), Error);  // plan does not cover T
    EXPECT_THROW(call({0, 3, 2}, {0, 1}, 2, 4, 2), Error);  // decreasing q_start
    EXPECT_THROW(call({0, 5}, {0}, 3, 4, 2), Error);        // nv not a multiple of nk
    EXPECT_THROW(call({0, 5}, {0}, 2, 8, 2), Error);        // v heads disagree with nv
    std::vector<float> small(size_t(2 * 4 * 8 * 7));
    GdnParams p;
    p.n_k_heads = 2;
    p.n_v_heads = 4;
    const int32_t qs[] = {0, 5}, sl[] = {0};
    auto f = [](const std::vector<float>& x) { return const_cast<float*>(x.data()); };
    try {
        be->gated_delta_rule(Tensor(out.data(), DType::F32, {5, 4, 8}), Tensor(f(in.q), DType::F32, {5, 2, 8}),
                             Tensor(f(in.k), DType::F32, {5, 2, 8}), Tensor(f(in.v), DType::F32, {5, 4, 8}),
                             Tensor(f(in.g), DType::F32, {5, 4}), Tensor(f(in.beta), DType::F32, {5, 4}),
                             Tensor(small.data(), DType::F32, {2, 4, 8, 7}), SeqPlan{1, qs, sl}, p);
        ADD_FAILURE() << "a state of the wrong shape was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("[n_slots, 4, 8, 8]"), std::string::npos) << e.what();
    }
}

}  // namespace
