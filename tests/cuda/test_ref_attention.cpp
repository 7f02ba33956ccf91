// The reference CUDA paged attention against the CPU backend's attention on the same inputs:
// decode, prefill of 1/63/64/65/257 tokens, decodes and prefill chunks mixed in one batch (with
// an empty sequence), block sizes 16 and 1, D 64/128/256, GQA 16/2 and MHA 4/4, f32 and f16
// caches, shuffled block tables, strided q (gated layout) and padded out rows. Tolerance
// max |Δ| <= 1e-4 · max(1, |ref|): both sides are f32 softmax-weighted sums; they differ only in
// summation order (the GPU's online softmax rescales as it goes, the CPU sums in two passes).
// The fast kernels (fast_attention.h) on the same batches: Simt to the same tolerance, Mma (q·scale
// and p rounded to f16 for the tensor cores) to 2e-3 · max(1, |ref|), as the prefill flash kernel.
// Mma with the fused merge (fast::AttnMerge::fused) to the CPU at that tolerance; launched three
// times on the same counters, bit for bit the same each time and the counters back at zero; and
// against the two-kernel merge at the same split count (the same per-split partials; the merges
// weigh them in different orders and units, log2 vs natural log) to 2e-5 · max(1, |ref|).
// Without a GPU the device tests skip; the argument checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/ref_attention.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;


namespace {

constexpr float kPad = -777.25f;  // out-of-view padding: a kernel writing there shows up

struct Config {
    int64_t n_head, n_kv, D, block_size;
    bool f16;
};

std::string describe(const Config& c) {
    return "n_head=" + std::to_string(c.n_head) + " n_kv=" + std::to_string(c.n_kv) + " D=" + std::to_string(c.D) +
           " block_size=" + std::to_string(c.block_size) + (c.f16 ? " f16" : " f32");
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    return b;
}

// One batch: sequence s has n_new[s] tokens this step and kv_len[s] context (including them).
struct Batch {
    std::vector<int32_t> n_new, kv_len;
};

// Which CUDA kernel check_batch runs: the reference, or the fast kernel with `splits` context
// splits (0: the launch geometry the backend would pick).
struct Kernel {
    bool fast = false;
    int splits = 0;
    fast::AttnKernel kind = fast::AttnKernel::Simt;
    bool gated = false;  // fast only: the output gate (fast::OutGate) from q's other half, against attention then sigmoid_mul
    int fused = -1;      // Mma only: the fused merge in clusters of `fused` blocks (0: its own pick); -1: the merge kernel
};

// Runs one batch through the CPU backend and a CUDA kernel on identical random inputs and
// compares the outputs (and that the out padding is untouched).
void check_batch(const Config& c, const Batch& b, uint32_t seed, Kernel kernel = {}) {
    const int n_seqs = int(b.n_new.size());
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);

    std::vector<int32_t> q_start(size_t(n_seqs) + 1, 0);
    for (int s = 0; s < n_seqs; ++s) q_start[size_t(s) + 1] = q_start[size_t(s)] + b.n_new[size_t(s)];
    const int64_t T = q_start.back();
    ASSERT_GT(T, 0);

    // Block tables: every sequence's blocks drawn from one shuffled pool (plus spare blocks that no
    // one uses); unused table entries are -1, which the kernel must never read.
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

    // Caches [n_blocks, block_size, n_kv, D], all random (also rows no sequence owns).
    const int64_t cache_elems = n_blocks * c.block_size * c.n_kv * c.D;
    const size_t elem_bytes = c.f16 ? 2 : 4;
    std::vector<uint8_t> kc(size_t(cache_elems) * elem_bytes), vc(kc.size());
    for (auto* cache : {&kc, &vc})
        for (int64_t i = 0; i < cache_elems; ++i) {
            const float x = u(rng) * 2.f;
            if (c.f16) reinterpret_cast<uint16_t*>(cache->data())[i] = f32_to_f16(x);
            else reinterpret_cast<float*>(cache->data())[i] = x;
        }

    // q [T, n_head, D] as in a gated projection: heads 2·D apart; out rows padded by 3 floats.
    const int64_t q_hs = 2 * c.D, q_ts = c.n_head * q_hs, out_hs = c.D, out_ts = c.n_head * c.D + 3;
    std::vector<float> q(size_t(T * q_ts));
    for (auto& x : q) x = u(rng) * 3.f;
    std::vector<float> out_cpu(size_t(T * out_ts), kPad), out_gpu = out_cpu;
    const float scale = 1.f / std::sqrt(float(c.D));

    // CPU ground truth.
    {
        const DType ct = c.f16 ? DType::F16 : DType::F32;
        Tensor kt(kc.data(), ct, {n_blocks, c.block_size, c.n_kv, c.D}), vt(vc.data(), ct, {n_blocks, c.block_size, c.n_kv, c.D});
        Tensor qt(q.data(), DType::F32, {T, c.n_head, c.D});
        qt.stride = {q_ts * 4, q_hs * 4, 4, 0};
        Tensor ot(out_cpu.data(), DType::F32, {T, c.n_head, c.D});
        ot.stride = {out_ts * 4, out_hs * 4, 4, 0};
        const AttnPlan plan{n_seqs, q_start.data(), b.kv_len.data(), table.data(), max_blocks, int(c.block_size)};
        auto cpu = make_cpu_backend();
        cpu->attention(ot, qt, kt, vt, plan, scale);
        if (kernel.gated) {  // the gate: the other half of each head's 2·D in the gated projection
            Tensor gt(q.data() + c.D, DType::F32, {T, c.n_head, c.D});
            gt.stride = {q_ts * 4, q_hs * 4, 4, 0};
            cpu->sigmoid_mul(ot, ot, gt);
        }
    }

    // The CUDA reference, every array on the device.
    DeviceBuffer d_kc = to_device(kc), d_vc = to_device(vc), d_q = to_device(q), d_out = to_device(out_gpu);
    DeviceBuffer d_qs = to_device(q_start), d_len = to_device(b.kv_len), d_tab = to_device(table);
    const ref::PagedCache pk = reftest::dense_cache(d_kc.data(), c.f16, n_blocks, c.block_size, c.n_kv, c.D);
    const ref::PagedCache pv = reftest::dense_cache(d_vc.data(), c.f16, n_blocks, c.block_size, c.n_kv, c.D);
    const AttnPlan dplan{n_seqs, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), max_blocks,
                         int(c.block_size)};
    Stream stream;
    if (!kernel.fast) {
        ref::attention(d_out.as<float>(), out_ts, out_hs, d_q.as<float>(), q_ts, q_hs, T, c.n_head, pk, pv, dplan,
                       scale, stream);
    } else {
        const int splits = kernel.splits ? kernel.splits
                                         : fast::attention_splits(T, c.n_kv, int64_t(max_blocks) * c.block_size,
                                                                  kernel.kind);
        DeviceBuffer part(std::max<size_t>(fast::attention_scratch(T, c.n_head, c.D, splits), 16));
        const fast::OutGate gate = kernel.gated ? fast::OutGate{d_q.as<float>() + c.D, q_ts, q_hs} : fast::OutGate{};
        auto run = [&](DeviceBuffer& o, int n_splits, const fast::AttnMerge& merge) {
            fast::attention(o.as<float>(), out_ts, out_hs, d_q.as<float>(), q_ts, q_hs, T, c.n_head, pk, pv, dplan,
                            scale, n_splits, part.data(), stream, kernel.kind, gate, merge);
        };
        if (kernel.fused < 0) {
            run(d_out, splits, {});
        } else {
            DeviceBuffer counters(fast::attention_counters(T, c.n_kv));
            counters.fill(0, counters.size(), 0, stream.get());
            const fast::AttnMerge merge{true, kernel.fused, counters.as<uint32_t>()};
            run(d_out, splits, merge);
            stream.synchronize();
            std::vector<float> first(out_gpu.size()), again(out_gpu.size());
            d_out.download(first.data(), d_out.size());
            for (int r = 1; r < 3; ++r) {  // the counters were left at zero: the same launch, the same bits
                run(d_out, splits, merge);
                stream.synchronize();
                d_out.download(again.data(), d_out.size());
                const auto diff = std::mismatch(first.begin(), first.end(), again.begin(), [](float a, float b) {
                    return std::memcmp(&a, &b, sizeof(float)) == 0;
                });
                EXPECT_TRUE(diff.first == first.end())
                    << "fused launch " << r << " differs from the first at element " << (diff.first - first.begin())
                    << ": " << *diff.second << " vs " << *diff.first;
            }
            std::vector<uint32_t> ctr(counters.size() / sizeof(uint32_t));
            counters.download(ctr.data(), counters.size());
            EXPECT_TRUE(std::all_of(ctr.begin(), ctr.end(), [](uint32_t x) { return x == 0; }))
                << "the fused merge left a counter non-zero";
            // The merge kernel at the split count the fused launch took (a multiple of its cluster size).
            const int C = fast::attention_fused_cluster(T, c.n_kv, c.D, splits, kernel.fused);
            DeviceBuffer d_kern = to_device(std::vector<float>(out_gpu.size(), kPad));
            run(d_kern, splits / C * C, {});
            stream.synchronize();
            std::vector<float> kern(out_gpu.size());
            d_kern.download(kern.data(), d_kern.size());
            float ref_max = 1.f;
            for (float x : out_cpu)
                if (x != kPad) ref_max = std::max(ref_max, std::fabs(x));
            int off = 0;
            for (size_t i = 0; i < kern.size(); ++i) {
                const bool same = std::isnan(kern[i]) ? std::isnan(first[i])
                                                      : std::fabs(double(kern[i]) - double(first[i])) <= 2e-5 * ref_max;
                if (!same && ++off <= 5)
                    ADD_FAILURE() << "fused vs kernel merge (cluster " << C << ", " << splits / C * C
                                  << " splits) at element " << i << ": " << first[i] << " vs " << kern[i];
            }
            EXPECT_EQ(off, 0);
        }
        stream.synchronize();
    }
    stream.synchronize();
    d_out.download(out_gpu.data(), d_out.size());

    float ref_max = 1.f;
    for (float x : out_cpu)
        if (x != kPad) ref_max = std::max(ref_max, std::fabs(x));
    const double tol = (kernel.fast && kernel.kind == fast::AttnKernel::Mma ? 2e-3 : 1e-4) * ref_max;
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

// Every head/D/block-size/dtype combination the task names.
std::vector<Config> all_configs() {
    std::vector<Config> v;
    for (int64_t D : {64, 128, 256})
        for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{16, 2}, {4, 4}})
            for (int64_t bs : {16, 1})
                for (bool f16 : {false, true}) v.push_back({nh, nkv, D, bs, f16});
    return v;
}

}  // namespace

TEST(CudaRefAttention, DecodeOneToken) {
    REQUIRE_CUDA();
    for (const Config& c : all_configs()) {
        SCOPED_TRACE(describe(c));
        check_batch(c, {{1}, {1}}, 1);    // the first token of a sequence: attends to itself only
        check_batch(c, {{1}, {300}}, 2);  // a decode deep into the context
    }
}

TEST(CudaRefAttention, PrefillLengths) {
    REQUIRE_CUDA();
    for (const Config& c : all_configs())
        for (int32_t n : {1, 63, 64, 65, 257}) {
            SCOPED_TRACE(describe(c) + " prefill " + std::to_string(n));
            check_batch(c, {{n}, {n}}, uint32_t(n));               // from an empty context
            if (n == 65) check_batch(c, {{n}, {n + 130}}, 7);  // a later prefill chunk
        }
}

TEST(CudaRefAttention, MixedBatch) {
    REQUIRE_CUDA();
    // Decodes at different depths, an empty sequence, a prefill chunk behind 130 cached tokens and a
    // fresh 65-token prefill, in one call.
    const Batch mixed{{1, 1, 0, 65, 1, 65, 1}, {1, 17, 40, 195, 300, 65, 64}};
    for (const Config& c : all_configs()) {
        SCOPED_TRACE(describe(c) + " mixed");
        check_batch(c, mixed, 11);
    }
}

TEST(CudaRefAttention, BadPlanOnTheDeviceGivesNaN) {
    REQUIRE_CUDA();
    // Sequence 0 points at block 9 of a 2-block cache; sequence 1 is sound.
    const int64_t n_kv = 1, D = 8, bs = 4, n_blocks = 2;
    std::vector<float> cache(size_t(n_blocks * bs * n_kv * D), 0.5f), q(size_t(2 * D), 1.f), out(size_t(2 * D), 0.f);
    std::vector<int32_t> q_start = {0, 1, 2}, kv_len = {3, 2}, table = {9, 0};
    DeviceBuffer d_c = to_device(cache), d_q = to_device(q), d_o = to_device(out), d_qs = to_device(q_start),
                 d_len = to_device(kv_len), d_tab = to_device(table);
    const ref::PagedCache pc = reftest::dense_cache(d_c.data(), false, n_blocks, bs, n_kv, D);
    const AttnPlan plan{2, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), 1, int(bs)};
    ref::attention(d_o.as<float>(), D, D, d_q.as<float>(), D, D, 2, 1, pc, pc, plan, 1.f, nullptr);
    d_o.download(out.data(), d_o.size());  // cudaMemcpy waits for the default stream
    for (int64_t i = 0; i < D; ++i) {
        EXPECT_TRUE(std::isnan(out[size_t(i)])) << "token 0 dim " << i;
        EXPECT_FLOAT_EQ(out[size_t(D + i)], 0.5f) << "token 1 dim " << i;  // v rows all 0.5
    }
}

TEST(CudaRefAttention, BadArgumentsAreErrors) {  // checked on the host before any launch: needs no GPU
    float* p = reinterpret_cast<float*>(16);
    ref::PagedCache c;
    c.data = p;
    c.n_blocks = 4;
    c.block_size = 16;
    c.n_kv = 2;
    c.D = 64;
    c.head_stride = 64;
    c.row_stride = 128;
    c.block_stride = 16 * 128;
    const int32_t* ip = reinterpret_cast<const int32_t*>(16);
    const AttnPlan plan{1, ip, ip, ip, 4, 16};
    auto call = [&](int64_t n_head, const ref::PagedCache& k, const ref::PagedCache& v, const AttnPlan& pl) {
        ref::attention(p, n_head * 64, 64, p, n_head * 64, 64, 3, n_head, k, v, pl, 1.f, nullptr);
    };
    EXPECT_THROW(call(5, c, c, plan), Error);  // 5 query heads over 2 kv heads
    ref::PagedCache big = c;
    big.D = 320;
    big.head_stride = 320;
    big.row_stride = 640;
    big.block_stride = 16 * 640;
    EXPECT_THROW(call(4, big, big, plan), Error);  // D > 256
    AttnPlan wrong_bs = plan;
    wrong_bs.block_size = 8;
    EXPECT_THROW(call(4, c, c, wrong_bs), Error);
    AttnPlan no_arrays = plan;
    no_arrays.block_table = nullptr;
    EXPECT_THROW(call(4, c, c, no_arrays), Error);
    ref::PagedCache bad_stride = c;
    bad_stride.row_stride = 100;  // two kv heads of 64 do not fit
    EXPECT_THROW(call(4, bad_stride, c, plan), Error);
    EXPECT_THROW(ref::attention(p, 10, 64, p, 256, 64, 3, 4, c, c, plan, 1.f, nullptr), Error);  // out rows overlap
    // No tokens: nothing to do, whatever the plan arrays.
    EXPECT_NO_THROW(ref::attention(nullptr, 0, 64, nullptr, 0, 64, 0, 4, c, c, AttnPlan{0, nullptr, nullptr, nullptr, 0, 16},
                                   1.f, nullptr));
}

// ---- the fast kernel (fast_attention.h) on the same batches, against the CPU

namespace {
std::vector<Config> fast_configs() {
    std::vector<Config> v;
    for (int64_t D : {64, 128, 256})
        for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{16, 2}, {4, 4}, {6, 2}})
            for (int64_t bs : {16, 1})
                for (bool f16 : {false, true}) v.push_back({nh, nkv, D, bs, f16});
    return v;
}
}  // namespace

TEST(CudaFastAttention, DecodeAndPrefill) {
    REQUIRE_CUDA();
    for (const Config& c : fast_configs()) {
        SCOPED_TRACE(describe(c));
        check_batch(c, {{1}, {1}}, 1, {true, 0});
        check_batch(c, {{1}, {300}}, 2, {true, 0});
        for (int32_t n : {1, 63, 64, 65}) check_batch(c, {{n}, {n + 40}}, uint32_t(n), {true, 0});
        check_batch(c, {{1, 1, 0, 65, 1, 65, 1}, {1, 17, 40, 195, 300, 65, 64}}, 11, {true, 0});
    }
}

// Long contexts split into 1, 3 and 24 parts (the merge in a fixed order; splits past the
// context of a short sequence are empty) give the CPU's result.
TEST(CudaFastAttention, ContextSplits) {
    REQUIRE_CUDA();
    for (const Config& c : {Config{16, 2, 256, 16, true}, Config{8, 8, 128, 16, false}, Config{4, 1, 64, 1, true}})
        for (int splits : {1, 3, 24, 255}) {
            SCOPED_TRACE(describe(c) + " splits " + std::to_string(splits));
            check_batch(c, {{1, 1, 1}, {3000, 2, 700}}, 21, {true, splits});
            check_batch(c, {{17}, {2100}}, 22, {true, splits});
        }
}

// A padding sequence (kv_len 0) between real ones gets zero rows, with and without splits.
TEST(CudaFastAttention, PaddingSequencesGiveZeros) {
    REQUIRE_CUDA();
    for (int splits : {1, 4}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        check_batch(Config{16, 2, 128, 16, true}, {{1, 1, 1}, {50, 0, 9}}, 31, {true, splits});
    }
}

TEST(CudaFastAttention, Supported) {
    EXPECT_TRUE(fast::attention_supported(16, 2, 256, 256));
    EXPECT_TRUE(fast::attention_supported(32, 4, 128, 128));
    EXPECT_FALSE(fast::attention_supported(32, 2, 128, 128));  // 16 heads per kv head
    EXPECT_FALSE(fast::attention_supported(8, 8, 80, 80));     // D not 32/64/128/256
    EXPECT_FALSE(fast::attention_supported(8, 8, 96, 96));
    EXPECT_FALSE(fast::attention_supported(8, 8, 128, 64));    // D != Dv
    EXPECT_EQ(fast::attention_splits(2048, 2, 4096), 1);
    EXPECT_GT(fast::attention_splits(1, 2, 4096), 1);
    EXPECT_EQ(fast::attention_splits(1, 2, 32), 1);   // one key tile is not split
    EXPECT_EQ(fast::attention_splits(1, 2, 100), 4);  // at least a tile (32 keys) per split
    EXPECT_EQ(fast::attention_splits(1, 2, 32768), 256);
    EXPECT_EQ(fast::attention_splits(1, 1, 1 << 20), int(fast::kAttnMaxSplits));
    EXPECT_EQ(fast::attention_splits(64, 2, 32768), 5);  // 64 decoding sequences

    using fast::AttnKernel;
    EXPECT_TRUE(fast::attention_supported(16, 2, 256, 256, AttnKernel::Mma, true));
    EXPECT_TRUE(fast::attention_supported(32, 2, 128, 128, AttnKernel::Mma, true));   // 16 heads per kv head
    EXPECT_FALSE(fast::attention_supported(34, 2, 128, 128, AttnKernel::Mma, true));  // 17
    EXPECT_FALSE(fast::attention_supported(16, 2, 256, 256, AttnKernel::Mma, false)); // f32 cache
    EXPECT_FALSE(fast::attention_supported(8, 8, 32, 32, AttnKernel::Mma, true));    // D 32: Simt only
    EXPECT_FALSE(fast::attention_supported(8, 8, 128, 64, AttnKernel::Mma, true));
    EXPECT_FALSE(fast::attention_supported(7, 2, 128, 128, AttnKernel::Mma, true));   // not a multiple
    EXPECT_EQ(fast::attention_splits(1, 2, 64, AttnKernel::Mma), 1);     // one 64-key tile is not split
    EXPECT_EQ(fast::attention_splits(1, 2, 65, AttnKernel::Mma), 2);
    EXPECT_EQ(fast::attention_splits(1, 2, 4096, AttnKernel::Mma), 64);  // a tile a split at most
    EXPECT_EQ(fast::attention_splits(1, 2, 32768, AttnKernel::Mma), 66); // a block an SM
    EXPECT_EQ(fast::attention_splits(1, 1, 1 << 20, AttnKernel::Mma), 132);
    EXPECT_EQ(fast::attention_splits(66, 2, 32768, AttnKernel::Mma), 1);
    EXPECT_EQ(fast::attention_splits(8, 2, 32768, AttnKernel::Mma), 9);
}

// ---- the tensor-core kernel (AttnKernel::Mma) on the same batches, against the CPU

namespace {
std::vector<Config> mma_configs() {
    std::vector<Config> v;
    for (int64_t D : {64, 128, 256})
        for (auto [nh, nkv] : {std::pair<int64_t, int64_t>{16, 2}, {4, 4}, {6, 2}, {32, 2}, {12, 1}})
            for (int64_t bs : {16, 1}) v.push_back({nh, nkv, D, bs, true});
    return v;
}
constexpr Kernel kMma{true, 0, fast::AttnKernel::Mma};
Kernel mma_splits(int splits) { return {true, splits, fast::AttnKernel::Mma}; }
}  // namespace

// 1 token, lengths around a 64-key tile and a 16-key warp slice, several sequences mixing decodes
// and short prefills (each token its own causal context), an empty sequence.
TEST(CudaFastAttentionMma, DecodeAndPrefill) {
    REQUIRE_CUDA();
    for (const Config& c : mma_configs()) {
        SCOPED_TRACE(describe(c));
        check_batch(c, {{1}, {1}}, 1, kMma);
        check_batch(c, {{1}, {300}}, 2, kMma);
        for (int32_t n : {1, 15, 17, 63, 64, 65, 129}) check_batch(c, {{1}, {n}}, uint32_t(n), kMma);
        for (int32_t n : {1, 63, 64, 65}) check_batch(c, {{n}, {n + 40}}, uint32_t(100 + n), kMma);
        check_batch(c, {{1, 1, 0, 65, 1, 65, 1}, {1, 17, 40, 195, 300, 65, 64}}, 11, kMma);
    }
}

// Contexts split into 1, 2, 3, 24 and 255 parts (more splits than tiles: empty splits) and the
// backend's own count; splits cut from each token's own context.
TEST(CudaFastAttentionMma, ContextSplits) {
    REQUIRE_CUDA();
    for (const Config& c : {Config{16, 2, 256, 16, true}, Config{8, 8, 128, 16, true}, Config{32, 2, 64, 1, true}})
        for (int splits : {1, 2, 3, 24, 255, 0}) {
            SCOPED_TRACE(describe(c) + " splits " + std::to_string(splits));
            check_batch(c, {{1, 1, 1}, {3000, 2, 700}}, 21, mma_splits(splits));
            check_batch(c, {{17}, {2100}}, 22, mma_splits(splits));
            check_batch(c, {{1}, {4097}}, 23, mma_splits(splits));
        }
}

// A padding sequence (kv_len 0) between real ones gets zero rows, with and without splits.
TEST(CudaFastAttentionMma, PaddingSequencesGiveZeros) {
    REQUIRE_CUDA();
    for (int splits : {1, 4}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        check_batch(Config{16, 2, 128, 16, true}, {{1, 1, 1}, {50, 0, 9}}, 31, mma_splits(splits));
    }
}

// Bad plan data seen only on the device: a block outside the cache and a context longer than the
// block table give NaN rows for their tokens; a sound sequence in the same batch is unharmed.
TEST(CudaFastAttentionMma, BadPlanOnTheDeviceGivesNaN) {
    REQUIRE_CUDA();
    const int64_t n_kv = 1, n_head = 2, D = 64, bs = 4, n_blocks = 2;
    std::vector<uint16_t> cache(size_t(n_blocks * bs * n_kv * D), f32_to_f16(0.5f));
    std::vector<float> q(size_t(3 * n_head * D), 1.f), out(q.size(), 0.f);
    // Sequence 0 points at block 9; sequence 1 is sound; sequence 2 claims 9 keys of a 2-block table.
    std::vector<int32_t> q_start = {0, 1, 2, 3}, kv_len = {3, 6, 9}, table = {9, 0, 0, 1, 0, 1};
    DeviceBuffer d_c = to_device(cache), d_q = to_device(q), d_qs = to_device(q_start), d_len = to_device(kv_len),
                 d_tab = to_device(table), d_part(fast::attention_scratch(3, n_head, D, 3));
    const ref::PagedCache pc = reftest::dense_cache(d_c.data(), true, n_blocks, bs, n_kv, D);
    const AttnPlan plan{3, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), 2, int(bs)};
    for (int splits : {1, 3}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        DeviceBuffer d_o = to_device(out);
        Stream stream;
        fast::attention(d_o.as<float>(), n_head * D, D, d_q.as<float>(), n_head * D, D, 3, n_head, pc, pc, plan, 1.f,
                        splits, d_part.data(), stream.get(), fast::AttnKernel::Mma);
        stream.synchronize();
        std::vector<float> got(out.size());
        d_o.download(got.data(), d_o.size());
        for (int64_t i = 0; i < n_head * D; ++i) {
            EXPECT_TRUE(std::isnan(got[size_t(i)])) << "token 0 element " << i;
            EXPECT_FLOAT_EQ(got[size_t(n_head * D + i)], 0.5f) << "token 1 element " << i;  // v rows all 0.5
            EXPECT_TRUE(std::isnan(got[size_t(2 * n_head * D + i)])) << "token 2 element " << i;
        }
    }
}

// The output gate applied as the kernels write (fast::OutGate, the backend's attention_gated) gives
// attention then sigmoid_mul: both kernels, one split and several, padding rows, a mixed batch.
TEST(CudaFastAttention, OutputGate) {
    REQUIRE_CUDA();
    for (fast::AttnKernel kind : {fast::AttnKernel::Simt, fast::AttnKernel::Mma})
        for (int splits : {1, 5, 0}) {
            const Kernel k{true, splits, kind, true};
            for (const Config& c : {Config{16, 2, 256, 16, true}, Config{4, 4, 64, 1, true}}) {
                SCOPED_TRACE(describe(c) + (kind == fast::AttnKernel::Mma ? " mma" : " simt") + " splits " +
                             std::to_string(splits));
                check_batch(c, {{1, 1, 1}, {700, 0, 65}}, 41, k);
                check_batch(c, {{1, 1, 0, 65, 1}, {1, 17, 40, 195, 300}}, 42, k);
            }
        }
}

// ---- the fused merge (fast::AttnMerge::fused): the merge in the attention kernel, through
// clusters and a ticket on per-(token, kv head) counters. check_batch also launches it three times
// on the same counters (the same bits, the counters back at zero) and compares it with the merge
// kernel at the same split count.

namespace {
Kernel fused(int splits, int cluster = 0, bool gated = false) {
    Kernel k{true, splits, fast::AttnKernel::Mma, gated};
    k.fused = cluster;
    return k;
}
}  // namespace

// The Mma batches with the backend's split count (2 … 66 splits: one cluster, or several and the
// ticket), every shape.
TEST(CudaFastAttentionFused, DecodeAndPrefill) {
    REQUIRE_CUDA();
    for (const Config& c : mma_configs()) {
        SCOPED_TRACE(describe(c));
        check_batch(c, {{1}, {300}}, 2, fused(0));
        for (int32_t n : {65, 129, 1000}) check_batch(c, {{1}, {n}}, uint32_t(n), fused(0));
        check_batch(c, {{17}, {57}}, 117, fused(0));
        check_batch(c, {{1, 1, 0, 65, 1, 65, 1}, {1, 17, 40, 195, 300, 65, 64}}, 11, fused(0));
    }
}

// Many split counts (more splits than tiles: empty splits; counts not a multiple of the cluster
// size: rounded down), cluster sizes 2, 4, 8 and the kernel's pick, T > 1 with mixed lengths (a
// 2-key sequence next to 3000 keys: most of its splits empty), a 17-token chunk, the flagship's
// 4K decode (64 splits: 8 clusters of 8).
TEST(CudaFastAttentionFused, ContextSplits) {
    REQUIRE_CUDA();
    for (const Config& c : {Config{16, 2, 256, 16, true}, Config{8, 8, 128, 16, true}, Config{32, 2, 64, 1, true}})
        for (int splits : {2, 3, 8, 9, 16, 24, 64, 255, 0})
            for (int cluster : {0, 2, 4, 8}) {
                SCOPED_TRACE(describe(c) + " splits " + std::to_string(splits) + " cluster " + std::to_string(cluster));
                check_batch(c, {{1, 1, 1}, {3000, 2, 700}}, 21, fused(splits, cluster));
                if (cluster <= 2) check_batch(c, {{17}, {2100}}, 22, fused(splits, cluster));  // the slow CPU side
                check_batch(c, {{1}, {4096}}, 23, fused(splits, cluster));
            }
}

// Clusters of 16 (the non-portable size; the launch fails where the device has no GPC of 16 free SMs).
TEST(CudaFastAttentionFused, Clusters16) {
    REQUIRE_CUDA();
    for (int splits : {16, 32, 64}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        check_batch(Config{16, 2, 256, 16, true}, {{1}, {4096}}, 51, fused(splits, 16));
        check_batch(Config{16, 2, 128, 16, true}, {{1, 1, 1}, {3000, 2, 700}}, 52, fused(splits, 16));
    }
}

// Padding sequences (zeros) and the output gate, one cluster and several.
TEST(CudaFastAttentionFused, PaddingAndGate) {
    REQUIRE_CUDA();
    for (int splits : {2, 4, 16, 64}) {
        SCOPED_TRACE("splits " + std::to_string(splits));
        check_batch(Config{16, 2, 128, 16, true}, {{1, 1, 1}, {50, 0, 9}}, 31, fused(splits));
        check_batch(Config{16, 2, 128, 16, true}, {{1, 1, 1}, {1000, 0, 900}}, 32, fused(splits, 2));
        for (const Config& c : {Config{16, 2, 256, 16, true}, Config{4, 4, 64, 1, true}}) {
            SCOPED_TRACE(describe(c) + " gated");
            check_batch(c, {{1, 1, 1}, {700, 0, 65}}, 41, fused(splits, 0, true));
            check_batch(c, {{1, 1, 0, 65, 1}, {1, 17, 40, 195, 300}}, 42, fused(splits, 4, true));
        }
    }
}

// Bad plan data seen only on the device gives NaN rows through the fused merge too (one cluster
// and several), the sound sequence unharmed, the counters back at zero.
TEST(CudaFastAttentionFused, BadPlanOnTheDeviceGivesNaN) {
    REQUIRE_CUDA();
    const int64_t n_kv = 1, n_head = 2, D = 64, bs = 4, n_blocks = 2;
    std::vector<uint16_t> cache(size_t(n_blocks * bs * n_kv * D), f32_to_f16(0.5f));
    std::vector<float> q(size_t(3 * n_head * D), 1.f), out(q.size(), 0.f);
    std::vector<int32_t> q_start = {0, 1, 2, 3}, kv_len = {3, 6, 9}, table = {9, 0, 0, 1, 0, 1};
    DeviceBuffer d_c = to_device(cache), d_q = to_device(q), d_qs = to_device(q_start), d_len = to_device(kv_len),
                 d_tab = to_device(table), d_part(fast::attention_scratch(3, n_head, D, 16)),
                 d_ctr(fast::attention_counters(3, n_kv));
    const ref::PagedCache pc = reftest::dense_cache(d_c.data(), true, n_blocks, bs, n_kv, D);
    const AttnPlan plan{3, d_qs.as<int32_t>(), d_len.as<int32_t>(), d_tab.as<int32_t>(), 2, int(bs)};
    Stream stream;
    d_ctr.fill(0, d_ctr.size(), 0, stream.get());
    for (int splits : {2, 3, 8, 16})
        for (int cluster : {0, 2}) {
            SCOPED_TRACE("splits " + std::to_string(splits) + " cluster " + std::to_string(cluster));
            DeviceBuffer d_o = to_device(out);
            fast::attention(d_o.as<float>(), n_head * D, D, d_q.as<float>(), n_head * D, D, 3, n_head, pc, pc, plan,
                            1.f, splits, d_part.data(), stream.get(), fast::AttnKernel::Mma, {},
                            fast::AttnMerge{true, cluster, d_ctr.as<uint32_t>()});
            stream.synchronize();
            std::vector<float> got(out.size());
            d_o.download(got.data(), d_o.size());
            for (int64_t i = 0; i < n_head * D; ++i) {
                EXPECT_TRUE(std::isnan(got[size_t(i)])) << "token 0 element " << i;
                EXPECT_FLOAT_EQ(got[size_t(n_head * D + i)], 0.5f) << "token 1 element " << i;
                EXPECT_TRUE(std::isnan(got[size_t(2 * n_head * D + i)])) << "token 2 element " << i;
            }
            std::vector<uint32_t> ctr(3);
            d_ctr.download(ctr.data(), d_ctr.size());
            EXPECT_EQ(ctr, (std::vector<uint32_t>{0, 0, 0}));
        }
}

// Host-side: counters' size, and the fused merge's argument checks (no launch).
TEST(CudaFastAttentionFused, Arguments) {
    EXPECT_EQ(fast::attention_counters(3, 2), 3 * 2 * sizeof(uint32_t));
    EXPECT_EQ(fast::attention_counters(0, 2), sizeof(uint32_t));
    ref::PagedCache c;
    c.data = reinterpret_cast<void*>(16);
    c.f16 = true;
    c.n_blocks = 4;
    c.block_size = 16;
    c.n_kv = 2;
    c.D = 64;
    c.head_stride = 64;
    c.row_stride = 128;
    c.block_stride = 16 * 128;
    const int32_t* ip = reinterpret_cast<const int32_t*>(16);
    const AttnPlan plan{1, ip, ip, ip, 4, 16};
    float* p = reinterpret_cast<float*>(16);
    auto call = [&](fast::AttnMerge m) {
        fast::attention(p, 4 * 64, 64, p, 4 * 64, 64, 1, 4, c, c, plan, 1.f, 8, p, nullptr, fast::AttnKernel::Mma, {},
                        m);
    };
    EXPECT_THROW(call({true, 0, nullptr}), Error);  // no counters
    EXPECT_THROW(call({true, 3, reinterpret_cast<uint32_t*>(16)}), Error);  // clusters of 3
}
