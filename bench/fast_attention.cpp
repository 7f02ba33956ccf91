// bench_fast_attention: causal prefill attention at the flagship's shape (head_dim 256, 16 query /
// 2 kv heads, f16 paged cache in shuffled blocks of 16) on device buffers: the tensor-core flash
// kernel (fast_flash_attention.h, every block shape) against the flash-decoding kernel
// (fast_attention.h). Prompts of 1K / 8K / 32K tokens from position 0, and a 2048-token chunk
// continuing 8K / 30K cached tokens. TFLOP/s over the causal pairs (bench/shapes.h
// attention_cost: 4·heads·D per pair) next to ~800 TFLOP/s of f16 mma and the 450 target.
// Decode steps (B sequences of one new token each, 4K / 32K context): the flash-decoding kernels
// (Simt, Mma at the backend's split count and at half / twice it, Mma with the fused merge —
// fast::AttnMerge, TESSERA_DECODE_MERGE=fused — at its own cluster pick and at 8 / 4 / 2, the
// cluster size in the label, the splits it took in the column) in µs and TB/s of K/V read
// (bench/shapes.h attention_cost) next to the H200's 4.8 TB/s.
//   bench_fast_attention [--runs 20] [--warmup 3] [--filter TEXT] [--old]  (--old: also time
//   fast::attention, slow at 32K)
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "cuda_timer.h"
#include "kernel_args.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/stream.h"
#include "shapes.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr int64_t H = 16, Hkv = 2, D = 256, kBlock = 16;
constexpr double kMmaFlops = 800e12, kTarget = 450e12;

struct Args {
    int runs = 20, warmup = 3;
    std::string filter;
    bool old = false;
};

DeviceBuffer upload(const void* p, size_t bytes) {
    DeviceBuffer b(std::max<size_t>(bytes, 16));
    b.upload(p, bytes);
    return b;
}

// B sequences (T new tokens in all, T / B each) ending at position kv_len: caches, plan, q and out
// on the device.
struct Case {
    DeviceBuffer k, v, q, out, q_start, kv_len, table, scratch;
    ref::PagedCache kc, vc;
    AttnPlan plan;
    int splits = 1;
};

void make_case(Case& c, int64_t T, int64_t kv_len, int64_t B = 1) {
    const int64_t per_seq = (kv_len + kBlock - 1) / kBlock, n_blocks = B * per_seq, elems = n_blocks * kBlock * Hkv * D;
    std::vector<uint16_t> h(size_t(std::min<int64_t>(elems, 1 << 22)));
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& x : h) x = f32_to_f16(u(rng));
    c.k = DeviceBuffer(size_t(elems) * 2);
    c.v = DeviceBuffer(size_t(elems) * 2);
    for (int64_t off = 0; off < elems; off += int64_t(h.size())) {  // tile the random values
        const size_t n = size_t(std::min<int64_t>(int64_t(h.size()), elems - off)) * 2;
        c.k.upload(h.data(), n, size_t(off) * 2);
        c.v.upload(h.data(), n, size_t(off) * 2);
    }
    std::vector<float> qh(size_t(T * H * D));
    for (auto& x : qh) x = u(rng);
    c.q = upload(qh.data(), qh.size() * 4);
    c.out = DeviceBuffer(qh.size() * 4);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<int32_t> qs(size_t(B) + 1), len(size_t(B), static_cast<int32_t>(kv_len));
    for (int64_t b = 0; b <= B; ++b) qs[size_t(b)] = int32_t(b * (T / B));
    c.q_start = upload(qs.data(), qs.size() * 4);
    c.kv_len = upload(len.data(), len.size() * 4);
    c.table = upload(table.data(), table.size() * 4);
    c.kc.data = c.k.data();
    c.kc.f16 = true;
    c.kc.n_blocks = n_blocks;
    c.kc.block_size = kBlock;
    c.kc.n_kv = Hkv;
    c.kc.D = D;
    c.kc.head_stride = D;
    c.kc.row_stride = Hkv * D;
    c.kc.block_stride = kBlock * Hkv * D;
    c.vc = c.kc;
    c.vc.data = c.v.data();
    c.plan = {int(B), c.q_start.as<int32_t>(), c.kv_len.as<int32_t>(), c.table.as<int32_t>(), int(per_seq), int(kBlock)};
    c.splits = fast::attention_splits(T, Hkv, n_blocks * kBlock);
    c.scratch = DeviceBuffer(std::max<size_t>(fast::attention_scratch(T, H, D, c.splits), 16));
}

void bench_case(const Args& a, Stream& stream, bench::CudaTimer& timer, const std::string& name, int64_t T,
                int64_t kv_len) {
    if (!a.filter.empty() && name.find(a.filter) == std::string::npos) return;
    Case c;
    make_case(c, T, kv_len);
    const double flops = bench::attention_cost(H, Hkv, D, T, kv_len, 2.0).flops;
    const float scale = 1.f / std::sqrt(float(D));
    auto row = [&](const char* kernel, double sec) {
        std::printf("| %-26s | %-22s | %6lld | %6lld | %10.1f | %7.1f | %5.1f%% | %5.1f%% |\n", name.c_str(), kernel,
                    (long long)T, (long long)kv_len, sec * 1e6, flops / sec * 1e-12, 100 * flops / sec / kMmaFlops,
                    100 * flops / sec / kTarget);
    };
    const std::pair<const char*, fast::FlashVariant> variants[] = {{"flash rows64", fast::FlashVariant::Rows64},
                                                                   {"flash rows128", fast::FlashVariant::Rows128},
                                                                   {"flash rows128x2", fast::FlashVariant::Rows128x2},
                                                                   {"flash wgmma", fast::FlashVariant::Wgmma},
                                                                   {"flash wgmma overlap", fast::FlashVariant::WgmmaOverlap},
                                                                   {"flash wgmma tma", fast::FlashVariant::WgmmaTma},
                                                                   {"flash wgmma tma overlap", fast::FlashVariant::WgmmaTmaOverlap}};
    for (auto [label, v] : variants) {
        const double sec = timer.median(a.warmup, a.runs, [&] {
            fast::flash_attention(c.out.as<float>(), H * D, D, c.q.as<float>(), H * D, D, T, H, c.kc, c.vc, c.plan,
                                  scale, v, stream);
        });
        row(v == fast::flash_variant(T, H, D) ? (std::string(label) + " (default)").c_str() : label, sec);
    }
    if (a.old || T <= 2048) {
        const double sec = timer.median(std::min(a.warmup, 1), std::min(a.runs, 5), [&] {
            fast::attention(c.out.as<float>(), H * D, D, c.q.as<float>(), H * D, D, T, H, c.kc, c.vc, c.plan, scale,
                            c.splits, c.scratch.data(), stream);
        });
        row("old fast::attention", sec);
    }
}

// B decoding sequences at context kv_len: Simt and Mma, Mma also at half and twice its split count
// and with the fused merge.
void bench_decode(const Args& a, Stream& stream, bench::CudaTimer& timer, int64_t B, int64_t kv_len) {
    const std::string name = "decode " + std::to_string(B) + " x " + std::to_string(kv_len / 1024) + "K";
    if (!a.filter.empty() && name.find(a.filter) == std::string::npos) return;
    Case c;
    make_case(c, B, kv_len, B);
    const double bytes = double(B) * bench::attention_cost(H, Hkv, D, 1, kv_len, 2.0).bytes;
    const float scale = 1.f / std::sqrt(float(D));
    const int64_t max_ctx = int64_t(c.plan.max_blocks) * kBlock;
    const int simt = fast::attention_splits(B, Hkv, max_ctx, fast::AttnKernel::Simt);
    const int mma = fast::attention_splits(B, Hkv, max_ctx, fast::AttnKernel::Mma);
    const std::tuple<const char*, fast::AttnKernel, int, int> runs[] = {  // label, kernel, splits, fused cluster
        {"simt", fast::AttnKernel::Simt, simt, -1},
        {"mma (default)", fast::AttnKernel::Mma, mma, -1},
        {"mma, half the splits", fast::AttnKernel::Mma, std::max(1, mma / 2), -1},
        {"mma, twice the splits", fast::AttnKernel::Mma, std::min(int(fast::kAttnMaxSplits), 2 * mma), -1},
        {"mma fused", fast::AttnKernel::Mma, mma, 0},
        {"mma fused", fast::AttnKernel::Mma, mma, 8},
        {"mma fused", fast::AttnKernel::Mma, mma, 4},
        {"mma fused", fast::AttnKernel::Mma, mma, 2}};
    DeviceBuffer counters(fast::attention_counters(B, Hkv));
    counters.fill(0, counters.size(), 0, stream.get());
    for (auto [label, kernel, splits, cluster] : runs) {
        DeviceBuffer scratch(std::max<size_t>(fast::attention_scratch(B, H, D, splits), 16));
        const fast::AttnMerge merge{cluster >= 0, std::max(cluster, 0), counters.as<uint32_t>()};
        std::string what = label;
        int took = splits;
        if (cluster >= 0) {
            const int C = fast::attention_fused_cluster(B, Hkv, D, splits, cluster);
            what += ", C " + std::to_string(C) + (cluster == 0 ? " (auto)" : "");
            took = splits / C * C;
        }
        const double sec = timer.median(a.warmup, a.runs, [&] {
            fast::attention(c.out.as<float>(), H * D, D, c.q.as<float>(), H * D, D, B, H, c.kc, c.vc, c.plan, scale,
                            splits, scratch.data(), stream, kernel, {}, merge);
        });
        std::printf("| %-26s | %-22s | %6d | %6lld | %10.2f | %7.2f | %5.1f%% | TB/s, %% of 4.8 |\n", name.c_str(),
                    what.c_str(), took, (long long)kv_len, sec * 1e6, bytes / sec * 1e-12, 100 * bytes / sec / 4.8e12);
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a;
        bench::KernelArgs args("bench_fast_attention [--runs N (20)] [--warmup N (3)] [--filter TEXT] [--old]\n");
        args.count("--runs", a.runs, 1).count("--warmup", a.warmup, 0).text("--filter", a.filter).flag("--old", a.old);
        if (!args.parse(argc, argv)) return 0;
        Stream stream;
        bench::CudaTimer timer(stream.get());
        std::printf("bench_fast_attention: D %lld, %lld q / %lld kv heads, f16 cache, blocks of %lld; median of %d "
                    "runs; %% of 800 TFLOP/s mma and of the 450 target\n",
                    (long long)D, (long long)H, (long long)Hkv, (long long)kBlock, a.runs);
        std::printf("| %-26s | %-22s | %6s | %6s | %10s | %7s | %6s | %6s |\n", "case", "kernel", "T", "ctx", "median us",
                    "TFLOP/s", "% mma", "% tgt");
        bench_case(a, stream, timer, "prefill 1K", 1024, 1024);
        bench_case(a, stream, timer, "prefill 8K", 8192, 8192);
        bench_case(a, stream, timer, "prefill 32K", 32768, 32768);
        bench_case(a, stream, timer, "chunk 2K after 8K", 2048, 8192 + 2048);
        bench_case(a, stream, timer, "chunk 2K after 30K", 2048, 30720 + 2048);
        std::printf("\n| %-26s | %-22s | %6s | %6s | %10s | %7s | %6s |\n", "case", "kernel", "splits", "ctx",
                    "median us", "TB/s", "% bw");
        for (int64_t B : {1, 8, 64})
            for (int64_t ctx : {4096, 32768})
                if (B * ctx <= 8 * 32768) bench_decode(a, stream, timer, B, ctx);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_attention: %s\n", e.what());
        return 1;
    }
    return 0;
}
