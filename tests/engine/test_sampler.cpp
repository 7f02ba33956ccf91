// Sampler: greedy, seeded reproducibility, the empirical distribution against softmax(logits/T),
// and top-k / top-p / min-p truncation on hand-built distributions.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "core/status.h"
#include "engine/sampler.h"
#include "kernels/backend.h"

using namespace tessera;

namespace {

std::vector<int> counts(Sampler& s, const std::vector<float>& logits, int draws) {
    std::vector<int> c(logits.size(), 0);
    for (int i = 0; i < draws; ++i) ++c[size_t(s.sample(logits.data(), int(logits.size())))];
    return c;
}

// |freq - p| within 5 binomial standard deviations (plus a hair), for every token.
void expect_distribution(const std::vector<int>& c, const std::vector<double>& p, int draws) {
    for (size_t i = 0; i < p.size(); ++i) {
        const double f = double(c[i]) / draws, sd = std::sqrt(p[i] * (1 - p[i]) / draws);
        EXPECT_NEAR(f, p[i], 5 * sd + 1e-4) << "token " << i;
        if (p[i] == 0) {
            EXPECT_EQ(c[i], 0) << "token " << i << " was filtered out but drawn";
        }
    }
}

// Logits whose softmax is exactly the given probabilities (up to rounding).
std::vector<float> logits_of(const std::vector<double>& p) {
    std::vector<float> l;
    for (double q : p) l.push_back(float(std::log(q)));
    return l;
}

TEST(Sampler, GreedyIsArgmax) {
    const std::vector<float> l = {0.1f, 2.f, -1.f, 2.f, NAN, 1.9f};
    SamplingParams p;
    p.temperature = 0.f;
    Sampler s(p);
    EXPECT_EQ(s.sample(l.data(), int(l.size())), 1);  // first of the ties
    SamplingParams k1;
    k1.top_k = 1;
    k1.temperature = 5.f;
    Sampler s1(k1);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s1.sample(l.data(), int(l.size())), 1);
}

TEST(Sampler, SeedIsReproducible) {
    std::vector<float> l(1000);
    for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i)) * 3);
    SamplingParams p;
    p.seed = 1234;
    p.top_p = 0.9f;
    Sampler a(p), b(p);
    p.seed = 99;
    Sampler c(p);
    int differ = 0;
    for (int i = 0; i < 200; ++i) {
        const int x = a.sample(l.data(), int(l.size()));
        EXPECT_EQ(x, b.sample(l.data(), int(l.size())));
        differ += x != c.sample(l.data(), int(l.size()));
    }
    EXPECT_GT(differ, 50);
}

TEST(Sampler, MatchesSoftmaxOfScaledLogits) {
    const std::vector<float> l = {1.f, 2.f, 0.5f, -1.f, 1.5f, 0.f};
    for (float T : {1.f, 0.7f, 2.f}) {
        SamplingParams p;
        p.temperature = T;
        p.seed = 7;
        Sampler s(p);
        std::vector<double> ref;
        double z = 0;
        for (float x : l) z += std::exp(x / double(T));
        for (float x : l) ref.push_back(std::exp(x / double(T)) / z);
        const int draws = 200000;
        expect_distribution(counts(s, l, draws), ref, draws);
    }
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
    // Shuffled on purpose: tokens 3, 0, 4, 1, 2 in decreasing probability.
    const std::vector<double> p = {0.2, 0.1, 0.05, 0.5, 0.15};
    const auto l = logits_of(p);
    const int draws = 100000;
    {
        SamplingParams sp;
        sp.top_p = 0.75f;  // 0.5 + 0.2 = 0.7 < 0.75, so 0.15 is kept too; 0.85 >= 0.75 stops
        Sampler s(sp);
        expect_distribution(counts(s, l, draws), {0.2 / 0.85, 0, 0, 0.5 / 0.85, 0.15 / 0.85}, draws);
    }
    {
        SamplingParams sp;
        sp.top_p = 0.45f;  // the top token alone
        Sampler s(sp);
        expect_distribution(counts(s, l, draws), {0, 0, 0, 1, 0}, draws);
    }
    {
        SamplingParams sp;  // top-p applies after temperature: T = 0.5 squares and renormalises
        sp.temperature = 0.5f;
        sp.top_p = 0.9f;    // p² ∝ {.04 .01 .0025 .25 .0225}/.3275: top three hold 0.962 > 0.9; two hold 0.885
        Sampler s(sp);
        const double z = 0.25 + 0.04 + 0.0225;
        expect_distribution(counts(s, l, draws), {0.04 / z, 0, 0, 0.25 / z, 0.0225 / z}, draws);
    }
}

TEST(Sampler, TopPOverALargeFlatVocabulary) {
    std::vector<float> l(50000, 0.f);
    SamplingParams sp;
    sp.top_p = 0.5f;  // uniform: exactly the first 25000 ids (ties broken by id)
    Sampler s(sp);
    int low = 0;
    for (int i = 0; i < 400; ++i) {
        const int x = s.sample(l.data(), int(l.size()));
        ASSERT_LT(x, 25000);
        low += x < 12500;
    }
    EXPECT_NEAR(low, 200, 5 * std::sqrt(100.0));
}

TEST(Sampler, TopKAndMinP) {
    const std::vector<double> p = {0.2, 0.1, 0.05, 0.5, 0.15};
    const auto l = logits_of(p);
    const int draws = 100000;
    {
        SamplingParams sp;
        sp.top_k = 2;
        Sampler s(sp);
        expect_distribution(counts(s, l, draws), {0.2 / 0.7, 0, 0, 0.5 / 0.7, 0}, draws);
    }
    {
        SamplingParams sp;
        sp.min_p = 0.25f;  // keep p >= 0.125
        Sampler s(sp);
        expect_distribution(counts(s, l, draws), {0.2 / 0.85, 0, 0, 0.5 / 0.85, 0.15 / 0.85}, draws);
    }
}

TEST(Sampler, NonFiniteLogitsAndBadParams) {
    const std::vector<float> l = {NAN, -INFINITY, 0.f, NAN};
    Sampler s(SamplingParams{});
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l.data(), 4), 2);
    const std::vector<float> inf = {0.f, INFINITY, 3.f};
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(inf.data(), 3), 1);
    EXPECT_THROW(s.sample(l.data(), 0), Error);
    SamplingParams bad;
    bad.top_p = 0.f;
    EXPECT_THROW(Sampler{bad}, Error);
    bad.top_p = 1.f;
    bad.min_p = -1.f;
    EXPECT_THROW(Sampler{bad}, Error);
}

}  // namespace

// sample_sorted on a row's top candidates (the CPU backend's top_k, as the GPU gives them) draws
// the same tokens as sample() on the whole row, draw after draw, whenever decided_by_top: top-k
// with top-p / min-p on top, ties, NaN / -inf logits, and rows with fewer finite logits than k.
TEST(Sampler, TopCandidatesDrawWhatTheWholeRowDraws) {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 2.f);
    auto backend = make_cpu_backend();
    int cases = 0;
    for (int vocab : {3, 40, 1000, 4099})
        for (int shape = 0; shape < 4; ++shape) {
            std::vector<float> row(static_cast<size_t>(vocab));
            for (float& v : row) v = nd(rng);
            if (shape == 1)  // ties: a coarse grid of values
                for (float& v : row) v = std::round(v);
            if (shape == 2)  // NaN and -inf sprinkled in
                for (size_t i = 0; i < row.size(); i += 3) row[i] = i % 2 ? NAN : -INFINITY;
            if (shape == 3 && vocab > 30)  // only 30 finite logits: fewer than some top_k
                for (size_t i = 30; i < row.size(); ++i) row[i] = -INFINITY;
            for (int top_k : {1, 5, 20, 50, 127})
                for (float top_p : {1.f, 0.9f, 0.5f})
                    for (float min_p : {0.f, 0.05f})
                        for (float temp : {0.f, 0.7f, 1.3f}) {
                            SamplingParams p;
                            p.temperature = temp;
                            p.top_k = top_k;
                            p.top_p = top_p;
                            p.min_p = min_p;
                            p.seed = uint64_t(cases);
                            const int n = std::min(top_k + 1, Backend::kMaxTopK);
                            Sampler whole(p), top(p);
                            if (!top.decided_by_top(n)) continue;
                            std::vector<float> vals(static_cast<size_t>(n));
                            std::vector<int32_t> ids(static_cast<size_t>(n));
                            backend->top_k(Tensor(row.data(), DType::F32, {1, vocab}), n, vals.data(), ids.data());
                            ++cases;
                            for (int d = 0; d < 20; ++d) {
                                std::vector<float> copy = row;  // sample() may not modify, but be sure
                                const int32_t want = whole.sample(copy.data(), vocab);
                                const int32_t got = top.sample_sorted(vals.data(), ids.data(), n);
                                ASSERT_EQ(got, want) << "vocab " << vocab << " shape " << shape << " top_k " << top_k
                                                     << " top_p " << top_p << " min_p " << min_p << " T " << temp
                                                     << " draw " << d;
                            }
                        }
        }
    EXPECT_GT(cases, 300);
    SamplingParams p;
    p.top_k = 0;  // plain temperature sampling needs the whole row
    EXPECT_FALSE(Sampler(p).decided_by_top(Backend::kMaxTopK));
    p.top_k = 20;
    EXPECT_FALSE(Sampler(p).decided_by_top(20));  // the 21st candidate tells whether there are more
    EXPECT_TRUE(Sampler(p).decided_by_top(21));
}
