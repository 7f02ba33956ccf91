// Backend::sample on the host: the reference of kernels/sampling.h, written for clarity — the
// filters by sorting the row's finite logits, the draw by scoring every kept token.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/sampling.h"

namespace tessera::cpu {

namespace {

// The kept token with the largest s + G (ties to the lower id); s(i) gives each one's score.
template <class Score>
int32_t gumbel_max(const std::vector<int32_t>& kept, const SampleRow& p, Score s) {
    int32_t best = -1;
    double best_score = -INFINITY;
    for (int32_t i : kept) {
        const double si = s(i);
        if (si < kSampleSkipBelow) continue;  // cannot win (sampling.h)
        const double v = si + sample_gumbel(p.seed, p.counter, i);
        if (best < 0 || v > best_score || (v == best_score && i < best)) best = i, best_score = v;
    }
    return best;
}

int32_t sample_row(const float* x, int64_t V, const SampleRow& p) {
    int32_t arg = -1;  // the first index of the largest non-NaN logit (Sampler::argmax)
    for (int64_t i = 0; i < V; ++i)
        if (!std::isnan(x[i]) && (arg < 0 || x[i] > x[arg])) arg = int32_t(i);
    if (arg < 0) return 0;
    const float top = x[arg];
    if (p.temperature <= 0.f || p.top_k == 1 || top == -INFINITY) return arg;

    std::vector<int32_t> kept;
    if (top == INFINITY) {  // the +inf logits share all the mass; no filter applies
        for (int64_t i = 0; i < V; ++i)
            if (x[i] == INFINITY) kept.push_back(int32_t(i));
        return gumbel_max(kept, p, [](int32_t) { return 0.0; });
    }
    for (int64_t i = 0; i < V; ++i)
        if (std::isfinite(x[i])) kept.push_back(int32_t(i));
    // By descending logit; the stable sort keeps equal logits in ascending id order.
    std::stable_sort(kept.begin(), kept.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
    const double inv_t = 1.0 / double(p.temperature);
    auto s = [&](int32_t i) { return sample_score(x[i], top, inv_t); };

    if (p.top_k > 0 && size_t(p.top_k) < kept.size()) kept.resize(size_t(p.top_k));
    if (p.top_p < 1.f) {
        uint64_t total = 0;
        for (int32_t i : kept) total += sample_mass_of_score(s(i));
        const uint64_t target = sample_top_p_target(total, p.top_p);
        uint64_t before = 0;
        size_t keep = 0;
        while (keep < kept.size() && before < target) before += sample_mass_of_score(s(kept[keep++]));
        kept.resize(std::max<size_t>(keep, 1));
    }
    if (p.min_p > 0.f) std::erase_if(kept, [&](int32_t i) { return std::exp(s(i)) < double(p.min_p); });
    return gumbel_max(kept, p, s);
}

}  // namespace

void sample(const float* x, int64_t xs, int64_t R, int64_t V, const SampleRow* rows, int32_t* out) {
    TS_CHECK(V >= 1 && V <= kSampleMaxVocab, "sample: {} logits a row (1..{})", V, kSampleMaxVocab);
    for (int64_t r = 0; r < R; ++r) {
        check_sample_row(rows[r], r);
        out[r] = sample_row(x + r * xs, V, rows[r]);
    }
}

}  // namespace tessera::cpu
