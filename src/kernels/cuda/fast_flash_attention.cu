// Kernel of the tensor-core prefill attention (fast_flash_attention.h): FA2-style, a block per
// (query tile, head), 16 query rows per warp, K/V tiles of 64 keys through swizzled shared memory.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_attention_tile.cuh"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kBN = 64;  // keys per tile

using namespace dev;

// Grid (n_head, tile slots). out/q strides in elements; scale_log2 = scale · log2(e).
// S = 1: one K and one V buffer (K of the next tile loads during p·v, V during q·kᵀ; 3 barriers a
// tile). S = 2: two of each, the next tile's K and V load during this tile's whole work (1 barrier).
template <int D, int W, int S>
__global__ void __launch_bounds__(W * 32, W == 4 ? 2 : 1)
    flash_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ q, int64_t q_ts,
                 int64_t q_hs, int T, int n_head, ref::PagedCache kc, ref::PagedCache vc, AttnPlan plan,
                 float scale_log2, OutGate gate) {
    constexpr int BM = 16 * W, NT = W * 32, CH = D / 8;  // CH: 16-byte chunks per row
    constexpr int R = S + 1;                              // buffers of rows_s
    extern __shared__ __align__(128) uint4 smem[];
    uint4* q_s = smem;                // [BM][CH]
    uint4* k_s = q_s + BM * CH;       // [S][kBN][CH]
    uint4* v_s = k_s + S * kBN * CH;  // [S][kBN][CH]
    __shared__ int2 rows_s[R][kBN];  // per key of a tile: (cache block or -1 bad / -2 unused, row in block)

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int h = blockIdx.x, slot = blockIdx.y;
    const int G = n_head / int(kc.n_kv), g = h / G;

    auto fill_rows = [&](int64_t t_lo, int64_t t_hi, float v) {  // out[t_lo..t_hi), head h := v
        for (int64_t i = tid; i < (t_hi - t_lo) * D; i += NT) {
            const int64_t t = t_lo + i / D;
            out[t * out_ts + int64_t(h) * out_hs + i % D] = gated(gate, v, t, h, int(i % D));
        }
    };
    FlashTile ft;  // this slot's (sequence s, tile)
    if (!flash_tile_begin<BM, kBN>(plan, slot, lane, T, kc.block_size, ft, fill_rows)) return;
    const int s = ft.s, rows = ft.rows, p_lo = ft.p_lo, p_hi = ft.p_hi, n_kt = ft.n_kt;  // p: the first / last row's positions
    const int64_t t0 = ft.t0, bs = kc.block_size;
    const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;
    bool bad = false;

    // Where key kt·kBN + tid of the tile lives (threads < kBN).
    auto resolve_rows = [&](int kt) {
        if (tid < kBN) {
            const int p = kt * kBN + tid;
            int2 e{-2, 0};
            if (p <= p_hi) {
                const int blk = table[p / int(bs)];
                e = {blk >= 0 && blk < kc.n_blocks ? blk : -1, p % int(bs)};
                bad |= e.x < 0;
            }
            rows_s[kt % R][tid] = e;
        }
    };
    // The tile's kBN rows of cache c (head g) into dst by cp.async; unused or bad rows are zeros.
    auto load_tile = [&](uint4* dst, const ref::PagedCache& c, int kt) {
        load_kv_tile<D, kBN, NT>(dst, c, rows_s[kt % R], g, tid);
    };

    // Q · scale · log2(e) as f16 into q_s (rows past the tile's tokens: zeros).
    for (int i = tid; i < BM * CH; i += NT) {
        const int r = i / CH, ch = i % CH;
        const uint4 v = r < rows ? q_chunk_f16(q + (t0 + r) * q_ts + int64_t(h) * q_hs + ch * 8, scale_log2)
                                 : uint4{0, 0, 0, 0};
        q_s[swz<D>(r, ch)] = v;
    }
    resolve_rows(0);
    if (S == 2 && n_kt > 1) resolve_rows(1);
    __syncthreads();
    load_tile(k_s, kc, 0);
    if constexpr (S == 2) load_tile(v_s, vc, 0);
    cp_async_commit();

    // This lane's rows (of 16 per warp): ra = warp·16 + lane/4 and ra + 8; rows past the tile's
    // tokens take the last token's position (computed, never stored).
    const int quad = lane & 3, ra = warp * 16 + (lane >> 2), rb = ra + 8;
    const int pos_a = p_lo + min(ra, rows - 1), pos_b = p_lo + min(rb, rows - 1);
    float o[D / 8][4];
#pragma unroll
    for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;  // l: this lane's partial sums

    for (int kt = 0; kt < n_kt; ++kt) {
        const uint4* k_t = k_s + (kt % S) * kBN * CH;
        const uint4* v_t = v_s + (kt % S) * kBN * CH;
        if constexpr (S == 2) {
            cp_async_wait<0>();  // this tile's K and V have landed
            __syncthreads();     // … for every warp, and every warp is done with the other buffers
            if (kt + 1 < n_kt) {
                load_tile(k_s + ((kt + 1) % S) * kBN * CH, kc, kt + 1);
                load_tile(v_s + ((kt + 1) % S) * kBN * CH, vc, kt + 1);
            }
            cp_async_commit();
            if (kt + 2 < n_kt) resolve_rows(kt + 2);
        } else {
            if (kt > 0) __syncthreads();  // every warp is done with v_s (p·v of the previous tile)
            load_tile(v_s, vc, kt);
            cp_async_commit();
            if (kt + 1 < n_kt) resolve_rows(kt + 1);
            cp_async_wait<1>();  // this tile's K has landed
            __syncthreads();
        }

        // S = q·kᵀ for the warp's 16 rows × 64 keys (log2 units).
        float sc[kBN / 8][4];
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) {
            uint32_t a[4];
            ldsm_x4(a, smem_addr(q_s + swz<D>(warp * 16 + (lane & 15), 2 * ks + (lane >> 4))));
#pragma unroll
            for (int nb = 0; nb < kBN / 16; ++nb) {
                uint32_t b[4];
                ldsm_x4(b, smem_addr(k_t + swz<D>(nb * 16 + (lane & 7) + ((lane >> 4) << 3), 2 * ks + ((lane >> 3) & 1))));
                mma_f16(sc[2 * nb], a, b[0], b[1]);
                mma_f16(sc[2 * nb + 1], a, b[2], b[3]);
            }
        }
        float corr_a, corr_b;
        tile_softmax<kBN>(sc, kt * kBN, kt * kBN + kBN - 1 > p_lo, pos_a, pos_b, quad, m_a, m_b, l_a, l_b, corr_a,
                          corr_b);
        uint32_t pa[kBN / 16][4];  // p as the A operand of p·v, 16 keys per step
        pack_p<kBN>(sc, pa);
        rescale_rows(o, corr_a, corr_b);

        if constexpr (S == 1) {
            cp_async_wait<0>();  // this tile's V has landed
            __syncthreads();     // … and every warp is done with k_s
            if (kt + 1 < n_kt) load_tile(k_s, kc, kt + 1);
            cp_async_commit();
        }

        // o += p·v.
#pragma unroll
        for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
            for (int dp = 0; dp < D / 16; ++dp) {
                uint32_t b[4];
                ldsm_x4_trans(b, smem_addr(v_t + swz<D>(kk * 16 + (lane & 15), 2 * dp + (lane >> 4))));
                mma_f16(o[2 * dp], pa[kk], b[0], b[1]);
                mma_f16(o[2 * dp + 1], pa[kk], b[2], b[3]);
            }
    }
    cp_async_wait<0>();
    if (__syncthreads_or(bad)) return fill_rows(t0, t0 + rows, ref::quiet_nan());

    store_rows(out, out_ts, out_hs, o, l_a, l_b, t0, ra, rows, h, quad, gate);
}

template <int D, int W, int S>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan,
                   float scale, OutGate gate, cudaStream_t stream) {
    constexpr int BM = 16 * W;
    constexpr size_t smem = size_t(BM + 2 * S * kBN) * D * 2;
    if (cudaError_t e = cudaFuncSetAttribute(flash_kernel<D, W, S>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        e != cudaSuccess)
        return e;
    const dim3 grid{unsigned(n_head), unsigned((T + BM - 1) / BM + plan.n_seqs)};
    flash_kernel<D, W, S><<<grid, W * 32, smem, stream>>>(out, out_ts, out_hs, q, q_ts, q_hs, int(T), int(n_head), kc, vc,
                                                        plan, scale * 1.4426950408889634f, gate);
    return cudaGetLastError();
}

template <int W, int S>
cudaError_t launch_dims(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                        int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                        const AttnPlan& plan, float scale, OutGate gate, cudaStream_t stream) {
    switch (kc.D) {
        case 64: return launch<64, W, S>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case 128: return launch<128, W, S>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case 256: return launch<256, W, S>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

cudaError_t launch_flash_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                   int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                   const ref::PagedCache& vc, const AttnPlan& plan, float scale, int variant,
                                   OutGate gate, cudaStream_t stream) {
    switch (FlashVariant(variant)) {
        case FlashVariant::Rows64:
            return launch_dims<4, 1>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case FlashVariant::Rows128:
            return launch_dims<8, 1>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case FlashVariant::Rows128x2:
            return launch_dims<8, 2>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case FlashVariant::Wgmma:
        case FlashVariant::WgmmaOverlap:
        case FlashVariant::WgmmaTma:
        case FlashVariant::WgmmaTmaOverlap: {
            const bool overlap = variant == int(FlashVariant::WgmmaOverlap) || variant == int(FlashVariant::WgmmaTmaOverlap);
            const bool tma = variant >= int(FlashVariant::WgmmaTma);
            return launch_flash_attention_wgmma(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate,
                                                overlap ? 1 : 0, tma, stream);
        }
    }
    return cudaErrorInvalidValue;
}

}  // namespace tessera::cuda::fast::detail
