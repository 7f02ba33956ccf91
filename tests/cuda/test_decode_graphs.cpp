// CUDA-graph decode: padding sequences on the GPU behave as on the CPU (the plan contract), and a
// model replaying recorded decode steps gives the logits of plain op-by-op steps on every fixture
// architecture, across batch-size buckets (padded and exact), growing contexts and block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "models/decode_graphs.h"
#include "runtime/model_loader.h"
#include "runtime/session.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

#include "../fixture_ref.h"

using namespace tessera;

namespace {

// A device copy of host floats, freed with the holder.
struct Dev {
    Backend& be;
    std::vector<void*> ptrs;
    explicit Dev(Backend& b) : be(b) {}
    ~Dev() {
        be.synchronize();
        for (void* p : ptrs) be.memory().deallocate(p);
    }
    template <typename T>
    T* put(const std::vector<T>& h) {
        void* p = be.memory().allocate(h.size() * sizeof(T));
        be.copy_in(p, h.data(), h.size() * sizeof(T));
        ptrs.push_back(p);
        return static_cast<T*>(p);
    }
    template <typename T>
    std::vector<T> get(const T* d, size_t n) {
        std::vector<T> h(n);
        be.copy_out(h.data(), d, n * sizeof(T));
        return h;
    }
};

std::vector<float> rnd(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    return reftest::random_rows(1, int64_t(n), int64_t(n), seed, lo, hi);
}

double max_rel(const std::vector<float>& got, const std::vector<float>& want) {
    return fixtures::rel_err(got.data(), want.data(), want.size());
}

}  // namespace

// One plan, three sequences: a real one, a padding one (slot -1 / kv_len 0) and another real one;
// the GPU's conv, delta rule and attention outputs and states equal the CPU's.
TEST(DecodeGraphs, PaddingSequencesMatchTheCpu) {
    REQUIRE_CUDA();
    auto cpu = make_cpu_backend();
    auto gpu = make_cuda_backend();
    Dev d(*gpu);
    const int64_t T = 3, C = 40, K = 4, nk = 2, nv = 4, dk = 32, dv = 32;
    const std::vector<int32_t> q_start = {0, 1, 2, 3}, slot = {2, -1, 0};
    const auto x = rnd(size_t(T * C), 1), w = rnd(size_t(C * K), 2), conv0 = rnd(size_t(3 * (K - 1) * C), 3);
    // conv1d_silu
    {
        std::vector<float> y(size_t(T * C)), st = conv0;
        cpu->conv1d_silu(Tensor(y.data(), DType::F32, {T, C}), Tensor(const_cast<float*>(x.data()), DType::F32, {T, C}),
                         Tensor(const_cast<float*>(w.data()), DType::F32, {C, K}),
                         Tensor(st.data(), DType::F32, {3, K - 1, C}), SeqPlan{3, q_start.data(), slot.data()});
        float *dy = d.put(std::vector<float>(y.size())), *dst = d.put(conv0);
        gpu->conv1d_silu(Tensor(dy, DType::F32, {T, C}, Device::CUDA),
                         Tensor(d.put(x), DType::F32, {T, C}, Device::CUDA),
                         Tensor(d.put(w), DType::F32, {C, K}, Device::CUDA),
                         Tensor(dst, DType::F32, {3, K - 1, C}, Device::CUDA),
                         SeqPlan{3, d.put(q_start), d.put(slot)});
        EXPECT_LT(max_rel(d.get(dy, y.size()), y), 1e-6);
        EXPECT_EQ(d.get(dst, st.size()), st);
    }
    // gated_delta_rule
    {
        const int64_t per = nv * dk * dv;
        const auto q = rnd(size_t(T * nk * dk), 4, -.2f, .2f), k = rnd(size_t(T * nk * dk), 5, -.2f, .2f);
        const auto v = rnd(size_t(T * nv * dv), 6), g = rnd(size_t(T * nv), 7, -1.f, 0.f), b = rnd(size_t(T * nv), 8, 0.f, 1.f);
        const auto s0 = rnd(size_t(3 * per), 9, -.5f, .5f);
        GdnParams p;
        p.n_k_heads = int(nk);
        p.n_v_heads = int(nv);
        p.mode = GdnMode::Chunked;
        auto call = [&](Backend& be, Device dev, float* o, const float* qq, const float* kk, const float* vv,
                        const float* gg, const float* bb, float* st, const int32_t* qs, const int32_t* sl) {
            auto t = [&](const float* ptr, std::initializer_list<int64_t> shape) {
                return Tensor(const_cast<float*>(ptr), DType::F32, shape, dev);
            };
            be.gated_delta_rule(t(o, {T, nv, dv}), t(qq, {T, nk, dk}), t(kk, {T, nk, dk}), t(vv, {T, nv, dv}),
                                t(gg, {T, nv}), t(bb, {T, nv}), t(st, {3, nv, dk, dv}), SeqPlan{3, qs, sl}, p);
        };
        std::vector<float> o(size_t(T * nv * dv)), st = s0;
        call(*cpu, Device::CPU, o.data(), q.data(), k.data(), v.data(), g.data(), b.data(), st.data(), q_start.data(),
             slot.data());
        float *dout = d.put(std::vector<float>(o.size())), *dst = d.put(s0);
        call(*gpu, Device::CUDA, dout, d.put(q), d.put(k), d.put(v), d.put(g), d.put(b), dst, d.put(q_start),
             d.put(slot));
        EXPECT_LT(max_rel(d.get(dout, o.size()), o), 1e-5);
        EXPECT_LT(max_rel(d.get(dst, st.size()), st), 1e-5);
        const auto slot1 = d.get(dst + per, size_t(per));  // no sequence's slot: untouched
        EXPECT_TRUE(std::equal(slot1.begin(), slot1.end(), s0.begin() + per));
    }
    // attention: the padding sequence's rows are zero, the others as on the CPU
    {
        const int64_t nh = 4, nkv = 2, D = 64, bs = 16, nb = 4;
        const auto kc = rnd(size_t(nb * bs * nkv * D), 10), vc = rnd(kc.size(), 11), q = rnd(size_t(T * nh * D), 12);
        const std::vector<int32_t> kv_len = {20, 0, 5}, table = {3, 1, 0, 0, 2, 0};
        std::vector<float> o(size_t(T * nh * D), 9.f);
        auto call = [&](Backend& be, Device dev, float* out, const float* qq, const float* kk, const float* vv,
                        const int32_t* qs, const int32_t* kl, const int32_t* tb) {
            auto t = [&](const float* ptr, std::initializer_list<int64_t> shape) {
                return Tensor(const_cast<float*>(ptr), DType::F32, shape, dev);
            };
            be.attention(t(out, {T, nh, D}), t(qq, {T, nh, D}), t(kk, {nb, bs, nkv, D}), t(vv, {nb, bs, nkv, D}),
                         AttnPlan{3, qs, kl, tb, 2, int(bs)}, 0.125f);
        };
        call(*cpu, Device::CPU, o.data(), q.data(), kc.data(), vc.data(), q_start.data(), kv_len.data(), table.data());
        float* dout = d.put(std::vector<float>(o.size(), 9.f));
        call(*gpu, Device::CUDA, dout, d.put(q), d.put(kc), d.put(vc), d.put(q_start), d.put(kv_len), d.put(table));
        const auto got = d.get(dout, o.size());
        EXPECT_LT(max_rel(got, o), 1e-5);
        for (int64_t i = nh * D; i < 2 * nh * D; ++i) ASSERT_EQ(got[size_t(i)], 0.f);
    }
}

class DecodeGraphFixture : public ::testing::TestWithParam<const char*> {};

// The same steps on two copies of a fixture model, one replaying recorded decode steps and one
// running them op by op: 3 sequences (bucket 4: one padding sequence), then 8 (bucket 8), then
// 1, over contexts that cross block-table widths (8 → 16 blocks of 4 tokens).
TEST_P(DecodeGraphFixture, ReplayedStepsGiveThePlainLogits) {
    REQUIRE_CUDA();
    const fixtures::FixtureRef ref = fixtures::load_fixture(GetParam());
    LoadOptions with, without;
    with.device = without.device = "cuda";
    with.max_batch_tokens = without.max_batch_tokens = 64;
    without.decode_graphs = false;
    LoadedModel a = load_model(ref.dir, with), b = load_model(ref.dir, without);
    ASSERT_NE(a.model->decode_graphs(), nullptr);
    ASSERT_EQ(b.model->decode_graphs(), nullptr);
    const int64_t V = a.config.vocab_size;
    Session sa(*a.model, 256, 4, 8), sb(*b.model, 256, 4, 8);
    std::vector<int> ids;
    const auto prompt = ref.ids("a");
    for (int i = 0; i < 8; ++i) {
        ids.push_back(sa.add_sequence());
        ASSERT_EQ(sb.add_sequence(), ids.back());
        // Prompts of different lengths (the first tokens of prompt a, rotated).
        std::vector<int32_t> p(prompt.begin(), prompt.begin() + long(std::min<size_t>(prompt.size(), 5 + 3 * i)));
        EXPECT_LT(fixtures::rel_err(sa.feed(ids.back(), p).data(), sb.feed(ids.back(), p).data(), size_t(V)), 1e-6);
    }
    auto step = [&](const std::vector<int>& seqs, int t) {
        std::vector<int32_t> toks;
        for (int s : seqs) toks.push_back(int32_t((7 * s + 3 * t) % V));
        const auto la = sa.decode(seqs, toks), lb = sb.decode(seqs, toks);
        return fixtures::rel_err(la.data(), lb.data(), la.size());
    };
    for (int t = 0; t < 24; ++t) EXPECT_LT(step({ids[0], ids[1], ids[2]}, t), 1e-5) << "3 seqs, step " << t;
    for (int t = 0; t < 6; ++t) EXPECT_LT(step(ids, t), 1e-5) << "8 seqs, step " << t;
    for (int t = 0; t < 6; ++t) EXPECT_LT(step({ids[5]}, t), 1e-5) << "1 seq, step " << t;
    const DecodeGraphs::Stats& st = a.model->decode_graphs()->stats();
    EXPECT_FALSE(a.model->decode_graphs()->disabled());
    EXPECT_GT(st.replays, 30);
    EXPECT_GE(st.recordings, 3);  // buckets 1, 4 and 8, at least once each
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeGraphFixture,
                         ::testing::Values("qwen3_tiny", "llama_tiny", "qwen35moe_tiny", "qwen3next_tiny"));

TEST(DecodeGraphs, Buckets) {
    EXPECT_EQ(DecodeGraphs::bucket_for(1), 1);
    EXPECT_EQ(DecodeGraphs::bucket_for(3), 4);
    EXPECT_EQ(DecodeGraphs::bucket_for(8), 8);
    EXPECT_EQ(DecodeGraphs::bucket_for(9), 16);
    EXPECT_EQ(DecodeGraphs::bucket_for(256), 256);
    EXPECT_EQ(DecodeGraphs::bucket_for(257), 0);
    EXPECT_EQ(DecodeGraphs::table_width_for(1), 8);
    EXPECT_EQ(DecodeGraphs::table_width_for(9), 16);
    EXPECT_EQ(DecodeGraphs::table_width_for(16), 16);
}
