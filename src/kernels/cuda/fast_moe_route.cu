// The fast MoE's routing kernels: the router (a warp per token, each lane holding E/32 values in
// registers) — softmax, top-k and renormalisation with the CPU's bits, or, where the weights are
// renormalised, the top-k of the logits and the picks' own exponentials — and the grouping of
// (token, slot) pairs by expert (one block: per-warp histograms, a scan over experts, a stable
// placement with __match_any_sync ranks). Integer counting only, so the grouping is exact and
// deterministic.
#include <cmath>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_rank.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using dev::pick_largest;
using dev::sort_desc;

constexpr unsigned kFull = 0xffffffffu;

// ---- router --------------------------------------------------------------------------------

// cpu::moe_topk's ranking: larger first, NaN above everything, equal values by the lower index.
// A total order (as 64-bit keys below), so a warp-wide max finds the same winner on every lane.

constexpr int kRouteWarps = 4;  // tokens per block

// NV probabilities per lane: expert v·32 + lane.
template <int NV>
__global__ void __launch_bounds__(kRouteWarps * 32)
    route_kernel(const float* __restrict__ logits, int64_t ldl, int T, int E, int k, bool renormalize, bool shared,
                 int32_t* __restrict__ ids, float* __restrict__ weights) {
    const int lane = int(threadIdx.x & 31);
    const int64_t t = int64_t(blockIdx.x) * kRouteWarps + (threadIdx.x >> 5);
    pdl::wait();  // launched with PDL (pdl.cuh): the logits come from the kernel before
    pdl::trigger();
    if (t >= T) return;  // the whole warp
    const float* l = logits + t * ldl;

    // m = max over the row as the CPU's std::max from -inf computes it (NaNs skipped).
    float p[NV];
    float m = -INFINITY;
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        p[v] = i < E ? __ldg(l + i) : 0.f;
        if (i < E) m = m < p[v] ? p[v] : m;
    }
    {  // the warp's max in one redux: floats as order-preserving ints (m is never NaN)
        const int mi = __float_as_int(m);
        const int top = __reduce_max_sync(kFull, mi >= 0 ? mi : mi ^ 0x7fffffff);
        m = __int_as_float(top >= 0 ? top : top ^ 0x7fffffff);
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
    // (ties to the lower index; never 0, so keys are unique). Absent experts have key 0. Each lane
    // sorts its keys once and offers its largest; the winning lane drops it (a shift of its list),
    // so a pick is two redux instructions and a few moves, not a scan of NV keys.
    unsigned long long key[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        const float pv = p[v];
        const uint32_t hi = isnan(pv) ? 0xffffffffu : pv == 0.f ? 0u : __float_as_uint(pv);
        key[v] = i < E ? (static_cast<unsigned long long>(hi) << 32) | uint32_t(0x10000 - i) : 0ull;
    }
    sort_desc<NV>(key);
    float my_w = 0.f, wsum = 0.f;
    int my_id = -1;
    for (int j = 0; j < k; ++j) {
        uint32_t bh, bl;
        pick_largest<NV>(key, bh, bl);
        const int bi = 0x10000 - int(bl);  // k ≤ E: a key is never 0 here
        const float bv = bh == 0xffffffffu ? __int_as_float(0x7fffffff) : __uint_as_float(bh);
        if (lane == j) {
            my_w = bv;
            my_id = bi;
        }
        wsum += bv;  // in slot order, as the CPU sums
    }
    const int slots = k + (shared ? 1 : 0);
    if (lane < k) {
        ids[t * slots + lane] = my_id;
        weights[t * slots + lane] = renormalize ? my_w / wsum : my_w;
    } else if (shared && lane == k) {  // the shared expert: σ(g) as the CPU computes it
        ids[t * slots + k] = E;
        weights[t * slots + k] = 1.f / (1.f + float(exp(-double(__ldg(l + E)))));
    }
}

// The same routing when the weights are renormalised over the k picks (Qwen's norm_topk_prob):
// softmax is monotone and its normaliser cancels, so the picks are the k largest logits and the
// weights e^(l − l₀) / Σ e^(l − l₀) over the picks alone (l₀ the first pick's logit) — k f32
// exponentials instead of E double ones and the normaliser's bounds. Ranking as cpu::moe_topk
// (NaN above everything, ties by the lower index) but on the logits: two experts whose logits
// differ yet whose f32 probabilities round equal can come out in the other order (the exact kernel
// above is what the tests compare bit for bit; this one within f32 rounding).
template <int NV>
__global__ void __launch_bounds__(kRouteWarps * 32)
    route_logits_kernel(const float* __restrict__ logits, int64_t ldl, int T, int E, int k, bool shared,
                        int32_t* __restrict__ ids, float* __restrict__ weights) {
    const int lane = int(threadIdx.x & 31);
    const int64_t t = int64_t(blockIdx.x) * kRouteWarps + (threadIdx.x >> 5);
    pdl::wait();  // launched with PDL (pdl.cuh): the logits come from the kernel before
    pdl::trigger();
    if (t >= T) return;  // the whole warp
    const float* l = logits + t * ldl;

    // Keys: dev::logit_rank_key (fast_moe_rank.cuh; absent experts 0).
    unsigned long long key[NV];
#pragma unroll
    for (int v = 0; v < NV; ++v) {
        const int i = v * 32 + lane;
        key[v] = dev::logit_rank_key(i < E ? __ldg(l + i) : 0.f, i, i < E);
    }
    sort_desc<NV>(key);
    float my_l = 0.f, l0 = 0.f;
    int my_id = -1;
    for (int j = 0; j < k; ++j) {
        uint32_t bh, bl;
        pick_largest<NV>(key, bh, bl);
        const float bv = bh == 0xffffffffu ? __int_as_float(0x7fffffff)
                                           : __uint_as_float((bh & 0x80000000u) ? bh & 0x7fffffffu : ~bh);
        if (j == 0) l0 = bv;
        if (lane == j) {
            my_l = bv;
            my_id = 0x10000 - int(bl);
        }
    }
    const float e = lane < k ? expf(my_l - l0) : 0.f;  // ≤ 1: l0 is the largest
    float wsum = 0.f;
    for (int j = 0; j < k; ++j) wsum += __shfl_sync(kFull, e, j);  // in slot order
    const int slots = k + (shared ? 1 : 0);
    if (lane < k) {
        ids[t * slots + lane] = my_id;
        weights[t * slots + lane] = e / wsum;
    } else if (shared && lane == k) {  // the shared expert's gate σ(g)
        ids[t * slots + k] = E;
        weights[t * slots + k] = 1.f / (1.f + expf(-__ldg(l + E)));
    }
}

// ---- grouping ------------------------------------------------------------------------------

constexpr int kGroupWarps = 16;
constexpr int kGroupThreads = kGroupWarps * 32;  // >= kMoeMaxExperts: one expert per thread in the scan
constexpr int kGroupBatch = 8;                   // rounds of 32 ids a warp loads at once
static_assert(kGroupThreads >= kMoeMaxExperts);

__device__ __forceinline__ unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// A warp's ids [base, base + 32·kGroupBatch) ∩ [.., end), lane l holding base + 32i + l (-1 past end).
__device__ __forceinline__ void load_id_batch(const int32_t* __restrict__ ids, int64_t base, int64_t end, int lane,
                                              int (&ev)[kGroupBatch]) {
#pragma unroll
    for (int i = 0; i < kGroupBatch; ++i) {
        const int64_t s = base + 32 * i + lane;
        ev[i] = s < end ? ids[s] : -1;
    }
}

// The pairs a block of the grouping owns: all of them with one block, else chunk b of
// kMoeGroupChunk (the counting kernel's chunks and the placing kernel's are the same).
struct GroupChunk {
    int64_t begin, end;
};
__device__ __forceinline__ GroupChunk group_chunk(int64_t P, int nb, int b) {
    if (nb == 1) return {0, P};
    const int64_t begin = int64_t(b) * kMoeGroupChunk;
    return {begin, min(P, begin + kMoeGroupChunk)};
}

// Two-kernel grouping, first: counts[b][e] — chunk b's pairs routed to e (order does not matter).
// Launched with PDL (pdl.cuh): the ids come from the kernel before (the routing).
__global__ void __launch_bounds__(kGroupThreads)
    group_count_kernel(const int32_t* __restrict__ ids, int64_t P, int E, int32_t* __restrict__ counts) {
    __shared__ int hist[kMoeMaxExperts];
    const int tid = int(threadIdx.x), b = int(blockIdx.x);
    pdl::wait();
    pdl::trigger();  // the placing kernel's blocks count their warps' pairs meanwhile
    for (int e = tid; e < E; e += kGroupThreads) hist[e] = 0;
    __syncthreads();
    const GroupChunk c = group_chunk(P, int(gridDim.x), b);
    for (int64_t s = c.begin + tid; s < c.end; s += kGroupThreads) {
        const int e = ids[s];
        if (e >= 0 && e < E) atomicAdd(&hist[e], 1);
    }
    __syncthreads();
    for (int e = tid; e < E; e += kGroupThreads) counts[int64_t(b) * E + e] = hist[e];
}

// The grouping itself (one block, or block b of the placing kernel after group_count_kernel).
// Warp w owns the pairs [P·w/16, P·(w+1)/16) of the block's chunk. hist[w][e]: its pairs routed
// to e; then the first grouped row of those pairs. Block 0 writes the offsets and the items.
// Launched with PDL: one block waits for the kernel before (the routing: the ids) first; the
// placing kernel reads the ids before its wait — written two launches back, complete once
// group_count_kernel passed its own wait and let this one start — and waits for the counts.
__global__ void __launch_bounds__(kGroupThreads)
    group_kernel(const int32_t* __restrict__ ids, int64_t P, int E, int tile_rows, MoeGrouping g) {
    __shared__ int hist[kGroupWarps][kMoeMaxExperts];
    __shared__ long long warp_tot[kGroupWarps + 1];
    __shared__ int valid_rows;
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int nb = int(gridDim.x), b = int(blockIdx.x);
    if (nb == 1) pdl::wait();
    for (int i = tid; i < kGroupWarps * kMoeMaxExperts; i += kGroupThreads) (&hist[0][0])[i] = 0;
    __syncthreads();

    // The warp's ids kGroupBatch rounds of 32 at a time: their loads in flight together (one L2
    // round trip a batch, not a round: session 33's 14 µs at 4,096 pairs were mostly those trips).
    const GroupChunk chunk = group_chunk(P, nb, b);
    const int64_t n = chunk.end - chunk.begin;
    const int64_t begin = chunk.begin + n * warp / kGroupWarps, end = chunk.begin + n * (warp + 1) / kGroupWarps;
    for (int64_t base = begin; base < end; base += 32 * kGroupBatch) {
        int ev[kGroupBatch];
        load_id_batch(ids, base, end, lane, ev);
#pragma unroll
        for (int i = 0; i < kGroupBatch; ++i) {
            const int e = ev[i];
            const bool ok = e >= 0 && e < E;
            const unsigned same = __match_any_sync(kFull, ok ? e : -1);
            if (ok && (same & lanemask_lt()) == 0) hist[warp][e] += __popc(same);  // the lowest lane of each expert
            __syncwarp();
        }
    }
    __syncthreads();

    // Per expert: count, exclusive row offset and item offset (packed in one 64-bit scan); with
    // several blocks the counts are every chunk's and `before` the rows of the earlier chunks.
    const int e = tid;
    int count = 0, before = 0;
    if (nb == 1) {
        if (e < E)
            for (int w = 0; w < kGroupWarps; ++w) count += hist[w][e];
    } else {
        pdl::wait();  // group_count_kernel's counts
        if (e < E)
            for (int c = 0; c < nb; ++c) {
                const int v = g.chunk_counts[int64_t(c) * E + e];
                before += c < b ? v : 0;
                count += v;
            }
    }
    const long long n_items = (count + tile_rows - 1) / tile_rows;
    long long total = 0;
    const long long ex = dev::block_exclusive_scan<kGroupWarps>(count | (n_items << 32), warp_tot, &total);
    const int row0 = int(ex & 0xffffffffll), item0 = int(ex >> 32);
    if (e < E) {
        if (b == 0) {
            g.offsets[e] = row0;
            for (int q = 0; q < n_items; ++q) {
                g.item_expert[item0 + q] = e;
                g.item_row0[item0 + q] = row0 + q * tile_rows;
                g.item_rows[item0 + q] = min(tile_rows, count - q * tile_rows);
                if (g.item_done) g.item_done[item0 + q] = 0u;  // (the fused tiles' counts)
            }
        }
        int run = row0 + before;
        for (int w = 0; w < kGroupWarps; ++w) {
            const int c = hist[w][e];
            hist[w][e] = run;
            run += c;
        }
    }
    if (tid == 0) {
        if (b == 0) {
            g.offsets[E] = int(total & 0xffffffffll);
            *g.n_items = int(total >> 32);
            if (g.tile_counters) g.tile_counters[0] = g.tile_counters[1] = 0u;  // the tiles' dynamic walk
        }
        valid_rows = int(total & 0xffffffffll);
    }
    __syncthreads();

    // Stable placement: pair s goes to its expert's next row, in slot order (batched as above).
    for (int64_t base = begin; base < end; base += 32 * kGroupBatch) {
        int ev[kGroupBatch];
        load_id_batch(ids, base, end, lane, ev);
#pragma unroll
        for (int i = 0; i < kGroupBatch; ++i) {
            const int64_t s = base + 32 * i + lane;
            const int ei = ev[i];
            const bool ok = ei >= 0 && ei < E;
            const unsigned same = __match_any_sync(kFull, ok ? ei : -1);
            const int leader = __ffs(same) - 1;
            const int b0 = ok && lane == leader ? hist[warp][ei] : 0;
            const int row = __shfl_sync(kFull, b0, leader) + __popc(same & lanemask_lt());
            if (s < end) {
                g.row_of_slot[s] = ok ? row : -1;
                if (ok) g.perm[row] = int(s);
            }
            __syncwarp();
            if (ok && lane == leader) hist[warp][ei] = b0 + __popc(same);
            __syncwarp();
        }
    }
    for (int64_t r = valid_rows + int64_t(b) * kGroupThreads + tid; r < P; r += int64_t(nb) * kGroupThreads)
        g.perm[r] = -1;
}

}  // namespace

cudaError_t launch_moe_route(const float* logits, int64_t ldl, int64_t T, int E, int k, bool renormalize,
                             bool shared, int32_t* ids, float* weights, bool exact, cudaStream_t stream) {
    const dim3 grid(unsigned((T + kRouteWarps - 1) / kRouteWarps)), block(kRouteWarps * 32);
    const int t = int(T);
    if (renormalize && !exact) {
        auto go = [&](auto kernel) {
            return pdl::launch(kernel, grid, block, 0, stream, logits, ldl, t, E, k, shared, ids, weights);
        };
        if (E <= 32) return go(route_logits_kernel<1>);
        if (E <= 64) return go(route_logits_kernel<2>);
        if (E <= 128) return go(route_logits_kernel<4>);
        if (E <= 256) return go(route_logits_kernel<8>);
        return go(route_logits_kernel<16>);
    }
    auto go = [&](auto kernel) {
        return pdl::launch(kernel, grid, block, 0, stream, logits, ldl, t, E, k, renormalize, shared, ids, weights);
    };
    if (E <= 32) return go(route_kernel<1>);
    if (E <= 64) return go(route_kernel<2>);
    if (E <= 128) return go(route_kernel<4>);
    if (E <= 256) return go(route_kernel<8>);
    return go(route_kernel<16>);
}

cudaError_t launch_moe_group(const int32_t* ids, int64_t T, int k, int E, int tile_rows, const MoeGrouping& g,
                             cudaStream_t stream, bool pdl) {
    const int64_t P = T * k, nb = moe_group_blocks(P);
    const dim3 block(kGroupThreads);
    if (nb == 1)
        return pdl::detail::launch_ex(group_kernel, dim3(1), block, 0, stream, nullptr, pdl, ids, P, E, tile_rows, g);
    if (!g.chunk_counts) return cudaErrorInvalidValue;
    const cudaError_t err = pdl::detail::launch_ex(group_count_kernel, dim3(unsigned(nb)), block, 0, stream, nullptr,
                                                   pdl, ids, P, E, g.chunk_counts);
    if (err != cudaSuccess) return err;
    return pdl::launch(group_kernel, dim3(unsigned(nb)), block, 0, stream, ids, P, E, tile_rows, g);
}

}  // namespace tessera::cuda::fast::detail
