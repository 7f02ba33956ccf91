// Pool sizing from need and budget, on the flagship's shapes (Qwen3.6-35B-A3B: 10 attention
// layers with 2 KV heads of 256, 30 Gated DeltaNet layers with 32 value heads of 128x128 and a
// 4-tap conv over 8192 channels) and a dense model.
#include <gtest/gtest.h>

#include "core/status.h"
#include "engine/pool_plan.h"

using namespace tessera;

namespace {

CacheSpec flagship() {
    CacheSpec s;
    s.attn_layers = 10;
    s.n_kv_heads = 2;
    s.head_dim = 256;
    s.state_layers = 30;
    s.conv_channels = 2 * 16 * 128 + 32 * 128;
    s.conv_k = 4;
    s.n_v_heads = 32;
    s.dk = 128;
    s.dv = 128;
    return s;
}

constexpr int64_t GiB = 1ll << 30;

}  // namespace

TEST(PoolPlan, FlagshipBytesPerTokenAndPerSlot) {
    // K and V, 10 layers, 2 heads x 256, f16: 20 KiB per token.
    EXPECT_EQ(kv_bytes_per_block(flagship(), 16, 2), 16 * 20480);
    // 30 layers x (3 x 8192 conv inputs + 32 x 128 x 128 state) x 4 bytes: ~62.8 MiB.
    EXPECT_EQ(state_bytes_per_slot(flagship()), 30ll * (3 * 8192 + 32 * 128 * 128) * 4);
}

TEST(PoolPlan, FlagshipUnderEightGiB) {
    PoolRequest r;
    r.budget_bytes = 8 * GiB;
    r.model_ctx = 262144;
    const PoolPlan p = plan_pools(flagship(), r);
    const int64_t slot = 30ll * (3 * 8192 + 32 * 128 * 128) * 4, block = 16 * 20480;
    EXPECT_EQ(p.n_snapshots, int64_t(double(8 * GiB) * 0.15) / slot);
    const int64_t rest = 8 * GiB - p.n_snapshots * slot;
    EXPECT_EQ(p.n_slots, rest / 2 / slot);
    EXPECT_EQ(p.n_blocks, (rest - p.n_slots * slot) / block);
    EXPECT_LE(p.kv_bytes() + p.state_bytes() + p.snapshot_bytes(), 8 * GiB);
    EXPECT_EQ(p.max_num_seqs, p.n_slots);
    // The 256K context does not fit next to everything else; it is clamped to what the pool holds.
    EXPECT_EQ(p.max_model_len, std::min<int64_t>(262144, p.n_blocks * 16));
    EXPECT_NE(p.summary().find("KV pool: " + std::to_string(p.n_blocks) + " blocks = " +
                               std::to_string(p.n_blocks * 16) + " tokens"),
              std::string::npos)
        << p.summary();
}

// A budget of exactly what the asked sequences need at full length (the CPU's default budget)
// gives every one of them its state slot and its KV, though the states are most of it: with the
// slots capped at half the budget, 64 sequences of 544 tokens got 37 slots.
TEST(PoolPlan, BudgetSizedFromNeedHoldsEveryAskedSequence) {
    PoolRequest r;
    r.max_num_seqs = 64;
    r.max_model_len = 544;
    r.prefix_caching = false;
    const int64_t slot = state_bytes_per_slot(flagship()), block = kv_bytes_per_block(flagship(), 16, 2);
    r.budget_bytes = 64 * (slot + 34 * block);
    EXPECT_EQ(default_cpu_budget(flagship(), r) <= r.budget_bytes, true);
    const PoolPlan p = plan_pools(flagship(), r);
    EXPECT_EQ(p.n_slots, 64);
    EXPECT_EQ(p.max_num_seqs, 64);
    EXPECT_EQ(p.n_blocks, 64 * 34);
    EXPECT_EQ(p.max_model_len, 544);
    // One sequence's worth less: 63 full sequences, not fewer.
    r.budget_bytes -= slot + 34 * block;
    EXPECT_EQ(plan_pools(flagship(), r).n_slots, 63);
}

TEST(PoolPlan, AskedForLengthThatCannotFitIsRefused) {
    PoolRequest r;
    r.budget_bytes = 1 * GiB;
    r.max_model_len = 262144;  // 5 GiB of KV alone
    try {
        plan_pools(flagship(), r);
        FAIL() << "expected TooLarge";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::TooLarge);
        EXPECT_NE(std::string(e.what()).find("262144"), std::string::npos) << e.what();
    }
}

TEST(PoolPlan, BudgetBelowOneStateSlotIsRefused) {
    PoolRequest r;
    r.budget_bytes = 32ll << 20;  // < one 62.8 MiB slot
    EXPECT_THROW(plan_pools(flagship(), r), Error);
}

TEST(PoolPlan, DenseModelIsSizedFromNeed) {
    CacheSpec s;
    s.attn_layers = 28;
    s.n_kv_heads = 8;
    s.head_dim = 128;
    PoolRequest r;
    r.budget_bytes = 64 * GiB;
    r.model_ctx = 4096;
    r.max_num_seqs = 4;
    r.prefix_caching = false;
    const PoolPlan p = plan_pools(s, r);
    EXPECT_EQ(p.n_slots, 0);
    EXPECT_EQ(p.n_blocks, 4 * 4096 / 16);  // every sequence at full length, no more
    EXPECT_EQ(p.max_model_len, 4096);
    r.budget_bytes = 100 * kv_bytes_per_block(s, 16, 2);
    const PoolPlan q = plan_pools(s, r);
    EXPECT_EQ(q.n_blocks, 100);
    EXPECT_EQ(q.max_model_len, 1600);
}
