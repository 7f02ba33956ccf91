// Sampler: temperature, top-k, top-p, min-p and a seeded draw (HF / vLLM semantics), linear in
// the vocabulary (selections, no sort).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "kernels/sampling.h"

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

namespace {

// The filters' order: larger logit first, the lower id among equals.
template <class A, class B>
bool ranks_above(const A& a, const B& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

// cand_: the row's finite logits in id order (top their largest), or its +inf ones. The kept set
// is a prefix of cand_ in rank order, so it is found by selections on a copy (work_) and
// described by its last token; then cand_ is narrowed in place, staying in id order.
void Sampler::filter(float top) {
    if (top == INFINITY) {  // +inf logits share all the mass
        prob_.assign(cand_.size(), 1.0);
        return;
    }
    const double inv_t = 1.0 / double(p_.temperature);
    auto weight = [&](float logit) { return std::exp(sample_score(logit, top, inv_t)); };
    work_.clear();
    for (const Cand& c : cand_) work_.push_back({c.logit, c.id, 0});
    size_t n = work_.size();
    bool cut = false;
    Ranked edge{};  // the last kept token in rank order, when cut
    auto by_rank = [](const Ranked& a, const Ranked& b) { return ranks_above(a, b); };
    if (p_.top_k > 0 && size_t(p_.top_k) < n) {  // top-k: the k first in rank order, unordered
        n = size_t(p_.top_k);
        std::nth_element(work_.begin(), work_.begin() + ptrdiff_t(n - 1), work_.end(), by_rank);
        edge = work_[n - 1];
        cut = true;
    }
    if (p_.top_p < 1.f) {
        // top-p over those: the first token in rank order at which the mass so far reaches
        // ⌈top_p · total⌉ — a weighted quickselect (integer masses: exact in any order).
        uint64_t total = 0;
        for (size_t j = 0; j < n; ++j) {
            work_[j].mass = sample_mass_of_score(sample_score(work_[j].logit, top, inv_t));
            total += work_[j].mass;
        }
        uint64_t want = sample_top_p_target(total, p_.top_p);  // >= 1, <= total
        auto lo = work_.begin(), hi = work_.begin() + ptrdiff_t(n);
        for (;;) {
            std::iter_swap(lo + (hi - lo) / 2, hi - 1);  // the middle element as the pivot, at the end
            const Ranked pivot = *(hi - 1);
            const auto mid = std::partition(lo, hi - 1, [&](const Ranked& c) { return by_rank(c, pivot); });
            uint64_t above = 0;
            for (auto it = lo; it != mid; ++it) above += it->mass;
            if (above >= want) {  // the crossing is above the pivot
                hi = mid;
                continue;
            }
            want -= above;
            if (pivot.mass >= want) {
                edge = pivot;
                break;
            }
            want -= pivot.mass;
            std::iter_swap(mid, hi - 1);
            lo = mid + 1;
        }
        cut = true;
    }
    // Narrow cand_ in id order: within the cut, and min-p (p >= min_p · p_max, p_max = 1 here).
    size_t w = 0;
    prob_.clear();
    for (const Cand& c : cand_) {
        if (cut && ranks_above(edge, c)) continue;
        const double q = weight(c.logit);
        if (p_.min_p > 0.f && q < double(p_.min_p)) continue;  // the largest always stays
        cand_[w++] = c;
        prob_.push_back(q);
    }
    cand_.resize(w);
}

bool Sampler::decided_by_top(int n) const {
    return p_.temperature <= 0.f || p_.top_k == 1 || (p_.top_k > 0 && p_.top_k < n);
}

int32_t Sampler::sample_sorted(const float* logits, const int32_t* ids, int n) {
    TS_CHECK(n > 0 && decided_by_top(n), "sampling: {} top candidates do not decide top_k {}", n, p_.top_k);
    // The row's argmax is its first candidate (NaN only pads: then every logit was NaN → 0).
    const int32_t first = std::isnan(logits[0]) ? 0 : ids[0];
    if (p_.temperature <= 0.f || p_.top_k == 1) return first;
    // filter() on what it would keep of the row: its top k finite logits when the row has more
    // (the (k+1)-th candidate is finite), else every finite logit, which are all here — or the
    // +inf ones, which lead the candidates.
    auto finite = [&](int i) { return !std::isnan(logits[i]) && logits[i] != -INFINITY; };
    cand_.clear();
    if (finite(0) && logits[0] == INFINITY) {
        for (int i = 0; i < n && logits[i] == INFINITY; ++i) cand_.push_back({logits[i], ids[i]});
    } else {
        for (int i = 0; i < n && i < p_.top_k && finite(i); ++i) cand_.push_back({logits[i], ids[i]});
    }
    if (cand_.empty()) return first;  // every logit NaN or -inf: sample() falls back to argmax
    const float top = cand_[0].logit;
    std::sort(cand_.begin(), cand_.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
    filter(top);
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
    cand_.clear();
    float top = -INFINITY;
    for (int i = 0; i < vocab; ++i)
        if (!std::isnan(logits[i]) && logits[i] != -INFINITY) {
            cand_.push_back({logits[i], i});
            top = std::max(top, logits[i]);
        }
    if (cand_.empty()) return argmax(logits, vocab);  // every logit NaN or -inf
    if (top == INFINITY) std::erase_if(cand_, [](const Cand& c) { return c.logit != INFINITY; });
    filter(top);
    return draw();
}

}  // namespace tessera
