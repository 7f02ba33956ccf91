// top_k (fast_topk.h): a block of 1024 threads per row — or, for rows wider than kTopKSegment, per
// segment of a row (pass 1: each segment's top k, ids offset to the row's), then one block per row
// over those S·k candidates (pass 2: ids mapped back through them). Within a segment, candidates
// come out by descending value and ascending index, and segments in column order, so the
// candidates' positions order equal values as the row's indices do: the lower index still wins.
//   1. Radix select: key(v) orders floats as unsigned integers (NaN excluded, -0 taken as +0).
//      Four passes histogram the next 8 bits of the keys that share the prefix found so far; a
//      walk from the top bin finds the bin holding the k-th largest key. After them `thr` is the
//      k-th largest key, `take_eq` how many keys equal to it belong to the top k (the lowest
//      indices first), and every key above it does.
//   2. Gather in index order: each thread owns a contiguous segment of the row, counts its keys
//      above / equal to thr, a block scan gives its offsets, a second sweep writes (key, index).
//   3. Sort the ≤ 128 candidates by (key descending, index ascending), bitonic in shared memory.
#include <cstdint>

#include "kernels/cuda/arg_best.cuh"
#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_topk.h"
#include "kernels/cuda/pdl.cuh"
#include "kernels/sampling.h"  // sample_key: floats as ordered keys

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kThreads = 1024, kWarps = kThreads / 32, kBins = 256;

// Block (s, r): columns [s·seg, s·seg + seg) of row r; writes its k outputs at (r·S + s)·k, S =
// gridDim.x, ids as the row's column (id_map null) or id_map[r·ld_map + column].
__global__ void __launch_bounds__(kThreads)
    top_k_kernel(const float* __restrict__ x, int64_t ldx, int cols_all, int seg, int k, float* __restrict__ values,
                 int32_t* __restrict__ ids, const int32_t* __restrict__ id_map, int64_t ld_map) {
    __shared__ uint32_t hist[kBins];
    __shared__ uint32_t sums[kWarps + 1];
    __shared__ uint64_t cand[kTopKMax];  // (key << 32) | ~index: descending order = the output order
    __shared__ uint32_t sel_prefix, sel_want, sel_all;
    const int tid = threadIdx.x;
    const int64_t r = blockIdx.y;
    const int c0 = int(blockIdx.x) * seg, cols = min(seg, cols_all - c0);
    const float* row = x + r * ldx + c0;

    // 1. The k-th largest key.
    uint32_t prefix = 0, mask = 0;
    if (tid == 0) {
        sel_want = uint32_t(k);
        sel_all = 0;
    }
    for (int pass = 0; pass < 4; ++pass) {
        const int shift = 24 - 8 * pass;
        for (int b = tid; b < kBins; b += kThreads) hist[b] = 0;
        __syncthreads();
        // Logits crowd into a few bins: the lanes of a warp with one bin add once (match_any).
        for (int base = 0; base < cols; base += kThreads) {
            const int i = base + tid;
            uint32_t bin = kBins;  // none
            if (i < cols) {
                const float v = row[i];
                const uint32_t key = sample_key(v);
                if (v == v && (key & mask) == prefix) bin = (key >> shift) & 0xffu;
            }
            const unsigned peers = __match_any_sync(0xffffffffu, bin);
            if (bin < kBins && (tid & 31) == __ffs(peers) - 1) atomicAdd(&hist[bin], unsigned(__popc(peers)));
        }
        __syncthreads();
        if (tid == 0) {
            uint32_t want = sel_want;
            if (pass == 0) {
                uint32_t total = 0;
                for (int b = 0; b < kBins; ++b) total += hist[b];
                if (total <= want) sel_all = 1;  // every non-NaN value is in the top k
            }
            int d = kBins - 1;
            for (; d > 0; --d) {
                if (hist[d] >= want) break;
                want -= hist[d];
            }
            sel_want = want;
            sel_prefix = prefix | (uint32_t(d) << shift);
        }
        __syncthreads();
        if (sel_all) break;
        prefix = sel_prefix;
        mask |= 0xffu << shift;
    }
    const bool all = sel_all != 0;
    const uint32_t thr = prefix, take_eq = sel_want;

    // 2. Gather: keys above thr, then the first take_eq equal to it (in index order).
    const int per = (cols + kThreads - 1) / kThreads;
    const int lo = min(cols, tid * per), hi = min(cols, lo + per);
    uint32_t n_gt = 0, n_eq = 0;
    for (int i = lo; i < hi; ++i) {
        const float v = row[i];
        if (v != v) continue;
        const uint32_t key = sample_key(v);
        if (all || key > thr) ++n_gt;
        else if (key == thr) ++n_eq;
    }
    uint32_t total_gt = 0, total_eq = 0;
    uint32_t at_gt = dev::block_exclusive_scan<kWarps>(n_gt, sums, &total_gt);
    uint32_t at_eq = dev::block_exclusive_scan<kWarps>(n_eq, sums, &total_eq);
    if (n_gt + n_eq > 0)
        for (int i = lo; i < hi; ++i) {
            const float v = row[i];
            if (v != v) continue;
            const uint32_t key = sample_key(v);
            const uint64_t item = (uint64_t(key) << 32) | uint64_t(~uint32_t(i));
            if (all || key > thr) {
                cand[at_gt++] = item;
            } else if (key == thr) {
                if (at_eq < take_eq) cand[total_gt + at_eq] = item;
                ++at_eq;
            }
        }
    const int n = int(all ? total_gt : total_gt + min(take_eq, total_eq));  // ≤ k
    for (int j = n + tid; j < kTopKMax; j += kThreads) cand[j] = 0;  // padding sorts last
    __syncthreads();

    // 3. Bitonic sort of kTopKMax items, descending.
    for (int size = 2; size <= kTopKMax; size <<= 1)
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            if (tid < kTopKMax) {
                const int j = tid ^ stride;
                if (j > tid) {
                    const bool desc = (tid & size) == 0;
                    const uint64_t a = cand[tid], b = cand[j];
                    if (desc ? a < b : a > b) {
                        cand[tid] = b;
                        cand[j] = a;
                    }
                }
            }
            __syncthreads();
        }
    for (int j = tid; j < k; j += kThreads) {
        const int64_t o = (r * gridDim.x + blockIdx.x) * k + j;
        if (j < n) {
            const int32_t id = int32_t(~uint32_t(cand[j]));
            values[o] = row[id];  // the value itself (-0 stays -0)
            ids[o] = id_map ? id_map[r * ld_map + id] : c0 + id;
        } else {
            values[o] = __uint_as_float(0x7fc00000u);
            ids[o] = -1;
        }
    }
}

// argmax: block (s, r) finds the largest non-NaN value of columns [s·seg, s·seg + seg) of row r,
// the lowest index among equals (-0 equals +0), 256 threads striding with 8 loads in flight each;
// with one segment it writes out[r] (0 for a row without a non-NaN value), else its (value,
// index) to part_v / part_i [r·S + s] (index -1: none), which argmax_merge_kernel reduces.
// Both launched with PDL (pdl.cuh): the logits come from the kernel before (the lm_head's GEMV).
using Best = ArgBest<int32_t>;

constexpr int kArgmaxThreads = 256;

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_part_kernel(const float* __restrict__ x, int64_t ldx, int cols, int seg, float* __restrict__ part_v,
                       int32_t* __restrict__ part_i, int32_t* __restrict__ out) {
    __shared__ Best warps[kArgmaxThreads / 32];
    pdl::wait();
    pdl::trigger();
    const int64_t r = blockIdx.y;
    const int c0 = int(blockIdx.x) * seg, c1 = min(cols, c0 + seg);
    const float* row = x + r * ldx;
    Best b{0.f, -1};
    constexpr int U = 8;
    for (int base = c0 + int(threadIdx.x); base < c1; base += U * kArgmaxThreads) {
        float v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = base + u * kArgmaxThreads;
            v[u] = c < c1 ? __ldg(row + c) : dev::quiet_nan();
        }
#pragma unroll
        for (int u = 0; u < U; ++u)  // increasing columns: the first of equals stays
            if (v[u] == v[u] && (b.idx < 0 || v[u] > b.v)) b = Best{v[u], base + u * kArgmaxThreads};
    }
    b = warp_best(b);
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    if (lane == 0) warps[warp] = b;
    __syncthreads();
    if (warp != 0) return;
    b = lane < kArgmaxThreads / 32 ? warps[lane] : Best{0.f, -1};
    b = warp_best(b);
    if (lane != 0) return;
    if (gridDim.x == 1) {
        out[r] = b.idx < 0 ? 0 : b.idx;
    } else {
        part_v[r * gridDim.x + blockIdx.x] = b.v;
        part_i[r * gridDim.x + blockIdx.x] = b.idx;
    }
}

// out[r] = the best of row r's S partial results (a warp a row).
__global__ void argmax_merge_kernel(const float* __restrict__ part_v, const int32_t* __restrict__ part_i, int S,
                                    int32_t* __restrict__ out) {
    pdl::wait();
    pdl::trigger();
    const int64_t r = blockIdx.x;
    Best b{0.f, -1};
    for (int s = int(threadIdx.x); s < S; s += 32) b = better(b, Best{part_v[r * S + s], part_i[r * S + s]});
    b = warp_best(b);
    if (threadIdx.x == 0) out[r] = b.idx < 0 ? 0 : b.idx;
}

__global__ void edit_logits_kernel(float* __restrict__ x, int64_t ldx, const LogitEdit* __restrict__ edits, int n) {
    const int i = int(blockIdx.x) * blockDim.x + int(threadIdx.x);
    if (i >= n) return;
    const LogitEdit e = edits[i];
    float& v = x[int64_t(e.row) * ldx + e.id];
    v = apply_logit_edit(v, e);
}

}  // namespace

cudaError_t launch_edit_logits(float* x, int64_t ldx, const LogitEdit* edits, int64_t n, cudaStream_t stream) {
    const int threads = 256;
    edit_logits_kernel<<<dim3(unsigned((n + threads - 1) / threads)), threads, 0, stream>>>(x, ldx, edits, int(n));
    return cudaGetLastError();
}

cudaError_t launch_top_k(const float* x, int64_t ldx, int64_t rows, int64_t cols, int k, float* values, int32_t* ids,
                         void* scratch, cudaStream_t stream) {
    const int S = top_k_segments(cols);
    if (S == 1) {
        top_k_kernel<<<dim3(1, unsigned(rows)), kThreads, 0, stream>>>(x, ldx, int(cols), int(cols), k, values, ids,
                                                                      nullptr, 0);
        return cudaGetLastError();
    }
    // Pass 1 → candidates [rows, S·k] (values, then ids, in scratch); pass 2 over them.
    const int64_t n = int64_t(S) * k;
    auto* cv = static_cast<float*>(scratch);
    auto* ci = reinterpret_cast<int32_t*>(cv + rows * n);
    top_k_kernel<<<dim3(unsigned(S), unsigned(rows)), kThreads, 0, stream>>>(x, ldx, int(cols), kTopKSegment, k, cv,
                                                                           ci, nullptr, 0);
    top_k_kernel<<<dim3(1, unsigned(rows)), kThreads, 0, stream>>>(cv, n, int(n), int(n), k, values, ids, ci, n);
    return cudaGetLastError();
}

cudaError_t launch_argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, void* scratch,
                          cudaStream_t stream) {
    const int S = argmax_segments(cols);
    auto* pv = static_cast<float*>(scratch);
    auto* pi = S > 1 ? reinterpret_cast<int32_t*>(pv + rows * S) : nullptr;
    const cudaError_t e = pdl::launch(argmax_part_kernel, dim3(unsigned(S), unsigned(rows)), dim3(kArgmaxThreads), 0,
                                      stream, x, ldx, int(cols), kArgmaxSegment, pv, pi, out);
    if (e != cudaSuccess || S == 1) return e;
    return pdl::launch(argmax_merge_kernel, dim3(unsigned(rows)), dim3(32), 0, stream, pv, pi, S, out);
}

}  // namespace tessera::cuda::fast::detail
