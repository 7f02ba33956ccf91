// A run of EngineCore that exercises its pipelined decode (EngineOptions::pipeline): requests
// that stop on a token, are cancelled, or end by length while the step after theirs is already
// launched, arrivals while one is in flight, and sampled and penalised requests (whose steps are
// not chained) among greedy ones. Events are triggered by token counts, never by step counts, so
// the run means the same with the pipeline on or off. Shared by the CPU test
// (tests/engine/test_pipeline.cpp) and the GPU one (tests/cuda/test_cuda_models.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/engine_core.h"

namespace tessera::pipeline_test {

struct Trace {
    std::vector<int32_t> tokens;
    FinishReason finish = FinishReason::None;
    int64_t completion = -1, cached = -1;
    bool operator==(const Trace&) const = default;
};

struct Outcome {
    std::vector<Trace> traces;
    EngineStats stats;  // after the run
};

inline uint64_t add_request(EngineCore& core, std::vector<int32_t> prompt, GenerationParams p, Trace& t) {
    Request r;
    r.prompt = std::move(prompt);
    r.params = std::move(p);
    r.on_output = [&t](const RequestOutput& o) {
        if (o.token >= 0) t.tokens.push_back(o.token);
        if (o.finish != FinishReason::None) {
            t.finish = o.finish;
            t.completion = o.completion_tokens;
            t.cached = o.cached_tokens;
        }
    };
    return core.add(std::move(r));
}

inline GenerationParams greedy_params(int64_t max_tokens) {
    GenerationParams p;
    p.sampling.temperature = 0.f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    return p;
}

// Eight requests (by index):
//   0  1-token prompt, greedy, 12 tokens          4  arrives once 1 has 8 tokens: 33, greedy, 20
//   1  65 tokens, greedy, 40 (the clock below)    5  once 1 has 12: sampled (seeded), 10
//   2  17 tokens, greedy, 30, stops on stop_id    6  once 1 has 25: greedy with a repetition penalty, 6
//   3  100 tokens, greedy, 30, cancelled at 5     7  once 1 has 30: greedy, 1 token
// stop_id < 0: request 2 has no stop token.
inline Outcome run_scenario(const EngineOptions& o, int32_t stop_id) {
    EngineCore core(o);
    const int vocab = int(std::min<int64_t>(core.config().vocab_size, 1000));
    std::mt19937 rng(5);
    auto prompt = [&](int n) {
        std::vector<int32_t> t(size_t(n), 0);
        for (auto& x : t) x = int32_t(rng() % uint32_t(vocab));
        return t;
    };
    std::vector<std::vector<int32_t>> prompts;
    for (int n : {1, 65, 17, 100, 33, 50, 20, 9}) prompts.push_back(prompt(n));
    std::vector<GenerationParams> params = {greedy_params(12), greedy_params(40), greedy_params(30),
                                            greedy_params(30), greedy_params(20), greedy_params(10),
                                            greedy_params(6),  greedy_params(1)};
    if (stop_id >= 0) params[2].stop_token_ids = {stop_id};
    params[5].sampling.temperature = 0.9f;
    params[5].sampling.top_p = 0.95f;
    params[5].sampling.seed = 17;
    params[6].repetition_penalty = 1.3f;
    const size_t arrive_at[8] = {0, 0, 0, 0, 8, 12, 25, 30};  // request 1's tokens before it arrives

    Outcome out;
    out.traces.resize(8);
    std::vector<uint64_t> ids(8, 0);
    std::vector<bool> added(8, false);
    bool cancelled = false;
    for (int guard = 0; guard < 10000; ++guard) {
        for (size_t r = 0; r < 8; ++r)
            if (!added[r] && out.traces[1].tokens.size() >= arrive_at[r]) {
                ids[r] = add_request(core, prompts[r], params[r], out.traces[r]);
                added[r] = true;
            }
        if (!cancelled && out.traces[3].tokens.size() >= 5) {
            core.cancel(ids[3]);
            cancelled = true;
        }
        const bool all_added = std::find(added.begin(), added.end(), false) == added.end();
        if (!core.step() && all_added) break;
    }
    out.stats = core.stats();
    return out;
}

// A two-turn conversation: the second prompt is the first prompt, its answer and more, so it
// starts from the prefix cache (blocks and, on hybrid models, the decode-time state snapshot).
inline std::vector<Trace> run_conversation(const EngineOptions& o) {
    EngineCore core(o);
    const int vocab = int(std::min<int64_t>(core.config().vocab_size, 1000));
    std::mt19937 rng(8);
    std::vector<int32_t> p1(130);
    for (auto& x : p1) x = int32_t(rng() % uint32_t(vocab));
    std::vector<Trace> t(2);
    add_request(core, p1, greedy_params(70), t[0]);
    while (core.step()) {
    }
    std::vector<int32_t> p2 = p1;
    p2.insert(p2.end(), t[0].tokens.begin(), t[0].tokens.end());
    for (int i = 0; i < 20; ++i) p2.push_back(int32_t(rng() % uint32_t(vocab)));
    add_request(core, p2, greedy_params(20), t[1]);
    while (core.step()) {
    }
    return t;
}

}  // namespace tessera::pipeline_test
