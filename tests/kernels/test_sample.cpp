// Backend::sample on the CPU (cpu::sample, the reference the CUDA kernel is compared with):
// Philox against the published known answers, greedy rows, the drawn frequencies against the
// filtered softmax computed here from the definitions (temperature, top-k, top-p, min-p and
// their combination), ties cut by id at the top-k and top-p boundaries, NaN / ±inf logits,
// reproducibility by (seed, counter), parameters out of range, and the device sampler's candidate
// bins (sampling.h: never growing with the logit).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/sampling.h"

using namespace tessera;

namespace {

int32_t draw(const std::vector<float>& logits, const SampleRow& p) {
    int32_t id = -1;
    auto be = make_cpu_backend();
    be->sample(Tensor(const_cast<float*>(logits.data()), DType::F32, {1, int64_t(logits.size())}), &p, &id);
    return id;
}

// Frequencies of n draws (counters 0 .. n − 1) from one backend call over n copies of the row.
std::vector<double> frequencies(const std::vector<float>& logits, SampleRow p, int n) {
    const int64_t V = int64_t(logits.size());
    std::vector<float> x;
    std::vector<SampleRow> rows;
    for (int i = 0; i < n; ++i) {
        x.insert(x.end(), logits.begin(), logits.end());
        p.counter = uint64_t(i);
        rows.push_back(p);
    }
    std::vector<int32_t> ids(size_t(n), -1);
    make_cpu_backend()->sample(Tensor(x.data(), DType::F32, {n, V}), rows.data(), ids.data());
    std::vector<double> f(size_t(V), 0.0);
    for (int32_t id : ids) {
        EXPECT_GE(id, 0);
        EXPECT_LT(id, V);
        if (id >= 0 && id < V) f[size_t(id)] += 1.0 / n;
    }
    return f;
}

// The distribution the filters define, from their definitions: softmax(l / t) over the tokens
// that survive top-k (the k largest), top-p (the shortest prefix by descending logit whose
// probability reaches top_p of the kept mass) and min-p (p >= min_p · p_max).
std::vector<double> filtered(const std::vector<float>& l, const SampleRow& p) {
    const size_t V = l.size();
    std::vector<size_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return l[a] > l[b]; });
    const double top = l[order[0]];
    std::vector<double> w(V);
    for (size_t i = 0; i < V; ++i) w[i] = std::exp((double(l[i]) - top) / p.temperature);
    size_t keep = p.top_k > 0 ? std::min(V, size_t(p.top_k)) : V;
    if (p.top_p < 1.f) {
        double total = 0, before = 0;
        for (size_t j = 0; j < keep; ++j) total += w[order[j]];
        size_t n = 0;
        while (n < keep && before < p.top_p * total) before += w[order[n++]];
        keep = n;
    }
    std::vector<double> q(V, 0.0);
    double sum = 0;
    for (size_t j = 0; j < keep; ++j)
        if (w[order[j]] >= p.min_p) sum += q[order[j]] = w[order[j]];
    for (double& v : q) v /= sum;
    return q;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, int n, const char* what) {
    for (size_t i = 0; i < want.size(); ++i) {
        const double sd = std::sqrt(want[i] * (1 - want[i]) / n);
        EXPECT_NEAR(got[i], want[i], 5 * sd + 1e-4) << what << ": token " << i;
        if (want[i] == 0) {
            EXPECT_EQ(got[i], 0.0) << what << ": token " << i << " is filtered out but drawn";
        }
    }
}

SampleRow row(float t, int32_t top_k = 0, float top_p = 1.f, float min_p = 0.f, uint64_t seed = 7) {
    SampleRow p;
    p.temperature = t;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

}  // namespace

// Random123's known-answer vectors for Philox4x32-10 (kat_vectors: zeros, ones, the digits of pi).
TEST(Sample, PhiloxKnownAnswers) {
    auto block = [](uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
        const uint32_t c[4] = {c0, c1, c2, c3};
        uint32_t out[4];
        philox4x32_10(c, k0, k1, out);
        return std::vector<uint32_t>(out, out + 4);
    };
    EXPECT_EQ(block(0, 0, 0, 0, 0, 0), (std::vector<uint32_t>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
    const uint32_t m = 0xffffffffu;
    EXPECT_EQ(block(m, m, m, m, m, m), (std::vector<uint32_t>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
    EXPECT_EQ(block(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u),
              (std::vector<uint32_t>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
    // A token's noise is word id % 4 of the block for (id / 4, counter) keyed by the seed.
    uint32_t bits[4];
    sample_noise_bits(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull, bits);
    EXPECT_EQ(bits[1], 0x94fdccebu);
    sample_noise_bits(77, 3, 5, bits);
    EXPECT_EQ(sample_gumbel(77, 3, 4 * 5 + 2), sample_gumbel(bits[2]));
}

TEST(Sample, GreedyRowsAreTheArgmax) {
    const std::vector<float> l = {0.5f, NAN, 3.f, -1.f, 3.f};
    EXPECT_EQ(draw(l, row(0.f)), 2);          // the first of the largest
    EXPECT_EQ(draw(l, row(-1.f)), 2);
    EXPECT_EQ(draw(l, row(1.f, 1)), 2);       // top_k 1
    EXPECT_EQ(draw({NAN, NAN}, row(1.f)), 0);  // no candidate: 0
    EXPECT_EQ(draw({NAN, -INFINITY, -INFINITY}, row(1.f)), 1);  // the first non-NaN
    EXPECT_EQ(draw({-0.f, 0.f}, row(0.f)), 0);  // -0 equals +0
}

TEST(Sample, FrequenciesFollowTheFilteredSoftmax) {
    const std::vector<float> l = {1.2f, -0.3f, 2.0f, 0.7f, -2.5f, 1.9f, 0.1f, -1.0f};
    const int n = 40000;
    const SampleRow cases[] = {row(1.f),           row(0.6f),          row(2.5f),
                               row(1.f, 3),        row(1.f, 0, 0.7f),  row(1.f, 0, 0.2f),
                               row(1.f, 0, 1.f, 0.3f), row(0.8f, 5, 0.9f, 0.05f), row(1.3f, 6, 0.5f)};
    for (const SampleRow& p : cases) {
        const std::string what = "t " + std::to_string(p.temperature) + " k " + std::to_string(p.top_k) + " p " +
                                 std::to_string(p.top_p) + " min " + std::to_string(p.min_p);
        expect_close(frequencies(l, p, n), filtered(l, p), n, what.c_str());
    }
}

// Equal logits: the first ids (by id) fill a top-k or top-p boundary.
TEST(Sample, TiesAtABoundaryKeepTheLowerIds) {
    const std::vector<float> l(10, 0.25f);
    const int n = 8000;
    std::vector<double> f = frequencies(l, row(1.f, 3), n);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(f[size_t(i)] > 0, i < 3) << "top_k 3: token " << i;
    // top_p 0.35 of ten equal masses: a token is kept while the mass before it is < 0.35 → 4.
    f = frequencies(l, row(1.f, 0, 0.35f), n);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(f[size_t(i)] > 0, i < 4) << "top_p 0.35: token " << i;
    // Ties below a larger logit, cut by top-k then top-p.
    std::vector<float> m(12, 0.f);
    m[7] = 1.f;
    f = frequencies(m, row(1.f, 5, 1.f), n);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(f[size_t(i)] > 0, i == 7 || i < 4) << "top_k 5 with a leader: " << i;
}

TEST(Sample, InfinitiesAndNaN) {
    const int n = 2000;
    // +inf logits share all the mass; filters do not apply to them.
    std::vector<double> f = frequencies({1.f, INFINITY, NAN, INFINITY, 5.f}, row(1.f, 0, 0.1f, 0.5f), n);
    EXPECT_EQ(f[0] + f[2] + f[4], 0.0);
    EXPECT_NEAR(f[1], 0.5, 0.05);
    // NaN and -inf are never drawn.
    f = frequencies({NAN, -INFINITY, 0.f, 0.1f, NAN}, row(1.f), n);
    EXPECT_EQ(f[0] + f[1] + f[4], 0.0);
    EXPECT_GT(f[2], 0.3);
    EXPECT_GT(f[3], 0.3);
}

TEST(Sample, ReproducibleBySeedAndCounter) {
    std::vector<float> l(500);
    for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i) * 1.7) * 2.0);
    SampleRow a = row(1.f, 0, 0.95f, 0.f, 12345), b = a;
    int differ = 0;
    for (uint64_t c = 0; c < 50; ++c) {
        a.counter = b.counter = c;
        EXPECT_EQ(draw(l, a), draw(l, b));
        SampleRow other = a;
        other.seed = 54321;
        differ += draw(l, other) != draw(l, a);
    }
    EXPECT_GT(differ, 25);  // another seed is another stream
    a.counter = 0;
    b.counter = 1;
    int same = 0;
    for (uint64_t s = 0; s < 50; ++s) {
        a.seed = b.seed = s;
        same += draw(l, a) == draw(l, b);
    }
    EXPECT_LT(same, 25);  // another counter is another draw
}

TEST(Sample, BadParametersAreRefused) {
    const std::vector<float> l = {0.f, 1.f};
    EXPECT_THROW(draw(l, row(INFINITY)), Error);
    EXPECT_THROW(draw(l, row(NAN)), Error);
    EXPECT_THROW(draw(l, row(1.f, 0, 0.f)), Error);
    EXPECT_THROW(draw(l, row(1.f, 0, 1.5f)), Error);
    EXPECT_THROW(draw(l, row(1.f, 0, 1.f, -0.1f)), Error);
    EXPECT_THROW(draw(l, row(1.f, 0, 1.f, 1.1f)), Error);
}

// The device sampler's candidate bins (sampling.h, fast_sample.cu): the bin never grows as the logit
// does, equal logits (±0 alike) share one, the top is bin 0, and logits far below (or a top past
// half the f32 range, where top − v overflows) land in the last bin. The candidate sets' proof rests
// on the first property: a sweep over sorted logits of many magnitudes, subnormals and the extremes
// included, against tops from tiny to huge.
TEST(Sample, CandidateBinsNeverGrowWithTheLogit) {
    std::vector<float> v;
    std::mt19937 rng(7);
    std::normal_distribution<float> n3(0.f, 3.f);
    for (int i = 0; i < 20000; ++i) v.push_back(n3(rng));
    for (int e = -149; e <= 127; ++e) v.push_back(std::ldexp(1.f, e)), v.push_back(-std::ldexp(1.f, e));
    for (float x : {0.f, -0.f, 1e-45f, -1e-45f, 3.4028235e38f, -3.4028235e38f, 1.f, 1.0000001f, 0.99999994f})
        v.push_back(x);
    std::sort(v.begin(), v.end());
    for (float top : {0.f, 1e-30f, 0.5f, 3.f, 9.75f, 16.f, 1e6f, 1e30f, 3.4028235e38f}) {
        int last = -1;
        float last_v = 0.f;
        bool any = false;
        for (float x : v) {  // ascending: the bins must not grow
            if (x > top) break;
            const int b = sample_cand_bin(x, top);
            ASSERT_GE(b, 0) << "top " << top << " v " << x;
            ASSERT_LT(b, kSampleCandBins) << "top " << top << " v " << x;
            if (any) {
                ASSERT_LE(b, last) << "top " << top << ": bin " << b << " at " << x << " after " << last << " at "
                                   << last_v;
            }
            if (any && x == last_v) {
                ASSERT_EQ(b, last) << "top " << top << ": equal logits " << x;
            }
            last = b, last_v = x, any = true;
        }
        EXPECT_EQ(sample_cand_bin(top, top), 0) << "top " << top;
        EXPECT_EQ(sample_cand_bin(-0.f, 0.f), sample_cand_bin(0.f, 0.f));
    }
    EXPECT_EQ(sample_cand_bin(3.f - 31.9375f, 3.f), kSampleCandBins - 1);  // 31 15/16 below: the last bin
    EXPECT_EQ(sample_cand_bin(3.f - 31.875f, 3.f), kSampleCandBins - 2);
    EXPECT_EQ(sample_cand_bin(-3.4028235e38f, 3.4028235e38f), kSampleCandBins - 1);  // top − v = +inf
    EXPECT_EQ(sample_cand_bin(2.9375f, 3.f), 1);  // a 16th below the top
}
