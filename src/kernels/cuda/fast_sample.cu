// sample (fast_sample.h): one block per row; the arithmetic of each token is kernels/sampling.h's,
// as the host reference (kernels/cpu/sample.cpp) does it, so both keep the same tokens and draw
// the same one.
//
// The kept set after top-k and after top-p is a prefix of the row in (key descending, id
// ascending) order — a Cut: keys above `key`, and those equal to it with id < id_end. Each is
// found by select_desc: among the items a functor admits (each with a key and a weight: 1 for
// top-k, the fixed-point mass for top-p), the key at which the weight summed in descending key
// order first reaches `want`. Three passes histogram the next 11 / 11 / 10 bits of the keys that
// share the prefix found so far; a block scan over the bins from the top finds the crossing bin.
// The ties at a cut's key are ordered by id with the same select over ~id. One block a row finds
// the cuts (sample_plan_kernel); the draw — a Philox block and two logs a kept token — runs over
// segments of the row in parallel (sample_draw_kernel), a warp a row merges the segments' best.
#include <cstdint>

#include "kernels/cuda/arg_best.cuh"
#include "kernels/cuda/fast_sample.h"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kThreads = 1024, kWarps = kThreads / 32, kBins = 2048;
constexpr int32_t kNoCut = 0x7fffffff;

using Best = ArgBest<int32_t, double>;

struct Cut {
    uint32_t key = 0;
    int32_t id_end = kNoCut;
    bool on = false;
    __device__ bool keeps(uint32_t k, int32_t i) const { return !on || k > key || (k == key && i < id_end); }
};

struct Selected {
    uint32_t key;    // the key where the running weight reaches `want`
    uint64_t above;  // the weight of the keys above it
    uint64_t at;     // the weight of the items with that key
};

struct Shared {
    unsigned long long hist[kBins];
    unsigned long long part[kWarps + 1];
    Best best[kWarps];
    uint32_t bin;
    unsigned long long above, at;
};

// Exclusive prefix sum of v in thread order; *total gets the block's sum.
__device__ uint64_t block_exclusive_scan(uint64_t v, Shared& sh, uint64_t* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    uint64_t incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const uint64_t n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    __syncthreads();  // part may still be read by the previous scan
    if (lane == 31) sh.part[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const uint64_t s = sh.part[lane];
        uint64_t si = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const uint64_t n = __shfl_up_sync(0xffffffffu, si, o);
            if (lane >= o) si += n;
        }
        sh.part[lane] = si - s;
        if (lane == 31) sh.part[kWarps] = si;
    }
    __syncthreads();
    *total = sh.part[kWarps];
    return sh.part[warp] + incl - v;
}

__device__ uint64_t block_sum(uint64_t v, Shared& sh) {
    uint64_t total;
    block_exclusive_scan(v, sh, &total);
    return total;
}

__device__ Best block_best(Best b, Shared& sh) {
    b = warp_best(b);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) sh.best[threadIdx.x >> 5] = b;
    __syncthreads();
    Best r = sh.best[0];
    for (int w = 1; w < kWarps; ++w) r = better(r, sh.best[w]);
    return r;
}

// item(i, v, key, w) -> whether token i (logit v) takes part, with its key and weight (w > 0).
// want in [1, the admitted weight]: then exactly one bin holds the crossing at every pass.
template <class Item>
__device__ Selected select_desc(const float* __restrict__ row, int V, uint64_t want, Item item, Shared& sh) {
    uint32_t prefix = 0, mask = 0;
    uint64_t above = 0, at = 0;
    for (int pass = 0; pass < 3; ++pass) {
        const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const uint32_t bin_mask = pass == 2 ? 0x3ffu : 0x7ffu;
        for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
        __syncthreads();
        for (int i = threadIdx.x; i < V; i += kThreads) {
            uint32_t key;
            uint64_t w;
            if (item(i, __ldg(row + i), key, w) && w > 0 && (key & mask) == prefix)
                atomicAdd(&sh.hist[(key >> shift) & bin_mask], static_cast<unsigned long long>(w));
        }
        __syncthreads();
        // Thread t holds bins hi = kBins − 1 − 2t and hi − 1: thread order is descending key order.
        const int hi = kBins - 1 - 2 * int(threadIdx.x);
        const uint64_t h1 = sh.hist[hi], h0 = sh.hist[hi - 1];
        uint64_t total;
        const uint64_t ex = block_exclusive_scan(h1 + h0, sh, &total);
        const uint64_t rem = want - above;
        if (ex < rem && rem <= ex + h1) {
            sh.bin = uint32_t(hi), sh.above = ex, sh.at = h1;
        } else if (ex + h1 < rem && rem <= ex + h1 + h0) {
            sh.bin = uint32_t(hi - 1), sh.above = ex + h1, sh.at = h0;
        }
        __syncthreads();
        prefix |= sh.bin << shift;
        mask |= bin_mask << shift;
        above += sh.above;
        at = sh.at;
        __syncthreads();  // sh is rewritten by the next pass
    }
    return {prefix, above, at};
}

// The cut keeping the items of `sel` above its key and the first m (by id) of those at it.
template <class Item>
__device__ Cut cut_at(const float* __restrict__ row, int V, const Selected& sel, uint64_t m, uint64_t n_at, Item item,
                      Shared& sh) {
    Cut c{sel.key, kNoCut, true};
    if (m >= n_at) return c;
    auto by_id = [&](int i, float v, uint32_t& key, uint64_t& w) {
        if (!item(i, v, key, w) || w == 0 || key != sel.key) return false;
        key = ~uint32_t(i);  // descending ~id: ascending id
        w = 1;
        return true;
    };
    c.id_end = int32_t(~select_desc(row, V, m, by_id, sh).key) + 1;
    return c;
}

// What the draw needs of a row (sample_plan_kernel → sample_draw_kernel / sample_merge_kernel).
struct RowPlan {
    float top;
    int32_t mode;  // kDone: ids[r] written (greedy, no candidate); kInf: the +inf logits; kCut: ck, cp
    double inv_t;
    Cut ck, cp;
};
constexpr int32_t kDone = 0, kInf = 1, kCut = 2;

// Block r: the argmax, then top-k's and top-p's cuts of row r (one block: the selects' passes
// need the whole row's histograms).
__global__ void __launch_bounds__(kThreads)
    sample_plan_kernel(const float* __restrict__ x, int64_t ldx, int V, const SampleRow* __restrict__ rows,
                       RowPlan* __restrict__ plans, int32_t* __restrict__ ids) {
    __shared__ Shared sh;
    const float* row = x + int64_t(blockIdx.x) * ldx;
    const SampleRow p = rows[blockIdx.x];
    RowPlan plan{};

    // 1. The argmax (the first index of the largest non-NaN logit) and the finite count.
    Best arg{0.0, -1};
    uint64_t n_fin = 0;
    for (int i = threadIdx.x; i < V; i += kThreads) {
        const float v = __ldg(row + i);
        if (v == v) arg = better(arg, Best{double(v), i});
        n_fin += isfinite(v) ? 1 : 0;
    }
    arg = block_best(arg, sh);
    n_fin = block_sum(n_fin, sh);
    const float top = float(arg.v);
    plan.top = top;
    if (arg.idx < 0 || p.temperature <= 0.f || p.top_k == 1 || top == -INFINITY) {
        if (threadIdx.x == 0) {
            ids[blockIdx.x] = arg.idx < 0 ? 0 : arg.idx;
            plan.mode = kDone;
            plans[blockIdx.x] = plan;
        }
        return;
    }
    if (top == INFINITY) {  // the +inf logits share all the mass; no filter applies
        if (threadIdx.x == 0) {
            plan.mode = kInf;
            plans[blockIdx.x] = plan;
        }
        return;
    }
    const double inv_t = 1.0 / double(p.temperature);
    auto finite = [&](int, float v, uint32_t& key, uint64_t& w) {
        if (!isfinite(v)) return false;
        key = sample_key(v);
        w = 1;
        return true;
    };

    // 2. top-k over the finite logits.
    Cut ck;
    if (p.top_k > 0 && uint64_t(p.top_k) < n_fin) {
        const Selected s = select_desc(row, V, uint64_t(p.top_k), finite, sh);
        ck = cut_at(row, V, s, uint64_t(p.top_k) - s.above, s.at, finite, sh);
    }

    // 3. top-p over the mass top-k kept.
    Cut cp;
    if (p.top_p < 1.f) {
        auto mass = [&](int i, float v, uint32_t& key, uint64_t& w) {
            if (!isfinite(v)) return false;
            key = sample_key(v);
            if (!ck.keeps(key, i)) return false;
            w = sample_mass_of_score(sample_score(v, top, inv_t));
            return true;
        };
        uint64_t total = 0;
        for (int i = threadIdx.x; i < V; i += kThreads) {
            uint32_t key;
            uint64_t w;
            if (mass(i, __ldg(row + i), key, w)) total += w;
        }
        total = block_sum(total, sh);
        const uint64_t want = sample_top_p_target(total, p.top_p);
        const Selected s = select_desc(row, V, want, mass, sh);
        const uint64_t q = sample_mass_of_score(sample_score(sample_key_value(s.key), top, inv_t));  // > 0 here
        const uint64_t m = (want - s.above - 1) / q + 1;  // ties kept while the mass before them < want
        cp = cut_at(row, V, s, m, s.at / q, mass, sh);
    }
    if (threadIdx.x == 0) {
        plan.mode = kCut;
        plan.inv_t = inv_t;
        plan.ck = ck;
        plan.cp = cp;
        plans[blockIdx.x] = plan;
    }
}

// Block (s, r): the kept token of columns [s·kSeg, s·kSeg + kSeg) of row r with the largest
// s + G, into part[r·S + s] (idx −1: none). A thread takes 4 neighbouring columns at a time (one
// Philox block).
constexpr int kDrawThreads = 256, kSeg = 4096;

__global__ void __launch_bounds__(kDrawThreads)
    sample_draw_kernel(const float* __restrict__ x, int64_t ldx, int V, const SampleRow* __restrict__ rows,
                       const RowPlan* __restrict__ plans, Best* __restrict__ part) {
    __shared__ Best warps[kDrawThreads / 32];
    const int64_t r = blockIdx.y;
    const RowPlan plan = plans[r];
    if (plan.mode == kDone) return;
    const SampleRow p = rows[r];
    const float* row = x + r * ldx;
    const int c0 = int(blockIdx.x) * kSeg, c1 = min(V, c0 + kSeg);
    Best b{0.0, -1};
    for (int i0 = c0 + 4 * int(threadIdx.x); i0 < c1; i0 += 4 * kDrawThreads) {
        double s[4];
        bool any = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = i0 + j;
            const float v = i < c1 ? __ldg(row + i) : NAN;
            bool keep;
            if (plan.mode == kInf) {
                keep = v == INFINITY;
                s[j] = 0.0;
            } else {
                const uint32_t key = sample_key(v);
                s[j] = sample_score(v, plan.top, plan.inv_t);
                keep = isfinite(v) && plan.ck.keeps(key, i) && plan.cp.keeps(key, i) && s[j] >= kSampleSkipBelow &&
                       (p.min_p <= 0.f || exp(s[j]) >= double(p.min_p));
            }
            if (!keep) s[j] = NAN;
            any = any || keep;
        }
        if (!any) continue;
        uint32_t bits[4];
        sample_noise_bits(p.seed, p.counter, uint64_t(i0) >> 2, bits);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (s[j] == s[j]) b = better(b, Best{s[j] + sample_gumbel(bits[j]), i0 + j});
    }
    b = warp_best(b);
    if ((threadIdx.x & 31) == 0) warps[threadIdx.x >> 5] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kDrawThreads / 32; ++w) b = better(b, warps[w]);
        part[r * gridDim.x + blockIdx.x] = b;
    }
}

// Warp r: the best of row r's segments.
__global__ void sample_merge_kernel(const RowPlan* __restrict__ plans, const Best* __restrict__ part, int S,
                                    int32_t* __restrict__ ids) {
    const int64_t r = blockIdx.x;
    if (plans[r].mode == kDone) return;
    Best b{0.0, -1};
    for (int s = threadIdx.x; s < S; s += 32) b = better(b, part[r * S + s]);
    b = warp_best(b);
    if (threadIdx.x == 0) ids[r] = b.idx;
}

}  // namespace

cudaError_t launch_sample(const float* x, int64_t ldx, int64_t rows, int64_t cols, const SampleRow* rows_p,
                          int32_t* ids, void* scratch, cudaStream_t stream) {
    const int S = int((cols + kSeg - 1) / kSeg);
    auto* plans = static_cast<RowPlan*>(scratch);
    auto* part = reinterpret_cast<Best*>(plans + rows);
    sample_plan_kernel<<<unsigned(rows), kThreads, 0, stream>>>(x, ldx, int(cols), rows_p, plans, ids);
    sample_draw_kernel<<<dim3(unsigned(S), unsigned(rows)), kDrawThreads, 0, stream>>>(x, ldx, int(cols), rows_p,
                                                                                       plans, part);
    sample_merge_kernel<<<unsigned(rows), 32, 0, stream>>>(plans, part, S, ids);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail

namespace tessera::cuda::fast {

size_t sample_scratch_bytes(int64_t rows, int64_t cols) {
    const int64_t S = (cols + detail::kSeg - 1) / detail::kSeg;
    return size_t(rows) * (sizeof(detail::RowPlan) + size_t(S) * sizeof(detail::Best));
}

}  // namespace tessera::cuda::fast
