// A running argmax for the argmax kernels (ref_misc.cu: int64 indices; fast_topk.cu: int32;
// fast_sample.cu: double scores): the largest non-NaN value seen, the lowest index among equals (-0 equals +0). Device code only.
#pragma once
#include <cstdint>

namespace tessera::cuda {

template <typename I, typename V = float>
struct ArgBest {
    V v;
    I idx;  // < 0: no non-NaN value seen yet
};

// Whether b beats a: NaN never enters, larger wins, the lower index on ties.
template <typename I, typename V>
__device__ inline ArgBest<I, V> better(ArgBest<I, V> a, ArgBest<I, V> b) {
    if (b.idx < 0) return a;
    if (a.idx < 0) return b;
    return (b.v > a.v || (b.v == a.v && b.idx < a.idx)) ? b : a;
}

// The best over the 32 lanes of a warp (every lane gets it).
template <typename I, typename V>
__device__ inline ArgBest<I, V> warp_best(ArgBest<I, V> x) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const ArgBest<I, V> y{__shfl_xor_sync(0xffffffffu, x.v, o), I(__shfl_xor_sync(0xffffffffu, x.idx, o))};
        x = better(x, y);
    }
    return x;
}

}  // namespace tessera::cuda
