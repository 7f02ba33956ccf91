// LogitsProcessor (bias, repetition / presence / frequency penalties) and the log-probability
// helpers, on small vocabularies whose expected values are worked out by hand in each test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/status.h"
#include "engine/logits_processor.h"
#include "kernels/backend.h"

using namespace tessera;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

GenerationParams params() { return GenerationParams{}; }

TEST(LogitsProcessor, LogitBiasIsAdded) {
    GenerationParams p = params();
    p.logit_bias = {{0, 2.5f}, {2, -100.f}};
    LogitsProcessor lp(p, {}, 4);
    EXPECT_TRUE(lp.active());
    float x[4] = {1.f, 2.f, -1.f, 0.5f};
    lp.apply(x);
    EXPECT_EQ(x[0], 3.5f);
    EXPECT_EQ(x[1], 2.f);
    EXPECT_EQ(x[2], -101.f);
    EXPECT_EQ(x[3], 0.5f);
}

// HF RepetitionPenaltyLogitsProcessor: each distinct token of prompt + output once,
// x > 0 ? x / p : x * p; zero stays zero; unseen tokens untouched.
TEST(LogitsProcessor, RepetitionPenaltyOverPromptAndOutputOncePerToken) {
    GenerationParams p = params();
    p.repetition_penalty = 2.f;
    LogitsProcessor lp(p, {0, 2, 2, 5}, 6);  // token 2 twice in the prompt: still penalised once
    lp.accept(3);
    lp.accept(3);
    float x[6] = {4.f, 1.f, -3.f, -1.f, 7.f, 0.f};
    lp.apply(x);
    EXPECT_EQ(x[0], 2.f);   // 4 / 2
    EXPECT_EQ(x[1], 1.f);   // unseen
    EXPECT_EQ(x[2], -6.f);  // -3 · 2, not -12
    EXPECT_EQ(x[3], -2.f);  // output token: -1 · 2
    EXPECT_EQ(x[4], 7.f);   // unseen
    EXPECT_EQ(x[5], 0.f);   // seen, but 0 stays 0

    // A penalty below 1 rewards instead: 4 / 0.5 = 8, -3 · 0.5 = -1.5.
    p.repetition_penalty = 0.5f;
    LogitsProcessor reward(p, {0, 2}, 6);
    float y[6] = {4.f, 1.f, -3.f, -1.f, 7.f, 0.f};
    reward.apply(y);
    EXPECT_EQ(y[0], 8.f);
    EXPECT_EQ(y[2], -1.5f);
    EXPECT_EQ(y[3], -1.f);
}

// OpenAI: logit -= presence · [count > 0] + frequency · count, over output tokens only.
TEST(LogitsProcessor, PresenceAndFrequencyOverOutputTokens) {
    GenerationParams p = params();
    p.presence_penalty = 0.5f;
    p.frequency_penalty = 0.25f;
    LogitsProcessor lp(p, {0, 0, 2}, 5);  // prompt tokens do not count
    for (int32_t t : {1, 1, 3, 1}) lp.accept(t);
    float x[5] = {1.f, 1.f, 1.f, 1.f, 1.f};
    lp.apply(x);
    EXPECT_EQ(x[0], 1.f);
    EXPECT_EQ(x[1], -0.25f);  // 3 times: 1 - 0.5 - 0.75
    EXPECT_EQ(x[2], 1.f);
    EXPECT_EQ(x[3], 0.25f);  // once: 1 - 0.5 - 0.25
    EXPECT_EQ(x[4], 1.f);

    // Negative penalties encourage repetition: -(-1) - (-2)·2 = +5.
    p.presence_penalty = -1.f;
    p.frequency_penalty = -2.f;
    LogitsProcessor enc(p, {}, 3);
    enc.accept(2);
    enc.accept(2);
    float y[3] = {0.f, 0.f, 0.f};
    enc.apply(y);
    EXPECT_EQ(y[2], 5.f);
    EXPECT_EQ(y[0], 0.f);
}

// The order of the contract: bias, then repetition, then presence / frequency.
TEST(LogitsProcessor, BiasThenRepetitionThenPresence) {
    GenerationParams p = params();
    p.logit_bias = {{0, 1.f}};
    p.repetition_penalty = 2.f;
    p.presence_penalty = 1.f;
    LogitsProcessor lp(p, {0}, 2);
    lp.accept(1);
    float x[2] = {1.f, -2.f};
    lp.apply(x);
    EXPECT_EQ(x[0], 1.f);   // (1 + 1) / 2; repetition first would give 1 / 2 + 1 = 1.5
    EXPECT_EQ(x[1], -5.f);  // -2 · 2 - 1; presence first would give (-2 - 1) · 2 = -6
}

TEST(LogitsProcessor, DefaultsDoNothing) {
    LogitsProcessor lp(params(), {0, 1, 2}, 3);
    EXPECT_FALSE(lp.active());
    lp.accept(1);
    lp.accept(7);  // outside the vocabulary: ignored
    lp.accept(-1);
    float x[3] = {1.f, -2.f, 0.f};
    lp.apply(x);
    EXPECT_EQ(x[0], 1.f);
    EXPECT_EQ(x[1], -2.f);
    EXPECT_EQ(x[2], 0.f);
    for (auto set : {+[](GenerationParams& q) { q.repetition_penalty = 1.1f; },
                     +[](GenerationParams& q) { q.presence_penalty = 0.1f; },
                     +[](GenerationParams& q) { q.frequency_penalty = -0.1f; },
                     +[](GenerationParams& q) { q.logit_bias = {{0, 0.f}}; }}) {
        GenerationParams q = params();
        set(q);
        EXPECT_TRUE(LogitsProcessor(q, {}, 3).active());
    }
}

// Bad parameters are Invalid errors that name the field.
TEST(LogitsProcessor, RejectsBadParameters) {
    struct Case {
        const char* field;
        void (*set)(GenerationParams&);
    };
    const Case cases[] = {
        {"repetition_penalty", [](GenerationParams& q) { q.repetition_penalty = 0.f; }},
        {"repetition_penalty", [](GenerationParams& q) { q.repetition_penalty = -1.f; }},
        {"repetition_penalty", [](GenerationParams& q) { q.repetition_penalty = kNaN; }},
        {"repetition_penalty", [](GenerationParams& q) { q.repetition_penalty = kInf; }},
        {"presence_penalty", [](GenerationParams& q) { q.presence_penalty = 2.5f; }},
        {"presence_penalty", [](GenerationParams& q) { q.presence_penalty = -2.01f; }},
        {"presence_penalty", [](GenerationParams& q) { q.presence_penalty = kNaN; }},
        {"frequency_penalty", [](GenerationParams& q) { q.frequency_penalty = 3.f; }},
        {"frequency_penalty", [](GenerationParams& q) { q.frequency_penalty = kNaN; }},
        {"logit_bias", [](GenerationParams& q) { q.logit_bias = {{-1, 1.f}}; }},
        {"logit_bias", [](GenerationParams& q) { q.logit_bias = {{4, 1.f}}; }},
        {"logit_bias", [](GenerationParams& q) { q.logit_bias = {{1, kInf}}; }},
        {"logit_bias", [](GenerationParams& q) { q.logit_bias = {{1, kNaN}}; }},
    };
    for (const Case& c : cases) {
        GenerationParams q = params();
        c.set(q);
        try {
            LogitsProcessor lp(q, {}, 4);
            ADD_FAILURE() << "accepted a bad " << c.field;
        } catch (const Error& e) {
            EXPECT_EQ(e.kind(), ErrorKind::Invalid);
            EXPECT_NE(std::string(e.what()).find(c.field), std::string::npos) << e.what();
        }
    }
    // The edges are allowed.
    GenerationParams q = params();
    q.presence_penalty = -2.f;
    q.frequency_penalty = 2.f;
    q.logit_bias = {{0, -100.f}, {3, 100.f}};
    EXPECT_NO_THROW({ LogitsProcessor ok(q, {}, 4); });
}

// ---- log-probabilities ----------------------------------------------------------------------

// Logits ln(1), ln(2), ln(5), ln(2): probabilities 0.1, 0.2, 0.5, 0.2.
TEST(Logprobs, LogSoftmaxOfTheRawLogits) {
    const float x[4] = {0.f, std::log(2.f), std::log(5.f), std::log(2.f)};
    EXPECT_NEAR(token_logprob(x, 4, 0), std::log(0.1), 1e-6);
    EXPECT_NEAR(token_logprob(x, 4, 1), std::log(0.2), 1e-6);
    EXPECT_NEAR(token_logprob(x, 4, 2), std::log(0.5), 1e-6);
    // Shifted by +1000 or -1000 (exp would overflow / underflow without the max subtracted).
    for (float shift : {1000.f, -1000.f}) {
        const float y[2] = {shift, shift};
        EXPECT_NEAR(token_logprob(y, 2, 1), std::log(0.5), 1e-6) << shift;
    }
    // log(1 / (1 + e^-30)) ≈ -e^-30 = -9.36e-14: zero if summed in f32, not in double.
    const float z[2] = {0.f, -30.f};
    const float lp = token_logprob(z, 2, 0);
    EXPECT_LT(lp, 0.f);
    EXPECT_NEAR(lp, -std::exp(-30.0), 2.3e-16);  // log(sum) with sum = 1 + e^-30 held to double's 2^-52
    EXPECT_NEAR(token_logprob(z, 2, 1), -30.0, 1e-5);
}

TEST(Logprobs, NanAndInfiniteLogits) {
    const float a[3] = {kNaN, 0.f, 0.f};  // NaN counts as -inf: the others share the mass
    EXPECT_EQ(token_logprob(a, 3, 0), -kInf);
    EXPECT_NEAR(token_logprob(a, 3, 1), std::log(0.5), 1e-6);
    const float b[3] = {kInf, 5.f, kInf};  // +inf logits share all of it
    EXPECT_NEAR(token_logprob(b, 3, 0), std::log(0.5), 1e-6);
    EXPECT_EQ(token_logprob(b, 3, 1), -kInf);
    const float c[2] = {-kInf, 1.f};
    EXPECT_EQ(token_logprob(c, 2, 0), -kInf);
    EXPECT_EQ(token_logprob(c, 2, 1), 0.f);
    const float d[2] = {-kInf, kNaN};  // nothing to normalise: no token has mass
    EXPECT_EQ(token_logprob(d, 2, 0), -kInf);
    EXPECT_EQ(token_logprob(d, 2, 1), -kInf);
    EXPECT_THROW(token_logprob(c, 2, 2), Error);
    EXPECT_THROW(token_logprob(c, 2, -1), Error);
}

TEST(Logprobs, TopBestFirstTiesByLowerId) {
    // Probabilities: e^1, e^3, e^3, e^2 over their sum; NaN has none.
    const float x[5] = {1.f, 3.f, 3.f, 2.f, kNaN};
    const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0));
    const auto top = top_logprobs(x, 5, 3);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token, 1);
    EXPECT_EQ(top[1].token, 2);
    EXPECT_EQ(top[2].token, 3);
    EXPECT_NEAR(top[0].logprob, 3.0 - lse, 1e-6);
    EXPECT_NEAR(top[1].logprob, 3.0 - lse, 1e-6);
    EXPECT_NEAR(top[2].logprob, 2.0 - lse, 1e-6);
    EXPECT_EQ(top[0].logprob, token_logprob(x, 5, 1));
    EXPECT_TRUE(top_logprobs(x, 5, 0).empty());
    const auto all = top_logprobs(x, 5, 20);  // more than the vocabulary: all of it, NaN last
    ASSERT_EQ(all.size(), 5u);
    EXPECT_EQ(all[3].token, 0);
    EXPECT_EQ(all[4].token, 4);
    EXPECT_EQ(all[4].logprob, -kInf);
    // Equal logits everywhere: ids in order.
    const float flat[4] = {0.5f, 0.5f, 0.5f, 0.5f};
    const auto f = top_logprobs(flat, 4, 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(f[size_t(i)].token, i);
        EXPECT_NEAR(f[size_t(i)].logprob, std::log(0.25), 1e-6);
    }
}

}  // namespace

// The processor's edits, applied where the logits are (the CPU backend's edit_logits here, the
// GPU's in tests/cuda), give apply()'s values bit for bit: every penalty and the bias on one
// token, negative / zero / -0 logits, a repeated bias id (summed once, in both), tokens seen in
// the prompt only, in the output only, and both; each row's edits land on its own row.
TEST(LogitsProcessor, EditsAreApplyBitForBit) {
    const int V = 50;
    GenerationParams p;
    p.repetition_penalty = 1.3f;
    p.presence_penalty = 0.4f;
    p.frequency_penalty = -0.7f;
    p.logit_bias = {{3, 2.5f}, {7, -1.f}, {3, 0.25f}, {11, 0.f}};
    LogitsProcessor proc(p, {1, 3, 5, 5, 20}, V);
    for (int32_t t : {3, 9, 9, 20, 33, 9}) proc.accept(t);
    std::vector<float> row(V);
    for (int i = 0; i < V; ++i) row[size_t(i)] = i % 5 == 0 ? -0.f : float(i % 7) - 3.25f + 0.125f * float(i);
    row[3] = 0.f;
    std::vector<float> want = row;
    proc.apply(want.data());

    std::vector<float> two(2 * V);  // row 1 of two rows gets the edits
    std::copy(row.begin(), row.end(), two.begin());
    std::copy(row.begin(), row.end(), two.begin() + V);
    std::vector<LogitEdit> edits;
    proc.edits(1, edits);
    EXPECT_EQ(edits.size(), size_t(8));  // ids 1 3 5 7 9 11 20 33, and no other
    for (size_t i = 1; i < edits.size(); ++i) EXPECT_LT(edits[i - 1].id, edits[i].id);
    make_cpu_backend()->edit_logits(Tensor(two.data(), DType::F32, {2, V}), edits.data(), int64_t(edits.size()));
    for (int i = 0; i < V; ++i) {
        EXPECT_EQ(std::memcmp(&two[size_t(V + i)], &want[size_t(i)], 4), 0) << "token " << i;
        EXPECT_EQ(std::memcmp(&two[size_t(i)], &row[size_t(i)], 4), 0) << "row 0 token " << i << " was edited";
    }
    EXPECT_FLOAT_EQ(want[3], ((0.f + 2.75f) / 1.3f) - (0.4f - 0.7f * 1.f));
    LogitEdit bad;
    bad.row = 2;
    EXPECT_THROW(make_cpu_backend()->edit_logits(Tensor(two.data(), DType::F32, {2, V}), &bad, 1), Error);
}
