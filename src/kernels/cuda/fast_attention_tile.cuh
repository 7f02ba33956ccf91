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

// Rows r0 … r1 − 1 of such a tile (load_kv_tile's copies of those rows alone): a tile loaded in
// parts, each its own cp.async group.
template <int D, int NT>
__device__ __forceinline__ void load_kv_rows(uint4* dst, const ref::PagedCache& c, const int2* rows, int head, int tid,
                                             int r0, int r1) {
    constexpr int CH = D / 8;
    const __half* base = static_cast<const __half*>(c.data);
#pragma unroll 4
    for (int i = r0 * CH + tid; i < r1 * CH; i += NT) {
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

// ---- a warp's 16 query rows of a prefill tile, as mma.sync / wgmma accumulators: lane (g, t)
// holds rows g (a) and g + 8 (b); x[j] = (a, 8j + 2t), (a, 8j + 2t + 1), (b, 8j + 2t), (b, 8j + 2t + 1).

// Online softmax of a tile of BN keys (scores in log2 units), in place: keys past a row's position
// masked where the tile crosses the diagonal (diag), the running max m and this lane's partial sums
// l of rows a and b updated, sc turned into p = 2^(s − m), o's factors returned in corr. It writes
// only sc and scalars, so it may run while a wgmma reading the previous p is in flight (pack_p
// after that wgmma is waited for: ptxas serialises a kernel's wgmma where a pending one's A
// registers are redefined).
template <int BN>
__device__ __forceinline__ void tile_softmax(float (&sc)[BN / 8][4], int key0, bool diag, int pos_a, int pos_b,
                                             int quad, float& m_a, float& m_b, float& l_a, float& l_b, float& corr_a,
                                             float& corr_b) {
    constexpr unsigned kFull = 0xffffffffu;
    if (diag) {
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int key = key0 + j * 8 + 2 * quad;
            if (key > pos_a) sc[j][0] = -INFINITY;
            if (key + 1 > pos_a) sc[j][1] = -INFINITY;
            if (key > pos_b) sc[j][2] = -INFINITY;
            if (key + 1 > pos_b) sc[j][3] = -INFINITY;
        }
    }
    // The first tile holds key 0 for every row, so m is finite from it on.
    float mx_a = m_a, mx_b = m_b;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        mx_a = fmaxf(mx_a, fmaxf(sc[j][0], sc[j][1]));
        mx_b = fmaxf(mx_b, fmaxf(sc[j][2], sc[j][3]));
    }
    mx_a = fmaxf(mx_a, __shfl_xor_sync(kFull, mx_a, 1));
    mx_a = fmaxf(mx_a, __shfl_xor_sync(kFull, mx_a, 2));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(kFull, mx_b, 1));
    mx_b = fmaxf(mx_b, __shfl_xor_sync(kFull, mx_b, 2));
    corr_a = exp2_approx(m_a - mx_a);
    corr_b = exp2_approx(m_b - mx_b);
    m_a = mx_a;
    m_b = mx_b;
    float sum_a = 0.f, sum_b = 0.f;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        sc[j][0] = exp2_approx(sc[j][0] - m_a);
        sc[j][1] = exp2_approx(sc[j][1] - m_a);
        sc[j][2] = exp2_approx(sc[j][2] - m_b);
        sc[j][3] = exp2_approx(sc[j][3] - m_b);
        sum_a += sc[j][0] + sc[j][1];
        sum_b += sc[j][2] + sc[j][3];
    }
    l_a = l_a * corr_a + sum_a;
    l_b = l_b * corr_b + sum_b;
}

// p (as tile_softmax left it) packed to f16 as the A operand of p·v, 16 keys a k-step: a warp's
// rows g, g + 8 and columns 8i + 2t are A's rows and k pairs.
template <int BN>
__device__ __forceinline__ void pack_p(const float (&sc)[BN / 8][4], uint32_t (&pa)[BN / 16][4]) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        pa[j / 2][(j & 1) * 2] = pack_half2(sc[j][0], sc[j][1]);
        pa[j / 2][(j & 1) * 2 + 1] = pack_half2(sc[j][2], sc[j][3]);
    }
}

template <int N>
__device__ __forceinline__ void rescale_rows(float (&o)[N][4], float corr_a, float corr_b) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
        o[j][0] *= corr_a;
        o[j][1] *= corr_a;
        o[j][2] *= corr_b;
        o[j][3] *= corr_b;
    }
}

// out[t0 + r, head h, :] = o / l (σ(gate) applied) for this lane's rows ra and ra + 8 below `rows`;
// l: the lanes' partial sums, summed over the quad here.
template <int N>
__device__ __forceinline__ void store_rows(float* out, int64_t out_ts, int64_t out_hs, const float (&o)[N][4],
                                           float l_a, float l_b, int64_t t0, int ra, int rows, int h, int quad,
                                           const OutGate& gate) {
    constexpr unsigned kFull = 0xffffffffu;
    l_a += __shfl_xor_sync(kFull, l_a, 1);
    l_a += __shfl_xor_sync(kFull, l_a, 2);
    l_b += __shfl_xor_sync(kFull, l_b, 1);
    l_b += __shfl_xor_sync(kFull, l_b, 2);
    const float inv_a = 1.f / l_a, inv_b = 1.f / l_b;  // l ≥ 1: the row's maximum contributes 2⁰
    const int rb = ra + 8;
    float* oa = out + (t0 + ra) * out_ts + int64_t(h) * out_hs + 2 * quad;
    float* ob = oa + 8 * out_ts;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const int d = j * 8 + 2 * quad;
        if (ra < rows) {
            oa[j * 8] = gated(gate, o[j][0] * inv_a, t0 + ra, h, d);
            oa[j * 8 + 1] = gated(gate, o[j][1] * inv_a, t0 + ra, h, d + 1);
        }
        if (rb < rows) {
            ob[j * 8] = gated(gate, o[j][2] * inv_b, t0 + rb, h, d);
            ob[j * 8 + 1] = gated(gate, o[j][3] * inv_b, t0 + rb, h, d + 1);
        }
    }
}

// 8 floats of q (scaled) as 8 f16 in one 16-byte chunk.
__device__ __forceinline__ uint4 q_chunk_f16(const float* src, float scale) {
    float x[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) x[e] = clamp_f16(src[e] * scale);
    return {pack_half2(x[0], x[1]), pack_half2(x[2], x[3]), pack_half2(x[4], x[5]), pack_half2(x[6], x[7])};
}

}  // namespace tessera::cuda::fast::dev
