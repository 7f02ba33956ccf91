// Per-request logits processing before sampling: logit bias, repetition / presence / frequency
// penalties, and log-probabilities of the raw model distribution. One LogitsProcessor per
// request; it keeps the counts of output tokens the penalties need.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "engine/request.h"
#include "kernels/logit_edit.h"

namespace tessera {

class LogitsProcessor {
public:
    // Validates the penalties and biases (throws Error(Invalid) with the field name): repetition
    // penalty > 0, presence / frequency in [-2, 2], bias ids in [0, vocab) and values finite.
    LogitsProcessor(const GenerationParams& p, const std::vector<int32_t>& prompt, int vocab);

    // Applies, in place: logit bias (added; a repeated id's biases are summed first), repetition
    // penalty over prompt + output tokens
    // (x > 0 ? x / p : x * p), then presence (-= p if the token was output) and frequency
    // (-= f · count) over output tokens.
    void apply(float* logits) const;
    void accept(int32_t token);  // a token was generated: counts for the penalties
    // The same as edits of logit row `row` (one per token touched, by id), appended to `out`:
    // applied where the logits are (Backend::edit_logits), they give apply()'s values bit for bit.
    void edits(int32_t row, std::vector<LogitEdit>& out) const;

    bool active() const;  // anything to apply?

private:
    GenerationParams p_;
    int vocab_;
    std::vector<std::pair<int32_t, float>> bias_;  // logit_bias by id, a repeated id's biases summed
    std::unordered_set<int32_t> seen_;             // prompt + output (repetition penalty)
    std::unordered_map<int32_t, int32_t> counts_;  // output only
};

// log softmax of the raw logits at `token`, and the top n (n >= 0, best first, ties by lower id).
// NaN logits count as -inf.
float token_logprob(const float* logits, int vocab, int32_t token);
std::vector<TokenLogprob> top_logprobs(const float* logits, int vocab, int n);

}  // namespace tessera
