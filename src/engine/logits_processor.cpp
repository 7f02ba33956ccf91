// Logit bias, repetition / presence / frequency penalties, and log-probabilities.
#include "engine/logits_processor.h"

#include <algorithm>
#include <cmath>
#include <map>

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
    std::map<int32_t, float> merged;
    for (const auto& [id, bias] : p.logit_bias) {
        TS_CHECK(id >= 0 && id < vocab, "logit_bias: token id {} is outside the vocabulary [0, {})", id, vocab);
        TS_CHECK(std::isfinite(bias), "logit_bias: the bias of token {} is not finite", id);
        merged[id] += bias;
    }
    bias_.assign(merged.begin(), merged.end());
    if (p.repetition_penalty != 1.f)
        for (int32_t t : prompt) seen_.insert(t);
}

bool LogitsProcessor::active() const {
    return !p_.logit_bias.empty() || p_.repetition_penalty != 1.f || p_.presence_penalty != 0.f ||
           p_.frequency_penalty != 0.f;
}

void LogitsProcessor::apply(float* logits) const {
    for (const auto& [id, bias] : bias_) logits[id] += bias;
    if (p_.repetition_penalty != 1.f)
        for (int32_t t : seen_) {
            float& x = logits[t];
            x = x > 0.f ? x / p_.repetition_penalty : x * p_.repetition_penalty;
        }
    if (p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f)
        for (const auto& [t, n] : counts_) logits[t] -= p_.presence_penalty + p_.frequency_penalty * float(n);
}

void LogitsProcessor::edits(int32_t row, std::vector<LogitEdit>& out) const {
    std::map<int32_t, LogitEdit> by_id;
    auto at = [&](int32_t id) -> LogitEdit& {
        LogitEdit& e = by_id[id];
        e.row = row;
        e.id = id;
        return e;
    };
    for (const auto& [id, bias] : bias_) {
        LogitEdit& e = at(id);
        e.flags |= LogitEdit::kBias;
        e.bias = bias;
    }
    if (p_.repetition_penalty != 1.f)
        for (int32_t t : seen_) {
            LogitEdit& e = at(t);
            e.flags |= LogitEdit::kRep;
            e.rep = p_.repetition_penalty;
        }
    if (p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f)
        for (const auto& [t, n] : counts_) {
            LogitEdit& e = at(t);
            e.flags |= LogitEdit::kSub;
            e.sub = p_.presence_penalty + p_.frequency_penalty * float(n);
        }
    for (const auto& [id, e] : by_id) out.push_back(e);
}

void LogitsProcessor::accept(int32_t token) {
    if (token < 0 || token >= vocab_) return;
    if (p_.repetition_penalty != 1.f) seen_.insert(token);
    if (p_.presence_penalty != 0.f || p_.frequency_penalty != 0.f) ++counts_[token];
}

namespace {

// log_softmax over the non-NaN logits, in double with max-subtraction. Degenerate rows stay
// defined: +inf logits share the mass equally; a row with nothing above -inf gives -inf.
struct LogSoftmax {
    double mx = -INFINITY, lse = 0.0;
    int64_t n_pos_inf = 0;
    LogSoftmax(const float* logits, int vocab) {
        TS_CHECK(vocab > 0, "logprobs over an empty vocabulary ({})", vocab);
        for (int i = 0; i < vocab; ++i)
            if (!std::isnan(logits[i])) mx = std::max(mx, double(logits[i]));
        if (mx == INFINITY) {
            for (int i = 0; i < vocab; ++i) n_pos_inf += logits[i] == INFINITY;
            return;
        }
        if (mx == -INFINITY) return;
        double sum = 0.0;
        for (int i = 0; i < vocab; ++i)
            if (!std::isnan(logits[i])) sum += std::exp(double(logits[i]) - mx);
        lse = std::log(sum);  // sum >= 1: the max contributes exp(0)
    }
    float operator()(float x) const {
        if (std::isnan(x) || mx == -INFINITY) return -INFINITY;
        if (mx == INFINITY) return x == INFINITY ? float(-std::log(double(n_pos_inf))) : -INFINITY;
        return float(double(x) - mx - lse);
    }
};

}  // namespace

float token_logprob(const float* logits, int vocab, int32_t token) {
    TS_CHECK(token >= 0 && token < vocab, "logprob of token {} outside the vocabulary [0, {})", token, vocab);
    return LogSoftmax(logits, vocab)(logits[token]);
}

std::vector<TokenLogprob> top_logprobs(const float* logits, int vocab, int n) {
    const LogSoftmax ls(logits, vocab);
    n = std::clamp(n, 0, vocab);
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int i = 0; i < vocab; ++i) ids[size_t(i)] = i;
    auto val = [&](int32_t i) { return std::isnan(logits[i]) ? -INFINITY : logits[i]; };
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return val(a) > val(b) || (val(a) == val(b) && a < b); });
    std::vector<TokenLogprob> out;
    out.reserve(size_t(n));
    for (int i = 0; i < n; ++i) out.push_back({ids[size_t(i)], ls(logits[ids[size_t(i)]])});
    return out;
}

}  // namespace tessera
