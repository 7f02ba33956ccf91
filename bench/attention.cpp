// bench_attention: Backend::attention at the flagship's full-attention shape (head_dim 256, GQA
// 16 query / 2 kv heads) over the paged KV cache (blocks of 16 in shuffled order, as a pool hands
// them out): causal prefill of one sequence at 1K and 8K tokens (FLOP/s over the causal pairs)
// and one decode token at 4K and 32K context (the cache read cold; bandwidth).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "harness.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

constexpr int64_t H = Flagship::n_head, Hkv = Flagship::n_kv, D = Flagship::head_dim, kBlock = 16;

// One sequence's K/V caches (random contents), its block table and the plan for T new tokens
// ending at position kv_len.
struct Cache {
    Tensor k, v;
    AttnPlan plan;
};

Cache make_cache(Scope& sc, DType kv, int64_t T, int64_t kv_len, uint64_t seed) {
    const int64_t n_blocks = (kv_len + kBlock - 1) / kBlock;
    const int64_t elems = n_blocks * kBlock * Hkv * D;
    const std::vector<float> src = random_f32(size_t(std::min<int64_t>(elems, 1 << 20)), -1.f, 1.f, seed);
    std::vector<uint8_t> host(dtype_row_bytes(kv, elems));
    for (int64_t off = 0; off < elems; off += int64_t(src.size())) {  // tile the random values
        const int64_t n = std::min<int64_t>(int64_t(src.size()), elems - off);
        quantize_row(kv, src.data(), host.data() + dtype_row_bytes(kv, off), n);
    }
    Cache c;
    c.k = sc.tensor(kv, {n_blocks, kBlock, Hkv, D}, host.data());
    c.v = sc.tensor(kv, {n_blocks, kBlock, Hkv, D}, host.data());
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), std::mt19937_64(seed));
    c.plan.n_seqs = 1;
    c.plan.q_start = sc.ints({0, int32_t(T)});
    c.plan.kv_len = sc.ints({int32_t(kv_len)});
    c.plan.block_table = sc.ints(table);
    c.plan.max_blocks = int(n_blocks);
    c.plan.block_size = int(kBlock);
    return c;
}

void bench_case(Bench& b, const std::string& name, const std::string& dt, int64_t T, int64_t kv_len, bool cold) {
    if (!b.want(name, dt, T)) return;
    const DType kv = dtype_from_name(dt);
    TS_CHECK(kv == DType::F32 || kv == DType::F16, "--dtypes {}: a KV cache is f16 or f32", dt);
    const Cost cost = attention_cost(H, Hkv, D, T, kv_len, double(dtype_info(kv).block_bytes));
    Scope sc(b.dev());
    const double cache_bytes = 2.0 * double(kv_len) * double(Hkv * D) * double(dtype_info(kv).block_bytes);
    const int copies = cold ? b.cold_copies(cache_bytes) : 1;
    std::vector<Cache> caches;
    for (int c = 0; c < copies; ++c) caches.push_back(make_cache(sc, kv, T, kv_len, 1 + uint64_t(c)));
    const auto qh = random_f32(size_t(T * H * D), -1.f, 1.f, 9);
    const Tensor q = sc.tensor(DType::F32, {T, H, D}, qh.data()), out = sc.tensor(DType::F32, {T, H, D});
    const float scale = 1.f / std::sqrt(float(D));
    Row row{name, dt, T, cost, "", copies > 1 ? std::to_string(copies) + " copies" : ""};
    row.cold = copies > 1;
    b.run(row, [&](int i) {
        const Cache& c = caches[size_t(i % copies)];
        b.be().attention(out, q, c.k, c.v, c.plan, scale);
    });
}

}  // namespace

int main(int argc, char** argv) {
    FamilyInfo info{
        "bench_attention", "paged causal GQA attention, head_dim 256, 16 q / 2 kv heads", {1024, 8192}, {"f16"}};
    info.ctx = {4096, 32768};
    info.tokens_help = "prefill lengths, one sequence from position 0";
    info.dtypes_help = "KV cache dtypes: f16, f32";
    return run_main(info, argc, argv, [](Bench& b) {
        for (const std::string& dt : b.opt().dtypes) {
            for (int64_t T : b.opt().tokens) bench_case(b, "attn prefill " + std::to_string(T), dt, T, T, false);
            for (int64_t ctx : b.opt().ctx) bench_case(b, "attn decode ctx " + std::to_string(ctx), dt, 1, ctx, true);
        }
    });
}
