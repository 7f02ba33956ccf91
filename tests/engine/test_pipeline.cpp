// EngineCore's pipelined decode on the CPU fixtures (EngineOptions::pipeline "on"; on a CPU the
// chained step reads its tokens on the host, so this tests the engine's books, not the overlap):
// the outputs equal the engine's without it — tokens, finish reasons, counts and prefix-cache
// hits — through stops, cancellation, length ends and arrivals while a step is launched ahead,
// preemption, and a second conversation turn from the cache; every block and slot comes back.
// The scheduler's schedule_ahead conditions are tested in test_scheduler.cpp.
#include <gtest/gtest.h>

#include "core/status.h"
#include "engine/engine_core.h"
#include "pipeline_scenario.h"

using namespace tessera;
using namespace tessera::pipeline_test;

namespace {

EngineOptions options(const std::string& name, const char* pipeline) {
    EngineOptions o;
    o.model_path = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + name;
    o.device = "cpu";
    o.memory_budget = 64ll << 20;
    o.max_num_batched_tokens = 256;
    o.pipeline = pipeline;
    return o;
}

void expect_idle(const EngineStats& s) {
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.state_slots_used, 0);
    EXPECT_EQ(s.running + s.waiting, 0);
}

}  // namespace

class EnginePipeline : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginePipeline, GivesTheOutputsOfTheEngineWithoutIt) {
    const Outcome probe = run_scenario(options(GetParam(), "off"), -1);
    ASSERT_GE(probe.traces[2].tokens.size(), 7u);
    const int32_t stop = probe.traces[2].tokens[6];  // request 2 stops on it, mid-run
    const Outcome off = run_scenario(options(GetParam(), "off"), stop);
    const Outcome on = run_scenario(options(GetParam(), "on"), stop);
    for (size_t r = 0; r < off.traces.size(); ++r) {
        EXPECT_EQ(on.traces[r].tokens, off.traces[r].tokens) << "request " << r;
        EXPECT_EQ(on.traces[r].finish, off.traces[r].finish) << "request " << r;
        EXPECT_EQ(on.traces[r].completion, off.traces[r].completion) << "request " << r;
        EXPECT_EQ(on.traces[r].cached, off.traces[r].cached) << "request " << r;
    }
    // The scenario did what it says (with the pipeline off, as on).
    EXPECT_EQ(off.traces[2].finish, FinishReason::Stop);
    EXPECT_EQ(off.traces[2].tokens.back(), stop);
    EXPECT_LE(off.traces[2].tokens.size(), 7u);
    EXPECT_EQ(off.traces[3].finish, FinishReason::Cancelled);
    EXPECT_EQ(off.traces[3].tokens.size(), 5u);
    EXPECT_EQ(off.traces[7].finish, FinishReason::Length);
    EXPECT_EQ(off.traces[7].tokens.size(), 1u);
    for (size_t r : {0, 1, 4, 5, 6}) EXPECT_EQ(off.traces[r].finish, FinishReason::Length) << "request " << r;
    EXPECT_EQ(off.stats.steps_ahead, 0);
    EXPECT_GT(on.stats.steps_ahead, 10) << "the greedy stretches ran pipelined";
    EXPECT_EQ(on.stats.generated_tokens, off.stats.generated_tokens);
    expect_idle(off.stats);
    expect_idle(on.stats);
}

// Device sampling (the CPU's reference of Backend::sample): steps whose rows draw where the
// logits are chain too, each draw's counter one position further than the sequence's length at
// launch — the sampled request gives the same tokens as without the pipeline.
TEST_P(EnginePipeline, DeviceSampledStepsChainToo) {
    EngineOptions off = options(GetParam(), "off"), on = options(GetParam(), "on");
    off.sampling = on.sampling = "device";
    const Outcome a = run_scenario(off, -1), b = run_scenario(on, -1);
    for (size_t r = 0; r < a.traces.size(); ++r) EXPECT_EQ(b.traces[r], a.traces[r]) << "request " << r;
    EXPECT_GT(b.stats.steps_ahead, run_scenario(options(GetParam(), "on"), -1).stats.steps_ahead)
        << "the steps with the sampled request should chain as well";
    expect_idle(b.stats);
}

TEST_P(EnginePipeline, SecondTurnFromThePrefixCache) {
    const std::vector<Trace> off = run_conversation(options(GetParam(), "off"));
    const std::vector<Trace> on = run_conversation(options(GetParam(), "on"));
    ASSERT_EQ(off.size(), 2u);
    EXPECT_GT(off[1].cached, 0) << "the second turn should start from the cache";
    EXPECT_EQ(on, off);
}

INSTANTIATE_TEST_SUITE_P(Models, EnginePipeline,
                         ::testing::Values("qwen3_tiny", "llama_tiny", "qwen35moe_tiny", "qwen3next_tiny"));

// Too few KV blocks for every sequence: preemption happens in normal steps only (a step launched
// ahead allocates what it needs or is not launched); outputs stay those of the plain engine.
TEST(EnginePipelineAlone, PreemptionKeepsOutputs) {
    auto run = [](const char* pipeline) {
        EngineOptions o = options("qwen35moe_tiny", pipeline);
        o.max_model_len = 256;
        o.max_num_seqs = 6;
        o.prefix_caching = false;
        {
            EngineCore probe(o);
            const EngineStats s = probe.stats();
            o.memory_budget = 12 * (s.state_bytes / s.state_slots_total);  // half for slots, half for KV
        }
        EngineCore core(o);
        std::mt19937 rng(2);
        std::vector<Trace> t(6);
        for (int i = 0; i < 6; ++i) {
            std::vector<int32_t> p(size_t(40 + 10 * i));
            for (auto& x : p) x = int32_t(rng() % 1000u);
            add_request(core, p, greedy_params(-1), t[size_t(i)]);
        }
        while (core.step()) {
        }
        return std::make_pair(t, core.stats());
    };
    const auto [off, off_stats] = run("off");
    const auto [on, on_stats] = run("on");
    EXPECT_GT(off_stats.preemptions, 0);
    EXPECT_GT(on_stats.steps_ahead, 0);
    EXPECT_EQ(on, off);
    expect_idle(on_stats);
}

TEST(EnginePipelineAlone, OptionIsChecked) {
    EngineOptions o = options("qwen3_tiny", "sometimes");
    EXPECT_THROW(EngineCore core(o), Error);
}
