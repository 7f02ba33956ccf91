// The warp-specialised down tiles' own slot sum (MoePlan::wgmma_combine, TESSERA_MOE_COMBINE=fused;
// fast_moe_tma_tile.cuh): each (token, feature block) summed by the tile that draws its last ticket,
// with combine_kernel's operations in its order (fast_moe_experts.cu), so its bits.
#pragma once
#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_moe.h"

namespace tessera::cuda::fast::detail {

// The down tiles' slot sum (MoeTileCombine), by the 256 consumer threads (ct: 0..255) after a
// tile's out stores: each thread fences its stores; one thread an item row draws a ticket on its
// (token, feature block) — its token's valid slots (rows of the grouping) are the tickets to draw —
// and the drawer of the last one lists the token; the block then sums each listed token's slots in
// slot order over the block's features, as combine_kernel does (the same bits), its reads from L2.
// list: BT ints of shared memory, n_list one. (The pattern of fast_moe_fused.cu's slot sum.)
constexpr int kCombineBar = 2;  // named barrier of the consumer threads (1: the gathering producers)

// Token t's feature c: Σ_j w_j · out[row of slot j] in slot order, NaN for a slot without a row —
// combine_kernel's operations (fast_moe_experts.cu), so its bits.
__device__ __forceinline__ float token_sum(const MoeTileCombine& cb, const int32_t* __restrict__ row_of_slot,
                                           const float* out, int64_t N, int64_t t, int64_t c) {
    float sum = 0.f;
    for (int j = 0; j < cb.k; ++j) {
        const int row = row_of_slot[t * cb.k + j];
        const float x = row >= 0 ? __ldcg(out + int64_t(row) * N + c) : dev::quiet_nan();
        const float v = __fmul_rn(cb.weights[t * cb.k + j], x);
        sum = j == 0 ? v : __fadd_rn(sum, v);
    }
    return sum;
}
__device__ __forceinline__ void tile_combine(const MoeTileCombine& cb, const int32_t* __restrict__ row_of_slot,
                                             const int32_t* __restrict__ perm, const float* out, int64_t N, int r0,
                                             int n_rows, int64_t n0, int64_t n_end, int fb, int fbs, int ct,
                                             int* list, int* n_list) {
    __threadfence();  // this thread's out stores, before any ticket
    if (ct == 0) *n_list = 0;
    dev::named_barrier_sync(kCombineBar, 256);
    for (int r = ct; r < n_rows; r += 256) {
        const int t = perm[r0 + r] / cb.k;
        int valid = 0;
        for (int j = 0; j < cb.k; ++j) valid += row_of_slot[int64_t(t) * cb.k + j] >= 0 ? 1 : 0;
        unsigned* ctr = cb.counters + int64_t(t) * fbs + fb;
        __threadfence();  // the block's stores (fenced by each thread, then the barrier) before the ticket
        if (atomicAdd(ctr, 1u) == unsigned(valid - 1)) {
            atomicExch(ctr, 0u);  // every valid slot has drawn: zero for the next launch
            list[atomicAdd(n_list, 1)] = t;
        }
    }
    __threadfence();  // the other tiles' parts, before this block reads them
    dev::named_barrier_sync(kCombineBar, 256);
    const int n = *n_list;
    for (int q = 0; q < n; ++q) {
        const int64_t t = list[q];
        for (int64_t c = n0 + ct; c < n_end; c += 256) cb.y[t * cb.ldy + c] = token_sum(cb, row_of_slot, out, N, t, c);
    }
    dev::named_barrier_sync(kCombineBar, 256);  // list and n_list free for the next tile
}

// Tokens none of whose slots has a row (every id invalid) get no ticket: the combine's NaN row (its
// very operations, so its bits), written by every block of the grid in turn (block `b` of `nb`, its
// `nt` threads), all N features — before a block leaves for want of an item: with every id invalid
// there is none, and no block would stay.
__device__ __forceinline__ void combine_orphans(const MoeTileCombine& cb, const int32_t* __restrict__ row_of_slot,
                                                int64_t N, int b, int nb, int ct, int nt) {
    for (int64_t t = b; t < cb.T; t += nb) {
        bool any = false;
        for (int j = 0; j < cb.k; ++j) any = any || row_of_slot[t * cb.k + j] >= 0;
        if (any) continue;
        const float sum = token_sum(cb, row_of_slot, nullptr, N, t, 0);  // (every slot NaN: no load)
        for (int64_t c = ct; c < N; c += nt) cb.y[t * cb.ldy + c] = sum;
    }
}

}  // namespace tessera::cuda::fast::detail
