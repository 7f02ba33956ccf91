// The fast MoE router's per-token math (fast_moe.h moe_route): one warp routes one token as
// cpu::moe_topk does. Shared by the router kernel (fast_moe_route.cu) and the dense GEMV that
// computes the router logits and routes in its last block (fast_dense_gemv.cu). Device code.
#pragma once
#include <cmath>
#include <cstdint>

namespace tessera::cuda::fast::dev {

// cpu::moe_topk's ranking: larger first, NaN above everything, equal values by the lower index.
// A total order (as 64-bit keys below), so a warp's butterfly finds the same winner on every lane.
//
// Token logits l [E] (+ the shared expert's gate l[E] with `shared`), read through `load`; NV
// probabilities a lane (expert v·32 + lane, NV·32 ≥ E); writes ids / weights [k (+1)] of the
// token. Every lane of the warp calls it.
template <int NV, typename Load>
__device__ __forceinline__ void route_token(const float* l, int E, int k, bool renormalize, bool shared,
                                            int32_t* __restrict__ ids, float* __restrict__ weights, int lane,
                                            Load load) {
    constexpr unsigned kFull = 0xffffffffu;

    // m = max over the row as the CPU's std::max from -inf computes it (NaNs skipped).
    float p[NV];
    float m = -INFINITY;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        p[v] = i < E ? load(l + i) : 0.f;
        if (i < E) m = m < p[v] ? p[v] : m;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float b = __shfl_xor_sync(kFull, m, o);
        m = m < b ? b : m;
    }
    // exp in double rounded to f32 (the correctly rounded expf of the CPU); a tree sum in double.
    double s = 0.0;
#pragma unroll
    for (int v = 0; v < NV; ++v)
        if (v * 32 + lane < E) {
            p[v] = float(exp(double(p[v] - m)));
            s += double(p[v]);
        }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);  // a + b = b + a: same bits on every lane

    // The CPU sums p in expert order in double, then takes inv = float(1.0 / sum). Both sums lie
    // within (E + 64)·2⁻⁵³·sum of the exact one (non-negative terms), so the sequential sum lies in
    // [lo, hi]; float(1.0 / ·) is monotone, so when lo and hi give the same float, so does the CPU.
    float inv = 0.f;
    bool known = isfinite(s);
    if (known) {
        const double d = double(E + 64) * 0x1p-50;
        const float a = float(1.0 / (s * (1.0 + d))), b = float(1.0 / (s * (1.0 - d)));
        known = a == b;
        inv = a;
    }
    if (!known) {  // rare (or NaN / inf logits): the CPU's sequential sum itself
        double q = 0.0;
#pragma unroll
        for (int v = 0; v < NV; ++v)
            for (int src = 0; src < 32; ++src) {
                const float pv = __shfl_sync(kFull, p[v], src);
                if (v * 32 + src < E) q += double(pv);
            }
        inv = float(1.0 / q);
    }
#pragma unroll
    for (int v = 0; v < NV; ++v) p[v] *= inv;

    // Top-k: k warp-wide selections of the largest 64-bit key, in cpu::moe_topk's order: the high
    // word the bits of p (p ≥ +0 or NaN: monotone; NaN above everything), the low word 2¹⁶ − index
    // (ties to the lower index; never 0). Absent experts have key 0, taken ones are masked.
    unsigned long long key[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        const float pv = p[v];
        const uint32_t hi = isnan(pv) ? 0xffffffffu : pv == 0.f ? 0u : __float_as_uint(pv);
        key[v] = i < E ? (static_cast<unsigned long long>(hi) << 32) | uint32_t(0x10000 - i) : 0ull;
    }
    unsigned taken = 0;  // bit v: expert v·32 + lane was selected (a mask, not a store into key[])
    float my_w = 0.f, wsum = 0.f;
    int my_id = -1;
    for (int j = 0; j < k; ++j) {
        unsigned long long best = 0ull;
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            const unsigned long long kv = (taken >> v) & 1u ? 0ull : key[v];
            best = kv > best ? kv : best;
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            const unsigned long long other = __shfl_xor_sync(kFull, best, o);
            best = other > best ? other : best;
        }
        const int bi = 0x10000 - int(uint32_t(best));  // k ≤ E: a key is never 0 here
        const uint32_t hi = uint32_t(best >> 32);
        const float bv = hi == 0xffffffffu ? __int_as_float(0x7fffffff) : __uint_as_float(hi);
        if ((bi & 31) == lane) taken |= 1u << (bi >> 5);
        if (lane == j) {
            my_w = bv;
            my_id = bi;
        }
        wsum += bv;  // in slot order, as the CPU sums
    }
    if (lane < k) {
        ids[lane] = my_id;
        weights[lane] = renormalize ? my_w / wsum : my_w;
    } else if (shared && lane == k) {  // the shared expert: σ(g) as the CPU computes it
        ids[k] = E;
        weights[k] = 1.f / (1.f + float(exp(-double(load(l + E)))));
    }
}

}  // namespace tessera::cuda::fast::dev
