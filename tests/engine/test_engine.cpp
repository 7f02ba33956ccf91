// EngineCore and Engine on the fixture models: greedy output equal to transformers' recorded
// continuation, batch invariance (a request gives the same tokens whatever else runs), prefix
// caching on a 2K-token conversation (dense and hybrid) with output identical to a run without
// the cache, preemption, cancellation freeing memory, validation errors, the threaded Engine.
#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/engine.h"
#include "engine/engine_core.h"

using namespace tessera;

namespace {

std::string fixture(const std::string& name) { return std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + name; }

EngineOptions options(const std::string& name) {
    EngineOptions o;
    o.model_path = fixture(name);
    o.device = "cpu";
    o.memory_budget = 64ll << 20;
    o.max_num_batched_tokens = 256;
    return o;
}

struct Result {
    std::vector<int32_t> tokens;
    RequestOutput final;
    bool done = false;
};

// Adds a request whose events land in `res`.
uint64_t add(EngineCore& core, std::vector<int32_t> prompt, GenerationParams p, Result& res) {
    Request r;
    r.prompt = std::move(prompt);
    r.params = std::move(p);
    r.on_output = [&res](const RequestOutput& o) {
        if (o.token >= 0) res.tokens.push_back(o.token);
        if (o.finish != FinishReason::None) {
            res.final = o;
            res.done = true;
        }
    };
    return core.add(std::move(r));
}

void run_all(EngineCore& core) {
    for (int i = 0; i < 100000 && core.step(); ++i) {
    }
}

GenerationParams greedy(int64_t max_tokens) {
    GenerationParams p;
    p.sampling.temperature = 0.f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

std::vector<int32_t> random_tokens(std::mt19937& rng, int64_t n, int vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
    return t;
}

std::vector<int32_t> generate_alone(const EngineOptions& o, const std::vector<int32_t>& prompt, GenerationParams p) {
    EngineCore core(o);
    Result r;
    add(core, prompt, std::move(p), r);
    run_all(core);
    EXPECT_TRUE(r.done);
    return r.tokens;
}

}  // namespace

class EngineFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineFixture, GreedyMatchesTransformers) {
    std::ifstream f(fixture(GetParam()) + "/reference.json");
    const auto ref = nlohmann::json::parse(f);
    const auto prompt = ref["greedy"]["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
    EngineCore core(options(GetParam()));
    Result r;
    add(core, prompt, greedy(int64_t(want.size())), r);
    run_all(core);
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.final.finish, FinishReason::Length);
    EXPECT_EQ(r.final.prompt_tokens, int64_t(prompt.size()));
    EXPECT_EQ(r.final.completion_tokens, int64_t(want.size()));
    EXPECT_EQ(r.tokens, want);
}

// Mixed prompt lengths (1, just past chunk and alignment boundaries, longer than a step's
// budget) run together give exactly the tokens each gives alone; sampled ones too (seeded).
TEST_P(EngineFixture, ConcurrentRequestsGiveTheTokensTheyGiveAlone) {
    EngineOptions o = options(GetParam());
    const int vocab = 1000;
    std::mt19937 rng(11);
    const std::vector<int64_t> lens = {1, 5, 63, 64, 65, 130, 300, 700};
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationParams> params;
    for (size_t i = 0; i < lens.size(); ++i) {
        prompts.push_back(random_tokens(rng, lens[i], vocab));
        GenerationParams p = greedy(10 + int64_t(i));
        if (i % 3 == 2) {  // some sampled, with their own seeds
            p.sampling.temperature = 0.9f;
            p.sampling.top_p = 0.95f;
            p.sampling.seed = 100 + i;
        }
        params.push_back(p);
    }
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(generate_alone(o, prompts[i], params[i]));

    EngineCore core(o);
    std::vector<Result> res(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        add(core, prompts[i], params[i], res[i]);
        core.step();  // staggered arrivals: prefills meet decodes
    }
    run_all(core);
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(res[i].done);
        EXPECT_EQ(res[i].tokens, alone[i]) << "request " << i << " (prompt of " << lens[i] << " tokens)";
    }
    const EngineStats s = core.stats();
    EXPECT_EQ(s.kv_blocks_used, 0);
    EXPECT_EQ(s.state_slots_used, 0);
    EXPECT_EQ(s.running + s.waiting, 0);
}

// Steps whose rows all sample with top-k (greedy rows among them) take only each row's top
// candidates from the model (LogitsOut::top_k), greedy ones only argmaxes, with the requests'
// penalties and bias applied as edits first; asking for logprobs forces the whole row of logits
// to the host instead. Both draw the same tokens, alone and batched together.
TEST_P(EngineFixture, TopKSamplingFromCandidatesEqualsSamplingFromTheLogits) {
    EngineOptions o = options(GetParam());
    std::mt19937 rng(23);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationParams> params;
    for (int i = 0; i < 4; ++i) {
        prompts.push_back(random_tokens(rng, 7 + 9 * i, 1000));
        GenerationParams p = greedy(12);
        if (i != 1) {
            p.sampling.temperature = 0.7f + 0.2f * float(i);
            p.sampling.top_k = i == 3 ? 127 : 20;
            p.sampling.top_p = i == 2 ? 0.8f : 1.f;
            p.sampling.min_p = i == 0 ? 0.02f : 0.f;
            p.sampling.seed = 7 + uint64_t(i);
        }
        if (i >= 1) {  // penalties and bias: applied as edits where the logits stay
            p.repetition_penalty = 1.2f;
            p.presence_penalty = i == 2 ? 0.5f : 0.f;
            p.frequency_penalty = i == 3 ? 0.3f : 0.f;
            p.logit_bias = {{int32_t(5 * i), 3.f}, {17, -2.f}};
        }
        params.push_back(p);
    }
    std::vector<std::vector<int32_t>> want;
    for (size_t i = 0; i < prompts.size(); ++i) {
        GenerationParams p = params[i];
        p.logprobs = 0;  // the whole row reaches the host
        want.push_back(generate_alone(o, prompts[i], p));
        EXPECT_EQ(generate_alone(o, prompts[i], params[i]), want.back()) << "request " << i << " alone";
    }
    EngineCore core(o);
    std::vector<Result> res(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) add(core, prompts[i], params[i], res[i]);
    run_all(core);
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(res[i].done);
        EXPECT_EQ(res[i].tokens, want[i]) << "request " << i << " batched";
    }
}

// Sampling where the logits are (EngineOptions::sampling = "device": Backend::sample, here the
// CPU's reference): a request draws the same tokens alone and batched with others, with or
// without asking for logprobs (its raw row then also reaches the host); penalties and bias are
// applied before the draw (a bias of +100 on one token makes it every draw).
TEST_P(EngineFixture, DeviceSamplingIsBatchInvariantAndAppliesEdits) {
    EngineOptions o = options(GetParam());
    o.sampling = "device";
    std::mt19937 rng(31);
    std::vector<std::vector<int32_t>> prompts;
    std::vector<GenerationParams> params;
    for (int i = 0; i < 5; ++i) {
        prompts.push_back(random_tokens(rng, 5 + 11 * i, 1000));
        GenerationParams p = greedy(10);
        if (i != 1) {
            p.sampling.temperature = 0.6f + 0.3f * float(i);
            p.sampling.top_k = i == 3 ? 300 : 0;
            p.sampling.top_p = i == 2 || i == 3 ? 0.85f : 1.f;
            p.sampling.min_p = i == 0 ? 0.05f : 0.f;
            p.sampling.seed = 70 + uint64_t(i);
        }
        if (i >= 2) {
            p.repetition_penalty = 1.3f;
            p.frequency_penalty = i == 4 ? 0.4f : 0.f;
        }
        if (i == 4) p.logit_bias = {{42, 100.f}};
        params.push_back(p);
    }
    std::vector<std::vector<int32_t>> alone;
    for (size_t i = 0; i < prompts.size(); ++i) {
        alone.push_back(generate_alone(o, prompts[i], params[i]));
        GenerationParams lp = params[i];
        lp.logprobs = 2;
        EXPECT_EQ(generate_alone(o, prompts[i], lp), alone.back()) << "request " << i << " with logprobs";
    }
    EXPECT_EQ(alone[4], std::vector<int32_t>(10, 42));
    EngineCore core(o);
    std::vector<Result> res(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        add(core, prompts[i], params[i], res[i]);
        core.step();
    }
    run_all(core);
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(res[i].done);
        EXPECT_EQ(res[i].tokens, alone[i]) << "request " << i << " batched";
    }
    o.sampling = "elsewhere";
    EXPECT_THROW(EngineCore{o}, Error);
}

// The second turn of a 2K-token conversation prefills only what follows the longest prefix it
// shares with the first (to the cache's granularity) and answers exactly as without the cache.
TEST_P(EngineFixture, PrefixCacheSecondTurnReusesTheFirst) {
    std::mt19937 rng(5);
    const std::vector<int32_t> turn1 = random_tokens(rng, 2000, 1000);
    auto conversation = [&](bool caching, RequestOutput& final2, std::vector<int32_t>& out2, int64_t& computed2) {
        EngineOptions o = options(GetParam());
        o.prefix_caching = caching;
        o.max_num_batched_tokens = 512;
        EngineCore core(o);
        Result r1;
        add(core, turn1, greedy(24), r1);
        run_all(core);
        std::vector<int32_t> turn2 = turn1;
        turn2.insert(turn2.end(), r1.tokens.begin(), r1.tokens.end());
        for (int i = 0; i < 37; ++i) turn2.push_back(int32_t(rng() % 1000));
        const int64_t before = core.stats().prompt_tokens;
        Result r2;
        add(core, turn2, greedy(16), r2);
        run_all(core);
        final2 = r2.final;
        out2 = r2.tokens;
        computed2 = core.stats().prompt_tokens - before;
        return int64_t(turn1.size() + r1.tokens.size());  // the prefix turn 2 shares with turn 1
    };
    RequestOutput with, without;
    std::vector<int32_t> out_with, out_without;
    int64_t computed_with = 0, computed_without = 0;
    const std::mt19937 saved = rng;
    const int64_t common = conversation(true, with, out_with, computed_with);
    rng = saved;
    conversation(false, without, out_without, computed_without);
    EXPECT_EQ(out_with, out_without);
    EXPECT_EQ(without.cached_tokens, 0);
    EXPECT_EQ(computed_without, with.prompt_tokens);
    // Reused: all of the common prefix down to the cache's grid (blocks of 16; 64-token aligned
    // state snapshots for hybrid models).
    const int64_t grid = (GetParam() == "qwen3_tiny" || GetParam() == "llama_tiny") ? 16 : 64;
    EXPECT_GT(with.cached_tokens, common - grid) << "common prefix " << common;
    EXPECT_LE(with.cached_tokens, common);
    EXPECT_EQ(computed_with, with.prompt_tokens - with.cached_tokens);
}

INSTANTIATE_TEST_SUITE_P(Models, EngineFixture,
                         ::testing::Values("qwen3_tiny", "llama_tiny", "qwen35moe_tiny", "qwen3next_tiny"));

// Too little KV for everyone: the newest sequences are preempted and recomputed later; every
// request still completes with exactly the tokens it gives alone.
class EnginePreemption : public ::testing::TestWithParam<std::string> {};

TEST_P(EnginePreemption, KeepsOutputsExact) {
    EngineOptions o = options(GetParam());
    o.max_model_len = 256;
    o.max_num_seqs = 6;
    o.prefix_caching = false;
    {
        EngineCore probe(o);
        const EngineStats s = probe.stats();
        const int64_t per_block = s.kv_bytes / s.kv_blocks_total;
        // Dense: 20 blocks (320 tokens). Hybrid: 6 live slots take half the budget, KV the rest.
        o.memory_budget = s.state_slots_total ? 12 * (s.state_bytes / s.state_slots_total) : 20 * per_block;
    }
    std::mt19937 rng(2);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 6; ++i) prompts.push_back(random_tokens(rng, 40 + 10 * i, 1000));
    EngineCore core(o);
    ASSERT_LT(core.stats().kv_blocks_total * 16, 6 * 256) << "the pool should not hold every sequence at full length";
    std::vector<Result> res(prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) add(core, prompts[i], greedy(-1), res[i]);
    run_all(core);
    EXPECT_GT(core.stats().preemptions, 0);
    EngineOptions roomy = options(GetParam());
    roomy.max_model_len = 256;
    roomy.prefix_caching = false;
    for (size_t i = 0; i < prompts.size(); ++i) {
        ASSERT_TRUE(res[i].done);
        EXPECT_EQ(res[i].final.finish, FinishReason::Length);
        EXPECT_EQ(res[i].tokens, generate_alone(roomy, prompts[i], greedy(-1))) << "request " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Models, EnginePreemption, ::testing::Values("qwen3_tiny", "qwen35moe_tiny"));

TEST(Engine, CancelFreesBlocksAndSlots) {
    EngineCore core(options("qwen35moe_tiny"));
    Result r;
    const uint64_t id = add(core, std::vector<int32_t>(300, 5), greedy(1000), r);
    for (int i = 0; i < 4; ++i) core.step();
    EXPECT_GT(core.stats().kv_blocks_used, 0);
    EXPECT_EQ(core.stats().state_slots_used, 1);
    core.cancel(id);
    ASSERT_TRUE(r.done);
    EXPECT_EQ(r.final.finish, FinishReason::Cancelled);
    EXPECT_EQ(core.stats().kv_blocks_used, 0);
    EXPECT_EQ(core.stats().state_slots_used, 0);
    EXPECT_FALSE(core.has_work());
    core.cancel(id);  // again: ignored
}

TEST(Engine, ValidationErrors) {
    EngineOptions o = options("qwen3_tiny");
    o.max_model_len = 100;
    o.max_queue = 2;
    EngineCore core(o);
    Result r;
    auto kind_of = [&](std::vector<int32_t> prompt, GenerationParams p) {
        try {
            add(core, std::move(prompt), std::move(p), r);
        } catch (const Error& e) {
            return int(e.kind());
        }
        return -1;
    };
    EXPECT_EQ(kind_of({}, greedy(1)), int(ErrorKind::Invalid));
    EXPECT_EQ(kind_of({1, 1000}, greedy(1)), int(ErrorKind::Invalid));
    EXPECT_EQ(kind_of({1, -1}, greedy(1)), int(ErrorKind::Invalid));
    EXPECT_EQ(kind_of(std::vector<int32_t>(100, 1), greedy(1)), int(ErrorKind::TooLarge));
    GenerationParams bad = greedy(1);
    bad.sampling.top_p = 0.f;
    EXPECT_EQ(kind_of({1}, bad), int(ErrorKind::Invalid));
    bad = greedy(1);
    bad.logit_bias = {{5000, 1.f}};
    EXPECT_EQ(kind_of({1}, bad), int(ErrorKind::Invalid));
    Result a, b;
    add(core, {1, 2}, greedy(2), a);
    add(core, {1, 2}, greedy(2), b);
    EXPECT_EQ(kind_of({1, 2}, greedy(2)), int(ErrorKind::Busy));
    run_all(core);
    EXPECT_TRUE(a.done && b.done);
}

TEST(Engine, MaxTokensZeroAndLengthCapAtMaxModelLen) {
    EngineOptions o = options("qwen3_tiny");
    o.max_model_len = 50;
    EngineCore core(o);
    Result zero, capped;
    add(core, {1, 2, 3}, greedy(0), zero);
    EXPECT_TRUE(zero.done);
    EXPECT_EQ(zero.final.finish, FinishReason::Length);
    EXPECT_TRUE(zero.tokens.empty());
    add(core, std::vector<int32_t>(40, 3), greedy(-1), capped);  // until the context is full
    run_all(core);
    EXPECT_EQ(capped.final.finish, FinishReason::Length);
    EXPECT_EQ(capped.tokens.size(), 10u);
}

TEST(Engine, StopTokenIdsAndLogprobs) {
    EngineCore core(options("qwen3_tiny"));
    std::ifstream f(fixture("qwen3_tiny") + "/reference.json");
    const auto ref = nlohmann::json::parse(f);
    const auto prompt = ref["greedy"]["prompt_ids"].get<std::vector<int32_t>>();
    const auto want = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();  // 467 442 555 511 ...
    GenerationParams p = greedy(16);
    p.stop_token_ids = {555};
    p.logprobs = 3;
    std::vector<RequestOutput> events;
    Request r;
    r.prompt = prompt;
    r.params = p;
    r.on_output = [&](const RequestOutput& o) { events.push_back(o); };
    core.add(std::move(r));
    run_all(core);
    ASSERT_EQ(events.size(), 3u);  // 467, 442, then 555 ends it
    EXPECT_EQ(events.back().token, 555);
    EXPECT_EQ(events.back().finish, FinishReason::Stop);
    for (const auto& e : events) {
        ASSERT_EQ(e.top.size(), 3u);
        EXPECT_EQ(e.top[0].token, e.token);  // greedy picks the top
        EXPECT_FLOAT_EQ(e.top[0].logprob, e.logprob);
        EXPECT_LE(e.logprob, 0.f);
        EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
        EXPECT_GE(e.top[1].logprob, e.top[2].logprob);
    }
}

TEST(Engine, StepModeGeneratesOneTokenPerResume) {
    EngineCore core(options("qwen3_tiny"));
    std::ifstream f(fixture("qwen3_tiny") + "/reference.json");
    const auto ref = nlohmann::json::parse(f);
    Request r;
    r.prompt = ref["greedy"]["prompt_ids"].get<std::vector<int32_t>>();
    r.params = greedy(-1);
    r.params.return_logits = true;
    r.step_mode = true;
    std::vector<int32_t> got;
    size_t logits_size = 0;
    r.on_output = [&](const RequestOutput& o) {
        got.push_back(o.token);
        logits_size = o.logits.size();
    };
    const uint64_t id = core.add(std::move(r));
    run_all(core);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(logits_size, 1000u);
    for (int i = 0; i < 5; ++i) {
        core.resume(id);
        run_all(core);
    }
    const auto want = ref["greedy"]["new_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(got, std::vector<int32_t>(want.begin(), want.begin() + 6));
    core.cancel(id);
}

TEST(Engine, ThreadedSubmitFromManyThreadsAndShutdown) {
    EngineOptions o = options("qwen3_tiny");
    Engine engine(o);
    std::mutex mu;
    std::condition_variable cv;
    std::map<uint64_t, Result> results;
    int finished = 0;
    auto submit = [&](std::vector<int32_t> prompt, int64_t max_tokens) {
        Request r;
        r.prompt = std::move(prompt);
        r.params = greedy(max_tokens);
        auto holder = std::make_shared<uint64_t>(0);
        r.on_output = [&](const RequestOutput& out) {
            std::lock_guard<std::mutex> lock(mu);
            Result& res = results[out.id];
            if (out.token >= 0) res.tokens.push_back(out.token);
            if (out.finish != FinishReason::None) {
                res.final = out;
                res.done = true;
                ++finished;
                cv.notify_all();
            }
        };
        return engine.submit(std::move(r));
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 4; ++i) submit(std::vector<int32_t>(size_t(5 + t + i), int32_t(t * 10 + i)), 8);
        });
    for (auto& th : threads) th.join();
    {
        std::unique_lock<std::mutex> lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(120), [&] { return finished == 32; }));
    }
    for (auto& [id, r] : results) {
        EXPECT_EQ(r.final.finish, FinishReason::Length);
        EXPECT_EQ(r.tokens.size(), 8u);
    }
    // Long requests in flight at shutdown end with Cancelled.
    for (int i = 0; i < 4; ++i) submit(std::vector<int32_t>(20, 3), 3000);
    engine.shutdown();
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(finished, 36);
    int cancelled = 0;
    for (auto& [id, r] : results) cancelled += r.final.finish == FinishReason::Cancelled;
    EXPECT_EQ(cancelled, 4);
    EXPECT_THROW(submit({1, 2}, 1), Error);
}
