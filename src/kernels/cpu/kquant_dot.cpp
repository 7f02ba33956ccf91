// Dot products of Q4_K / Q6_K weight rows (256-element super-blocks) with q8_K-quantized
// activations, and the q8_K activation quantizer.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

void quantize_row_q8_K(const float* x, BlockQ8K* y, int64_t K) {
    for (int64_t b = 0; b < K / QK_K; ++b, x += QK_K) {
        float amax = 0.f;
        for (int j = 0; j < QK_K; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        y[b].d = d;
        for (int j = 0; j < QK_K; ++j) y[b].qs[j] = int8_t(std::clamp(std::nearbyint(x[j] * id), -127.f, 127.f));
        for (int g = 0; g < QK_K / 16; ++g) {
            int s = 0;
            for (int j = 0; j < 16; ++j) s += y[b].qs[16 * g + j];
            y[b].bsums[g] = int16_t(s);
        }
    }
}

namespace {

inline const BlockQ8K* act_row(const void* x, size_t xs, int r) {
    return reinterpret_cast<const BlockQ8K*>(static_cast<const char*>(x) + r * xs);
}

// The 8 (6-bit scale, 6-bit min) pairs of a Q4_K super-block (ggml get_scale_min_k4).
inline void q4_K_scales(const uint8_t* s, uint8_t* sc, uint8_t* mn) {
    for (int j = 0; j < 4; ++j) {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
    }
    for (int j = 4; j < 8; ++j) {
        sc[j] = uint8_t((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        mn[j] = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Σ_j mins[j] · (sum of activation sub-block j of 32) — the offset term of Q4_K.
inline int32_t q4_K_min_term(const uint8_t* mn, const int16_t* bsums) {
    int32_t s = 0;
    for (int j = 0; j < 8; ++j) s += int32_t(mn[j]) * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

// Σ_g scale[g] · (sum of activation group g of 16) — the -32 offset term of Q6_K.
inline int32_t q6_K_offset_term(const int8_t* sc, const int16_t* bsums) {
    int32_t s = 0;
    for (int g = 0; g < 16; ++g) s += int32_t(sc[g]) * bsums[g];
    return s;
}

}  // namespace

void dot_q4_K_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    const auto* wb = static_cast<const BlockQ4_K*>(w);
    for (int r = 0; r < R; ++r) out[r] = 0.f;
    uint8_t sc[8], mn[8];
    for (int64_t b = 0; b < K / QK_K; ++b) {
        q4_K_scales(wb[b].scales, sc, mn);
        const float d = f16_to_f32(wb[b].d), dmin = f16_to_f32(wb[b].dmin);
        for (int r = 0; r < R; ++r) {
            const BlockQ8K& y = act_row(x, xs, r)[b];
            int32_t sumi = 0;
            for (int j = 0; j < 4; ++j) {
                const uint8_t* q = wb[b].qs + 32 * j;
                const int8_t* a = y.qs + 64 * j;
                int32_t s0 = 0, s1 = 0;
                for (int l = 0; l < 32; ++l) {
                    s0 += (q[l] & 15) * a[l];
                    s1 += (q[l] >> 4) * a[l + 32];
                }
                sumi += sc[2 * j] * s0 + sc[2 * j + 1] * s1;
            }
            out[r] += y.d * (d * float(sumi) - dmin * float(q4_K_min_term(mn, y.bsums)));
        }
    }
}

void dot_q6_K_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    const auto* wb = static_cast<const BlockQ6_K*>(w);
    for (int r = 0; r < R; ++r) out[r] = 0.f;
    int8_t q[QK_K];
    for (int64_t b = 0; b < K / QK_K; ++b) {
        // Unpack to unsigned 6-bit values 0..63 (the -32 is applied through bsums).
        for (int h = 0; h < 2; ++h) {
            const uint8_t* ql = wb[b].ql + 64 * h;
            const uint8_t* qh = wb[b].qh + 32 * h;
            int8_t* o = q + 128 * h;
            for (int l = 0; l < 32; ++l) {
                o[l] = int8_t((ql[l] & 15) | (((qh[l] >> 0) & 3) << 4));
                o[l + 32] = int8_t((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4));
                o[l + 64] = int8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
                o[l + 96] = int8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
            }
        }
        const float d = f16_to_f32(wb[b].d);
        for (int r = 0; r < R; ++r) {
            const BlockQ8K& y = act_row(x, xs, r)[b];
            int32_t sumi = 0;
            for (int g = 0; g < 16; ++g) {
                int32_t s = 0;
                for (int l = 0; l < 16; ++l) s += q[16 * g + l] * y.qs[16 * g + l];
                sumi += wb[b].scales[g] * s;
            }
            sumi -= 32 * q6_K_offset_term(wb[b].scales, y.bsums);
            out[r] += d * y.d * float(sumi);
        }
    }
}

#ifdef TESSERA_CPU_AVX2
namespace {

template <int R>
void dot_q4_K_avx2_r(const void* w, const void* x, size_t xs, int64_t K, float* out) {
    const auto* wb = static_cast<const BlockQ4_K*>(w);
    const BlockQ8K* y[R];
    __m256 acc[R];
    float mins[R];
    for (int r = 0; r < R; ++r) {
        y[r] = act_row(x, xs, r);
        acc[r] = _mm256_setzero_ps();
        mins[r] = 0.f;
    }
    const __m256i m4 = _mm256_set1_epi8(15);
    uint8_t sc[8], mn[8];
    for (int64_t b = 0; b < K / QK_K; ++b) {
        q4_K_scales(wb[b].scales, sc, mn);
        __m256i isum[R];
        for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * j));
            const __m256i lo = _mm256_and_si256(bytes, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), m4);
            const __m256i s_lo = _mm256_set1_epi16(sc[2 * j]), s_hi = _mm256_set1_epi16(sc[2 * j + 1]);
            for (int r = 0; r < R; ++r) {
                const int8_t* a = y[r][b].qs + 64 * j;
                const __m256i a0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a));
                const __m256i a1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 32));
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, a0), s_lo);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, a1), s_hi);
                isum[r] = _mm256_add_epi32(isum[r], _mm256_add_epi32(p0, p1));
            }
        }
        const float d = _cvtsh_ss(wb[b].d), dmin = _cvtsh_ss(wb[b].dmin);
        for (int r = 0; r < R; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[r][b].d), _mm256_cvtepi32_ps(isum[r]), acc[r]);
            mins[r] = std::fma(dmin * y[r][b].d, float(q4_K_min_term(mn, y[r][b].bsums)), mins[r]);  // any R alike
        }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) - mins[r];
}

template <int R>
void dot_q6_K_avx2_r(const void* w, const void* x, size_t xs, int64_t K, float* out) {
    const auto* wb = static_cast<const BlockQ6_K*>(w);
    const BlockQ8K* y[R];
    __m256 acc[R];
    for (int r = 0; r < R; ++r) {
        y[r] = act_row(x, xs, r);
        acc[r] = _mm256_setzero_ps();
    }
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < K / QK_K; ++b) {
        const int8_t* sc = wb[b].scales;
        __m256i isum[R];
        for (int r = 0; r < R; ++r) isum[r] = _mm256_setzero_si256();
        for (int h = 0; h < 2; ++h) {
            const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qh + 32 * h));
            // Four chunks of 32 values (0..63), at offsets 0, 32, 64, 96 of this half.
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2)),
            };
            for (int c = 0; c < 4; ++c) {
                const int g = 8 * h + 2 * c;  // groups of 16 covered by this chunk: g, g + 1
                const __m256i s = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
                for (int r = 0; r < R; ++r) {
                    const __m256i a =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[r][b].qs + 128 * h + 32 * c));
                    isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(_mm256_maddubs_epi16(q[c], a), s));
                }
            }
        }
        const float d = _cvtsh_ss(wb[b].d);
        for (int r = 0; r < R; ++r) {
            const float corr = float(32 * q6_K_offset_term(sc, y[r][b].bsums));
            const __m256 v = _mm256_sub_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set_ps(0, 0, 0, 0, 0, 0, 0, corr));
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d * y[r][b].d), v, acc[r]);
        }
    }
    for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

}  // namespace

void dot_q4_K_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    switch (R) {
        case 1: return dot_q4_K_avx2_r<1>(w, x, xs, K, out);
        case 2: return dot_q4_K_avx2_r<2>(w, x, xs, K, out);
        case 3: return dot_q4_K_avx2_r<3>(w, x, xs, K, out);
        default: return dot_q4_K_avx2_r<4>(w, x, xs, K, out);
    }
}
void dot_q6_K_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    switch (R) {
        case 1: return dot_q6_K_avx2_r<1>(w, x, xs, K, out);
        case 2: return dot_q6_K_avx2_r<2>(w, x, xs, K, out);
        case 3: return dot_q6_K_avx2_r<3>(w, x, xs, K, out);
        default: return dot_q6_K_avx2_r<4>(w, x, xs, K, out);
    }
}
#else
void dot_q4_K_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q4_K_scalar(w, x, xs, R, K, out); }
void dot_q6_K_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q6_K_scalar(w, x, xs, R, K, out); }
#endif

}  // namespace tessera::cpu
