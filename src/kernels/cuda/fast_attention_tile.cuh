// Device helpers of the tensor-core attention kernels (fast_flash_attention.cu and
// fast_flash_attention_wgmma.cu for prefill, fast_decode_attention.cu for decode): K / V tiles of
// the paged f16 cache in swizzled shared memory, a prefill block's query tile, q rounded to f16,
// the output gate. Header-only, device code only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/ref_attention.h"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::dev {

// Tiles are [rows][D] f16 in 16-byte chunks; chunk c of row r sits at c ^ (r & 7) within its row,
// so the 8 rows an ldmatrix (or a row of cp.async) touches fall on distinct banks.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
    return r * (D / 8) + (c ^ (r & 7));
}

// f16 range without turning a large q into inf (NaN stays NaN: the comparisons are false).
__device__ __forceinline__ float clamp_f16(float x) { return x > 65504.f ? 65504.f : (x < -65504.f ? -65504.f : x); }

// Where a tile's key rows live: (cache block, row in block), or x = -1 for a block outside the
// cache (bad plan data) and x = -2 for a key the tile does not use. Both read as zeros.
// The BN rows of kv head `head` of cache c into dst ([BN][D / 8] chunks, swizzled) by cp.async,
// spread over NT threads; rows with x < 0 are zero-filled (nothing is read for them).
template <int D, int BN, int NT>
__device__ __forceinline__ void load_kv_tile(uint4* dst, const ref::PagedCache& c, const int2* rows, int head,
                                             int tid) {
    constexpr int CH = D / 8;
    const __half* base = static_cast<const __half*>(c.data);
#pragma unroll 4
    for (int i = tid; i < BN * CH; i += NT) {
        const int r = i / CH, ch = i % CH;
        const int2 e = rows[r];
        const __half* src = e.x >= 0 ? base + int64_t(e.x) * c.block_stride + int64_t(e.y) * c.row_stride +
                                           int64_t(head) * c.head_stride + ch * 8
                                     : base;
        cp_async16(smem_addr(dst + swz<D>(r, ch)), src, e.x >= 0);
    }
}

// v · σ(g) for out[t, head, d] with a gate (ref::sigmoid_mul's arithmetic), v without one.
__device__ __forceinline__ float gated(const OutGate& gate, float v, int64_t t, int head, int d) {
    if (!gate.g) return v;
    return v * (1.f / (1.f + expf(-gate.g[t * gate.ts + int64_t(head) * gate.hs + d])));
}

// A prefill attention block's query tile: slot `slot` of the grid counts the BM-row tiles of
// sequences 0, 1, … in order (a warp scans 32 sequences at a time; every warp of the block gets the
// same answer). Returns the sequence (tile: its tile index), or -1 for an idle slot.
template <int BM>
__device__ __forceinline__ int flash_slot_tile(const AttnPlan& plan, int slot, int lane, int& tile) {
    constexpr unsigned kFull = 0xffffffffu;
    tile = 0;
    for (int s0 = 0, base = 0; s0 < plan.n_seqs; s0 += 32) {
        const int si = s0 + lane;
        const int n = si < plan.n_seqs ? max(0, (plan.q_start[si + 1] - plan.q_start[si] + BM - 1) / BM) : 0;
        int inc = n;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int v = __shfl_up_sync(kFull, inc, o);
            if (lane >= o) inc += v;
        }
        const int total = __shfl_sync(kFull, inc, 31);
        if (slot < base + total) {
            const int l = __ffs(__ballot_sync(kFull, slot < base + inc)) - 1;
            tile = slot - base - __shfl_sync(kFull, inc - n, l);
            return s0 + l;
        }
        base += total;
    }
    return -1;
}

// The query tile of a prefill attention block and what it needs: sequence s, its tile's rows
// t0 … t0 + rows − 1 at positions p_lo … p_hi, and n_kt key tiles of BN. flash_tile_begin finds
// it from the block's slot and returns false where the block is done: an idle slot (the last one
// marks the tokens outside q_start NaN), a bad plan (nothing written outside out), a padding
// sequence (zeros) or a context longer than its block table (NaN) — fill(t_lo, t_hi, v) writes
// out[t_lo..t_hi) of the block's head.
struct FlashTile {
    int s, rows, p_lo, p_hi, n_kt;
    int64_t t0;
};
template <int BM, int BN, typename Fill>
__device__ __forceinline__ bool flash_tile_begin(const AttnPlan& plan, int slot, int lane, int T, int64_t block_size,
                                                 FlashTile& f, Fill&& fill) {
    int tile = 0;
    f.s = flash_slot_tile<BM>(plan, slot, lane, tile);
    if (f.s < 0) {
        if (slot == int(gridDim.y) - 1) {
            const int a = min(max(plan.q_start[0], 0), T), b = min(max(plan.q_start[plan.n_seqs], a), T);
            fill(0, a, ref::quiet_nan());
            fill(b, T, ref::quiet_nan());
        }
        return false;
    }
    const int q0 = plan.q_start[f.s], n_new = plan.q_start[f.s + 1] - q0, len = plan.kv_len[f.s];
    const int n_tiles = (n_new + BM - 1) / BM;
    const int row0 = (n_tiles - 1 - tile) * BM;  // heaviest (last) tiles take the first slots
    f.rows = min(BM, n_new - row0);
    f.t0 = int64_t(q0) + row0;
    if (q0 < 0 || int64_t(q0) + n_new > T) return false;
    if (len == 0) return fill(f.t0, f.t0 + f.rows, 0.f), false;
    if (n_new > len || int64_t(len) > int64_t(plan.max_blocks) * block_size)
        return fill(f.t0, f.t0 + f.rows, ref::quiet_nan()), false;
    f.p_lo = len - n_new + row0;
    f.p_hi = f.p_lo + f.rows - 1;
    f.n_kt = f.p_hi / BN + 1;
    return true;
}

// 8 floats of q (scaled) as 8 f16 in one 16-byte chunk.
__device__ __forceinline__ uint4 q_chunk_f16(const float* src, float scale) {
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = clamp_f16(src[e] * scale);
    return {pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7])};
}

}  // namespace tessera::cuda::fast::dev
