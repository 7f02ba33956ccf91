// Token sampling from one row of logits: greedy, or temperature → top-k → top-p → min-p → a
// seeded draw. One Sampler per request (it owns the request's RNG stream). The filters keep what
// Backend::sample keeps (kernels/sampling.h: top-p's mass in fixed point); the draw is an
// inverse CDF over the kept tokens in id order with the request's mt19937 stream. Linear in the
// vocabulary: selections, no sort of the row.
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

    // Whether a row's n largest logits decide this sampler's draw: greedy, or top-k with
    // 1 <= top_k < n (top-p and min-p then act within the top k; the (top_k+1)-th candidate
    // tells whether the row has more than top_k finite logits).
    bool decided_by_top(int n) const;
    // sample() from a row's top candidates instead of the whole row — the same token, and the
    // same random draw, whenever decided_by_top(n): logits / ids [n] as Backend::top_k gives them
    // (descending logit, ties by the lower id; NaN / -1 padding).
    int32_t sample_sorted(const float* logits, const int32_t* ids, int n);

private:
    struct Cand {
        float logit;
        int32_t id;
    };
    struct Ranked {  // a kept-set candidate as the filters rank it
        float logit;
        int32_t id;
        uint64_t mass;  // top-p's fixed-point mass (kernels/sampling.h)
    };
    // Narrows cand_ (the row's finite logits in id order, or its +inf ones) to the tokens the
    // filters keep, still in id order, and fills prob_ with their unnormalised probabilities.
    void filter(float top);
    double uniform();  // [0, 1), 53 random bits
    int32_t draw();    // one draw from cand_ weighted by prob_, walked in id order

    SamplingParams p_;
    std::mt19937_64 rng_;
    std::vector<Cand> cand_;
    std::vector<Ranked> work_;
    std::vector<double> prob_;
};

}  // namespace tessera
