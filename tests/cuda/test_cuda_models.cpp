// The CUDA backend's reference path end to end on the transformers fixtures: every dense and
// hybrid fixture model loaded with --device cuda gives transformers' logits within the CPU's
// tolerance (f32 and bf16 checkpoints; the reference path keeps activations f32), and the engine on the GPU reproduces the recorded greedy continuations, alone
// and with other requests in the batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine_core.h"
#include "kernels/cuda/device.h"
#include "runtime/model_loader.h"
#include "runtime/session.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

#include "../engine/pipeline_scenario.h"
#include "../fixture_ref.h"

using namespace tessera;
using tessera::fixtures::FixtureRef;
using tessera::fixtures::load_fixture;
using tessera::fixtures::rel_err;


namespace {


int argmax(const float* x, int n) {
    int b = 0;
    for (int i = 1; i < n; ++i)
        if (x[i] > x[b]) b = i;
    return b;
}

}  // namespace

class CudaFixture : public ::testing::TestWithParam<const char*> {};

namespace {
// Prompt a in chunks of 16 (prefill across steps), then prompt b as a second sequence decoded
// token by token next to a: every position's logits within 1e-3 of transformers.
void check_logits_against_transformers(const char* fixture) {
    const FixtureRef ref = load_fixture(fixture);
    LoadOptions lo;
    lo.device = "cuda";
    lo.max_batch_tokens = 64;
    LoadedModel m = load_model(ref.dir, lo);
    ASSERT_EQ(m.backend->device(), Device::CUDA);
    const int64_t V = m.config.vocab_size;
    const auto a = ref.ids("a"), b = ref.ids("b");
    const auto la = ref.logits("a"), lb = ref.logits("b");
    Session s(*m.model, 64, 16, 2);
    const int sa = s.add_sequence(), sb = s.add_sequence();
    std::vector<float> got_a;
    for (size_t i = 0; i < a.size(); i += 16) {
        std::vector<int32_t> chunk(a.begin() + long(i), a.begin() + long(std::min(a.size(), i + 16)));
        const auto l = s.feed(sa, chunk, /*all_logits=*/true);
        got_a.insert(got_a.end(), l.begin(), l.end());
    }
    EXPECT_LT(rel_err(got_a.data(), la.data(), la.size()), 1e-3) << fixture << " prompt a";
    for (size_t t = 0; t < a.size(); ++t)
        EXPECT_EQ(argmax(got_a.data() + t * V, int(V)), argmax(la.data() + t * V, int(V))) << "position " << t;
    // b token by token, each step batched with one more token of a's continuation.
    for (size_t t = 0; t < b.size(); ++t) {
        const auto l = s.decode({sb, sa}, {b[t], 1});
        EXPECT_LT(rel_err(l.data(), lb.data() + t * V, size_t(V)), 1e-3) << fixture << " b position " << t;
    }
}

// Sets an environment variable for one scope.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old, had_ = true;
        setenv(name, value, 1);
    }
    ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

private:
    const char* name_;
    std::string old_;
    bool had_ = false;
};
}  // namespace

TEST_P(CudaFixture, LogitsMatchTransformers) {
    REQUIRE_CUDA();
    check_logits_against_transformers(GetParam());
}

// The hybrid fixtures with the kernel pack's Gated DeltaNet (the default in fast mode: the fused
// decode step and the recurrent / chunked delta rule) and with the reference GDN kernels
// (TESSERA_FAST_GDN=0). f32 weights: the other ops are the reference's; the fast GDN's chunked form
// (F16Rt: f16 operands under power-of-two scales, f32 accumulators and state) stays within ~1e-4 of
// f32 on these, far inside the logits' tolerance, so the tolerance is the same.
TEST_P(CudaFixture, LogitsMatchTransformersWithFastGdn) {
    REQUIRE_CUDA();
    const std::string f = GetParam();
    if (f.find("qwen35") == std::string::npos && f.find("next") == std::string::npos) GTEST_SKIP() << "no GDN layers";
    const ScopedEnv kernels("TESSERA_KERNELS", "fast"), gdn("TESSERA_FAST_GDN", "1");
    check_logits_against_transformers(GetParam());
}

TEST_P(CudaFixture, LogitsMatchTransformersWithReferenceGdn) {
    REQUIRE_CUDA();
    const std::string f = GetParam();
    if (f.find("qwen35") == std::string::npos && f.find("next") == std::string::npos) GTEST_SKIP() << "no GDN layers";
    const ScopedEnv kernels("TESSERA_KERNELS", "fast"), gdn("TESSERA_FAST_GDN", "0");
    check_logits_against_transformers(GetParam());
}

// An engine on the GPU over a fixture: small steps and pools, 8 sequences at once.
static EngineOptions engine_options(const FixtureRef& ref) {
    EngineOptions o;
    o.model_path = ref.dir;
    o.device = "cuda";
    o.max_num_batched_tokens = 128;
    o.max_model_len = 512;
    o.max_num_seqs = 8;
    return o;
}

TEST_P(CudaFixture, EngineGreedyMatchesTransformersAloneAndBatched) {
    REQUIRE_CUDA();
    const FixtureRef ref = load_fixture(GetParam());
    const auto prompt = ref.json["greedy"]["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref.json["greedy"]["new_ids"].get<std::vector<int32_t>>();
    EngineCore core(engine_options(ref));
    std::vector<std::vector<int32_t>> got(4);
    std::vector<int> done(4, 0);
    for (int r = 0; r < 4; ++r) {
        Request q;
        q.prompt = r == 0 ? prompt : std::vector<int32_t>(size_t(20 + 37 * r), int32_t(7 * r));
        if (r == 3) q.prompt = prompt;  // the same prompt again, among others (prefix cache too)
        q.params.sampling.temperature = 0.f;
        q.params.max_tokens = int64_t(want.size());
        q.params.ignore_eos = true;
        q.on_output = [&, r](const RequestOutput& out) {
            if (out.token >= 0) got[size_t(r)].push_back(out.token);
            if (out.finish != FinishReason::None) done[size_t(r)] = 1;
        };
        core.add(std::move(q));
        core.step();
    }
    while (core.step()) {
    }
    EXPECT_TRUE(done[0] && done[1] && done[2] && done[3]);
    EXPECT_EQ(got[0], want) << GetParam();
    EXPECT_EQ(got[3], want) << GetParam() << " (batched, from the prefix cache)";
    EXPECT_EQ(core.stats().kv_blocks_used, 0);
}

// Sampled requests on the GPU draw where the logits are (EngineOptions::sampling "auto" →
// Backend::sample): top_k 1 is greedy (transformers' continuation); a seed repeats its tokens,
// with or without logprobs (whose raw rows then also reach the host); a +100 bias makes its
// token every draw (penalties and bias applied on the device first); temperature 1 is not greedy.
TEST_P(CudaFixture, EngineSamplesOnTheDevice) {
    REQUIRE_CUDA();
    const FixtureRef ref = load_fixture(GetParam());
    const auto prompt = ref.json["greedy"]["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref.json["greedy"]["new_ids"].get<std::vector<int32_t>>();
    EngineCore core(engine_options(ref));
    auto run = [&](std::vector<GenerationParams> ps) {
        std::vector<std::vector<int32_t>> got(ps.size());
        for (size_t r = 0; r < ps.size(); ++r) {
            Request q;
            q.prompt = prompt;
            q.params = ps[r];
            q.params.max_tokens = int64_t(want.size());
            q.params.ignore_eos = true;
            q.on_output = [&got, r](const RequestOutput& out) {
                if (out.token >= 0) got[r].push_back(out.token);
            };
            core.add(std::move(q));
        }
        while (core.step()) {
        }
        return got;
    };
    GenerationParams top1, hot, biased, logprobs;
    top1.sampling.temperature = 0.8f;
    top1.sampling.top_k = 1;
    hot.sampling.temperature = 1.f;
    hot.sampling.top_p = 0.95f;
    hot.sampling.seed = 99;
    hot.repetition_penalty = 1.1f;
    biased = hot;
    biased.logit_bias = {{int32_t(want[0]) ^ 1, 100.f}};
    logprobs = hot;
    logprobs.logprobs = 3;
    const auto a = run({top1, hot, biased});
    const auto b = run({hot, logprobs});
    EXPECT_EQ(a[0], want) << GetParam();
    EXPECT_EQ(b[0], a[1]) << GetParam() << ": the same seed, batched otherwise";
    EXPECT_EQ(b[1], a[1]) << GetParam() << ": the same seed with logprobs";
    EXPECT_EQ(a[2], std::vector<int32_t>(want.size(), int32_t(want[0]) ^ 1)) << GetParam();
    EXPECT_NE(a[1], want) << GetParam() << ": temperature 1 drew the greedy continuation";
}

// The pipelined decode (EngineOptions::pipeline; on by default on a GPU): a greedy step launched
// before the step before it has its tokens reads them on the device (DecodeGraphs::Launch::chain).
// Through stops, cancellation, length ends, arrivals, sampled and penalised requests
// (pipeline_scenario.h) the outputs equal the engine's without it, and a conversation's second
// turn from the prefix cache too.
TEST_P(CudaFixture, EnginePipelinedDecodeGivesThePlainOutputs) {
    REQUIRE_CUDA();
    const FixtureRef ref = load_fixture(GetParam());
    auto opts = [&](const char* pipeline) {
        EngineOptions o = engine_options(ref);
        o.pipeline = pipeline;
        return o;
    };
    const pipeline_test::Outcome probe = pipeline_test::run_scenario(opts("off"), -1);
    ASSERT_GE(probe.traces[2].tokens.size(), 7u);
    const int32_t stop = probe.traces[2].tokens[6];
    const pipeline_test::Outcome off = pipeline_test::run_scenario(opts("off"), stop);
    const pipeline_test::Outcome on = pipeline_test::run_scenario(opts("on"), stop);
    for (size_t r = 0; r < off.traces.size(); ++r)
        EXPECT_EQ(on.traces[r], off.traces[r]) << GetParam() << ": request " << r;
    EXPECT_EQ(off.traces[2].finish, FinishReason::Stop);
    EXPECT_EQ(off.traces[3].finish, FinishReason::Cancelled);
    EXPECT_EQ(off.stats.steps_ahead, 0);
    EXPECT_GT(on.stats.steps_ahead, 10) << GetParam();
    EXPECT_EQ(on.stats.kv_blocks_used, 0);
    EXPECT_EQ(on.stats.state_slots_used, 0);
    EXPECT_EQ(pipeline_test::run_conversation(opts("on")), pipeline_test::run_conversation(opts("off"))) << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Models, CudaFixture,
                         ::testing::Values("qwen3_tiny", "llama_tiny", "qwen2_tiny", "qwen35moe_tiny", "qwen35_tiny",
                                           "qwen3next_tiny"));
