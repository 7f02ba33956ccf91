// kv_store and causal GQA attention over a paged cache: several sequences with different context
// lengths and new-token counts in one call, block_size 16 with shuffled block tables, GQA ratios
// 1/2/8, f32 and f16 caches, SIMD and scalar — against a double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/half.h"
#include "core/status.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"

using namespace tessera;
using test::random_floats;

namespace {

struct Cache {
    DType dtype;
    int64_t n_blocks, bs, n_kv, D;
    std::vector<uint8_t> bytes;
    Cache(DType t, int64_t nb, int64_t b, int64_t nk, int64_t d)
        : dtype(t), n_blocks(nb), bs(b), n_kv(nk), D(d), bytes(size_t(nb * b * nk * d) * (t == DType::F32 ? 4 : 2)) {}
    Tensor tensor() { return Tensor(bytes.data(), dtype, {n_blocks, bs, n_kv, D}); }
    size_t index(int64_t slot, int64_t h, int64_t i) const { return size_t((slot * n_kv + h) * D + i); }
    void put(int64_t slot, int64_t h, int64_t i, float v) {
        if (dtype == DType::F32) {
            reinterpret_cast<float*>(bytes.data())[index(slot, h, i)] = v;
        } else {
            reinterpret_cast<uint16_t*>(bytes.data())[index(slot, h, i)] = f32_to_f16(v);
        }
    }
    float get(int64_t slot, int64_t h, int64_t i) const {
        if (dtype == DType::F32) return reinterpret_cast<const float*>(bytes.data())[index(slot, h, i)];
        return f16_to_f32(reinterpret_cast<const uint16_t*>(bytes.data())[index(slot, h, i)]);
    }
};

// What a value becomes once stored in a cache of type t.
float stored(DType t, float v) { return t == DType::F32 ? v : f16_to_f32(f32_to_f16(v)); }

void check_attention(int64_t n_head, int64_t n_kv, int64_t D, DType cache_t, bool simd) {
    SCOPED_TRACE(::testing::Message() << "heads " << n_head << "/" << n_kv << " D=" << D << " " << dtype_name(cache_t)
                                      << (simd ? " simd" : " scalar"));
    test::SimdScope scope(simd);
    const int64_t bs = 16, n_blocks = 24, max_blocks = 5;
    // (kv_len, new tokens): a first token, a chunk after history, a whole prompt, a decode.
    const std::vector<std::pair<int, int>> seqs = {{1, 1}, {37, 5}, {20, 20}, {70, 1}};
    const int n_seqs = int(seqs.size());
    std::vector<int32_t> q_start = {0}, kv_len, table(size_t(n_seqs * max_blocks), -1);
    std::vector<int32_t> perm(static_cast<size_t>(n_blocks));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(42));
    int next = 0;
    for (int s = 0; s < n_seqs; ++s) {
        kv_len.push_back(seqs[size_t(s)].first);
        q_start.push_back(q_start.back() + seqs[size_t(s)].second);
        for (int b = 0; b < (seqs[size_t(s)].first + bs - 1) / bs; ++b) table[size_t(s * max_blocks + b)] = perm[size_t(next++)];
    }
    const int64_t T = q_start.back();

    Cache kc(cache_t, n_blocks, bs, n_kv, D), vc(cache_t, n_blocks, bs, n_kv, D);
    // kv[s][p][h][i], the values each sequence has cached (rounded as the cache stores them).
    std::vector<std::vector<float>> kref(static_cast<size_t>(n_seqs)), vref(static_cast<size_t>(n_seqs));
    for (int s = 0; s < n_seqs; ++s) {
        const int len = seqs[size_t(s)].first;
        kref[size_t(s)] = random_floats(size_t(len * n_kv * D), uint64_t(100 + s), -2.f, 2.f);
        vref[size_t(s)] = random_floats(size_t(len * n_kv * D), uint64_t(200 + s));
        for (int p = 0; p < len; ++p) {
            const int64_t slot = int64_t(table[size_t(s * max_blocks + p / bs)]) * bs + p % bs;
            for (int64_t h = 0; h < n_kv; ++h)
                for (int64_t i = 0; i < D; ++i) {
                    const size_t j = size_t((p * n_kv + h) * D + i);
                    kc.put(slot, h, i, kref[size_t(s)][j]);
                    vc.put(slot, h, i, vref[size_t(s)][j]);
                    kref[size_t(s)][j] = stored(cache_t, kref[size_t(s)][j]);
                    vref[size_t(s)][j] = stored(cache_t, vref[size_t(s)][j]);
                }
        }
    }
    auto q = random_floats(size_t(T * n_head * D), 7, -2.f, 2.f);
    std::vector<float> out(q.size(), NAN);
    AttnPlan plan;
    plan.n_seqs = n_seqs;
    plan.q_start = q_start.data();
    plan.kv_len = kv_len.data();
    plan.block_table = table.data();
    plan.max_blocks = int(max_blocks);
    plan.block_size = int(bs);
    const float scale = 1.f / std::sqrt(float(D));
    make_cpu_backend()->attention(Tensor(out.data(), DType::F32, {T, n_head, D}),
                                  Tensor(q.data(), DType::F32, {T, n_head, D}), kc.tensor(), vc.tensor(), plan, scale);

    const int64_t group = n_head / n_kv;
    for (int s = 0; s < n_seqs; ++s)
        for (int t = q_start[size_t(s)]; t < q_start[size_t(s) + 1]; ++t) {
            const int pos = kv_len[size_t(s)] - (q_start[size_t(s) + 1] - q_start[size_t(s)]) + (t - q_start[size_t(s)]);
            for (int64_t h = 0; h < n_head; ++h) {
                const int64_t kvh = h / group;
                const float* qh = &q[size_t((t * n_head + h) * D)];
                std::vector<double> sc(size_t(pos + 1));
                for (int p = 0; p <= pos; ++p) {
                    double d = 0;
                    for (int64_t i = 0; i < D; ++i) d += double(qh[i]) * kref[size_t(s)][size_t((p * n_kv + kvh) * D + i)];
                    sc[size_t(p)] = d * scale;
                }
                const double m = *std::max_element(sc.begin(), sc.end());
                double sum = 0;
                for (auto& v : sc) sum += (v = std::exp(v - m));
                for (int64_t i = 0; i < D; ++i) {
                    double o = 0;
                    for (int p = 0; p <= pos; ++p) o += sc[size_t(p)] * vref[size_t(s)][size_t((p * n_kv + kvh) * D + i)];
                    ASSERT_NEAR(out[size_t((t * n_head + h) * D + i)], o / sum, 2e-5) << "t=" << t << " h=" << h << " i=" << i;
                }
            }
        }
}

TEST(Attention, PagedMultiSequenceGqa) {
    for (DType ct : {DType::F32, DType::F16})
        for (bool simd : {true, false}) {
            check_attention(4, 4, 16, ct, simd);   // GQA ratio 1
            check_attention(8, 4, 20, ct, simd);   // ratio 2, D not a multiple of 8
            check_attention(16, 2, 64, ct, simd);  // ratio 8
        }
}

TEST(Attention, RejectsBadPlans) {
    auto be = make_cpu_backend();
    std::vector<float> kc(4 * 16 * 2 * 8), vc(kc.size()), q(3 * 4 * 8), out(q.size());
    Tensor K(kc.data(), DType::F32, {4, 16, 2, 8}), V(vc.data(), DType::F32, {4, 16, 2, 8});
    Tensor Q(q.data(), DType::F32, {3, 4, 8}), O(out.data(), DType::F32, {3, 4, 8});
    std::vector<int32_t> q_start = {0, 3}, kv_len = {5}, table = {2, 7};
    AttnPlan plan{1, q_start.data(), kv_len.data(), table.data(), 2, 16};
    EXPECT_NO_THROW(be->attention(O, Q, K, V, plan, 1.f));
    table[0] = 7;  // block outside the cache
    EXPECT_THROW(be->attention(O, Q, K, V, plan, 1.f), Error);
    table[0] = 1;
    kv_len[0] = 2;  // fewer positions than new tokens
    EXPECT_THROW(be->attention(O, Q, K, V, plan, 1.f), Error);
    kv_len[0] = 40;  // more than max_blocks * block_size
    EXPECT_THROW(be->attention(O, Q, K, V, plan, 1.f), Error);
    kv_len[0] = 5;
    q_start[1] = 2;  // does not cover the batch
    EXPECT_THROW(be->attention(O, Q, K, V, plan, 1.f), Error);
    q_start[1] = 3;
    Tensor Q3(q.data(), DType::F32, {3, 3, 8});  // 3 heads over 2 kv heads
    Tensor O3(out.data(), DType::F32, {3, 3, 8});
    EXPECT_THROW(be->attention(O3, Q3, K, V, plan, 1.f), Error);
}

TEST(KvStore, WritesSlotsAndSkipsPadding) {
    auto be = make_cpu_backend();
    for (DType ct : {DType::F32, DType::F16}) {
        const int64_t T = 4, n_kv = 2, D = 8;
        Cache kc(ct, 3, 16, n_kv, D), vc(ct, 3, 16, n_kv, D);
        auto k = random_floats(size_t(T * n_kv * D), 1), v = random_floats(size_t(T * n_kv * D), 2);
        const std::vector<int32_t> slot = {17, 0, -1, 47};
        be->kv_store(kc.tensor(), vc.tensor(), Tensor(k.data(), DType::F32, {T, n_kv, D}),
                     Tensor(v.data(), DType::F32, {T, n_kv, D}), slot.data());
        for (int64_t t = 0; t < T; ++t) {
            if (slot[size_t(t)] < 0) continue;
            for (int64_t h = 0; h < n_kv; ++h)
                for (int64_t i = 0; i < D; ++i) {
                    ASSERT_EQ(kc.get(slot[size_t(t)], h, i), stored(ct, k[size_t((t * n_kv + h) * D + i)]));
                    ASSERT_EQ(vc.get(slot[size_t(t)], h, i), stored(ct, v[size_t((t * n_kv + h) * D + i)]));
                }
        }
        size_t nonzero = 0;
        for (int64_t s = 0; s < 48; ++s)
            for (int64_t i = 0; i < n_kv * D; ++i) nonzero += kc.get(s, 0, i) != 0.f;
        EXPECT_EQ(nonzero, size_t(3 * n_kv * D));  // the padding token wrote nothing
        const std::vector<int32_t> bad = {0, 1, 2, 48};
        EXPECT_THROW(be->kv_store(kc.tensor(), vc.tensor(), Tensor(k.data(), DType::F32, {T, n_kv, D}),
                                  Tensor(v.data(), DType::F32, {T, n_kv, D}), bad.data()), Error);
    }
}

}  // namespace
