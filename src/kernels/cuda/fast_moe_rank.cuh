// The MoE router's ranking as a warp computes it (fast_moe_route.cu's kernels, and the integer-unit
// gate+up kernel that ranks its token's logits itself: MoeRouteAhead, fast_moe_decode_dp4a.cu): a
// lane holds NV experts (v·32 + lane) as unique 64-bit keys, sorts them by a compile-time network,
// and the warp picks the largest key k times. Keys are a total order, so the picks do not depend on
// how the experts are spread over lanes or NV. Device code only.
#pragma once
#include <cstdint>

namespace tessera::cuda::fast::dev {

// Batcher's odd-even merge sort network for N (a power of 2) as a list of compare-exchange
// pairs (lo, hi), built at compile time (N = 8: 19 pairs in 6 levels).
template <int N>
struct SortNet {
    int n = 0;
    int lo[N * N] = {}, hi[N * N] = {};
};
template <int N>
constexpr SortNet<N> sort_net() {
    SortNet<N> net;
    for (int p = 1; p < N; p += p)
        for (int k = p; k > 0; k /= 2)
            for (int j = k % p; j + k < N; j += 2 * k)
                for (int i = 0; i < k && i + j + k < N; ++i)
                    if ((i + j) / (2 * p) == (i + j + k) / (2 * p)) {
                        net.lo[net.n] = i + j;
                        net.hi[net.n] = i + j + k;
                        ++net.n;
                    }
    return net;
}

// a[0..N) in descending order by that network: every index known at compile time (registers).
template <int N>
__device__ __forceinline__ void sort_desc(unsigned long long (&a)[N]) {
    constexpr SortNet<N> net = sort_net<N>();
#pragma unroll
    for (int c = 0; c < net.n; ++c) {
        const unsigned long long x = a[net.lo[c]], y = a[net.hi[c]];
        a[net.lo[c]] = y > x ? y : x;
        a[net.hi[c]] = y > x ? x : y;
    }
}

// One pick of a warp-wide top-k over per-lane lists sorted by sort_desc: the warp's largest key —
// the largest high word, then the largest low word among the lanes holding it: two redux
// instructions, not a butterfly of 64-bit shuffles — returned as (high, low); the lane holding it
// drops it (the next of its keys moves up).
template <int NV>
__device__ __forceinline__ void pick_largest(unsigned long long (&key)[NV], uint32_t& bh, uint32_t& bl) {
    const unsigned long long mine = key[0];
    bh = __reduce_max_sync(0xffffffffu, uint32_t(mine >> 32));
    bl = __reduce_max_sync(0xffffffffu, uint32_t(mine >> 32) == bh ? uint32_t(mine) : 0u);
    if (mine == ((static_cast<unsigned long long>(bh) << 32) | bl)) {
#pragma unroll
        for (int v = 0; v + 1 < NV; ++v) key[v] = key[v + 1];
        key[NV - 1] = 0ull;
    }
}

// Expert i's key when ranked on its logit x (route_logits_kernel's order, cpu::moe_topk's but on
// the logits): the high word x's bits made order-preserving as unsigned (±0 alike, NaN on top),
// the low word 2¹⁶ − i (ties to the lower index; never 0). Absent experts (present false): 0.
__device__ __forceinline__ unsigned long long logit_rank_key(float x, int i, bool present) {
    const uint32_t u = x == 0.f ? 0u : __float_as_uint(x);
    const uint32_t hi = isnan(x) ? 0xffffffffu : (u & 0x80000000u) ? ~u : u | 0x80000000u;
    return present ? (static_cast<unsigned long long>(hi) << 32) | uint32_t(0x10000 - i) : 0ull;
}

// The expert of pick j (0-based, j < E) of the token whose E logits are at l, ranked as
// route_logits_kernel ranks them (every lane of the warp gets it; call from the whole warp).
template <int NV>
__device__ __forceinline__ int logits_pick(const float* __restrict__ l, int E, int j) {
    const int lane = int(threadIdx.x & 31);
    unsigned long long key[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        key[v] = logit_rank_key(i < E ? __ldg(l + i) : 0.f, i, i < E);
    }
    sort_desc<NV>(key);
    uint32_t bh = 0, bl = 0;
    for (int q = 0; q <= j; ++q) pick_largest<NV>(key, bh, bl);
    return 0x10000 - int(bl);
}

}  // namespace tessera::cuda::fast::dev
