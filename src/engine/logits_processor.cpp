// Logit bias, repetition / presence / frequency penalties, and log-probabilities.
#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"

namespace tessera {

LogitsProcessor::LogitsProcessor(const GenerationParams& p, const std::vector<int32_t>& prompt, int vocab)
    : p_(p), vocab_(vocab) {
    TS_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0.f,
             "repetition_penalty must be > 0 (got {})", p.repetition_penalty);
    TS_CHECK(p.presence_penalty >= -2.f && p.presence_penalty <= 2.f, "presence_penalty must be in [-2, 2] (got {})",
             p.presence_penalty);
    TS_CHECK(p.frequency_penalty >= -2.f && p.frequency_penalty <= 2.f,
             "frequency_penalty must be in [-2, 2] (got {})", p.frequency_penalty);
    for (const auto& [id, bias] : p.logit_bias) {
        TS_CHECK(id >= 0 && id < vocab, "logit_bias: token id {} is outside the vocabulary [0, {})", id, vocab);
        TS_CHECK(std::isfinite(bias), "logit_bias: the bias of token {} is not finite", id);
    }
    if (p.repetition_penalty != 1.f)
        for (int32_t t : prompt) seen_.insert(t);
}

bool LogitsProcessor::active() const {
    return !p_.logit_bias.empty() || p_.repetition_penalty != 1.f || p_.presence_penalty != 0.f ||
           p_.frequency_penalty != 0.f;
}

void LogitsProcessor::apply(float* logits) const {
    for (const auto& [id, bias] : p_.logit_bias) logits[id] += bias;
    if (p_.repetition_penalty != 1.f)
        for (int32_t t : seen_) {
            float& x = logits[t];
            x = x > 0.f ? x / p_.repetition_penalty : x * p_.repetition_penalty;
        }
    if (p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f)
        for (const auto& [t, n] : counts_) logits[t] -= p_.presence_penalty + p_.frequency_penalty * float(n);
}

void LogitsProcessor::accept(int32_t token) {
    if (token < 0 || token >= vocab_) return;
    if (p_.repetition_penalty != 1.f) seen_.insert(token);
    if (p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f) ++counts_[token];
}

namespace {
// max and log Σ exp(x - max) over the non-NaN logits.
std::pair<double, double> log_normalizer(const float* logits, int vocab) {
    double mx = -INFINITY;
    for (int i = 0; i < vocab; ++i)
        if (!std::isnan(logits[i])) mx = std::max(mx, double(logits[i]));
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i)
        if (!std::isnan(logits[i]) && std::isfinite(mx)) sum += std::exp(double(logits[i]) - mx);
    return {mx, std::log(sum)};
}
}  // namespace

float token_logprob(const float* logits, int vocab, int32_t token) {
    TS_CHECK(token >= 0 && token < vocab, "logprob of token {} outside the vocabulary", token);
    if (std::isnan(logits[token])) return -INFINITY;
    const auto [mx, lse] = log_normalizer(logits, vocab);
    return float(double(logits[token]) - mx - lse);
}

std::vector<TokenLogprob> top_logprobs(const float* logits, int vocab, int n) {
    n = std::clamp(n, 0, vocab);
    const auto [mx, lse] = log_normalizer(logits, vocab);
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int i = 0; i < vocab; ++i) ids[size_t(i)] = i;
    auto val = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return val(a) > val(b) || (val(a) == val(b) && a < b); });
    std::vector<TokenLogprob> out;
    for (int i = 0; i < n; ++i) out.push_back({ids[size_t(i)], float(double(val(ids[size_t(i)])) - mx - lse)});
    return out;
}

}  // namespace tessera
