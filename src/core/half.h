// f16 / bf16 <-> f32 conversions (round to nearest even), usable on host and device.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TS_HD __host__ __device__ inline
#else
#define TS_HD inline
#endif

namespace tessera {

TS_HD float bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
TS_HD uint32_t f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

TS_HD float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }
TS_HD uint16_t f32_to_bf16(float f) {
    uint32_t u = f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
}

TS_HD float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        if (mant == 0) return bits_to_f32(sign);
        // subnormal: normalise
        int e = -1;
        do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
        mant &= 0x3ffu;
        return bits_to_f32(sign | uint32_t(127 - 15 - e) << 23 | mant << 13);
    }
    if (exp == 31) return bits_to_f32(sign | 0x7f800000u | mant << 13);
    return bits_to_f32(sign | (exp + 112) << 23 | mant << 13);
}

TS_HD uint16_t f32_to_f16(float f) {
    uint32_t u = f32_to_bits(f);
    const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
    u &= 0x7fffffffu;
    if (u > 0x7f800000u) return uint16_t(sign | 0x7e00u);            // NaN
    if (u >= 0x477ff000u) return uint16_t(sign | 0x7c00u);           // overflow -> inf
    if (u < 0x38800000u) {                                           // subnormal or zero
        if (u < 0x33000000u) return sign;                            // < half of min subnormal
        const uint32_t e = u >> 23, m = (u & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126 - e;                              // 14..24
        uint32_t r = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (r & 1u))) ++r;
        return uint16_t(sign | r);
    }
    u += 0xfffu + ((u >> 13) & 1u);                                  // round to nearest even
    return uint16_t(sign | ((u - 0x38000000u) >> 13));
}

}  // namespace tessera
