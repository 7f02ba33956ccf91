// C ABI, single stream: prefill / decode_step reproduce transformers' greedy continuation and
// logits (tests/fixtures/qwen3_tiny), and the stream ends with FINISHED at max_tokens, stop ids
// and EOS.
#include <algorithm>
#include <cmath>
#include <string>

#include "capi_test_util.h"

using namespace capi_test;

namespace {

float max_abs(const float* x, size_t n) {
    float m = 0.f;
    for (size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
    return m;
}

}  // namespace

TEST(CapiStream, GreedyContinuationMatchesTransformers) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const auto g = reference()["greedy"];
    const std::vector<int32_t> want = ids(g["new_ids"]);
    const auto got = run_stream(e.get(), nullptr, ids(g["prompt_ids"]), greedy(int64_t(want.size())));
    EXPECT_EQ(got, want);
    // Starting over with the same history (now from the prefix cache) gives the same tokens.
    EXPECT_EQ(run_stream(e.get(), nullptr, ids(g["prompt_ids"]), greedy(int64_t(want.size()))), want);
}

TEST(CapiStream, LogitsMatchTransformersAtTheLastPromptPosition) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const auto a = reference()["prompts"]["a"];
    const std::vector<int32_t> prompt = ids(a["ids"]);
    const std::vector<float> want = reference_logits("a", int64_t(prompt.size()) - 1);
    ASSERT_FALSE(want.empty());

    const tessera_sampling s = greedy(4);
    int32_t tok = -1, n = 0;
    ASSERT_EQ(tessera_prefill(e.get(), prompt.data(), int32_t(prompt.size()), &s, &tok), TESSERA_STATUS_OK)
        << tessera_last_error();
    const float* got = tessera_get_logits(e.get(), &n);
    ASSERT_NE(got, nullptr) << tessera_last_error();
    ASSERT_EQ(n, int32_t(want.size()));
    float err = 0.f;
    for (int32_t i = 0; i < n; ++i) err = std::max(err, std::fabs(got[i] - want[size_t(i)]));
    EXPECT_LE(err / max_abs(want.data(), want.size()), 1e-3f);
    // Greedy: the returned token is the argmax of the returned logits, at every step.
    EXPECT_EQ(tok, int32_t(std::max_element(got, got + n) - got));
    ASSERT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_OK) << tessera_last_error();
    got = tessera_get_logits(e.get(), &n);
    ASSERT_NE(got, nullptr) << tessera_last_error();
    ASSERT_EQ(n, int32_t(want.size()));
    EXPECT_EQ(tok, int32_t(std::max_element(got, got + n) - got));

    // Another call in between: the logits are gone (they belong to the last returned token).
    ASSERT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);
    EXPECT_EQ(tessera_get_logits(e.get(), &n), nullptr);
    EXPECT_EQ(n, 0);
}

TEST(CapiStream, MaxTokensEndsTheStream) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const auto g = reference()["greedy"];
    const std::vector<int32_t> prompt = ids(g["prompt_ids"]), full = ids(g["new_ids"]);
    for (int64_t max_tokens : {1, 4}) {
        SCOPED_TRACE(max_tokens);
        EXPECT_EQ(run_stream(e.get(), nullptr, prompt, greedy(max_tokens)),
                  std::vector<int32_t>(full.begin(), full.begin() + max_tokens));
        int32_t tok = 123;
        for (int again = 0; again < 2; ++again) {  // FINISHED stays FINISHED
            EXPECT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_FINISHED);
            EXPECT_EQ(tok, -1);
            EXPECT_NE(std::string(tessera_last_error()).find("length"), std::string::npos) << tessera_last_error();
        }
    }
}

TEST(CapiStream, StopTokenIdEndsTheStream) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const auto g = reference()["greedy"];
    const std::vector<int32_t> prompt = ids(g["prompt_ids"]), full = ids(g["new_ids"]);
    // new_ids: 467 442 555 511 ...; stopping at the third token.
    tessera_sampling s = greedy(16);
    const int32_t stop[] = {full[2]};
    s.stop_token_ids = stop;
    s.n_stop_token_ids = 1;
    const auto got = run_stream(e.get(), nullptr, prompt, s);
    EXPECT_EQ(got, std::vector<int32_t>(full.begin(), full.begin() + 3));
    int32_t tok = 0;
    EXPECT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_FINISHED);
    EXPECT_NE(std::string(tessera_last_error()).find("stop"), std::string::npos) << tessera_last_error();
}

TEST(CapiStream, EosEndsTheStreamUnlessIgnored) {
    const auto g = reference()["greedy"];
    const std::vector<int32_t> prompt = ids(g["prompt_ids"]), full = ids(g["new_ids"]);
    // EOS = the fourth greedy token, from generation_config.json (no tokenizer needed).
    EnginePtr e = open_engine(model_with_eos(full[3], /*with_tokenizer=*/false));
    ASSERT_TRUE(e);
    EXPECT_EQ(run_stream(e.get(), nullptr, prompt, greedy(16)), std::vector<int32_t>(full.begin(), full.begin() + 4));
    int32_t tok = 0;
    EXPECT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_FINISHED);
    tessera_sampling s = greedy(16);
    s.ignore_eos = 1;
    EXPECT_EQ(run_stream(e.get(), nullptr, prompt, s), full);
}

TEST(CapiStream, ResetEndsTheStream) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const std::vector<int32_t> prompt = ids(reference()["greedy"]["prompt_ids"]);
    const tessera_sampling s = greedy(-1);
    int32_t tok = 0;
    ASSERT_EQ(tessera_prefill(e.get(), prompt.data(), int32_t(prompt.size()), &s, &tok), TESSERA_STATUS_OK);
    ASSERT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);
    EXPECT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_NOT_FOUND);
    EXPECT_EQ(tessera_reset(e.get()), TESSERA_STATUS_OK);  // resetting nothing is fine
    tessera_memory m{};
    m.struct_size = sizeof(m);
    ASSERT_EQ(tessera_memory_snapshot(e.get(), &m), TESSERA_STATUS_OK);
    EXPECT_EQ(m.kv_blocks_used, 0);  // the stream's blocks went back (cached ones count as free)
}

TEST(CapiStream, FinishReasons) {
    EnginePtr e = open_fixture();
    ASSERT_TRUE(e);
    const auto g = reference()["greedy"];
    const std::vector<int32_t> prompt = ids(g["prompt_ids"]), full = ids(g["new_ids"]);
    tessera_finish_reason r = TESSERA_FINISH_REASON_ERROR;
    EXPECT_EQ(tessera_get_finish_reason(e.get(), nullptr, &r), TESSERA_STATUS_NOT_FOUND);  // no stream yet
    EXPECT_EQ(tessera_get_finish_reason(e.get(), "ghost", &r), TESSERA_STATUS_NOT_FOUND);
    EXPECT_EQ(tessera_get_finish_reason(e.get(), nullptr, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);

    // Length: the max_tokens-th token is returned with OK, and only then is the reason known.
    const tessera_sampling two = greedy(2);
    int32_t tok = 0;
    ASSERT_EQ(tessera_prefill(e.get(), prompt.data(), int32_t(prompt.size()), &two, &tok), TESSERA_STATUS_OK);
    ASSERT_EQ(tessera_get_finish_reason(e.get(), nullptr, &r), TESSERA_STATUS_OK);
    EXPECT_EQ(r, TESSERA_FINISH_REASON_NONE);
    ASSERT_EQ(tessera_decode_step(e.get(), &tok), TESSERA_STATUS_OK);
    EXPECT_EQ(tok, full[1]);
    ASSERT_EQ(tessera_get_finish_reason(e.get(), nullptr, &r), TESSERA_STATUS_OK);
    EXPECT_EQ(r, TESSERA_FINISH_REASON_LENGTH);

    // Stop: the stop token is returned, then the reason is STOP.
    tessera_sampling s = greedy(16);
    s.stop_token_ids = &full[0];
    s.n_stop_token_ids = 1;
    ASSERT_EQ(tessera_prefill_req(e.get(), "r", prompt.data(), int32_t(prompt.size()), &s, &tok), TESSERA_STATUS_OK);
    EXPECT_EQ(tok, full[0]);
    ASSERT_EQ(tessera_get_finish_reason(e.get(), "r", &r), TESSERA_STATUS_OK);
    EXPECT_EQ(r, TESSERA_FINISH_REASON_STOP);
}
