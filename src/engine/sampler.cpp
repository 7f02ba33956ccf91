// Sampler: temperature, top-k, top-p, min-p and a seeded draw (HF / vLLM semantics).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"

namespace tessera {

Sampler::Sampler(SamplingParams p) : p_(p), rng_(p.seed) {
    TS_CHECK(std::isfinite(p.temperature), "sampling: temperature {} is not finite", p.temperature);
    TS_CHECK(p.top_p > 0.f && p.top_p <= 1.f, "sampling: top_p {} must be in (0, 1]", p.top_p);
    TS_CHECK(p.min_p >= 0.f && p.min_p <= 1.f, "sampling: min_p {} must be in [0, 1]", p.min_p);
}

int32_t Sampler::argmax(const float* logits, int vocab) {
    TS_CHECK(vocab > 0, "sampling: empty vocabulary");
    int32_t best = -1;
    for (int i = 0; i < vocab; ++i)
        if (!std::isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    return best < 0 ? 0 : best;
}

double Sampler::uniform() { return double(rng_() >> 11) * 0x1.0p-53; }

void Sampler::filter(const float* logits, int vocab) {
    cand_.clear();
    float top = -INFINITY;
    for (int i = 0; i < vocab; ++i)
        if (!std::isnan(logits[i]) && logits[i] != -INFINITY) {
            cand_.push_back({logits[i], i});
            top = std::max(top, logits[i]);
        }
    if (top == INFINITY) {  // +inf logits share all the mass
        std::erase_if(cand_, [](const Cand& c) { return c.logit != INFINITY; });
        prob_.assign(cand_.size(), 1.0);
        return;
    }
    size_t n = cand_.size();
    if (n == 0) return;
    // Probabilities after temperature, relative to the max logit (so exp never overflows).
    const double inv_t = 1.0 / double(p_.temperature);
    auto rel_prob = [&](const Cand& c) { return std::exp((double(c.logit) - top) * inv_t); };
    auto by_logit = [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); };

    double total = -1.0;  // the mass top-p is relative to, once known
    if (p_.top_k > 0 && size_t(p_.top_k) < n) {  // top-k: the k largest, sorted
        std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), by_logit);
        n = size_t(p_.top_k);
    } else if (p_.top_p < 1.f) {
        // top-p needs a sorted prefix holding top_p of the mass: sort a growing prefix, not all.
        total = 0.0;
        for (const Cand& c : cand_) total += rel_prob(c);
        size_t m = std::min<size_t>(n, 256);
        for (;;) {
            if (m * 4 >= n) {  // most of it: a full sort is cheaper than a heap
                m = n;
                std::sort(cand_.begin(), cand_.end(), by_logit);
            } else {
                std::partial_sort(cand_.begin(), cand_.begin() + m, cand_.end(), by_logit);
            }
            double mass = 0.0;
            for (size_t i = 0; i < m; ++i) mass += rel_prob(cand_[i]);
            if (m == n || mass >= double(p_.top_p) * total) break;
            m = std::min(n, m * 8);
        }
        n = m;
    }
    cand_.resize(n);
    filter_kept(top, total);
}

// cand_ holds the kept tokens (sorted by descending logit where top-k or top-p sorted them, else
// in index order); `top` is the row's largest finite logit; `total` the mass top-p is relative
// to, or < 0 for the kept tokens' own.
void Sampler::filter_kept(float top_logit, double total) {
    size_t n = cand_.size();
    const double top = double(top_logit), inv_t = 1.0 / double(p_.temperature);
    prob_.resize(n);
    for (size_t i = 0; i < n; ++i) prob_[i] = std::exp((double(cand_[i].logit) - top) * inv_t);

    // top-p over the kept (sorted) tokens: keep a token while the mass strictly before it is
    // < top_p of the total (HF TopPLogitsWarper); always at least one.
    if (p_.top_p < 1.f) {
        if (total < 0.0) {
            total = 0.0;
            for (double q : prob_) total += q;
        }
        double before = 0.0;
        size_t keep = 0;
        while (keep < n && before < double(p_.top_p) * total) before += prob_[keep++];
        n = std::max<size_t>(keep, 1);
    }
    // min-p: drop p < min_p · p_max; probabilities are relative to the max, so p_max = 1.
    if (p_.min_p > 0.f) {
        size_t w = 0;
        for (size_t i = 0; i < n; ++i)
            if (prob_[i] >= double(p_.min_p)) {
                cand_[w] = cand_[i];
                prob_[w++] = prob_[i];
            }
        n = w;  // the max itself always survives
    }
    cand_.resize(n);
    prob_.resize(n);
}

bool Sampler::decided_by_top(int n) const {
    return p_.temperature <= 0.f || p_.top_k == 1 || (p_.top_k > 0 && p_.top_k < n);
}

int32_t Sampler::sample_sorted(const float* logits, const int32_t* ids, int n) {
    TS_CHECK(n > 0 && decided_by_top(n), "sampling: {} top candidates do not decide top_k {}", n, p_.top_k);
    // The row's argmax is its first candidate (NaN only pads: then every logit was NaN → 0).
    const int32_t first = std::isnan(logits[0]) ? 0 : ids[0];
    if (p_.temperature <= 0.f || p_.top_k == 1) return first;
    // filter() on the candidates: the finite (or +inf) ones among the top k.
    auto finite = [&](int i) { return !std::isnan(logits[i]) && logits[i] != -INFINITY; };
    const int k = p_.top_k;
    cand_.clear();
    for (int i = 0; i < k; ++i)
        if (finite(i)) cand_.push_back({logits[i], ids[i]});
    if (cand_.empty()) return first;  // every logit NaN or -inf: sample() falls back to argmax
    const float top = cand_[0].logit;
    if (top == INFINITY) {  // +inf logits share all the mass (among the candidates)
        std::erase_if(cand_, [](const Cand& c) { return c.logit != INFINITY; });
        prob_.assign(cand_.size(), 1.0);
        return draw();
    }
    if (finite(k)) {  // more than k tokens: filter()'s top-k branch (sorted; top-p over the kept)
        filter_kept(top, -1.0);
        return draw();
    }
    // At most k finite tokens in the whole row, all here: filter() keeps them in index order, or
    // sorts them for top-p with the total summed in index order.
    std::sort(cand_.begin(), cand_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    double total = -1.0;
    if (p_.top_p < 1.f) {
        total = 0.0;
        const double inv_t = 1.0 / double(p_.temperature);
        for (const Cand& c : cand_) total += std::exp((double(c.logit) - double(top)) * inv_t);
        std::sort(cand_.begin(), cand_.end(),
                  [](const Cand& a, const Cand& b) { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id); });
    }
    filter_kept(top, total);
    return draw();
}

int32_t Sampler::draw() {
    double total = 0.0;
    for (double p : prob_) total += p;
    const double u = uniform() * total;
    double acc = 0.0;
    for (size_t i = 0; i < cand_.size(); ++i) {
        acc += prob_[i];
        if (u < acc) return cand_[i].id;
    }
    return cand_.back().id;  // u rounded up to the total
}

int32_t Sampler::sample(const float* logits, int vocab) {
    TS_CHECK(vocab > 0, "sampling: empty vocabulary");
    if (p_.temperature <= 0.f || p_.top_k == 1) return argmax(logits, vocab);
    filter(logits, vocab);
    if (cand_.empty()) return argmax(logits, vocab);  // every logit NaN or -inf
    return draw();
}

}  // namespace tessera
