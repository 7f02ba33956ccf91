// Padding sequences in a step plan (what CUDA graphs fill a batch-size bucket with): state slot
// -1 starts the conv and the delta rule from zeros and writes no state back; kv_len 0 attends to
// nothing and outputs zeros. The real sequences of the batch are unaffected.
#include <gtest/gtest.h>

#include <vector>

#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

constexpr float kPoison = 123.5f;  // state slots a padding sequence must not touch

TEST(Padding, Conv1dSlotMinusOneStartsFromZerosAndKeepsNothing) {
    auto be = make_cpu_backend();
    const int64_t C = 9, K = 4, T = 3;  // sequence 0: tokens 0..1 (slot 1); sequence 1: token 2 (padding)
    auto x = random_floats(size_t(T * C), 1, -2.f, 2.f);
    auto w = random_floats(size_t(C * K), 2, -1.f, 1.f);
    std::vector<float> state(size_t(2 * (K - 1) * C), kPoison);
    auto init1 = random_floats(size_t((K - 1) * C), 3);
    std::copy(init1.begin(), init1.end(), state.begin() + (K - 1) * C);
    std::vector<float> y(size_t(T * C));
    const int32_t q_start[] = {0, 2, 3}, slot[] = {1, -1};
    be->conv1d_silu(Tensor(y.data(), DType::F32, {T, C}), Tensor(x.data(), DType::F32, {T, C}),
                    Tensor(w.data(), DType::F32, {C, K}), Tensor(state.data(), DType::F32, {2, K - 1, C}),
                    SeqPlan{2, q_start, slot});
    for (int64_t i = 0; i < (K - 1) * C; ++i) ASSERT_EQ(state[size_t(i)], kPoison) << "slot 0 was written";

    // The same tokens alone: sequence 0 from its state, the padding token from a zero state.
    std::vector<float> s0(init1), zeros(size_t((K - 1) * C), 0.f), y0(static_cast<size_t>(2 * C)), y1(static_cast<size_t>(C));
    const int32_t qs0[] = {0, 2}, qs1[] = {0, 1}, sl0[] = {0};
    be->conv1d_silu(Tensor(y0.data(), DType::F32, {2, C}), Tensor(x.data(), DType::F32, {2, C}),
                    Tensor(w.data(), DType::F32, {C, K}), Tensor(s0.data(), DType::F32, {1, K - 1, C}),
                    SeqPlan{1, qs0, sl0});
    be->conv1d_silu(Tensor(y1.data(), DType::F32, {1, C}), Tensor(x.data() + 2 * C, DType::F32, {1, C}),
                    Tensor(w.data(), DType::F32, {C, K}), Tensor(zeros.data(), DType::F32, {1, K - 1, C}),
                    SeqPlan{1, qs1, sl0});
    for (int64_t i = 0; i < 2 * C; ++i) EXPECT_EQ(y[size_t(i)], y0[size_t(i)]);
    for (int64_t i = 0; i < C; ++i) EXPECT_EQ(y[size_t(2 * C + i)], y1[size_t(i)]);
    for (int64_t i = 0; i < (K - 1) * C; ++i) EXPECT_EQ(state[size_t((K - 1) * C + i)], s0[size_t(i)]);
}

TEST(Padding, DeltaRuleSlotMinusOneStartsFromZerosAndKeepsNothing) {
    auto be = make_cpu_backend();
    const int64_t nk = 2, nv = 4, dk = 8, dv = 8, T = 3, per_slot = nv * dk * dv;
    auto q = random_floats(size_t(T * nk * dk), 1), k = random_floats(size_t(T * nk * dk), 2);
    auto v = random_floats(size_t(T * nv * dv), 3), g = random_floats(size_t(T * nv), 4, -1.f, 0.f);
    auto beta = random_floats(size_t(T * nv), 5, 0.f, 1.f);
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
        GdnParams p;
        p.n_k_heads = nk;
        p.n_v_heads = nv;
        p.mode = mode;
        std::vector<float> state(size_t(2 * per_slot), kPoison);
        auto init0 = random_floats(size_t(per_slot), 6, -0.5f, 0.5f);
        std::copy(init0.begin(), init0.end(), state.begin() + per_slot);
        std::vector<float> o(size_t(T * nv * dv));
        // Sequence 0: padding, token 0; sequence 1: tokens 1..2 in slot 1.
        const int32_t q_start[] = {0, 1, 3}, slot[] = {-1, 1};
        auto run = [&](float* out, int64_t t0, int64_t n, float* st, const int32_t* qs, const int32_t* sl, int ns) {
            be->gated_delta_rule(Tensor(out, DType::F32, {n, nv, dv}), Tensor(q.data() + t0 * nk * dk, DType::F32, {n, nk, dk}),
                                 Tensor(k.data() + t0 * nk * dk, DType::F32, {n, nk, dk}),
                                 Tensor(v.data() + t0 * nv * dv, DType::F32, {n, nv, dv}),
                                 Tensor(g.data() + t0 * nv, DType::F32, {n, nv}),
                                 Tensor(beta.data() + t0 * nv, DType::F32, {n, nv}),
                                 Tensor(st, DType::F32, {int64_t(ns), nv, dk, dv}), SeqPlan{int(ns), qs, sl}, p);
        };
        run(o.data(), 0, T, state.data(), q_start, slot, 2);
        for (int64_t i = 0; i < per_slot; ++i) ASSERT_EQ(state[size_t(i)], kPoison) << "slot 0 was written";

        std::vector<float> zeros(size_t(per_slot), 0.f), s1(init0), o0(static_cast<size_t>(nv * dv)), o1(static_cast<size_t>(2 * nv * dv));
        const int32_t qs_a[] = {0, 1}, qs_b[] = {0, 2}, sl[] = {0};
        run(o0.data(), 0, 1, zeros.data(), qs_a, sl, 1);
        run(o1.data(), 1, 2, s1.data(), qs_b, sl, 1);
        for (int64_t i = 0; i < nv * dv; ++i) EXPECT_EQ(o[size_t(i)], o0[size_t(i)]);
        for (int64_t i = 0; i < 2 * nv * dv; ++i) EXPECT_EQ(o[size_t(nv * dv + i)], o1[size_t(i)]);
        for (int64_t i = 0; i < per_slot; ++i) EXPECT_EQ(state[size_t(per_slot + i)], s1[size_t(i)]);
    }
}

TEST(Padding, AttentionKvLenZeroOutputsZeros) {
    auto be = make_cpu_backend();
    const int64_t n_head = 4, n_kv = 2, D = 16, bs = 4, n_blocks = 3, T = 2;
    auto kc = random_floats(size_t(n_blocks * bs * n_kv * D), 1), vc = random_floats(kc.size(), 2);
    auto q = random_floats(size_t(T * n_head * D), 3);
    std::vector<float> out(size_t(T * n_head * D), kPoison);
    // Sequence 0: one real token at position 5 (blocks 2, 0); sequence 1: padding.
    const int32_t q_start[] = {0, 1, 2}, kv_len[] = {6, 0}, table[] = {2, 0, 0, 0};
    const AttnPlan plan{2, q_start, kv_len, table, 2, int(bs)};
    auto cache = [&](std::vector<float>& c) { return Tensor(c.data(), DType::F32, {n_blocks, bs, n_kv, D}); };
    be->attention(Tensor(out.data(), DType::F32, {T, n_head, D}), Tensor(q.data(), DType::F32, {T, n_head, D}),
                  cache(kc), cache(vc), plan, 0.25f);
    std::vector<float> alone(static_cast<size_t>(n_head * D));
    const int32_t qs1[] = {0, 1};
    be->attention(Tensor(alone.data(), DType::F32, {1, n_head, D}), Tensor(q.data(), DType::F32, {1, n_head, D}),
                  cache(kc), cache(vc), AttnPlan{1, qs1, kv_len, table, 2, int(bs)}, 0.25f);
    for (int64_t i = 0; i < n_head * D; ++i) EXPECT_EQ(out[size_t(i)], alone[size_t(i)]);
    for (int64_t i = 0; i < n_head * D; ++i) EXPECT_EQ(out[size_t(n_head * D + i)], 0.f);
}

}  // namespace
