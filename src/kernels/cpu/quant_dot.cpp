// Dot products of Q4_0 / Q8_0 / MXFP4 weight rows with q8_0-quantized activations, the q8_0
// activation quantizer, and the table that picks a row-dot kernel per weight dtype.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

float e8m0_to_f32_half(uint8_t e) {
    // 2^(e-128); e < 2 lands in the f32 subnormal range.
    const uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
    return bits_to_f32(bits);
}

void quantize_row_q8_0(const float* x, BlockQ8A* y, int64_t K) {
    for (int64_t b = 0; b < K / QK8_0; ++b, x += QK8_0) {
        float amax = 0.f;
        for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        y[b].d = d;
        for (int j = 0; j < QK8_0; ++j) y[b].qs[j] = int8_t(std::clamp(std::nearbyint(x[j] * id), -127.f, 127.f));
    }
}

size_t act_row_bytes(ActFormat f, int64_t K) {
    switch (f) {
        case ActFormat::F32: return size_t(K) * sizeof(float);
        case ActFormat::Q8_0: return size_t(K / QK8_0) * sizeof(BlockQ8A);
        case ActFormat::Q8_K: return size_t(K / QK_K) * sizeof(BlockQ8K);
    }
    return 0;
}

void quantize_act(ActFormat f, const float* x, void* y, int64_t K) {
    switch (f) {
        case ActFormat::F32: std::memcpy(y, x, size_t(K) * sizeof(float)); return;
        case ActFormat::Q8_0: quantize_row_q8_0(x, static_cast<BlockQ8A*>(y), K); return;
        case ActFormat::Q8_K: quantize_row_q8_K(x, static_cast<BlockQ8K*>(y), K); return;
    }
}

namespace {

inline const BlockQ8A* act_row(const void* x, size_t xs, int r) {
    return reinterpret_cast<const BlockQ8A*>(static_cast<const char*>(x) + r * xs);
}

// ---- scalar ------------------------------------------------------------------------------
// Each format: the 32 int8 weight values of block b and its scale.
struct Q4_0Dec {
    using Block = BlockQ4_0;
    static float decode(const Block& b, int8_t* q) {
        for (int j = 0; j < 16; ++j) {
            q[j] = int8_t((b.qs[j] & 15) - 8);
            q[j + 16] = int8_t((b.qs[j] >> 4) - 8);
        }
        return f16_to_f32(b.d);
    }
};
struct Q8_0Dec {
    using Block = BlockQ8_0;
    static float decode(const Block& b, int8_t* q) {
        std::memcpy(q, b.qs, 32);
        return f16_to_f32(b.d);
    }
};
struct Mxfp4Dec {
    using Block = BlockMXFP4;
    static float decode(const Block& b, int8_t* q) {
        for (int j = 0; j < 16; ++j) {
            q[j] = kMxfp4Values[b.qs[j] & 15];
            q[j + 16] = kMxfp4Values[b.qs[j] >> 4];
        }
        return e8m0_to_f32_half(b.e);
    }
};

template <class Dec>
void dot_q8_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    const auto* wb = static_cast<const typename Dec::Block*>(w);
    for (int r = 0; r < R; ++r) out[r] = 0.f;
    int8_t q[32];
    for (int64_t b = 0; b < K / 32; ++b) {
        const float dw = Dec::decode(wb[b], q);
        for (int r = 0; r < R; ++r) {
            const BlockQ8A& y = act_row(x, xs, r)[b];
            int32_t s = 0;
            for (int j = 0; j < 32; ++j) s += int32_t(q[j]) * y.qs[j];
            out[r] += float(s) * (dw * y.d);
        }
    }
}

// ---- AVX2 --------------------------------------------------------------------------------
#ifdef TESSERA_CPU_AVX2
struct Q4_0Avx {
    using Block = BlockQ4_0;
    static __m256i decode(const Block& b, float& d) {
        const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
        d = _cvtsh_ss(b.d);
        return _mm256_sub_epi8(nib, _mm256_set1_epi8(8));
    }
};
struct Q8_0Avx {
    using Block = BlockQ8_0;
    static __m256i decode(const Block& b, float& d) {
        d = _cvtsh_ss(b.d);
        return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs));
    }
};
struct Mxfp4Avx {
    using Block = BlockMXFP4;
    static __m256i decode(const Block& b, float& d) {
        const __m128i lut = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
        const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs));
        const __m128i m = _mm_set1_epi8(15);
        const __m128i lo = _mm_shuffle_epi8(lut, _mm_and_si128(t, m));
        const __m128i hi = _mm_shuffle_epi8(lut, _mm_and_si128(_mm_srli_epi16(t, 4), m));
        d = e8m0_to_f32_half(b.e);
        return _mm256_set_m128i(hi, lo);
    }
};

// Two blocks per step with separate accumulators, so one row (decode) still has two FMA chains.
template <class Dec, int R>
void dot_q8_avx2_r(const void* w, const void* x, size_t xs, int64_t K, float* out) {
    const auto* wb = static_cast<const typename Dec::Block*>(w);
    const BlockQ8A* y[R];
    __m256 acc0[R], acc1[R];
    for (int r = 0; r < R; ++r) {
        y[r] = act_row(x, xs, r);
        acc0[r] = acc1[r] = _mm256_setzero_ps();
    }
    auto step = [&](int64_t b, __m256* acc) {
        float dw;
        const __m256i qw = Dec::decode(wb[b], dw);
        const __m256i aw = _mm256_sign_epi8(qw, qw);  // |w|, shared by the rows
        const __m256 dwv = _mm256_set1_ps(dw);
        for (int r = 0; r < R; ++r) {
            const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[r][b].qs));
            const __m256i p16 = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(qy, qw));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
            acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(dwv, _mm256_broadcast_ss(&y[r][b].d)), p, acc[r]);
        }
    };
    const int64_t nb = K / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        step(b, acc0);
        step(b + 1, acc1);
    }
    if (b < nb) step(b, acc0);
    for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

template <class Dec>
void dot_q8_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) {
    switch (R) {
        case 1: return dot_q8_avx2_r<Dec, 1>(w, x, xs, K, out);
        case 2: return dot_q8_avx2_r<Dec, 2>(w, x, xs, K, out);
        case 3: return dot_q8_avx2_r<Dec, 3>(w, x, xs, K, out);
        default: return dot_q8_avx2_r<Dec, 4>(w, x, xs, K, out);
    }
}
#endif

}  // namespace

void dot_q4_0_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_scalar<Q4_0Dec>(w, x, xs, R, K, out); }
void dot_q8_0_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_scalar<Q8_0Dec>(w, x, xs, R, K, out); }
void dot_mxfp4_scalar(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_scalar<Mxfp4Dec>(w, x, xs, R, K, out); }
#ifdef TESSERA_CPU_AVX2
void dot_q4_0_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_avx2<Q4_0Avx>(w, x, xs, R, K, out); }
void dot_q8_0_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_avx2<Q8_0Avx>(w, x, xs, R, K, out); }
void dot_mxfp4_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_avx2<Mxfp4Avx>(w, x, xs, R, K, out); }
#else
void dot_q4_0_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q4_0_scalar(w, x, xs, R, K, out); }
void dot_q8_0_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_q8_0_scalar(w, x, xs, R, K, out); }
void dot_mxfp4_avx2(const void* w, const void* x, size_t xs, int R, int64_t K, float* out) { dot_mxfp4_scalar(w, x, xs, R, K, out); }
#endif

const DotKernel* dot_kernel(DType w) {
    static const DotKernel kF32{ActFormat::F32, dot_f32_scalar, dot_f32_avx2};
    static const DotKernel kF16{ActFormat::F32, dot_f16_scalar, dot_f16_avx2};
    static const DotKernel kBF16{ActFormat::F32, dot_bf16_scalar, dot_bf16_avx2};
    static const DotKernel kQ4_0{ActFormat::Q8_0, dot_q4_0_scalar, dot_q4_0_avx2};
    static const DotKernel kQ8_0{ActFormat::Q8_0, dot_q8_0_scalar, dot_q8_0_avx2};
    static const DotKernel kMxfp4{ActFormat::Q8_0, dot_mxfp4_scalar, dot_mxfp4_avx2};
    static const DotKernel kQ4_K{ActFormat::Q8_K, dot_q4_K_scalar, dot_q4_K_avx2};
    static const DotKernel kQ6_K{ActFormat::Q8_K, dot_q6_K_scalar, dot_q6_K_avx2};
    switch (w) {
        case DType::F32: return &kF32;
        case DType::F16: return &kF16;
        case DType::BF16: return &kBF16;
        case DType::Q4_0: return &kQ4_0;
        case DType::Q8_0: return &kQ8_0;
        case DType::MXFP4: return &kMxfp4;
        case DType::Q4_K: return &kQ4_K;
        case DType::Q6_K: return &kQ6_K;
        default: return nullptr;
    }
}

}  // namespace tessera::cpu
