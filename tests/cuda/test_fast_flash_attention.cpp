// The tensor-core prefill attention (fast_flash_attention.h) against the CPU backend's attention
// on the same inputs: prompts of 1..300 tokens (just past the 64/128-row and 64-key tiles), chunks
// continuing a cached context, several sequences of different lengths in one call with an empty
// and a padding sequence, block sizes 16 and 32 (and 1), D 64/128/256, GQA 16/2, 8/1 and MHA 4/4,
// every block shape, strided q (gated layout) and padded out rows. f16 caches. Tolerance
// max |Δ| <= 2e-3 · max(1, max |ref|): q·scale and p are rounded to f16 for the tensor cores.
// Without a GPU the device tests skip; the argument checks and dispatch rules run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr float kPad = -777.25f;  // out-of-view padding: a kernel writing there shows up

struct Config {
    int64_t n_head, n_kv, D, block_size;
};

std::string describe(const Config& c, fast::FlashVariant v) {
    return "n_head=" + std::to_string(c.n_head) + " n_kv=" + std::to_string(c.n_kv) + " D=" + std::to_string(c.D) +
           " block_size=" + std::to_string(c.block_size) +
           (v == fast::FlashVariant::Rows64      ? " rows64"
            : v == fast::FlashVariant::Rows128   ? " rows128"
            : v == fast::FlashVariant::Rows128x2 ? " rows128x2"
            : v == fast::FlashVariant::Wgmma     ? " wgmma"
            : v == fast::FlashVariant::WgmmaOverlap ? " wgmma_overlap"
            : v == fast::FlashVariant::WgmmaTma     ? " wgmma_tma"
                                                    : " wgmma_tma_overlap");
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
    DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 16));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
    return b;
}

// Sequence s has n_new[s] tokens this call and kv_len[s] context (including them).
struct Batch {
    std::vector<int32_t> n_new, kv_len;
};

// One batch through the CPU backend and the flash kernel on identical random inputs; compares the
// outputs and checks the out padding is untouched.
// gated: the output gate (fast::OutGate) from q's other half, against attention then sigmoid_mul.
// nan_unowned: cache rows no sequence reads (past each kv_len, spare blocks) hold NaN, which
// a kernel must never let into a result (p·v multiplies loaded rows by p = 0).
// heads_outer: the device caches laid out [block][kv head][row][D] instead of [block][row][kv head][D].
void check_batch(const Config& c, const Batch& b, uint32_t seed, fast::FlashVariant variant, bool gated = false,
                 bool nan_unowned = false, bool heads_outer = false) {
    const int n_seqs = int(b.n_new.size());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);

    std::vector<int32_t> q_start(size_t(n_seqs) + 1, 0);
    for (int s = 0; s < n_seqs; ++s) q_start[size_t(s) + 1] = q_start[size_t(s)] + b.n_new[size_t(s)];
    const int64_t T = q_start.back();
    ASSERT_GT(T, 0);

    // Block tables drawn from one shuffled pool (plus spare blocks); unused entries are -1.
    int max_blocks = 1, used = 0;
    for (int s = 0; s < n_seqs; ++s) {
        const int nb = int((b.kv_len[size_t(s)] + c.block_size - 1) / c.block_size);
        max_blocks = std::max(max_blocks, nb + 1);
        used += nb;
    }
    const int64_t n_blocks = used + 3;
    std::vector<int32_t> pool(static_cast<size_t>(n_blocks));
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> table(size_t(n_seqs) * max_blocks, -1);
    for (int s = 0, next = 0; s < n_seqs; ++s)
        for (int64_t k = 0; k < (b.kv_len[size_t(s)] + c.block_size - 1) / c.block_size; ++k)
            table[size_t(s) * max_blocks + k] = pool[size_t(next++)];

    // f16 caches [n_blocks, block_size, n_kv, D], all random (also rows no sequence owns).
    const int64_t cache_elems = n_blocks * c.block_size * c.n_kv * c.D;
    std::vector<uint16_t> kc(static_cast<size_t>(cache_elems)), vc(kc.size());
    for (auto* cache : {&kc, &vc})
        for (auto& x : *cache) x = f32_to_f16(u(rng) * 2.f);
    if (nan_unowned) {
        std::vector<char> owned(size_t(n_blocks * c.block_size), 0);  // [block][row]
        for (int s = 0; s < n_seqs; ++s)
            for (int64_t p = 0; p < b.kv_len[size_t(s)]; ++p)
                owned[size_t(table[size_t(s) * max_blocks + p / c.block_size] * c.block_size + p % c.block_size)] = 1;
        const int64_t row_elems = c.n_kv * c.D;
        for (int64_t r = 0; r < n_blocks * c.block_size; ++r)
            if (!owned[size_t(r)])
                for (auto* cache : {&kc, &vc}) std::fill_n(cache->begin() + r * row_elems, row_elems, uint16_t(0x7e00));
    }

    // q [T, n_head, D] as in a gated projection: heads 2·D apart; out rows padded by 3 floats.
    const int64_t q_hs = 2 * c.D, q_ts = c.n_head * q_hs, out_hs = c.D, out_ts = c.n_head * c.D + 3;
    std::vector<float> q(size_t(T * q_ts));
    for (auto& x : q) x = u(rng) * 1.5f;
    std::vector<float> out_cpu(size_t(T * out_ts), kPad), out_gpu = out_cpu;
    const float scale = 1.f / std::sqrt(float(c.D));
    {
        Tensor kt(kc.data(), DType::F16, {n_blocks, c.block_size, c.n_kv, c.D});
        Tensor vt(vc.data(), DType::F16, {n_blocks, c.block_size, c.n_kv, c.D});
        Tensor qt(q.data(), DType::F32, {T, c.n_head, c.D});
        qt.stride = {q_ts * 4, q_hs * 4, 4, 0};
        Tensor ot(out_cpu.data(), DType::F32, {T, c.n_head, c.D});
        ot.stride = {out_ts * 4, out_hs * 4, 4, 0};
        const AttnPlan plan{n_seqs, q_start.data(), b.kv_len.data(), table.data(), max_blocks, int(c.block_size)};
        auto cpu = make_cpu_backend();
        cpu->attention(ot, qt, kt, vt, plan, scale);
        if (gated) {  // the gate: the other half of each head's 2·D in the gated projection
            Tensor gt(q.data() + c.D, DType::F32, {T, c.n_head, c.D});
            gt.stride = {q_ts * 4, q_hs * 4, 4, 0};
            cpu->sigmoid_mul(ot, ot, gt);
        }
    }

    // On the device V's blocks lie 8 values further apart than K's: the kernels must take each
    // cache's own strides.
    const int64_t block_elems = c.block_size * c.n_kv * c.D, v_block_stride = block_elems + 8;
    auto device_layout = [&](const std::vector<uint16_t>& src, int64_t block_stride) {
        std::vector<uint16_t> d(size_t(n_blocks * block_stride), 0);
        for (int64_t blk = 0; blk < n_blocks; ++blk)
            for (int64_t r = 0; r < c.block_size; ++r)
                for (int64_t h = 0; h < c.n_kv; ++h)
                    std::copy_n(src.begin() + ((blk * c.block_size + r) * c.n_kv + h) * c.D, c.D,
                                d.begin() + blk * block_stride +
                                    (heads_outer ? h * c.block_size + r : r * c.n_kv + h) * c.D);
        return d;
    };
    DeviceBuffer d_kc = to_device(device_layout(kc, block_elems)), d_vc = to_device(device_layout(vc, v_block_stride));
    DeviceBuffer d_q = to_device(q), d_out = to_device(out_gpu);
    DeviceBuffer d_qs = to_device(q_start), d_len = to_device(b.kv_len), d_tab = to_device(table);
    ref::PagedCache pk = reftest::dense_cache(d_kc.data(), true, n_blocks, c.block_size, c.n_kv, c.D);
    ref::PagedCache pv = reftest::dense_cache(d_vc.data(), true, n_blocks, c.block_size, c.n_kv, c.D);
    pv.block_stride = v_block_stride;
    if (heads_outer)
        for (ref::PagedCache* pc : {&pk, &pv}) pc->row_stride = c.D, pc->head_stride = c.block_size * c.D;
    const AttnPlan dplan{n_seqs, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), max_blocks,
                         int(c.block_size)};
    Stream stream;
    fast::flash_attention(d_out.as<float>(), out_ts, out_hs, d_q.as<float>(), q_ts, q_hs, T, c.n_head, pk, pv, dplan,
                          scale, variant, stream,
                          gated ? fast::OutGate{d_q.as<float>() + c.D, q_ts, q_hs} : fast::OutGate{});
    stream.synchronize();
    d_out.download(out_gpu.data(), out_gpu.size() * sizeof(float));

    float ref_max = 1.f;
    for (float x : out_cpu)
        if (x != kPad) ref_max = std::max(ref_max, std::fabs(x));
    const double tol = 2e-3 * ref_max;
    double worst = 0;
    int bad = 0;
    for (size_t i = 0; i < out_cpu.size(); ++i) {
        const int64_t col = int64_t(i) % out_ts;
        if (col >= c.n_head * c.D) {
            if (out_gpu[i] != kPad && ++bad <= 5) ADD_FAILURE() << "padding overwritten at element " << i;
            continue;
        }
        const double err = std::fabs(double(out_gpu[i]) - double(out_cpu[i]));
        worst = std::max(worst, std::isnan(err) ? INFINITY : err);
        if (!(err <= tol) && ++bad <= 5)
            ADD_FAILURE() << "token " << int64_t(i) / out_ts << " head " << col / c.D << " dim " << col % c.D
                          << ": gpu " << out_gpu[i] << " cpu " << out_cpu[i];
    }
    EXPECT_EQ(bad, 0) << "worst |Δ| " << worst << " > " << tol << " (T=" << T << ")";
}

constexpr fast::FlashVariant kVariants[] = {fast::FlashVariant::Rows64, fast::FlashVariant::Rows128,
                                            fast::FlashVariant::Rows128x2, fast::FlashVariant::Wgmma,
                                            fast::FlashVariant::WgmmaOverlap, fast::FlashVariant::WgmmaTma,
                                            fast::FlashVariant::WgmmaTmaOverlap};

std::vector<Config> configs() {
    std::vector<Config> v;
    for (int64_t D : {256, 128, 64})
        for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{16, 2}, {4, 4}})
            for (int64_t bs : {16, 32}) v.push_back({nh, nkv, D, bs});
    v.push_back({8, 1, 256, 1});  // G = 8 over one kv head, a block per key
    // The TMA producer's other boxes: 8 keys (a box a block, 32 boxes a tile at D = 256) and 64
    // keys of a block of 128.
    v.push_back({16, 2, 256, 8});
    v.push_back({16, 2, 256, 128});
    v.push_back({4, 4, 64, 64});
    return v;
}

}  // namespace

TEST(CudaFlashAttention, PromptLengths) {
    REQUIRE_CUDA();
    for (const Config& c : configs())
        for (auto v : kVariants)
            for (int32_t n : {1, 16, 63, 64, 65, 127, 128, 129, 300}) {
                SCOPED_TRACE(describe(c, v) + " prompt " + std::to_string(n));
                check_batch(c, {{n}, {n}}, uint32_t(n), v);
            }
}

// A later chunk of a prompt: the queries start mid-cache (kv_len > n_new), so the diagonal falls
// inside the key tiles at every offset.
TEST(CudaFlashAttention, ChunksContinuingAContext) {
    REQUIRE_CUDA();
    for (const Config& c : configs())
        for (auto v : kVariants)
            for (auto [n, ctx] : {std::pair<int32_t, int32_t>{1, 40}, {17, 17 + 64}, {65, 65 + 37}, {129, 129 + 500},
                                  {200, 200 + 1000}}) {
                SCOPED_TRACE(describe(c, v) + " chunk " + std::to_string(n) + " of " + std::to_string(ctx));
                check_batch(c, {{n}, {ctx}}, uint32_t(n + ctx), v);
            }
}

// Sequences of different lengths in one call: a decode token, an empty sequence, a padding
// sequence (kv_len 0: zero rows), a chunk behind a cached context and fresh prompts whose tiles
// end just past the tile boundaries.
TEST(CudaFlashAttention, MixedBatch) {
    REQUIRE_CUDA();
    const Batch mixed{{65, 1, 0, 3, 130, 17, 129, 1}, {65, 300, 40, 0, 195, 17 + 250, 129, 1}};
    for (const Config& c : configs())
        for (auto v : kVariants) {
            SCOPED_TRACE(describe(c, v) + " mixed");
            check_batch(c, mixed, 11, v);
            check_batch(c, {{0, 300, 2}, {0, 300, 0}}, 12, v);  // empty first, padding last
        }
}

// The output gate applied as the kernel writes gives attention then sigmoid_mul (padding rows,
// prompts, a chunk behind a context).
TEST(CudaFlashAttention, OutputGate) {
    REQUIRE_CUDA();
    const Batch mixed{{65, 1, 0, 3, 130}, {65, 300, 40, 0, 195}};
    for (const Config& c : configs())
        for (auto v : kVariants) {
            SCOPED_TRACE(describe(c, v) + " gated");
            check_batch(c, mixed, 51, v, true);
        }
}

// Caches whose kv heads lie further apart than their rows (a layout the TMA maps order differently).
TEST(CudaFlashAttention, HeadsOuterCacheLayout) {
    REQUIRE_CUDA();
    const Batch mixed{{65, 1, 0, 3, 130, 17}, {65, 300, 40, 0, 195, 17 + 250}};
    for (const Config& c : configs())
        for (auto v : kVariants) {
            SCOPED_TRACE(describe(c, v) + " heads outer");
            check_batch(c, mixed, 71, v, false, false, true);
        }
}

// Rows past each context and blocks no sequence owns hold NaN: the results are those of a clean cache.
TEST(CudaFlashAttention, UnownedCacheRowsMayHoldNaN) {
    REQUIRE_CUDA();
    const Batch mixed{{65, 1, 0, 3, 130, 17}, {65, 300, 40, 0, 195, 17 + 250}};
    for (const Config& c : configs())
        for (auto v : kVariants) {
            SCOPED_TRACE(describe(c, v) + " NaN past the contexts");
            check_batch(c, mixed, 61, v, false, true);
            check_batch(c, {{1}, {1}}, 62, v, false, true);
        }
}

// A block index outside the cache gives NaN rows for the tiles that read it (the reference's NaN
// contract); the other sequence is unaffected, and tokens no sequence covers are NaN.
TEST(CudaFlashAttention, BadPlanOnTheDeviceGivesNaN) {
    REQUIRE_CUDA();
    for (auto variant : kVariants) {
        SCOPED_TRACE(describe({1, 1, 64, 16}, variant));
        const int64_t n_kv = 1, D = 64, bs = 16, n_blocks = 2, T = 3;
        std::vector<uint16_t> cache(size_t(n_blocks * bs * n_kv * D), f32_to_f16(0.5f));
        std::vector<float> q(size_t(T * D), 1.f), out(size_t(T * D), 0.f);
        std::vector<int32_t> q_start = {0, 1, 2}, kv_len = {3, 2}, table = {9, 0};  // token 2: no sequence
        DeviceBuffer d_c = to_device(cache), d_q = to_device(q), d_o = to_device(out), d_qs = to_device(q_start),
                     d_len = to_device(kv_len), d_tab = to_device(table);
        const ref::PagedCache pc = reftest::dense_cache(d_c.data(), true, n_blocks, bs, n_kv, D);
        const AttnPlan plan{2, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), 1, int(bs)};
        Stream stream;
        fast::flash_attention(d_o.as<float>(), D, D, d_q.as<float>(), D, D, T, 1, pc, pc, plan, 1.f, variant, stream);
        stream.synchronize();
        d_o.download(out.data(), out.size() * sizeof(float));
        for (int64_t i = 0; i < D; ++i) {
            EXPECT_TRUE(std::isnan(out[size_t(i)])) << "token 0 dim " << i;
            EXPECT_FLOAT_EQ(out[size_t(D + i)], 0.5f) << "token 1 dim " << i;  // v rows all 0.5
            EXPECT_TRUE(std::isnan(out[size_t(2 * D + i)])) << "token 2 dim " << i;
        }
    }
}

TEST(CudaFlashAttention, SupportedAndDispatch) {  // host-side rules: need no GPU
    EXPECT_TRUE(fast::flash_attention_supported(16, 2, 256, 256, true));
    EXPECT_TRUE(fast::flash_attention_supported(32, 4, 128, 128, true));
    EXPECT_TRUE(fast::flash_attention_supported(32, 2, 64, 64, true));  // any group size
    EXPECT_FALSE(fast::flash_attention_supported(16, 2, 256, 256, false));  // f32 caches
    EXPECT_FALSE(fast::flash_attention_supported(8, 8, 96, 96, true));
    EXPECT_FALSE(fast::flash_attention_supported(8, 8, 128, 64, true));
    EXPECT_FALSE(fast::flash_attention_supported(6, 4, 128, 128, true));
    EXPECT_FALSE(fast::use_flash_attention(8, 8));      // decode
    EXPECT_FALSE(fast::use_flash_attention(64, 64));    // a token per sequence
    EXPECT_TRUE(fast::use_flash_attention(2048, 1));    // a prompt
    EXPECT_TRUE(fast::use_flash_attention(2048, 33));   // a prompt chunk with decodes
    EXPECT_FALSE(fast::use_flash_attention(15, 1));
    // The picks: 128-row wgmma tiles with TMA loads by default, cp.async or mma.sync for A/B, 64-row
    // tiles where 128-row ones would leave more than half the SMs idle.
    EXPECT_EQ(fast::flash_variant(8192, 16, 256), fast::FlashVariant::WgmmaTma);
    EXPECT_EQ(fast::flash_variant(8192, 16, 256, true, false), fast::FlashVariant::Wgmma);
    EXPECT_EQ(fast::flash_variant(8192, 16, 256, false), fast::FlashVariant::Rows128x2);
    EXPECT_EQ(fast::flash_variant(640, 16, 256), fast::FlashVariant::WgmmaTma);  // 80 blocks of 128 rows
    EXPECT_EQ(fast::flash_variant(512, 16, 256), fast::FlashVariant::Rows64);    // 64 blocks < 132 / 2
    // The overlap schedule by the keys' bound (TESSERA_FLASH_SCHEDULE=kv): the wgmma variants' overlapped
    // forms from kFlashOverlapMinKv keys, the others as they are.
    using V = fast::FlashVariant;
    const int64_t kv = fast::kFlashOverlapMinKv;
    EXPECT_EQ(fast::flash_schedule(V::WgmmaTma, kv - 1), V::WgmmaTma);
    EXPECT_EQ(fast::flash_schedule(V::WgmmaTma, kv), V::WgmmaTmaOverlap);
    EXPECT_EQ(fast::flash_schedule(V::Wgmma, kv), V::WgmmaOverlap);
    EXPECT_EQ(fast::flash_schedule(V::Wgmma, 8192), V::Wgmma);
    EXPECT_EQ(fast::flash_schedule(V::Rows64, 32768), V::Rows64);
    EXPECT_EQ(fast::flash_schedule(V::Rows128x2, 32768), V::Rows128x2);
}

TEST(CudaFlashAttention, BadArgumentsAreErrors) {  // checked on the host before any launch: needs no GPU
    float* p = reinterpret_cast<float*>(256);
    ref::PagedCache c;
    c.data = p;
    c.f16 = true;
    c.n_blocks = 4;
    c.block_size = 16;
    c.n_kv = 2;
    c.D = 64;
    c.head_stride = 64;
    c.row_stride = 128;
    c.block_stride = 16 * 128;
    const int32_t* ip = reinterpret_cast<const int32_t*>(256);
    const AttnPlan plan{1, ip, ip, ip, 4, 16};
    auto call = [&](int64_t n_head, const ref::PagedCache& k, const ref::PagedCache& v, const AttnPlan& pl) {
        fast::flash_attention(p, n_head * 64, 64, p, n_head * 64, 64, 3, n_head, k, v, pl, 1.f,
                              fast::FlashVariant::Rows64, nullptr);
    };
    EXPECT_THROW(call(5, c, c, plan), Error);  // 5 query heads over 2 kv heads
    ref::PagedCache f32 = c;
    f32.f16 = false;
    EXPECT_THROW(call(4, f32, f32, plan), Error);
    AttnPlan wrong_bs = plan;
    wrong_bs.block_size = 8;
    EXPECT_THROW(call(4, c, c, wrong_bs), Error);
    AttnPlan no_arrays = plan;
    no_arrays.block_table = nullptr;
    EXPECT_THROW(call(4, c, c, no_arrays), Error);
    ref::PagedCache odd = c;
    odd.row_stride = 100;  // rows not 16-byte aligned
    EXPECT_THROW(call(4, odd, c, plan), Error);
}
