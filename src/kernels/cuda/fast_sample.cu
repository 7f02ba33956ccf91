// sample (fast_sample.h): the arithmetic of each token is kernels/sampling.h's, as the host
// reference (kernels/cpu/sample.cpp) does it, so both keep the same tokens and draw the same one.
//
// The kept set after top-k and after top-p is a prefix of the row in (key descending, id
// ascending) order — a Cut: keys above `key`, and those equal to it with id < id_end. Each is
// found by select_desc: among the items a Filter admits (each with a key and a weight: 1 for
// top-k, the fixed-point mass for top-p), the key at which the weight summed in descending key
// order first reaches `want`. Three passes histogram the next 11 / 11 / 10 bits of the keys that
// share the prefix found so far; a block scan over the bins from the top finds the crossing bin.
// The ties at a cut's key are ordered by id with the same select over ~id.
//
// A cluster of kCluster blocks plans a row (sample_plan_kernel): each block takes a slice of the
// columns, keeps its own histogram in shared memory, and every block reads all of them through
// distributed shared memory and walks the same sums (integers: the same result in every block).
//
// Candidates (session 43). The selects walk the whole row three times each (about 30 µs a walk at
// 248,320 columns: the first pass's keys crowd into a few bins), yet a top-k or top-p cut keeps
// the row's largest logits only. So before them the cluster gathers a candidate set, an upper
// set of the row in value order that provably holds every token a cut can keep, into shared
// memory, and the selects walk that (a few hundred items a block) instead of the row:
//   - bin(v) = ⌊(top − v)·16⌋ (f32, clamped to kCandBins − 1) is non-increasing in v (rounding is
//     monotonic), so {v : bin(v) ≤ B} is an upper set, closed under equal keys;
//   - one pass histograms the maxima of the row's 32-column chunks by bin; B is the first bin
//     where the chunk maxima counted from the top reach K' (top-k's k, or kCandTopP for top-p
//     alone): K' distinct tokens lie in the set, so it holds the K' largest and every tie of them;
//   - a second pass copies the set into shared memory (kCand a block at most).
// Top-k's cut (its k-th key and the ties at it) then lies in the set whole; top-p after top-k
// admits only what top-k kept, all in the set; top-p alone needs the set's mass to reach the
// target of the whole row's mass (summed in the same pass). Whatever fails — a block's set past
// kCand (all logits equal, or many ties), too little mass, k past kCandMaxK — the row is planned
// on the whole row as before. Integer sums in any order: the same cuts either way, bit for bit.
// Every token the cuts keep is a candidate, so such a row is drawn in the plan kernel as well
// (the draw kernel's keep and noise, token by token; the best is a total order) and the draw and
// merge kernels skip it.
// The draw — a Philox block and two f32 logs a kept token, two double ones for the few within a
// bound of the segment's best — runs over segments of the row in parallel (sample_draw_kernel);
// a warp a row merges the segments' best.
#include <cooperative_groups.h>

#include <cstdint>
#include <vector>

#include "kernels/cuda/arg_best.cuh"
#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_sample.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 1024, kWarps = kThreads / 32, kBins = 2048, kCluster = 8;
constexpr int32_t kNoCut = 0x7fffffff;
// Candidates: at most kCand a block (dynamic shared memory: a float and an id each); bins of 1/16
// of a logit below the top, the last one everything lower; top-k from candidates up to kCandMaxK,
// top-p alone from the set of the kCandTopP largest chunk maxima.
constexpr int kCand = 4096, kCandBins = kSampleCandBins, kCandMaxK = 1024, kCandTopP = 1024;
constexpr size_t kCandSmem = size_t(kCand) * (sizeof(float) + sizeof(int32_t));
// A block's slice of the row staged in shared memory after the candidates, where it has at most
// kStageMax columns (vocabularies up to 262,144): every pass then reads shared memory. Read from
// global memory a pass was a chain of ~30 dependent loads a thread — one load a warp in flight a
// round trip, the row's 124 KB a block in ~30 trips — which is most of a walk's time.
constexpr int kStageMax = 32768;
constexpr size_t kPlanSmemMax = kCandSmem + size_t(kStageMax) * sizeof(float);
constexpr unsigned kFull = 0xffffffffu;

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
    uint64_t want;
};

struct Shared {
    unsigned long long hist[kBins];
    unsigned long long wbuf[kThreads];  // a histogram pass's weights, for each warp's bin leaders
    uint64_t part[kWarps + 1];  // block scans
    Best best[kWarps];
    Best cbest;  // this block's part of a cluster reduction
    unsigned long long csum;
    uint32_t bin;
    unsigned long long above, at, want;
    int ncand;  // the block's candidates (past kCand: too many)
};

// The columns [lo, hi) of the cluster's block `rank` (lo a multiple of 4).
struct Slice {
    int lo, hi;
};
__host__ __device__ inline int slice_len(int V) { return ((V + kCluster - 1) / kCluster + 3) & ~3; }
__device__ Slice slice_of(int V, int rank) {
    const int per = slice_len(V);
    const int lo = min(V, rank * per);
    return {lo, min(V, lo + per)};
}

// Copies the block's slice [lo, hi) of `row` to `to` (16 bytes a load where row + lo is 16-byte
// aligned — lo is a multiple of 4 — every load of a thread issued before its stores) and returns
// the pointer that reads column i of the slice at [i] (to − lo). Ends at a block barrier.
__device__ const float* stage_slice(const float* __restrict__ row, Slice sl, float* to) {
    const int n = sl.hi - sl.lo;
    const float* src = row + sl.lo;
    constexpr int U = 8;
    if ((reinterpret_cast<uintptr_t>(src) & 15) == 0) {
        const int n4 = n / 4;
        for (int b = int(threadIdx.x); b < n4; b += U * kThreads) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (b + u * kThreads < n4) v[u] = __ldg(reinterpret_cast<const float4*>(src) + b + u * kThreads);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (b + u * kThreads < n4) reinterpret_cast<float4*>(to)[b + u * kThreads] = v[u];
        }
        for (int i = 4 * n4 + int(threadIdx.x); i < n; i += kThreads) to[i] = __ldg(src + i);
    } else {
        for (int b = int(threadIdx.x); b < n; b += U * kThreads) {
            float v[U];
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (b + u * kThreads < n) v[u] = __ldg(src + b + u * kThreads);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (b + u * kThreads < n) to[b + u * kThreads] = v[u];
        }
    }
    __syncthreads();
    return to - sl.lo;
}

// What a select walks: positions [begin, end) of the block's part, each a token id and its logit —
// the row's slice (row[i] for column i: global memory, or the slice staged in shared memory), or the
// block's candidates in shared memory (in no order: the selects' sums are integers).
struct RowSource {
    const float* row;
    Slice sl;
    __device__ int begin() const { return sl.lo; }
    __device__ int end() const { return sl.hi; }
    __device__ void at(int pos, int& i, float& v) const { i = pos, v = row[pos]; }
};
struct CandSource {
    const float* v;
    const int32_t* id;
    int n;
    __device__ int begin() const { return 0; }
    __device__ int end() const { return n; }
    __device__ void at(int pos, int& i, float& x) const { i = id[pos], x = v[pos]; }
};

__device__ uint64_t block_sum(uint64_t v, Shared& sh) {
    uint64_t total;
    dev::block_exclusive_scan<kWarps>(v, sh.part, &total);
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

// Over the cluster, in rank order (every block gets the same result).
__device__ Best cluster_best(Best b, Shared& sh, const cg::cluster_group& cl) {
    b = block_best(b, sh);
    if (threadIdx.x == 0) sh.cbest = b;
    cl.sync();
    Best r = *cl.map_shared_rank(&sh.cbest, 0);
    for (int q = 1; q < kCluster; ++q) r = better(r, *cl.map_shared_rank(&sh.cbest, q));
    cl.sync();  // before a block rewrites its part
    return r;
}
__device__ uint64_t cluster_sum(uint64_t v, Shared& sh, const cg::cluster_group& cl) {
    v = block_sum(v, sh);
    if (threadIdx.x == 0) sh.csum = v;
    cl.sync();
    uint64_t r = 0;
    for (int q = 0; q < kCluster; ++q) r += *cl.map_shared_rank(&sh.csum, q);
    cl.sync();
    return r;
}

// The items a select counts: admits(i, v, key) says whether token i (logit v) takes part and
// gives its key; weight(i, v) its weight (> 0 to count; asked only of keys in the bin walked).
// want(total) the running weight to reach, from the total of every admitted weight.
//
// Every block of the cluster histograms its slice (weights of equal bins summed within a warp
// first: logits crowd into few bins), then reads all the histograms and walks the same sums.
template <class Source, class Filter, class Want>
__device__ Selected select_desc(const Source& src, const Filter& f, Want want_of, Shared& sh,
                                const cg::cluster_group& cl) {
    const int lane = threadIdx.x & 31;
    uint32_t prefix = 0, mask = 0;
    uint64_t above = 0, at = 0, want = 0;
    for (int pass = 0; pass < 3; ++pass) {
        const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
        const uint32_t bin_mask = pass == 2 ? 0x3ffu : 0x7ffu;
        for (int b = threadIdx.x; b < kBins; b += kThreads) sh.hist[b] = 0;
        __syncthreads();
        const int end = src.end();
        for (int base = src.begin() + (threadIdx.x & ~31); base < end; base += kThreads) {  // warp-uniform
            const int pos = base + lane;
            uint32_t key = 0;
            uint64_t w = 0;
            if (pos < end) {
                int i;
                float v;
                src.at(pos, i, v);
                if (f.admits(i, v, key) && (key & mask) == prefix) w = f.weight(i, v);
            }
            if (!__any_sync(kFull, w > 0)) continue;
            const uint32_t bin = w > 0 ? (key >> shift) & bin_mask : 0xffffffffu;
            const unsigned peers = __match_any_sync(kFull, bin);
            sh.wbuf[threadIdx.x] = w;
            __syncwarp();
            if (w > 0 && lane == __ffs(peers) - 1) {  // the leader adds its bin's weights in the warp
                const unsigned long long* wb = sh.wbuf + (threadIdx.x & ~31u);
                uint64_t sum = 0;
                for (unsigned m = peers; m; m &= m - 1) sum += wb[__ffs(m) - 1];
                atomicAdd(&sh.hist[bin], static_cast<unsigned long long>(sum));
            }
            __syncwarp();  // wbuf is rewritten next iteration
        }
        cl.sync();  // every block's histogram is complete
        // Thread t holds bins hi = kBins − 1 − 2t and hi − 1: thread order is descending key order.
        const int hi = kBins - 1 - 2 * int(threadIdx.x);
        uint64_t h1 = 0, h0 = 0;
        for (int q = 0; q < kCluster; ++q) {
            const unsigned long long* hq = cl.map_shared_rank(sh.hist, q);
            h1 += hq[hi];
            h0 += hq[hi - 1];
        }
        uint64_t total;
        const uint64_t ex = dev::block_exclusive_scan<kWarps>(h1 + h0, sh.part, &total);
        if (pass == 0) want = want_of(total);
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
        cl.sync();  // no block rewrites its histogram (or sh) while another still reads it
    }
    return {prefix, above, at, want};
}

// The ids of the admitted items at sel.key, ascending, as a select over ~id.
template <class Filter>
struct TiesById {
    const Filter& f;
    uint32_t at;
    __device__ bool admits(int i, float v, uint32_t& key) const {
        uint32_t k;
        if (!f.admits(i, v, k) || k != at || f.weight(i, v) == 0) return false;
        key = ~uint32_t(i);
        return true;
    }
    __device__ uint64_t weight(int, float) const { return 1; }
};

// The cut keeping the items of `sel` above its key and the first m (by id) of those at it.
template <class Source, class Filter>
__device__ Cut cut_at(const Source& src, const Selected& sel, uint64_t m, uint64_t n_at, const Filter& f, Shared& sh,
                      const cg::cluster_group& cl) {
    Cut c{sel.key, kNoCut, true};
    if (m >= n_at) return c;
    const TiesById<Filter> ties{f, sel.key};
    c.id_end = int32_t(~select_desc(src, ties, [m](uint64_t) { return m; }, sh, cl).key) + 1;
    return c;
}

// top-k's items: the finite logits, weight 1.
struct Finite {
    __device__ bool admits(int, float v, uint32_t& key) const {
        if (!isfinite(v)) return false;
        key = sample_key(v);
        return true;
    }
    __device__ uint64_t weight(int, float) const { return 1; }
};
// top-p's: the finite logits top-k kept, weighted by their fixed-point mass.
struct Mass {
    Cut ck;
    float top;
    double inv_t;
    __device__ bool admits(int i, float v, uint32_t& key) const {
        if (!isfinite(v)) return false;
        key = sample_key(v);
        return ck.keeps(key, i);
    }
    __device__ uint64_t weight(int, float v) const { return sample_mass_of_score(sample_score(v, top, inv_t)); }
};

// top-p's target: ⌈top_p · total⌉ of the mass the select walks, or `fixed` (> 0) where it walks
// the candidates of top-p alone and the target is the whole row's.
struct PWant {
    uint64_t fixed;
    float top_p;
    __device__ uint64_t operator()(uint64_t total) const { return fixed ? fixed : sample_top_p_target(total, top_p); }
};

// The block's candidates, in dynamic shared memory: logits and ids.
struct Cands {
    float* v;
    int32_t* id;
};

// Gathers the candidate set for the kk largest tokens of the row (file comment; row[i] is column
// i's logit, staged or not) into `c`, the block's count in *n. Returns whether every block's set
// fit in kCand (the same answer in every block).
// MASS (top-p alone): *total and *in_set, the fixed-point mass of the row's finite logits and of
// the set's (cluster sums).
template <bool MASS>
__device__ bool gather_candidates(const float* row, Slice sl, float top, double inv_t, uint64_t kk,
                                  const Cands& c, Shared& sh, const cg::cluster_group& cl, int* n, uint64_t* total,
                                  uint64_t* in_set) {
    const int lane = threadIdx.x & 31;
    for (int b = threadIdx.x; b < kCandBins; b += kThreads) sh.hist[b] = 0;
    if (threadIdx.x == 0) sh.ncand = 0;
    __syncthreads();
    // 1. The bins of the maxima of the slice's 32-column chunks (key 0: no finite logit there).
    for (int base = sl.lo + (threadIdx.x & ~31); base < sl.hi; base += kThreads) {  // warp-uniform
        const int i = base + lane;
        uint32_t key = 0;
        if (i < sl.hi) {
            const float v = row[i];
            if (isfinite(v)) key = sample_key(v);
        }
        const uint32_t m = __reduce_max_sync(kFull, key);
        if (lane == 0 && m != 0) atomicAdd(&sh.hist[sample_cand_bin(sample_key_value(m), top)], 1ull);
    }
    cl.sync();  // every block's counts
    // 2. B: the first bin where the cluster's counts from the top reach kk (every block the same);
    // fewer chunks than kk: every finite logit.
    uint64_t cnt = 0;
    if (int(threadIdx.x) < kCandBins)
        for (int q = 0; q < kCluster; ++q) cnt += cl.map_shared_rank(sh.hist, q)[threadIdx.x];
    uint64_t chunks;
    const uint64_t ex = dev::block_exclusive_scan<kWarps>(cnt, sh.part, &chunks);
    if (ex < kk && kk <= ex + cnt) sh.bin = threadIdx.x;
    __syncthreads();
    const int B = chunks < kk ? kCandBins - 1 : int(sh.bin);
    cl.sync();  // no block rewrites its counts (the next select) while another still reads them
    // 3. The set: the slice's finite logits of bin ≤ B, a warp's at consecutive places.
    uint64_t mass = 0, mass_in = 0;
    for (int base = sl.lo + (threadIdx.x & ~31); base < sl.hi; base += kThreads) {
        const int i = base + lane;
        float v = 0.f;
        bool in = false;
        if (i < sl.hi) {
            v = row[i];
            if (isfinite(v)) {
                in = sample_cand_bin(v, top) <= B;  // (sampling.h: an upper set of the row)
                if constexpr (MASS) {
                    const uint64_t w = sample_mass_of_score(sample_score(v, top, inv_t));
                    mass += w;
                    mass_in += in ? w : 0;
                }
            }
        }
        const unsigned ballot = __ballot_sync(kFull, in);
        if (!ballot) continue;
        int at = 0;
        if (lane == 0) at = atomicAdd(&sh.ncand, __popc(ballot));
        at = __shfl_sync(kFull, at, 0) + __popc(ballot & ((1u << lane) - 1u));
        if (in && at < kCand) c.v[at] = v, c.id[at] = i;
    }
    __syncthreads();
    const int got = sh.ncand;
    *n = min(got, kCand);
    const uint64_t over = cluster_sum(threadIdx.x == 0 && got > kCand ? 1 : 0, sh, cl);
    if constexpr (MASS) {
        *total = cluster_sum(mass, sh, cl);
        *in_set = cluster_sum(mass_in, sh, cl);
    }
    return over == 0;
}

// top-k's cut ck (where cut_k) and top-p's cp after it (where cut_p), walking `src`.
template <class Source>
__device__ void plan_cuts(const Source& src, bool cut_k, uint64_t k, bool cut_p, const PWant& want_p, float top,
                          double inv_t, Shared& sh, const cg::cluster_group& cl, Cut& ck, Cut& cp) {
    if (cut_k) {
        const Finite f;
        const Selected s = select_desc(src, f, [k](uint64_t) { return k; }, sh, cl);
        ck = cut_at(src, s, k - s.above, s.at, f, sh, cl);
    }
    if (cut_p) {
        const Mass f{ck, top, inv_t};
        const Selected s = select_desc(src, f, want_p, sh, cl);
        const uint64_t q = f.weight(0, sample_key_value(s.key));  // > 0 at the crossing
        const uint64_t m = (s.want - s.above - 1) / q + 1;         // ties kept while the mass before them < want
        cp = cut_at(src, s, m, s.at / q, f, sh, cl);
    }
}

// Whether the draw keeps finite token i (key, score s): within both cuts, able to win (sampling.h's
// kSampleSkipBelow) and, with min-p, exp(s) ≥ min_p. One test for the draw kernel and the
// candidates' draw, so both keep the same tokens.
__device__ __forceinline__ bool draw_keeps(const Cut& ck, const Cut& cp, const SampleRow& p, uint32_t key, int i,
                                           double s) {
    return ck.keeps(key, i) && cp.keeps(key, i) && s >= kSampleSkipBelow &&
           (p.min_p <= 0.f || exp(s) >= double(p.min_p));
}

// This thread's best of the block's candidates by the draw kernel's keep and noise (s + G). Not
// inlined: the noise's registers stay out of the plan kernel's selects.
__device__ __noinline__ Best draw_candidates(const Cands& c, int n, const Cut& ck, const Cut& cp, float top,
                                             double inv_t, const SampleRow& p) {
    Best b{0.0, -1};
    for (int pos = threadIdx.x; pos < n; pos += kThreads) {
        const int i = c.id[pos];
        const float v = c.v[pos];
        const uint32_t key = sample_key(v);
        const double s = sample_score(v, top, inv_t);
        if (draw_keeps(ck, cp, p, key, i, s)) {
            uint32_t bits[4];
            sample_noise_bits(p.seed, p.counter, uint64_t(i) >> 2, bits);
            b = better(b, Best{s + sample_gumbel(bits[i & 3]), i});
        }
    }
    return b;
}

// What the draw needs of a row (sample_plan_kernel → sample_draw_kernel / sample_merge_kernel).
struct RowPlan {
    float top;
    int32_t mode;  // kDone: ids[r] written (greedy, or drawn from the candidates); kInf: the +inf logits; kCut: ck, cp
    double inv_t;
    Cut ck, cp;
    int32_t from_cands;  // 1: the cuts and the draw came from the candidates (mode kDone)
};
constexpr int32_t kDone = 0, kInf = 1, kCut = 2;

// Cluster r: the argmax, then top-k's and top-p's cuts of row r.
__global__ void __launch_bounds__(kThreads)
    sample_plan_kernel(const float* __restrict__ x, int64_t ldx, int V, const SampleRow* __restrict__ rows,
                       RowPlan* __restrict__ plans, int32_t* __restrict__ ids, bool try_cands, bool stage) {
    __shared__ Shared sh;
    extern __shared__ float4 plan_smem[];  // kCandSmem bytes, then the staged slice (stage)
    const Cands cs{reinterpret_cast<float*>(plan_smem), reinterpret_cast<int32_t*>(plan_smem) + kCand};
    pdl::wait();  // launched with PDL (pdl.cuh): the logits come from the kernel before
    pdl::trigger();
    const cg::cluster_group cl = cg::this_cluster();
    const int64_t r = blockIdx.y;
    const SampleRow p = rows[r];
    const Slice sl = slice_of(V, int(cl.block_rank()));
    // row[i]: column i's logit — from the slice staged in shared memory where it fits (every pass
    // below reads it there), else from global memory.
    const float* row = stage ? stage_slice(x + r * ldx, sl, reinterpret_cast<float*>(cs.id + kCand))
                             : x + r * ldx;
    const bool writer = cl.block_rank() == 0 && threadIdx.x == 0;
    RowPlan plan{};

    // 1. The argmax (the first index of the largest non-NaN logit) and the finite count.
    Best arg{0.0, -1};
    uint64_t n_fin = 0;
    for (int i = sl.lo + int(threadIdx.x); i < sl.hi; i += kThreads) {
        const float v = row[i];
        if (v == v) arg = better(arg, Best{double(v), i});
        n_fin += isfinite(v) ? 1 : 0;
    }
    arg = cluster_best(arg, sh, cl);
    n_fin = cluster_sum(n_fin, sh, cl);
    const float top = float(arg.v);
    plan.top = top;
    if (arg.idx < 0 || p.temperature <= 0.f || p.top_k == 1 || top == -INFINITY) {
        if (writer) {
            ids[r] = arg.idx < 0 ? 0 : arg.idx;
            plan.mode = kDone;
            plans[r] = plan;
        }
        return;
    }
    if (top == INFINITY) {  // the +inf logits share all the mass; no filter applies
        if (writer) {
            plan.mode = kInf;
            plans[r] = plan;
        }
        return;
    }
    const double inv_t = 1.0 / double(p.temperature);
    const bool cut_k = p.top_k > 0 && uint64_t(p.top_k) < n_fin, cut_p = p.top_p < 1.f;
    const uint64_t k = cut_k ? uint64_t(p.top_k) : 0;

    // 2. The candidates (file comment), where a cut is asked for and they can hold it: top-k's k
    // largest (top-p after it admits only those), or top-p alone's kCandTopP with enough mass.
    int n_cand = 0;
    bool cands = false;
    PWant want_p{0, p.top_p};
    if (try_cands && cut_k && k <= uint64_t(kCandMaxK)) {
        cands = gather_candidates<false>(row, sl, top, inv_t, k, cs, sh, cl, &n_cand, nullptr, nullptr);
    } else if (try_cands && !cut_k && cut_p) {
        uint64_t total = 0, in_set = 0;
        cands = gather_candidates<true>(row, sl, top, inv_t, kCandTopP, cs, sh, cl, &n_cand, &total, &in_set);
        want_p.fixed = sample_top_p_target(total, p.top_p);  // ≥ 1: the top's mass is 2⁴²
        cands = cands && in_set >= want_p.fixed;
        if (!cands) want_p.fixed = 0;
    }

    // 3. top-k over the finite logits, then top-p over the mass top-k kept.
    Cut ck, cp;
    if (cands) plan_cuts(CandSource{cs.v, cs.id, n_cand}, cut_k, k, cut_p, want_p, top, inv_t, sh, cl, ck, cp);
    else plan_cuts(RowSource{row, sl}, cut_k, k, cut_p, want_p, top, inv_t, sh, cl, ck, cp);

    // 4. With candidates, the draw too: every token the cuts keep is one of them, and the draw
    // kernel's keep and noise on each give its winner (the best is a total order: any walk).
    if (cands) {
        const Best b = cluster_best(draw_candidates(cs, n_cand, ck, cp, top, inv_t, p), sh, cl);
        if (writer) {
            ids[r] = b.idx;
            plan.mode = kDone;
            plan.from_cands = 1;
            plans[r] = plan;
        }
        return;
    }
    if (writer) {
        plan.mode = kCut;
        plan.inv_t = inv_t;
        plan.ck = ck;
        plan.cp = cp;
        plans[r] = plan;
    }
}

// Block (s, r): the kept token of columns [s·kSeg, s·kSeg + kSeg) of row r with the largest
// s + G, into part[r·S + s] (idx −1: none). A thread takes 4 neighbouring columns at a time (one
// Philox block), kSeg / (4·kDrawThreads) = 2 times.
//
// Two logs in double a token (sample_gumbel) were most of the draw's arithmetic; so each kept token
// first gets a = s + Ĝ with Ĝ from two f32 logs (gumbel_f32: |Ĝ − G| ≤ 2⁻¹⁸·⁷, below), the block
// takes the largest a, M, and only the kept tokens with a ≥ M − 2δ (δ = kDrawDelta ≥ that bound) get
// the exact s + G. The exact best w is among them: e_w ≥ e_m ≥ a_m − δ = M − δ for the token m of
// M, so a_w ≥ e_w − δ ≥ M − 2δ. Its winner is the one the all-double draw picks (the same bits).
constexpr int kDrawThreads = 256, kSeg = 2048, kDrawIters = kSeg / (4 * kDrawThreads);
constexpr double kDrawDelta = 0x1p-14;  // ≥ 18 × the bound on |Ĝ − G|

// G = −ln(−ln U), U = (bits + ½)·2⁻³², in f32. t = −ln U from U where U < ½, else from 1 − U =
// (2³² − 1 − bits + ½)·2⁻³² by log1p: either way t̃ = t(1 + ε), |ε| ≤ 2⁻²¹·⁴ (the integer's rounding
// to f32, 2⁻²³ relative; logf / log1pf within 1 ulp; |d(−log1p(−v))/dv| ≤ 2 for v ≤ ½, and t ≥ v;
// t ≥ ln 2 where U < ½). Then −ln t̃ is off by |ln(1 + ε)| plus logf's ulp of |G| ≤ 22.9 (2⁻¹⁹):
// |Ĝ − G| ≤ 2⁻¹⁸·⁷.
__device__ __forceinline__ float gumbel_f32(uint32_t bits) {
    const float t = bits < 0x80000000u ? -logf((float(bits) + 0.5f) * 0x1p-32f)
                                       : -log1pf(-((float(0xffffffffu - bits) + 0.5f) * 0x1p-32f));
    return -logf(t);
}

__global__ void __launch_bounds__(kDrawThreads)
    sample_draw_kernel(const float* __restrict__ x, int64_t ldx, int V, const SampleRow* __restrict__ rows,
                       const RowPlan* __restrict__ plans, Best* __restrict__ part, double delta) {
    __shared__ Best warps[kDrawThreads / 32];
    __shared__ double warp_max[kDrawThreads / 32];
    pdl::wait();  // (launched with PDL: the plans come from the kernel before)
    pdl::trigger();
    const int64_t r = blockIdx.y;
    const RowPlan plan = plans[r];
    if (plan.mode == kDone) return;
    const SampleRow p = rows[r];
    const float* row = x + r * ldx;
    const int c0 = int(blockIdx.x) * kSeg, c1 = min(V, c0 + kSeg);
    // 1. a = s + Ĝ of this thread's kept tokens (NaN: not kept — no comparison passes it), and its
    // largest (fmax passes over NaN).
    double s[kDrawIters][4], a[kDrawIters][4];
    double m = -INFINITY;
#pragma unroll
    for (int it = 0; it < kDrawIters; ++it) {
        const int i0 = c0 + 4 * int(threadIdx.x) + it * 4 * kDrawThreads;
        bool any = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = i0 + j;
            const float v = i < c1 ? __ldg(row + i) : NAN;
            bool keep;
            if (plan.mode == kInf) {
                keep = v == INFINITY;
                s[it][j] = 0.0;
            } else {
                const uint32_t key = sample_key(v);
                s[it][j] = sample_score(v, plan.top, plan.inv_t);
                keep = isfinite(v) && draw_keeps(plan.ck, plan.cp, p, key, i, s[it][j]);
            }
            if (!keep) s[it][j] = NAN;
            a[it][j] = NAN;
            any = any || keep;
        }
        if (!any) continue;
        uint32_t bits[4];
        sample_noise_bits(p.seed, p.counter, uint64_t(i0) >> 2, bits);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (s[it][j] == s[it][j]) {
                a[it][j] = s[it][j] + double(gumbel_f32(bits[j]));
                m = fmax(m, a[it][j]);
            }
    }
    // 2. M, the block's largest a.
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmax(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
    __syncthreads();
    double M = warp_max[0];
#pragma unroll
    for (int w = 1; w < kDrawThreads / 32; ++w) M = fmax(M, warp_max[w]);
    // 3. The exact s + G of the kept tokens within 2δ of it.
    Best b{0.0, -1};
    const double floor = M - 2.0 * delta;  // (M = −inf: no kept token; a NaN passes no test)
#pragma unroll
    for (int it = 0; it < kDrawIters; ++it) {
        const int i0 = c0 + 4 * int(threadIdx.x) + it * 4 * kDrawThreads;
        bool any = false;
#pragma unroll
        for (int j = 0; j < 4; ++j) any = any || a[it][j] >= floor;
        if (!any) continue;
        uint32_t bits[4];
        sample_noise_bits(p.seed, p.counter, uint64_t(i0) >> 2, bits);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            if (a[it][j] >= floor) b = better(b, Best{s[it][j] + sample_gumbel(bits[j]), i0 + j});
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
    pdl::wait();  // (launched with PDL: the segments' bests come from the kernel before)
    pdl::trigger();
    const int64_t r = blockIdx.x;
    if (plans[r].mode == kDone) return;
    Best b{0.0, -1};
    for (int s = threadIdx.x; s < S; s += 32) b = better(b, part[r * S + s]);
    b = warp_best(b);
    if (threadIdx.x == 0) ids[r] = b.idx;
}

}  // namespace

cudaError_t launch_sample(const float* x, int64_t ldx, int64_t rows, int64_t cols, const SampleRow* rows_p,
                          int32_t* ids, void* scratch, cudaStream_t stream, SamplePlan how, double draw_delta) {
    if (!(draw_delta >= kDrawDelta)) return cudaErrorInvalidValue;  // (larger: more tokens drawn exactly)
    static const cudaError_t smem =
        cudaFuncSetAttribute(sample_plan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kPlanSmemMax));
    if (smem != cudaSuccess) return smem;
    const bool stage = slice_len(int(cols)) <= kStageMax;
    const size_t plan_smem = kCandSmem + (stage ? size_t(slice_len(int(cols))) * sizeof(float) : 0);
    const int S = int((cols + kSeg - 1) / kSeg);
    auto* plans = static_cast<RowPlan*>(scratch);
    auto* part = reinterpret_cast<Best*>(plans + rows);
    const cudaError_t e = pdl::launch_cluster(sample_plan_kernel, dim3(kCluster, unsigned(rows)), dim3(kThreads),
                                              plan_smem, stream, dim3(kCluster, 1, 1), x, ldx, int(cols), rows_p,
                                              plans, ids, how == SamplePlan::Candidates, stage);
    if (e != cudaSuccess) return e;
    const cudaError_t d = pdl::launch(sample_draw_kernel, dim3(unsigned(S), unsigned(rows)), dim3(kDrawThreads), 0,
                                      stream, x, ldx, int(cols), rows_p, static_cast<const RowPlan*>(plans), part,
                                      draw_delta);
    if (d != cudaSuccess) return d;
    return pdl::launch(sample_merge_kernel, dim3(unsigned(rows)), dim3(32), 0, stream,
                       static_cast<const RowPlan*>(plans), static_cast<const Best*>(part), S, ids);
}

std::vector<int32_t> sample_plans_from_candidates(const void* scratch, int64_t rows) {
    std::vector<RowPlan> plans(static_cast<size_t>(rows));
    if (rows > 0 &&
        cudaMemcpy(plans.data(), scratch, plans.size() * sizeof(RowPlan), cudaMemcpyDeviceToHost) != cudaSuccess)
        return {};
    std::vector<int32_t> out(plans.size());
    for (size_t r = 0; r < plans.size(); ++r) {
        const RowPlan& q = plans[r];
        out[r] = q.from_cands ? 1 : q.mode == kCut && (q.ck.on || q.cp.on) ? 0 : -1;
    }
    return out;
}

}  // namespace tessera::cuda::fast::detail

namespace tessera::cuda::fast {

size_t sample_scratch_bytes(int64_t rows, int64_t cols) {
    const int64_t S = (cols + detail::kSeg - 1) / detail::kSeg;
    return size_t(rows) * (sizeof(detail::RowPlan) + size_t(S) * sizeof(detail::Best));
}

}  // namespace tessera::cuda::fast
