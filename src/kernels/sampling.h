// Sampling where the logits are (Backend::sample): a row's parameters as plain data and the
// arithmetic that the host reference (kernels/cpu/sample.cpp) and the CUDA kernel
// (kernels/cuda/fast_sample.cu) share, so both draw the same token.
//
// The filters are the Sampler's (engine/sampler.h), in its order: temperature, top-k (the k
// largest logits, ties to the lower id), top-p over the mass top-k kept (the shortest prefix by
// descending logit, then ascending id, whose mass reaches top_p of it), min-p (w >= min_p, w
// relative to the largest). Greedy (temperature <= 0 or top_k == 1) is the row's argmax.
//
// The draw is the Gumbel-max trick: the kept token with the largest s + G, s = (logit − max) /
// temperature, G = −ln(−ln U), U a uniform from a counter-based generator keyed by (seed,
// counter, token id) — Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011). A token's noise depends on nothing else, so a device draws in one pass in any
// order, and equal (seed, counter) give equal tokens. It is not the Sampler's draw (an inverse
// CDF over an mt19937 stream): the two give the same distribution, not the same tokens.
//
// top-p counts mass in fixed point — mass(w) = ⌊w · 2^42⌋, w = exp(s) in double — so its sums
// are exact in any order (up to 2^21 tokens of mass ≤ 2^42 fit in 63 bits).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TS_SAMPLE_HD __host__ __device__ __forceinline__
#else
#define TS_SAMPLE_HD inline
#endif

namespace tessera {

struct SampleRow {
    float temperature = 1.f;  // <= 0: greedy (the argmax)
    float top_p = 1.f;        // (0, 1]
    int32_t top_k = 0;        // <= 0: off
    float min_p = 0.f;        // [0, 1]
    uint64_t seed = 0;
    uint64_t counter = 0;  // which draw of the seed's stream (a request counts its draws)
};

#if !defined(__CUDACC__)
// Throws Error when row r's parameters are out of range (temperature not finite, top_p outside
// (0, 1], min_p outside [0, 1]); backends call it before sampling (backend.cpp).
void check_sample_row(const SampleRow& p, int64_t r);
#endif

constexpr int64_t kSampleMaxVocab = int64_t(1) << 21;  // the fixed-point sums' bound

// Tokens with s below this have no top-p mass: exp(−29.2) · 2^42 < 1.
constexpr double kSampleMassBelow = -29.2;

// Tokens with s below this never win: G lies in [−ln(−ln(2⁻³³)), −ln(−ln(1 − 2⁻³³))] ⊂
// [−3.14, 22.88], and the largest logit (s = 0) is always kept, so s < −27 loses to it.
constexpr double kSampleSkipBelow = -27.0;

TS_SAMPLE_HD uint32_t philox_mulhi(uint32_t a, uint32_t b) { return uint32_t((uint64_t(a) * b) >> 32); }

// Philox4x32 with 10 rounds: the block for counter c and key (k0, k1).
TS_SAMPLE_HD void philox4x32_10(const uint32_t (&c)[4], uint32_t k0, uint32_t k1, uint32_t (&out)[4]) {
    uint32_t c0 = c[0], c1 = c[1], c2 = c[2], c3 = c[3];
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const uint32_t h0 = philox_mulhi(0xD2511F53u, c0), l0 = 0xD2511F53u * c0;
        const uint32_t h1 = philox_mulhi(0xCD9E8D57u, c2), l1 = 0xCD9E8D57u * c2;
        c0 = h1 ^ c1 ^ k0;
        c1 = l1;
        c2 = h0 ^ c3 ^ k1;
        c3 = l0;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

// The uniform bits of tokens 4·group … 4·group + 3 in draw `counter` of stream `seed`: the Philox
// block for counter (group, counter) and key seed — one block serves 4 neighbouring tokens.
TS_SAMPLE_HD void sample_noise_bits(uint64_t seed, uint64_t counter, uint64_t group, uint32_t (&bits)[4]) {
    const uint32_t c[4] = {uint32_t(group), uint32_t(group >> 32), uint32_t(counter), uint32_t(counter >> 32)};
    philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32), bits);
}

// Gumbel noise from 32 uniform bits: −ln(−ln U), U = (bits + ½) · 2⁻³² ∈ (0, 1).
TS_SAMPLE_HD double sample_gumbel(uint32_t bits) {
    const double u = (double(bits) + 0.5) * 0x1p-32;
    return -std::log(-std::log(u));
}

// Token id's noise in draw `counter` of stream `seed`.
TS_SAMPLE_HD double sample_gumbel(uint64_t seed, uint64_t counter, int64_t id) {
    uint32_t bits[4];
    sample_noise_bits(seed, counter, uint64_t(id) >> 2, bits);
    return sample_gumbel(bits[id & 3]);
}

// s of a finite logit: (logit − top) / temperature, as the Sampler computes it.
TS_SAMPLE_HD double sample_score(float logit, float top, double inv_t) { return (double(logit) - double(top)) * inv_t; }

// top-p's fixed-point mass of w = exp(s) ∈ [0, 1].
TS_SAMPLE_HD uint64_t sample_mass(double w) { return uint64_t(w * 0x1p42); }
// The mass of a token with score s (0 below kSampleMassBelow without computing exp).
TS_SAMPLE_HD uint64_t sample_mass_of_score(double s) { return s < kSampleMassBelow ? 0 : sample_mass(std::exp(s)); }

// The mass a top-p prefix must reach: ⌈top_p · total⌉ (≤ total for top_p < 1 — callers cut only then —,
// ≥ 1 for total ≥ 1).
TS_SAMPLE_HD uint64_t sample_top_p_target(uint64_t total, float top_p) {
    return uint64_t(std::ceil(double(top_p) * double(total)));
}

// Floats as unsigned keys in their order (-0 as +0; NaN never asked).
TS_SAMPLE_HD uint32_t float_bits(float v) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(v);
#else
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
#endif
}
TS_SAMPLE_HD float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float v;
    std::memcpy(&v, &u, 4);
    return v;
#endif
}
TS_SAMPLE_HD uint32_t sample_key(float v) {
    uint32_t u = float_bits(v);
    if ((u << 1) == 0) u = 0;
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
TS_SAMPLE_HD float sample_key_value(uint32_t k) {
    return bits_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// The device sampler's candidate bins (fast_sample.cu): bin b of a finite logit v ≤ top is
// ⌊(top − v)·16⌋, the last one (kSampleCandBins − 1) everything from 31 15/16 below the top on. Each
// rounding is monotonic, so the bin never grows as v does — {v : bin(v) ≤ B} is an upper set of the
// row, closed under equal logits (±0 alike): the property the candidate sets rest on.
constexpr int kSampleCandBins = 512;
TS_SAMPLE_HD int sample_cand_bin(float v, float top) {
    const float d = (top - v) * 16.f;  // ≥ 0; +inf past the f32 range (an exact power-of-two product)
    return d < float(kSampleCandBins - 1) ? int(d) : kSampleCandBins - 1;
}

}  // namespace tessera
