// C ABI, many requests: per-request streams and batched requests (tessera_add_request +
// tessera_step) give each request the tokens it gets alone, and events beyond cap wait.
#include <map>
#include <string>
#include <thread>

#include "capi_test_util.h"

using namespace capi_test;

namespace {

struct Collected {
    std::map<std::string, std::vector<int32_t>> tokens;
    std::map<std::string, int> finished;                      // final events seen
    std::map<std::string, tessera_finish_reason> reason;
    std::map<std::string, bool> event_after_final;
    int calls = 0;
    int events = 0;
};

// Calls tessera_step(cap) until it hands out nothing.
Collected drain(tessera_engine* e, int32_t cap) {
    Collected c;
    std::vector<tessera_token_event> ev(static_cast<size_t>(cap));
    for (;;) {
        int32_t n = -1;
        const tessera_status st = tessera_step(e, ev.data(), cap, &n);
        EXPECT_EQ(st, TESSERA_STATUS_OK) << tessera_last_error();
        if (st != TESSERA_STATUS_OK || n == 0) break;
        EXPECT_LE(n, cap);
        ++c.calls;
        c.events += n;
        for (int32_t i = 0; i < n; ++i) {
            const std::string id = ev[size_t(i)].request_id;
            if (c.finished[id]) c.event_after_final[id] = true;
            if (ev[size_t(i)].token >= 0) c.tokens[id].push_back(ev[size_t(i)].token);
            if (ev[size_t(i)].finished) {
                ++c.finished[id];
                c.reason[id] = ev[size_t(i)].finish_reason;
            } else {
                EXPECT_EQ(ev[size_t(i)].finish_reason, TESSERA_FINISH_REASON_NONE);
            }
        }
    }
    return c;
}

struct Prompts {
    std::vector<int32_t> g, g_want, a, b;
};

Prompts prompts() {
    const auto ref = reference();
    return {ids(ref["greedy"]["prompt_ids"]), ids(ref["greedy"]["new_ids"]), ids(ref["prompts"]["a"]["ids"]),
            ids(ref["prompts"]["b"]["ids"])};
}

}  // namespace

TEST(CapiRequests, PerRequestStreamsMatchTheSingleStream) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const tessera_sampling s = greedy(8);
    const auto alone_a = run_stream(e.get(), nullptr, p.a, s);
    ASSERT_EQ(alone_a.size(), 8u);

    // Two per-request streams, interleaved token by token.
    int32_t tg = -1, ta = -1;
    ASSERT_EQ(tessera_prefill_req(e.get(), "g", p.g.data(), int32_t(p.g.size()), &s, &tg), TESSERA_STATUS_OK)
        << tessera_last_error();
    ASSERT_EQ(tessera_prefill_req(e.get(), "a", p.a.data(), int32_t(p.a.size()), &s, &ta), TESSERA_STATUS_OK)
        << tessera_last_error();
    std::vector<int32_t> got_g{tg}, got_a{ta};
    for (int i = 1; i < 8; ++i) {
        ASSERT_EQ(tessera_decode_step_req(e.get(), "a", &ta), TESSERA_STATUS_OK) << tessera_last_error();
        ASSERT_EQ(tessera_decode_step_req(e.get(), "g", &tg), TESSERA_STATUS_OK) << tessera_last_error();
        got_a.push_back(ta);
        got_g.push_back(tg);
    }
    EXPECT_EQ(got_g, std::vector<int32_t>(p.g_want.begin(), p.g_want.begin() + 8));
    EXPECT_EQ(got_a, alone_a);
    EXPECT_EQ(tessera_decode_step_req(e.get(), "g", &tg), TESSERA_STATUS_FINISHED);
    EXPECT_NE(std::string(tessera_last_error()).find("'g'"), std::string::npos) << tessera_last_error();
    // Finished requests keep their id until tessera_finish_req.
    EXPECT_EQ(tessera_prefill_req(e.get(), "g", p.g.data(), int32_t(p.g.size()), &s, &tg),
              TESSERA_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(tessera_finish_req(e.get(), "g"), TESSERA_STATUS_OK);
    EXPECT_EQ(tessera_finish_req(e.get(), "a"), TESSERA_STATUS_OK);
    // Per-request logits are the stream's too.
    ASSERT_EQ(tessera_prefill_req(e.get(), "a2", p.a.data(), int32_t(p.a.size()), &s, &ta), TESSERA_STATUS_OK);
    int32_t n = 0;
    EXPECT_NE(tessera_get_logits(e.get(), &n), nullptr) << tessera_last_error();
    EXPECT_EQ(n, tessera_vocab_size(e.get()));
}

TEST(CapiRequests, BatchedRequestsGetTheTokensTheyGetAlone) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const auto alone_a = run_stream(e.get(), nullptr, p.a, greedy(8));
    const auto alone_b = run_stream(e.get(), nullptr, p.b, greedy(5));
    ASSERT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);

    const tessera_sampling sg = greedy(16), sa = greedy(8), sb = greedy(5);
    ASSERT_EQ(tessera_add_request(e.get(), "g", p.g.data(), int32_t(p.g.size()), &sg), TESSERA_STATUS_OK)
        << tessera_last_error();
    ASSERT_EQ(tessera_add_request(e.get(), "a", p.a.data(), int32_t(p.a.size()), &sa), TESSERA_STATUS_OK);
    ASSERT_EQ(tessera_add_request(e.get(), "b", p.b.data(), int32_t(p.b.size()), &sb), TESSERA_STATUS_OK);
    const Collected c = drain(e.get(), 64);
    EXPECT_EQ(c.tokens.at("g"), p.g_want);
    EXPECT_EQ(c.tokens.at("a"), alone_a);
    EXPECT_EQ(c.tokens.at("b"), alone_b);
    for (const char* id : {"g", "a", "b"}) {
        EXPECT_EQ(c.finished.at(id), 1) << id;
        EXPECT_EQ(c.reason.at(id), TESSERA_FINISH_REASON_LENGTH) << id;
        EXPECT_FALSE(c.event_after_final.count(id)) << id;
    }
    EXPECT_LT(c.calls, 16 + 8 + 5);  // requests were batched: steps carried several events
    // Handed-out requests free their ids.
    EXPECT_EQ(tessera_finish_req(e.get(), "g"), TESSERA_STATUS_NOT_FOUND);
    EXPECT_EQ(tessera_add_request(e.get(), "g", p.g.data(), int32_t(p.g.size()), &sg), TESSERA_STATUS_OK);
}

TEST(CapiRequests, EventsBeyondCapWaitForTheNextCall) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const tessera_sampling sg = greedy(16), sa = greedy(8);
    auto add_both = [&] {
        ASSERT_EQ(tessera_add_request(e.get(), "g", p.g.data(), int32_t(p.g.size()), &sg), TESSERA_STATUS_OK);
        ASSERT_EQ(tessera_add_request(e.get(), "a", p.a.data(), int32_t(p.a.size()), &sa), TESSERA_STATUS_OK);
    };
    add_both();
    const Collected wide = drain(e.get(), 64);
    add_both();
    const Collected narrow = drain(e.get(), 1);
    EXPECT_EQ(narrow.tokens, wide.tokens);
    EXPECT_EQ(narrow.finished, wide.finished);
    EXPECT_EQ(narrow.events, wide.events);
    EXPECT_EQ(narrow.calls, narrow.events);  // one event per call, none lost
    EXPECT_EQ(narrow.tokens.at("g"), p.g_want);
}

TEST(CapiRequests, FinishingABatchedRequestCancelsItAlone) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const tessera_sampling s = greedy(16);
    ASSERT_EQ(tessera_add_request(e.get(), "g", p.g.data(), int32_t(p.g.size()), &s), TESSERA_STATUS_OK);
    ASSERT_EQ(tessera_add_request(e.get(), "x", p.a.data(), int32_t(p.a.size()), &s), TESSERA_STATUS_OK);
    tessera_token_event ev[1];
    int32_t n = 0;
    ASSERT_EQ(tessera_step(e.get(), ev, 1, &n), TESSERA_STATUS_OK);
    ASSERT_EQ(n, 1);
    std::vector<int32_t> g;
    if (std::string(ev[0].request_id) == "g") g.push_back(ev[0].token);
    ASSERT_EQ(tessera_finish_req(e.get(), "x"), TESSERA_STATUS_OK);
    const Collected rest = drain(e.get(), 8);
    EXPECT_FALSE(rest.tokens.count("x"));  // its undelivered events were dropped
    g.insert(g.end(), rest.tokens.at("g").begin(), rest.tokens.at("g").end());
    EXPECT_EQ(g, p.g_want);
}

TEST(CapiRequests, BatchedEventsWaitWhileStreamsStep) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const auto alone_a = run_stream(e.get(), nullptr, p.a, greedy(6));
    ASSERT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);
    const tessera_sampling sg = greedy(16), sa = greedy(6);
    ASSERT_EQ(tessera_add_request(e.get(), "batched", p.g.data(), int32_t(p.g.size()), &sg), TESSERA_STATUS_OK);
    // The stream's steps also advance the batched request; its events are kept for tessera_step.
    EXPECT_EQ(run_stream(e.get(), "s", p.a, sa), alone_a);
    const Collected c = drain(e.get(), 64);
    EXPECT_EQ(c.tokens.at("batched"), p.g_want);
    EXPECT_EQ(c.finished.at("batched"), 1);
    EXPECT_FALSE(c.tokens.count("s"));  // step-mode tokens never show up in tessera_step
}

TEST(CapiRequests, ThreadsShareOneEngine) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const Prompts p = prompts();
    const tessera_sampling s = greedy(16);
    std::vector<std::vector<int32_t>> got(4);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < got.size(); ++i)
        threads.emplace_back([&, i] {
            const std::string id = std::string("t") + std::to_string(i);  // (GCC 12's -Wrestrict on "t" + ...)
            got[i] = run_stream(e.get(), id.c_str(), p.g, s);
            EXPECT_EQ(tessera_finish_req(e.get(), id.c_str()), TESSERA_STATUS_OK) << tessera_last_error();
        });
    for (auto& t : threads) t.join();
    for (const auto& g : got) EXPECT_EQ(g, p.g_want);
}

// tessera_options.pipeline: batched greedy requests give the same tokens with the pipelined decode
// on (on the CPU its chained steps read their tokens on the host) as off; an unknown mode is
// refused naming the option.
TEST(CapiRequests, PipelineOptionKeepsTheTokens) {
    const Prompts p = prompts();
    auto run = [&](const char* pipeline) {
        tessera_options o;
        tessera_options_default(&o);
        o.device = "cpu";
        o.memory_budget = int64_t(64) << 20;
        o.pipeline = pipeline;
        EnginePtr e(tessera_engine_create(fixture_dir().string().c_str(), &o));
        EXPECT_NE(e, nullptr) << tessera_last_error();
        if (!e) return Collected{};
        const tessera_sampling sg = greedy(16), sa = greedy(8), sb = greedy(5);
        EXPECT_EQ(tessera_add_request(e.get(), "g", p.g.data(), int32_t(p.g.size()), &sg), TESSERA_STATUS_OK);
        EXPECT_EQ(tessera_add_request(e.get(), "a", p.a.data(), int32_t(p.a.size()), &sa), TESSERA_STATUS_OK);
        EXPECT_EQ(tessera_add_request(e.get(), "b", p.b.data(), int32_t(p.b.size()), &sb), TESSERA_STATUS_OK);
        return drain(e.get(), 64);
    };
    const Collected on = run("on"), off = run("off");
    EXPECT_EQ(on.tokens.at("g"), p.g_want);
    EXPECT_EQ(on.tokens, off.tokens);
    EXPECT_EQ(on.finished, off.finished);

    tessera_options o;
    tessera_options_default(&o);
    o.device = "cpu";
    o.memory_budget = int64_t(64) << 20;
    o.pipeline = "sometimes";
    EXPECT_EQ(tessera_engine_create(fixture_dir().string().c_str(), &o), nullptr);
    EXPECT_EQ(tessera_last_status(), TESSERA_STATUS_INVALID_ARGUMENT) << tessera_last_error();
    EXPECT_NE(std::string(tessera_last_error()).find("pipeline"), std::string::npos) << tessera_last_error();
}
