// Row dot products for f32 / f16 / bf16 weights against f32 activations (converted on the fly).
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

namespace {

template <DType WT>
inline float load1(const void* w, int64_t k) {
    if constexpr (WT == DType::F32) return static_cast<const float*>(w)[k];
    if constexpr (WT == DType::F16) return f16_to_f32(static_cast<const uint16_t*>(w)[k]);
    if constexpr (WT == DType::BF16) return bf16_to_f32(static_cast<const uint16_t*>(w)[k]);
}

template <DType WT>
void dot_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    for (int r = 0; r < R; ++r) {
        const float* xr = reinterpret_cast<const float*>(static_cast<const char*>(x) + r * xs);
        float acc[8] = {};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
            for (int j = 0; j < 8; ++j) acc[j] += load1<WT>(w, k + j) * xr[k + j];
        float s = 0.f;
        for (; k < K; ++k) s += load1<WT>(w, k) * xr[k];
        out[r] = s + ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
}

#ifdef TESSERA_CPU_AVX2
template <DType WT>
inline __m256 load8(const void* w, int64_t k) {
    if constexpr (WT == DType::F32) return _mm256_loadu_ps(static_cast<const float*>(w) + k);
    if constexpr (WT == DType::F16) return load8_f16(static_cast<const uint16_t*>(w) + k);
    if constexpr (WT == DType::BF16) return load8_bf16(static_cast<const uint16_t*>(w) + k);
}

// R rows share each weight load; two accumulators per row hide FMA latency.
template <DType WT, int R>
void dot_avx2_r(const void* w, const char* x, size_t xs, int64_t K, float* out) {
    __m256 acc0[R], acc1[R];
    const float* xr[R];
    for (int r = 0; r < R; ++r) {
        acc0[r] = acc1[r] = _mm256_setzero_ps();
        xr[r] = reinterpret_cast<const float*>(x + r * xs);
    }
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        const __m256 w0 = load8<WT>(w, k), w1 = load8<WT>(w, k + 8);
        for (int r = 0; r < R; ++r) {
            acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[r] + k), acc0[r]);
            acc1[r] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xr[r] + k + 8), acc1[r]);
        }
    }
    for (; k + 8 <= K; k += 8) {
        const __m256 w0 = load8<WT>(w, k);
        for (int r = 0; r < R; ++r) acc0[r] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xr[r] + k), acc0[r]);
    }
    for (int r = 0; r < R; ++r) {
        float s = hsum(_mm256_add_ps(acc0[r], acc1[r]));
        for (int64_t j = k; j < K; ++j) s = std::fma(load1<WT>(w, j), xr[r][j], s);  // one rounding for any R
        out[r] = s;
    }
}

template <DType WT>
void dot_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    const char* xc = static_cast<const char*>(x);
    switch (R) {
        case 1: return dot_avx2_r<WT, 1>(w, xc, xs, K, out);
        case 2: return dot_avx2_r<WT, 2>(w, xc, xs, K, out);
        case 3: return dot_avx2_r<WT, 3>(w, xc, xs, K, out);
        default: return dot_avx2_r<WT, 4>(w, xc, xs, K, out);
    }
}
#else
template <DType WT>
void dot_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    dot_scalar<WT>(w, x, xs, R, K, out);
}
#endif

}  // namespace

void dot_f32_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_scalar<DType::F32>(w, x, xs, R, K, out); }
void dot_f32_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_avx2<DType::F32>(w, x, xs, R, K, out); }
void dot_f16_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_scalar<DType::F16>(w, x, xs, R, K, out); }
void dot_f16_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_avx2<DType::F16>(w, x, xs, R, K, out); }
void dot_bf16_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_scalar<DType::BF16>(w, x, xs, R, K, out); }
void dot_bf16_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_avx2<DType::BF16>(w, x, xs, R, K, out); }

}  // namespace tessera::cpu
