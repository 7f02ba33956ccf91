// The fused q/k norm + RoPE + KV store (fast_qk_prep.h, the fast backend's qk_norm_rope_store)
// against the reference backend running the same op as its parts (rms_norm ×2, rope ×2,
// kv_store) on identical device inputs: q (gated layout: heads 2·D apart) and k normed and
// rotated in place, k and v in f16 and f32 caches at shuffled slots with padding (-1) and a slot
// past the cache (both skipped: those cache rows keep their old values). Head dims 64 / 96 / 128
// / 256, NeoX partial and full, GPT-J, llama3 scaling, with and without each norm, 1 / 3 / 17
// tokens at small and large positions. Tolerance 1e-5 · max(1, |ref|) (the norm's sum of squares
// is summed in another order); f16 cache rows to 1e-3. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/fast_qk_prep.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;

namespace {

struct PrepCase {
    std::string name;
    int64_t nh, nkv, D;
    RopeParams rope;
    bool q_norm, k_norm;
};

std::vector<PrepCase> cases() {
    RopeParams partial;
    partial.rot_dims = 64;
    partial.theta = 1e7f;
    RopeParams full;
    RopeParams gptj;
    gptj.style = RopeStyle::GptJ;
    RopeParams two = full;
    two.rot_dims = 2;
    RopeParams llama3;
    llama3.theta = 500000.f;
    llama3.llama3_factor = 8.f;
    return {{"flagship: 16/2 heads of 256, 64 rotated", 16, 2, 256, partial, true, true},
            {"neox full 128, k norm only", 8, 2, 128, full, false, true},
            {"gptj 64, no norms", 4, 4, 64, gptj, false, false},
            {"96 dims, 2 rotated", 6, 3, 96, two, true, true},
            {"llama3 scaled 128", 32, 8, 128, llama3, true, false}};
}

void run_case(const PrepCase& c, DType cache_dtype, int64_t T) {
    auto fast = make_cuda_backend(0, CudaKernels::Fast), ref = make_cuda_backend(0, CudaKernels::Reference);
    const int64_t D = c.D, nh = c.nh, nkv = c.nkv, qw = 2 * nh * D, row = qw + 2 * nkv * D;
    const std::vector<float> qkv = random_rows(T, row, row, uint32_t(D + T + nh), -3.f, 3.f);
    std::vector<float> qn(static_cast<size_t>(D)), kn(static_cast<size_t>(D));
    std::mt19937 rng(uint32_t(D * 3 + T));
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    for (auto* w : {&qn, &kn})
        for (auto& x : *w) x = u(rng);
    std::vector<int32_t> pos(static_cast<size_t>(T)), slot(static_cast<size_t>(T));
    const int64_t n_blocks = 5, bs = 4, n_slots = n_blocks * bs;
    std::vector<int32_t> order(static_cast<size_t>(n_slots));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t t = 0; t < T; ++t) {
        pos[size_t(t)] = int32_t(t == 1 ? 1000003 : 7 * t + 3);
        slot[size_t(t)] = t == 2 ? -1 : t == 4 ? int32_t(n_slots) : order[size_t(t % n_slots)];
    }
    const size_t es = cache_dtype == DType::F16 ? 2 : 4, cache_elems = size_t(n_slots * nkv * D);
    std::vector<uint8_t> pattern(cache_elems * es);
    for (size_t i = 0; i < cache_elems; ++i) {
        const float x = float(int(i % 97)) * 0.25f - 12.f;
        if (es == 2) reinterpret_cast<uint16_t*>(pattern.data())[i] = f32_to_f16(x);
        else reinterpret_cast<float*>(pattern.data())[i] = x;
    }

    struct Out {
        std::vector<float> qkv, k_cache, v_cache;
    };
    auto run = [&](Backend& be) {
        MemoryResource& m = be.memory();
        void* d_qkv = m.allocate(qkv.size() * 4);
        void* d_qn = m.allocate(size_t(D) * 4);
        void* d_kn = m.allocate(size_t(D) * 4);
        void* d_pos = m.allocate(size_t(T) * 4);
        void* d_slot = m.allocate(size_t(T) * 4);
        void* d_kc = m.allocate(pattern.size());
        void* d_vc = m.allocate(pattern.size());
        be.copy_in(d_qkv, qkv.data(), qkv.size() * 4);
        be.copy_in(d_qn, qn.data(), qn.size() * 4);
        be.copy_in(d_kn, kn.data(), kn.size() * 4);
        be.copy_in(d_pos, pos.data(), pos.size() * 4);
        be.copy_in(d_slot, slot.data(), slot.size() * 4);
        be.copy_in(d_kc, pattern.data(), pattern.size());
        be.copy_in(d_vc, pattern.data(), pattern.size());
        float* p = static_cast<float*>(d_qkv);
        Tensor q3 = heads_view(p, T, nh, D, row, 2 * D), k3 = heads_view(p + qw, T, nkv, D, row, D),
               v3 = heads_view(p + qw + nkv * D, T, nkv, D, row, D);
        for (Tensor* t : {&q3, &k3, &v3}) t->device = Device::CUDA;
        Tensor qnt(d_qn, DType::F32, {D}, Device::CUDA), knt(d_kn, DType::F32, {D}, Device::CUDA);
        Tensor kc(d_kc, cache_dtype, {n_blocks, bs, nkv, D}, Device::CUDA),
            vc(d_vc, cache_dtype, {n_blocks, bs, nkv, D}, Device::CUDA);
        be.qk_norm_rope_store(q3, k3, v3, c.q_norm ? qnt : Tensor(), c.k_norm ? knt : Tensor(), 1e-6f,
                              static_cast<const int32_t*>(d_pos), c.rope, kc, vc, static_cast<const int32_t*>(d_slot));
        Out o;
        o.qkv.resize(qkv.size());
        be.copy_out(o.qkv.data(), d_qkv, qkv.size() * 4);
        std::vector<uint8_t> kb(pattern.size()), vb(pattern.size());
        be.copy_out(kb.data(), d_kc, kb.size());
        be.copy_out(vb.data(), d_vc, vb.size());
        for (auto [src, dst] : {std::pair{&kb, &o.k_cache}, std::pair{&vb, &o.v_cache}}) {
            dst->resize(cache_elems);
            for (size_t i = 0; i < cache_elems; ++i)
                (*dst)[i] = es == 2 ? f16_to_f32(reinterpret_cast<const uint16_t*>(src->data())[i])
                                    : reinterpret_cast<const float*>(src->data())[i];
        }
        for (void* d : {d_qkv, d_qn, d_kn, d_pos, d_slot, d_kc, d_vc}) m.deallocate(d);
        return o;
    };
    const Out got = run(*fast), want = run(*ref);
    expect_close(got.qkv, want.qkv, 1e-5, "q | k | v");
    const double cache_tol = cache_dtype == DType::F16 ? 1e-3 : 1e-5;
    expect_close(got.k_cache, want.k_cache, cache_tol, "k cache");
    expect_close(got.v_cache, want.v_cache, cache_tol, "v cache");
    // The op did something: a stored row differs from the pattern, a skipped slot's does not.
    bool stored = false;
    for (size_t i = 0; i < cache_elems && !stored; ++i) {
        const float x = float(int(i % 97)) * 0.25f - 12.f;
        stored = want.v_cache[i] != x;
    }
    EXPECT_TRUE(stored);
}

}  // namespace

TEST(FastQkPrep, MatchesTheOpsInOrder) {
    REQUIRE_CUDA();
    for (const PrepCase& c : cases())
        for (DType dt : {DType::F16, DType::F32})
            for (int64_t T : {1, 3, 17}) {
                SCOPED_TRACE(c.name + " " + dtype_name(dt) + " T=" + std::to_string(T));
                ASSERT_TRUE(cuda::fast::qk_prep_supported(c.D, c.rope.rot_dims > 0 ? c.rope.rot_dims : int(c.D)));
                run_case(c, dt, T);
            }
}

TEST(FastQkPrep, Supported) {  // host logic: no GPU needed
    using cuda::fast::qk_prep_supported;
    EXPECT_TRUE(qk_prep_supported(256, 64));
    EXPECT_TRUE(qk_prep_supported(32, 32));
    EXPECT_TRUE(qk_prep_supported(512, 2));
    EXPECT_FALSE(qk_prep_supported(80, 64));   // not a multiple of 32
    EXPECT_FALSE(qk_prep_supported(288, 64));  // 9 × 32: not instantiated
    EXPECT_FALSE(qk_prep_supported(128, 3));   // odd rotation
    EXPECT_FALSE(qk_prep_supported(128, 130)); // more rotated dims than D
    cuda::fast::QkPrep a;
    a.D = 80;
    a.rot = 64;
    EXPECT_THROW(cuda::fast::qk_prep(a, nullptr), Error);
}
