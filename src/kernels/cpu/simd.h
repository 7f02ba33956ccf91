// Small SIMD helpers shared by the CPU kernels, and the runtime switch between the SIMD paths
// and the portable scalar fallback (tests run both).
#pragma once
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define TESSERA_CPU_AVX2 1
#endif

namespace tessera::cpu {

// True when this build has the AVX2/FMA/F16C kernels.
constexpr bool simd_compiled() {
#ifdef TESSERA_CPU_AVX2
    return true;
#else
    return false;
#endif
}
// Whether kernels take the SIMD path (default: when compiled; env TESSERA_CPU_SIMD=0 turns it off).
bool simd_enabled();
void set_simd_enabled(bool on);

#ifdef TESSERA_CPU_AVX2
inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
// 8 f32 from f16 / bf16 / f32 memory.
inline __m256 load8_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)); }
inline __m256 load8_bf16(const uint16_t* p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p)), 16));
}
// Σ x·y of 32 signed bytes as 8 int32 lanes (maddubs needs one unsigned operand: |x|, sign(y, x)).
inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i ax = _mm256_sign_epi8(x, x);
    const __m256i sy = _mm256_sign_epi8(y, x);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
}
#endif

}  // namespace tessera::cpu
