// Token sampling from one row of logits: greedy, or temperature → top-k → top-p → min-p → a
// seeded draw. One Sampler per request (it owns the request's RNG stream).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

namespace tessera {

struct SamplingParams {
    float temperature = 1.f;  // <= 0: greedy (argmax)
    float top_p = 1.f;        // nucleus: keep the smallest top set with probability mass >= top_p
    int top_k = 0;            // keep the k most likely tokens; <= 0: off
    float min_p = 0.f;        // drop tokens with p < min_p · p_max; 0: off
    uint64_t seed = 0;        // the RNG stream; equal seeds give equal samples
    // Later: repetition / presence / frequency penalties, logit bias, logprobs — applied to the
    // logits before the filters (see Sampler::sample).
};

class Sampler {
public:
    explicit Sampler(SamplingParams p);

    // A token id in [0, vocab). Throws Error on vocab <= 0. NaN logits are never chosen (unless
    // every logit is NaN, then 0).
    int32_t sample(const float* logits, int vocab);

    const SamplingParams& params() const { return p_; }

    // Greedy choice: first index of the largest non-NaN logit.
    static int32_t argmax(const float* logits, int vocab);

private:
    struct Cand {
        float logit;
        int32_t id;
    };
    // Narrows cand_ (sorted by descending logit on return) to the tokens the filters keep, and
    // fills prob_ with their unnormalised probabilities.
    void filter(const float* logits, int vocab);
    double uniform();  // [0, 1), 53 random bits

    SamplingParams p_;
    std::mt19937_64 rng_;
    std::vector<Cand> cand_;
    std::vector<double> prob_;
};

}  // namespace tessera
