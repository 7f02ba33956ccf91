// Batch invariance of the CPU ops: a token's (or a sequence's) result is bit for bit the same
// whatever else is in the call and wherever it sits — matmul rows vs the same row alone, the
// gated delta rule over a prompt in one call vs split at multiples of 64 vs batched with other
// sequences, paged attention and conv1d_silu of one sequence alone vs batched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "formats/quants.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

// Bitwise equality of n floats (NaN-safe, -0 ≠ +0), with the first differing index on failure.
::testing::AssertionResult same_bits(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; ++i)
        if (std::memcmp(a + i, b + i, sizeof(float)) != 0)
            return ::testing::AssertionFailure() << "differ at " << i << ": " << a[i] << " vs " << b[i];
    return ::testing::AssertionSuccess();
}

// ---- matmul -----------------------------------------------------------------------------

// Every row of a T-row matmul equals the 1-row matmul of that row alone, for every dtype the CPU
// matmul supports, with K long enough to be cut into several cache chunks (a short last one).
void check_matmul_rows(DType t, int64_t K, bool simd) {
    test::SimdScope scope(simd);
    const int64_t N = 37;
    const auto src = random_floats(size_t(N * K), 11 + uint64_t(K));
    std::vector<uint8_t> w(dtype_row_bytes(t, K) * size_t(N));
    quantize_tensor(t, src.data(), w.data(), N, K);
    const Tensor wt(w.data(), t, {N, K});
    auto be = make_cpu_backend();
    for (int64_t T : {37, 130}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(t) << " K=" << K << " T=" << T << (simd ? " simd" : " scalar"));
        const auto x = random_floats(size_t(T * K), 5 + uint64_t(T), -2.f, 2.f);
        std::vector<float> y(size_t(T * N)), one(static_cast<size_t>(N));
        be->matmul(Tensor(y.data(), DType::F32, {T, N}), Tensor(const_cast<float*>(x.data()), DType::F32, {T, K}), wt);
        for (int64_t r = 0; r < T; ++r) {
            be->matmul(Tensor(one.data(), DType::F32, {1, N}),
                       Tensor(const_cast<float*>(x.data()) + r * K, DType::F32, {1, K}), wt);
            ASSERT_TRUE(same_bits(one.data(), y.data() + r * N, size_t(N))) << "row " << r;
        }
    }
}

TEST(BatchInvariance, MatmulRowsEqualOneRowAlone) {
    const DType all[] = {DType::F32, DType::F16, DType::BF16, DType::Q4_0,
                         DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4};
    for (DType t : all)
        for (bool simd : {true, false}) {
            check_matmul_rows(t, 4096, simd);
            if (!dtype_is_quantized(t)) check_matmul_rows(t, 1100, simd);  // odd tail inside the last chunk
        }
}

// The thread count changes how tasks are spread, never a row's result.
TEST(BatchInvariance, MatmulIndependentOfThreads) {
    const int64_t N = 70, K = 2048, T = 9;
    const auto src = random_floats(size_t(N * K), 3);
    std::vector<uint8_t> w(dtype_row_bytes(DType::Q4_K, K) * size_t(N));
    quantize_tensor(DType::Q4_K, src.data(), w.data(), N, K);
    auto x = random_floats(size_t(T * K), 4);
    auto be = make_cpu_backend();
    auto run = [&] {
        std::vector<float> y(size_t(T * N));
        be->matmul(Tensor(y.data(), DType::F32, {T, N}), Tensor(x.data(), DType::F32, {T, K}),
                   Tensor(w.data(), DType::Q4_K, {N, K}));
        return y;
    };
    const auto base = run();
    for (int threads : {1, 3}) {
        ThreadPool::set_global_threads(threads);
        const auto y = run();
        ThreadPool::set_global_threads(0);
        EXPECT_TRUE(same_bits(y.data(), base.data(), y.size())) << threads << " threads";
    }
}

// ---- gated delta rule -------------------------------------------------------------------

// One stream of tokens for the delta rule (q, k l2-normed as the layer feeds them).
struct GdnData {
    int64_t T, nk = 2, nv = 4, dk = 32, dv = 24;
    std::vector<float> q, k, v, g, beta;
    GdnData(int64_t t, uint64_t seed) : T(t) {
        q = random_floats(size_t(T * nk * dk), seed);
        k = random_floats(size_t(T * nk * dk), seed + 1);
        v = random_floats(size_t(T * nv * dv), seed + 2, -2.f, 2.f);
        g = random_floats(size_t(T * nv), seed + 3, -2.f, -0.01f);
        beta = random_floats(size_t(T * nv), seed + 4, 0.f, 1.f);
        for (std::vector<float>* m : {&q, &k})
            for (int64_t r = 0; r < T * nk; ++r) {
                float* row = m->data() + r * dk;
                double ss = 0;
                for (int64_t i = 0; i < dk; ++i) ss += double(row[i]) * row[i];
                for (int64_t i = 0; i < dk; ++i) row[i] = float(row[i] / std::sqrt(ss));
            }
    }
    size_t state_floats() const { return size_t(nv * dk * dv); }
};

// A piece of a call: tokens [t0, t1) of one sequence's data, using state slot `slot`.
struct Piece {
    const GdnData* d;
    int64_t t0, t1;
    int32_t slot;
};

// One gated_delta_rule call over the pieces (in order); returns o [T, nv, dv] of the call and
// updates `state` [n_slots, nv, dk, dv].
std::vector<float> gdn_call(Backend& be, const std::vector<Piece>& pieces, std::vector<float>& state,
                            int64_t n_slots, GdnMode mode = GdnMode::Chunked) {
    const GdnData& d0 = *pieces.at(0).d;
    const int64_t nk = d0.nk, nv = d0.nv, dk = d0.dk, dv = d0.dv;
    std::vector<float> q, k, v, g, beta;
    std::vector<int32_t> q_start = {0}, slot;
    for (const Piece& p : pieces) {
        auto app = [&](std::vector<float>& dst, const std::vector<float>& src, int64_t w) {
            dst.insert(dst.end(), src.begin() + p.t0 * w, src.begin() + p.t1 * w);
        };
        app(q, p.d->q, nk * dk);
        app(k, p.d->k, nk * dk);
        app(v, p.d->v, nv * dv);
        app(g, p.d->g, nv);
        app(beta, p.d->beta, nv);
        q_start.push_back(q_start.back() + int32_t(p.t1 - p.t0));
        slot.push_back(p.slot);
    }
    const int64_t T = q_start.back();
    std::vector<float> o(size_t(T * nv * dv));
    GdnParams gp;
    gp.n_k_heads = int(nk);
    gp.n_v_heads = int(nv);
    gp.mode = mode;
    be.gated_delta_rule(Tensor(o.data(), DType::F32, {T, nv, dv}), Tensor(q.data(), DType::F32, {T, nk, dk}),
                        Tensor(k.data(), DType::F32, {T, nk, dk}), Tensor(v.data(), DType::F32, {T, nv, dv}),
                        Tensor(g.data(), DType::F32, {T, nv}), Tensor(beta.data(), DType::F32, {T, nv}),
                        Tensor(state.data(), DType::F32, {n_slots, nv, dk, dv}),
                        SeqPlan{int(pieces.size()), q_start.data(), slot.data()}, gp);
    return o;
}

// Runs sequence A (data a, from state init) through `calls`: each call is a list of pieces, A's
// piece marked by slot 0; returns A's outputs concatenated in token order and A's final state.
struct GdnRun {
    std::vector<float> out, state;
};
GdnRun run_a(Backend& be, const std::vector<std::vector<Piece>>& calls, const std::vector<float>& init, int64_t n_slots) {
    std::vector<float> state = init;
    GdnRun r;
    for (const auto& call : calls) {
        const auto o = gdn_call(be, call, state, n_slots);
        int64_t t = 0;
        for (const Piece& p : call) {
            const int64_t n = p.t1 - p.t0, w = p.d->nv * p.d->dv;
            if (p.slot == 0) r.out.insert(r.out.end(), o.begin() + t * w, o.begin() + (t + n) * w);
            t += n;
        }
    }
    const size_t sf = calls.at(0).at(0).d->state_floats();
    r.state.assign(state.begin(), state.begin() + long(sf));
    return r;
}

void expect_same_run(const GdnRun& got, const GdnRun& want) {
    ASSERT_EQ(got.out.size(), want.out.size());
    EXPECT_TRUE(same_bits(got.out.data(), want.out.data(), want.out.size())) << "outputs";
    EXPECT_TRUE(same_bits(got.state.data(), want.state.data(), want.state.size())) << "final state";
}

// A prompt in one call equals the same prompt split at multiples of 64, with or without other
// sequences (decoding, prefilling) in the same calls; lengths 150 (partial last chunk), 129 (a
// last chunk of one token), 128 (whole chunks).
TEST(BatchInvariance, GdnPrefillSplitAtMultiplesOf64) {
    auto be = make_cpu_backend();
    const int64_t n_slots = 3;
    for (bool simd : {true, false})
        for (int64_t n : {150, 129, 128}) {
            SCOPED_TRACE(::testing::Message() << "n=" << n << (simd ? " simd" : " scalar"));
            test::SimdScope scope(simd);
            const GdnData a(n, 100), b(300, 200), c(300, 300);
            const auto init = random_floats(a.state_floats() * size_t(n_slots), 7, -0.5f, 0.5f);
            const GdnRun one = run_a(*be, {{{&a, 0, n, 0}}}, init, n_slots);
            // Split at 64 and 128 (a third piece only when n > 128).
            std::vector<std::vector<Piece>> alone = {{{&a, 0, 64, 0}}, {{&a, 64, std::min<int64_t>(128, n), 0}}};
            if (n > 128) alone.push_back({{&a, 128, n, 0}});
            expect_same_run(run_a(*be, alone, init, n_slots), one);
            // The same split batched: b decodes (1 token) or prefills around A; c sits after A.
            std::vector<std::vector<Piece>> batched = {
                {{&b, 0, 1, 1}, {&a, 0, 64, 0}, {&c, 0, 37, 2}},
                {{&a, 64, std::min<int64_t>(128, n), 0}, {&b, 1, 71, 1}},
            };
            if (n > 128) batched.push_back({{&c, 37, 38, 2}, {&b, 71, 72, 1}, {&a, 128, n, 0}});
            expect_same_run(run_a(*be, batched, init, n_slots), one);
            // Split at 64 only.
            expect_same_run(run_a(*be, {{{&a, 0, 64, 0}, {&b, 0, 5, 1}}, {{&c, 0, 130, 2}, {&a, 64, n, 0}}}, init,
                                  n_slots),
                            one);
        }
}

// Decode tokens (one per call) give the same outputs and state alone, batched with other decodes,
// batched with prefills, and in Recurrent mode; a one-token sequence in Chunked mode is the
// recurrent step.
TEST(BatchInvariance, GdnDecodeAloneOrBatched) {
    auto be = make_cpu_backend();
    const int64_t n_slots = 3;
    for (bool simd : {true, false}) {
        SCOPED_TRACE(simd ? "simd" : "scalar");
        test::SimdScope scope(simd);
        const GdnData a(134, 400), b(400, 500), c(400, 600);
        const auto init = random_floats(a.state_floats() * size_t(n_slots), 8, -0.5f, 0.5f);
        std::vector<std::vector<Piece>> alone = {{{&a, 0, 128, 0}}}, with_decodes = alone, with_prefills = alone;
        for (int64_t t = 128; t < 134; ++t) {
            alone.push_back({{&a, t, t + 1, 0}});
            with_decodes.push_back({{&b, t, t + 1, 1}, {&a, t, t + 1, 0}, {&c, t, t + 1, 2}});
            const int64_t p0 = (t - 128) * 64;  // b, c prefill 64-token chunks around the decode
            with_prefills.push_back({{&b, p0, p0 + 64, 1}, {&a, t, t + 1, 0}, {&c, p0, p0 + 3, 2}});
        }
        const GdnRun ref = run_a(*be, alone, init, n_slots);
        expect_same_run(run_a(*be, with_decodes, init, n_slots), ref);
        expect_same_run(run_a(*be, with_prefills, init, n_slots), ref);

        // Each decode step in Recurrent mode (from the state after the 128-token prefill).
        std::vector<float> st = init;
        gdn_call(*be, {{&a, 0, 128, 0}}, st, n_slots);
        std::vector<float> out;
        for (int64_t t = 128; t < 134; ++t) {
            const auto o = gdn_call(*be, {{&a, t, t + 1, 0}}, st, n_slots, GdnMode::Recurrent);
            out.insert(out.end(), o.begin(), o.end());
        }
        const size_t head = size_t(128 * a.nv * a.dv);
        ASSERT_EQ(ref.out.size(), head + out.size());
        EXPECT_TRUE(same_bits(ref.out.data() + head, out.data(), out.size())) << "chunked 1-token vs recurrent";
        EXPECT_TRUE(same_bits(ref.state.data(), st.data(), ref.state.size()));
    }
}

// ---- attention --------------------------------------------------------------------------

// Sequence A's query rows (a prefill chunk after history, then a decode) alone vs batched with
// other sequences, before and after it, with GQA (so small batches split query heads over tasks).
TEST(BatchInvariance, AttentionOfOneSequenceAloneOrBatched) {
    const int64_t n_head = 8, n_kv = 2, D = 40, bs = 16, n_blocks = 40, max_blocks = 8;
    std::vector<float> kc = random_floats(size_t(n_blocks * bs * n_kv * D), 1, -2.f, 2.f);
    std::vector<float> vc = random_floats(kc.size(), 2);
    const Tensor K(kc.data(), DType::F32, {n_blocks, bs, n_kv, D}), V(vc.data(), DType::F32, {n_blocks, bs, n_kv, D});
    // Sequences (kv_len, new tokens, first of the max_blocks blocks it owns).
    struct Seq { int kv_len, n_new, block0; };
    const Seq A1{100, 36, 0}, A2{101, 1, 0}, B{50, 1, 8}, C{20, 20, 16}, D2{64, 64, 24};
    auto be = make_cpu_backend();
    const float scale = 1.f / std::sqrt(float(D));
    // Runs the sequences (each with its q rows qs[i]) and returns the output rows of seqs[which].
    auto run = [&](const std::vector<Seq>& seqs, const std::vector<const float*>& qs, size_t which) {
        std::vector<int32_t> q_start = {0}, kv_len, table(seqs.size() * size_t(max_blocks), 0);
        for (size_t s = 0; s < seqs.size(); ++s) {
            q_start.push_back(q_start.back() + seqs[s].n_new);
            kv_len.push_back(seqs[s].kv_len);
            // A sequence's blocks go with it, not with its place in the batch (descending ids).
            for (int b = 0; b < max_blocks; ++b)
                table[s * max_blocks + size_t(b)] = int32_t(n_blocks - 1 - seqs[s].block0 - b);
        }
        const int64_t T = q_start.back();
        std::vector<float> q, out(size_t(T * n_head * D));
        for (size_t s = 0; s < seqs.size(); ++s) q.insert(q.end(), qs[s], qs[s] + seqs[s].n_new * n_head * D);
        const AttnPlan plan{int(seqs.size()), q_start.data(), kv_len.data(), table.data(), int(max_blocks), int(bs)};
        be->attention(Tensor(out.data(), DType::F32, {T, n_head, D}), Tensor(q.data(), DType::F32, {T, n_head, D}), K,
                      V, plan, scale);
        return std::vector<float>(out.begin() + q_start[which] * n_head * D, out.begin() + q_start[which + 1] * n_head * D);
    };
    const auto qa = random_floats(size_t(64 * n_head * D), 10), qo = random_floats(size_t(64 * n_head * D), 11);
    for (bool simd : {true, false}) {
        SCOPED_TRACE(simd ? "simd" : "scalar");
        test::SimdScope scope(simd);
        for (const Seq& a : {A1, A2}) {
            const auto alone = run({a}, {qa.data()}, 0);
            const auto first = run({a, B, C}, {qa.data(), qo.data(), qo.data()}, 0);
            const auto middle = run({B, a, D2}, {qo.data(), qa.data(), qo.data()}, 1);
            const auto last = run({C, B, a}, {qo.data(), qo.data(), qa.data()}, 2);
            EXPECT_TRUE(same_bits(first.data(), alone.data(), alone.size())) << "first, n_new " << a.n_new;
            EXPECT_TRUE(same_bits(middle.data(), alone.data(), alone.size())) << "middle, n_new " << a.n_new;
            EXPECT_TRUE(same_bits(last.data(), alone.data(), alone.size())) << "last, n_new " << a.n_new;
        }
    }
}

// ---- conv1d_silu and row-wise ops --------------------------------------------------------

// conv1d_silu of a sequence over [0, 150) in one call equals the split at 64 and 128, batched
// with another sequence; rms_norm of a row equals that row alone at any offset in the batch.
TEST(BatchInvariance, ConvAndRowOpsAloneOrBatched) {
    auto be = make_cpu_backend();
    const int64_t C = 300, Kc = 4, n = 150;
    const auto w = random_floats(size_t(C * Kc), 1);
    const auto xa = random_floats(size_t(n * C), 2, -2.f, 2.f), xb = random_floats(size_t(100 * C), 3, -2.f, 2.f);
    const auto init = random_floats(size_t(2 * (Kc - 1) * C), 4);
    // pieces: (is_a, t0, t1); A uses slot 0, B slot 1. Returns A's outputs in order.
    using P = std::tuple<bool, int64_t, int64_t>;
    auto run = [&](const std::vector<std::vector<P>>& calls) {
        std::vector<float> state = init, out;
        for (const auto& call : calls) {
            std::vector<float> x;
            std::vector<int32_t> q_start = {0}, slot;
            for (const auto& [is_a, t0, t1] : call) {
                const auto& src = is_a ? xa : xb;
                x.insert(x.end(), src.begin() + t0 * C, src.begin() + t1 * C);
                q_start.push_back(q_start.back() + int32_t(t1 - t0));
                slot.push_back(is_a ? 0 : 1);
            }
            const int64_t T = q_start.back();
            std::vector<float> y(size_t(T * C));
            be->conv1d_silu(Tensor(y.data(), DType::F32, {T, C}), Tensor(x.data(), DType::F32, {T, C}),
                            Tensor(const_cast<float*>(w.data()), DType::F32, {C, Kc}),
                            Tensor(state.data(), DType::F32, {2, Kc - 1, C}),
                            SeqPlan{int(call.size()), q_start.data(), slot.data()});
            for (size_t i = 0; i < call.size(); ++i)
                if (std::get<0>(call[i])) out.insert(out.end(), y.begin() + q_start[i] * C, y.begin() + q_start[i + 1] * C);
        }
        out.insert(out.end(), state.begin(), state.begin() + (Kc - 1) * C);  // A's final state
        return out;
    };
    const auto one = run({{P{true, 0, n}}});
    const auto split = run({{P{false, 0, 1}, P{true, 0, 64}}, {P{true, 64, 128}, P{false, 1, 60}}, {P{false, 60, 61}, P{true, 128, n}}});
    EXPECT_TRUE(same_bits(split.data(), one.data(), one.size()));

    // rms_norm: row r of a batch vs that row alone (the batch shifts rows to odd float offsets).
    const int64_t H = 203, T = 9;
    const auto x = random_floats(size_t(T * H), 5, -3.f, 3.f), nw = random_floats(size_t(H), 6);
    std::vector<float> y(size_t(T * H)), one_row(static_cast<size_t>(H));
    const Tensor wt(const_cast<float*>(nw.data()), DType::F32, {H});
    be->rms_norm(Tensor(y.data(), DType::F32, {T, H}), Tensor(const_cast<float*>(x.data()), DType::F32, {T, H}), wt, 1e-6f);
    for (int64_t r = 0; r < T; ++r) {
        std::vector<float> xr(x.begin() + r * H, x.begin() + (r + 1) * H);
        be->rms_norm(Tensor(one_row.data(), DType::F32, {1, H}), Tensor(xr.data(), DType::F32, {1, H}), wt, 1e-6f);
        EXPECT_TRUE(same_bits(one_row.data(), y.data() + r * H, size_t(H))) << "row " << r;
    }
}

}  // namespace
