// Kernel of the prefill attention on Hopper's warpgroup MMA (FlashVariant::Wgmma*,
// fast_flash_attention.h; the semantics, plan handling and precision of fast_flash_attention.cu's
// kernels): a block per (128-row query tile, head) of three warpgroups. Warpgroup 0 is the
// producer of the K/V tiles of 64 keys, two buffers each — by TMA (kTma: one warp, a lane a box of
// 64 d × one cache block's keys, the bytes counted on the tile's mbarrier) or by cp.async (a thread
// per half row of a key); warpgroups 1 and 2 are the consumers of 64 query rows each:
//   S = Q·Kᵀ: wgmma with Q (A) and K (B) from shared memory, both K-major (k = d).
//   O += P·V: wgmma with P in registers — the S accumulators after the online softmax, packed to
//            f16 exactly as the mma.sync kernel's A fragments (a warp's D rows g, g + 8 and columns
//            8i + 2t are A's rows and k pairs) — and V an N-major B (imm-trans-b).
// No block-wide barrier inside the loop: per buffer b an mbarrier says k(b) / v(b) landed (full_k /
// full_v: the TMA bytes after one arrival, or 128 cp.async producer arrivals, each after its
// copies' wait and the proxy fence) and one says the consumers are done with it (empty_k after S,
// empty_v after p·v: 8 consumer warps). setmaxnreg moves registers from the producer (56) to the
// consumers (224). The TMA producer zeroes the last tile's V rows past the last query itself (a
// box brings whole cache blocks, whose unwritten rows may hold anything) before it releases them.
// Q, K and V tiles share one layout (wgmma_b_offset): per 64 columns of d a region of rows × 128
// bytes in the 128-byte swizzle — what a TMA box in the 128-byte swizzle writes. A consumer
// warpgroup holds O in D / 2 f32 registers a thread (128 at D = 256), S in 32, P in 16.
//
// Measured (H200, D 256, 16 / 2 heads, 8K / 32K causal, bench_fast_attention): cp.async producer
// 1.78 / 25.1 ms (309 / 350 TFLOP/s; session 14); TMA producer 1.14 / 18.3 ms (481 / 481),
// WgmmaTmaOverlap 1.17 / 17.6 ms (471 / 501) — session 15. Without any K/V copies (a diagnostic)
// the cp.async kernel ran 1.01 ms at 8K and without the softmax unchanged: the copies were the limit.
#include <cuda.h>  // CUtensorMap
#include <cuda_fp16.h>

#include "kernels/cuda/fast_attention_tile.cuh"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/ref_plan.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBM = 128;      // query rows a block: two consumer warpgroups of 64
constexpr int kBN = 64;       // keys a tile
constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups

// How a consumer warpgroup orders its work on a tile (FlashVariant::Wgmma / WgmmaOverlap and their
// Tma forms). Serial: S, wait, softmax, p·v, wait. Overlap (FA3's inside a warpgroup): S of tile kt
// issued together with p·v of tile kt − 1, tile kt's softmax under that p·v. (A ping-pong of the
// two consumers, FA3's across warpgroups, measured slower than both on the H200: 1,833 against
// 1,776 µs at 8K, 28.0 against 25.3 ms at 32K — session 15 — and was dropped.)
enum Sched : int { kSerial = 0, kOverlap = 1 };

// The TMA producer's K / V boxes: 64 values of d × kRows keys of one cache block, kRows = the
// launch's tma_rows (8, 16, 32: a whole block; 64: a tile inside a block of a multiple of 64).
struct TmaMaps {
    CUtensorMap k, v;
    int rows;          // keys a box
    bool heads_inner;  // coordinates (d, head, row, block), else (d, row, head, block)
};

template <int D>
struct FlashTiles {
    static constexpr int kQBytes = kBM * D * 2;   // D / 64 regions of 128 rows × 128 bytes
    static constexpr int kKVBytes = kBN * D * 2;  // D / 64 regions of 64 rows × 128 bytes
    static constexpr int kSmem = kQBytes + 4 * kKVBytes + 1024;  // Q, K[2], V[2], room to align to 1024
    static_assert(D % 64 == 0 && kSmem <= 227 * 1024, "tiles");
};

// A wgmma accumulator as the flat register list its wrappers take: [N][4] fragments (the layout
// fast_attention_tile.cuh's softmax and stores read) are the same floats in the same order.
template <int N>
__device__ __forceinline__ float (&flat(float (&x)[N][4]))[4 * N] {
    return reinterpret_cast<float(&)[4 * N]>(x);
}

// Grid (n_head, tile slots). out/q strides in elements; scale_log2 = scale · log2(e).
// kTma: the producer is one warp issuing TMA boxes (tma), else its warpgroup's cp.async.
template <int D, int kSched, bool kTma>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wgmma_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ q,
                       int64_t q_ts, int64_t q_hs, int T, int n_head, ref::PagedCache kc, ref::PagedCache vc,
                       AttnPlan plan, float scale_log2, OutGate gate, const __grid_constant__ TmaMaps tma) {
    using C = FlashTiles<D>;
    constexpr int CH = D / 8;  // 16-byte chunks a row
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t* q_s = smem;
    uint8_t* k_s = q_s + C::kQBytes;      // [2][kBN rows]
    uint8_t* v_s = k_s + 2 * C::kKVBytes;  // [2][kBN rows]
    __shared__ uint64_t full_k[2], full_v[2], empty_k[2], empty_v[2], tail_v;
    __shared__ int bad_s;  // a key's cache block was out of range (set before the last full_v arrival)

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    const int h = blockIdx.x, slot = blockIdx.y;
    const int G = n_head / int(kc.n_kv), g = h / G;
    auto fill_rows = [&](int64_t t_lo, int64_t t_hi, float v, int first = 0, int stride = kThreads) {
        for (int64_t i = tid - first; i < (t_hi - t_lo) * D; i += stride) {  // out[t_lo..t_hi), head h := v
            const int64_t t = t_lo + i / D;
            out[t * out_ts + int64_t(h) * out_hs + i % D] = gated(gate, v, t, h, int(i % D));
        }
    };
    FlashTile ft;
    if (!flash_tile_begin<kBM, kBN>(plan, slot, lane, T, kc.block_size, ft, fill_rows)) return;
    const int s = ft.s, rows = ft.rows, p_lo = ft.p_lo, p_hi = ft.p_hi, n_kt = ft.n_kt;  // p: the first / last row's positions
    const int64_t t0 = ft.t0, bs = kc.block_size;
    bool bad = false;
    if (tid == 0) {
        bad_s = 0;
        for (int b = 0; b < 2; ++b) {
            mbar_init(&full_k[b], kTma ? 1 : 128);
            mbar_init(&full_v[b], kTma ? 1 : 128);
            mbar_init(&empty_k[b], 8);
            mbar_init(&empty_v[b], 8);
        }
        mbar_init(&tail_v, 1);
    }
    __syncthreads();

    if (kTma && wg == 0) {
        // ---- TMA producer: warp 0, lane i one box (key segment i / (D/64), d region i % (D/64)) ----
        setmaxnreg_dec<56>();
        if (warp != 0) return;
        constexpr int NR = D / 64;
        const int R = tma.rows, n_box = kBN / R * NR, seg = lane / NR, dr = lane % NR;
        const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;
        for (int kt = 0; kt < n_kt; ++kt) {
            const int b = kt & 1;
            const uint32_t free_parity = ((uint32_t(kt) >> 1) & 1) ^ 1;
            // This lane's box: keys p … p + R − 1 of one cache block (none past the last query).
            const int p = kt * kBN + seg * R;
            int blk = -1;
            if (lane < n_box && p <= p_hi) {
                blk = table[p / int(bs)];
                if (blk < 0 || blk >= kc.n_blocks) bad = true, blk = -1;
            }
            const int row = p % int(bs), c1 = tma.heads_inner ? g : row, c2 = tma.heads_inner ? row : g;
            const uint32_t bytes = uint32_t(__popc(__ballot_sync(0xffffffffu, blk >= 0))) * uint32_t(R) * 128u;
            const uint32_t off = uint32_t(b * C::kKVBytes + dr * kBN * 128 + seg * R * 128);
            mbar_wait(&empty_k[b], free_parity);  // S of tile kt − 2 is done
            if (lane == 0) mbar_arrive_expect_tx(&full_k[b], bytes);
            __syncwarp();
            if (blk >= 0) tma_load_4d(smem_addr(k_s) + off, &tma.k, dr * 64, c1, c2, blk, &full_k[b]);
            mbar_wait(&empty_v[b], free_parity);  // p·v of tile kt − 2 is done
            const bool last = kt + 1 == n_kt;
            uint64_t* vbar = last ? &tail_v : &full_v[b];
            if (lane == 0) mbar_arrive_expect_tx(vbar, bytes);
            __syncwarp();
            if (blk >= 0) tma_load_4d(smem_addr(v_s) + off, &tma.v, dr * 64, c1, c2, blk, vbar);
            if (last) {
                // V rows past the last query (stale or never written: maybe not finite, and p·v
                // multiplies them by p = 0) are zeroed before the consumers see the tile.
                mbar_wait(&tail_v, 0);
                const int z0 = p_hi + 1 - kt * kBN;
                uint8_t* vb = v_s + b * C::kKVBytes;
                for (int i = lane; i < (kBN - z0) * NR * 8; i += 32) {
                    const int r = z0 + i / (NR * 8), dc = i % (NR * 8);
                    *reinterpret_cast<uint4*>(vb + (dc / 8) * kBN * 128 + r * 128 + (dc % 8) * 16) = uint4{0, 0, 0, 0};
                }
                if (__any_sync(0xffffffffu, bad) && lane == 0) bad_s = 1;
                fence_proxy_async_smem();
                __syncwarp();
                if (lane == 0) mbar_arrive(&full_v[b]);
            }
        }
    } else if (wg == 0) {
        // ---- cp.async producer: key r = tid / 2 of each tile, chunks (tid % 2)·CH/2 … of its row ----
        setmaxnreg_dec<56>();
        const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;
        const int r = tid >> 1, ch0 = (tid & 1) * (CH / 2);
        const __half* kbase = static_cast<const __half*>(kc.data);
        const __half* vbase = static_cast<const __half*>(vc.data);
        int64_t off_k = -1, off_v = -1;  // this thread's key row in each cache, in elements (−1: zeros)
        auto resolve = [&](int kt) {
            const int p = kt * kBN + r;
            off_k = off_v = -1;
            if (p <= p_hi) {
                const int blk = table[p / int(bs)], row = p % int(bs);
                if (blk >= 0 && blk < kc.n_blocks) {
                    off_k = int64_t(blk) * kc.block_stride + int64_t(row) * kc.row_stride + int64_t(g) * kc.head_stride;
                    off_v = int64_t(blk) * vc.block_stride + int64_t(row) * vc.row_stride + int64_t(g) * vc.head_stride;
                } else {
                    bad = true;
                }
            }
        };
        auto load = [&](uint8_t* dst, const __half* base, int64_t off) {
            const uint32_t d0 = smem_addr(dst);
            const __half* src = off >= 0 ? base + off : base;
#pragma unroll 4
            for (int i = 0; i < CH / 2; ++i)
                cp_async16(d0 + wgmma_b_offset(r, ch0 + i, kBN), src + (ch0 + i) * 8, off >= 0);
            cp_async_commit();
        };
        resolve(0);
        load(k_s, kbase, off_k);
        load(v_s, vbase, off_v);
        for (int kt = 0; kt < n_kt; ++kt) {
            const int b = kt & 1, nb = b ^ 1;
            const uint32_t free_parity = ((uint32_t(kt + 1) >> 1) & 1) ^ 1;
            cp_async_wait<1>();  // k(kt)
            fence_proxy_async_smem();
            mbar_arrive(&full_k[b]);
            if (kt + 1 < n_kt) {
                resolve(kt + 1);
                mbar_wait(&empty_k[nb], free_parity);  // S of tile kt − 1 is done
                load(k_s + nb * C::kKVBytes, kbase, off_k);
                cp_async_wait<1>();  // v(kt)
            } else {
                cp_async_wait<0>();
                if (bad) bad_s = 1;
            }
            fence_proxy_async_smem();
            mbar_arrive(&full_v[b]);
            if (kt + 1 < n_kt) {
                mbar_wait(&empty_v[nb], free_parity);  // p·v of tile kt − 1 is done
                load(v_s + nb * C::kKVBytes, vbase, off_v);
            }
        }
    } else {
        // ---- consumers: warpgroup cw = wg − 1 holds query rows 64cw … 64cw + 63 ----
        setmaxnreg_inc<224>();
        const int cw = wg - 1, ctid = tid - 128 * wg, cwarp = warp - 4;
        // Q · scale · log2(e) as f16 (rows past the tile's tokens: zeros), this warpgroup's rows.
        for (int i = ctid; i < 64 * CH; i += 128) {
            const int rr = 64 * cw + i / CH, ch = i % CH;
            const uint4 v = rr < rows ? q_chunk_f16(q + (t0 + rr) * q_ts + int64_t(h) * q_hs + ch * 8, scale_log2)
                                      : uint4{0, 0, 0, 0};
            *reinterpret_cast<uint4*>(q_s + wgmma_b_offset(rr, ch, kBM)) = v;
        }
        fence_proxy_async_smem();
        named_barrier_sync(1 + cw, 128);

        const int quad = lane & 3, ra = cwarp * 16 + (lane >> 2), rb = ra + 8;  // rows of the block's 128
        const int pos_a = p_lo + min(ra, rows - 1), pos_b = p_lo + min(rb, rows - 1);
        float o[D / 8][4];
#pragma unroll
        for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
        float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.f, l_b = 0.f;
        const uint32_t q_addr = smem_addr(q_s) + uint32_t(cw * 64 * 128);

        auto issue_s = [&](float (&sc)[kBN / 8][4], int kt) {  // S = q·k(kt)ᵀ, k16 step ks of d at region ks / 4
            const uint32_t k_addr = smem_addr(k_s + (kt & 1) * C::kKVBytes);
#pragma unroll
            for (int ks = 0; ks < D / 16; ++ks)
                wgmma_m64n64k16_ss_f16(flat(sc), wgmma_desc_sw128(q_addr + (ks / 4) * kBM * 128 + (ks % 4) * 32),
                                       wgmma_desc_sw128(k_addr + (ks / 4) * kBN * 128 + (ks % 4) * 32), ks > 0);
            wgmma_commit();
        };
        auto issue_pv = [&](const uint32_t (&pa)[kBN / 16][4], int kt) {  // o += p·v(kt), V N-major
            const uint32_t v_addr = smem_addr(v_s + (kt & 1) * C::kKVBytes);
#pragma unroll
            for (int kk = 0; kk < kBN / 16; ++kk)
                wgmma_rs_f16_tb<D>(flat(o), pa[kk], wgmma_desc_sw128_mn(v_addr + kk * 16 * 128, kBN * 128), 1);
            wgmma_commit();
        };
        auto release = [&](uint64_t* bar) {
            __syncwarp();
            if (lane == 0) mbar_arrive(bar);
        };
        auto parity = [](int kt) { return (uint32_t(kt) >> 1) & 1; };
        auto diag = [&](int kt) { return kt * kBN + kBN - 1 > p_lo; };
        float sc[kBN / 8][4];
#pragma unroll
        for (int j = 0; j < kBN / 8; ++j) sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.f;
        float corr_a, corr_b;
        if constexpr (kSched == kSerial) {
            for (int kt = 0; kt < n_kt; ++kt) {
                mbar_wait(&full_k[kt & 1], parity(kt));
                wgmma_fence();
                issue_s(sc, kt);
                wgmma_wait<0>();
                wgmma_fence_operands(flat(sc));
                release(&empty_k[kt & 1]);
                tile_softmax<kBN>(sc, kt * kBN, diag(kt), pos_a, pos_b, quad, m_a, m_b, l_a, l_b, corr_a, corr_b);
                uint32_t pa[kBN / 16][4];
                pack_p<kBN>(sc, pa);
                rescale_rows(o, corr_a, corr_b);
                mbar_wait(&full_v[kt & 1], parity(kt));
                wgmma_fence();
                wgmma_fence_operands(flat(o));
                issue_pv(pa, kt);
                wgmma_wait<0>();
                wgmma_fence_operands(flat(o));
                release(&empty_v[kt & 1]);
            }
        } else {
            uint32_t pa[kBN / 16][4];
            auto after_pv = [&] {  // o's rescale and p of this tile as the next p·v's A operand
                rescale_rows(o, corr_a, corr_b);
                wgmma_fence_operands(flat(o));
                pack_p<kBN>(sc, pa);
#pragma unroll
                for (int kk = 0; kk < kBN / 16; ++kk) wgmma_fence_operands(pa[kk]);
            };
            mbar_wait(&full_k[0], 0);
            wgmma_fence();
            issue_s(sc, 0);
            wgmma_wait<0>();
            wgmma_fence_operands(flat(sc));
            release(&empty_k[0]);
            tile_softmax<kBN>(sc, 0, diag(0), pos_a, pos_b, quad, m_a, m_b, l_a, l_b, corr_a, corr_b);
            after_pv();
            for (int kt = 1; kt < n_kt; ++kt) {
                mbar_wait(&full_k[kt & 1], parity(kt));
                mbar_wait(&full_v[(kt - 1) & 1], parity(kt - 1));
                wgmma_fence();
                issue_s(sc, kt);
                issue_pv(pa, kt - 1);
                wgmma_wait<1>();  // S is done; p·v may still run
                wgmma_fence_operands(flat(sc));
                release(&empty_k[kt & 1]);
                tile_softmax<kBN>(sc, kt * kBN, diag(kt), pos_a, pos_b, quad, m_a, m_b, l_a, l_b, corr_a, corr_b);
                wgmma_wait<0>();
                wgmma_fence_operands(flat(o));
                release(&empty_v[(kt - 1) & 1]);
                after_pv();
            }
            mbar_wait(&full_v[(n_kt - 1) & 1], parity(n_kt - 1));
            wgmma_fence();
            issue_pv(pa, n_kt - 1);
            wgmma_wait<0>();
            wgmma_fence_operands(flat(o));
        }

        if (bad_s) return fill_rows(t0, t0 + rows, ref::quiet_nan(), 128, 256);  // seen after the last full_v
        store_rows(out, out_ts, out_hs, o, l_a, l_b, t0, ra, rows, h, quad, gate);
    }
}

template <int D, int kSched, bool kTma>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan,
                   float scale, OutGate gate, const TmaMaps& tma, cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        flash_wgmma_kernel<D, kSched, kTma>, cudaFuncAttributeMaxDynamicSharedMemorySize, FlashTiles<D>::kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid{unsigned(n_head), unsigned((T + kBM - 1) / kBM + plan.n_seqs)};
    flash_wgmma_kernel<D, kSched, kTma><<<grid, kThreads, FlashTiles<D>::kSmem, stream>>>(
        out, out_ts, out_hs, q, q_ts, q_hs, int(T), int(n_head), kc, vc, plan, scale * 1.4426950408889634f, gate, tma);
    return cudaGetLastError();
}

// The TMA boxes' keys for this cache's blocks (a whole block of 8, 16 or 32 keys, or 64 keys of a
// block of a multiple of 64), or 0 where no box fits.
int tma_rows(int64_t block_size) {
    if (block_size == 8 || block_size == 16 || block_size == 32) return int(block_size);
    return block_size % kBN == 0 ? kBN : 0;
}

template <int D>
cudaError_t launch_sched(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                         int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                         const AttnPlan& plan, float scale, OutGate gate, int sched, bool use_tma,
                         cudaStream_t stream) {
    TmaMaps m{};
    bool v_inner = false;
    m.rows = tma_rows(kc.block_size);
    // TMA where the cache's blocks fit its boxes and the driver encodes both maps, else cp.async.
    const bool tma = use_tma && m.rows > 0 && paged_cache_tma_map(&m.k, &m.heads_inner, kc, m.rows) &&
                     paged_cache_tma_map(&m.v, &v_inner, vc, m.rows) && v_inner == m.heads_inner;
#define TS_FLASH_LAUNCH(S, TMA) \
    launch<D, S, TMA>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, m, stream)
    switch (sched) {
        case kSerial: return tma ? TS_FLASH_LAUNCH(kSerial, true) : TS_FLASH_LAUNCH(kSerial, false);
        case kOverlap: return tma ? TS_FLASH_LAUNCH(kOverlap, true) : TS_FLASH_LAUNCH(kOverlap, false);
        default: return cudaErrorInvalidValue;
    }
#undef TS_FLASH_LAUNCH
}

}  // namespace

cudaError_t launch_flash_attention_wgmma(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                         int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                         const ref::PagedCache& vc, const AttnPlan& plan, float scale, OutGate gate,
                                         int sched, bool tma, cudaStream_t stream) {
    switch (kc.D) {
        case 64:
            return launch_sched<64>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    tma, stream);
        case 128:
            return launch_sched<128>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    tma, stream);
        case 256:
            return launch_sched<256>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    tma, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::fast::detail
