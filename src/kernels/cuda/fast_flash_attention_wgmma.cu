// Kernel of the prefill attention on Hopper's warpgroup MMA (FlashVariant::Wgmma,
// fast_flash_attention.h; the semantics, plan handling and precision of fast_flash_attention.cu's
// kernels): a block per (128-row query tile, head) of three warpgroups. Warpgroup 0 is the
// producer: it loads the K/V tiles of 64 keys (cp.async, a thread per half row of a key) into two
// buffers each; warpgroups 1 and 2 are the consumers of 64 query rows each:
//   S = Q·Kᵀ: wgmma with Q (A) and K (B) from shared memory, both K-major (k = d).
//   O += P·V: wgmma with P in registers — the S accumulators after the online softmax, packed to
//            f16 exactly as the mma.sync kernel's A fragments (a warp's D rows g, g + 8 and columns
//            8i + 2t are A's rows and k pairs) — and V an N-major B (imm-trans-b).
// No block-wide barrier inside the loop: per buffer b an mbarrier says k(b) / v(b) landed (full_k /
// full_v: 128 producer arrivals, each after its copies' wait and the proxy fence) and one says the
// consumers are done with it (empty_k after S, empty_v after p·v: 8 consumer warps). setmaxnreg
// moves registers from the producer (56) to the consumers (224).
// Q, K and V tiles share one layout (wgmma_b_offset): per 64 columns of d a region of rows × 128
// bytes in the 128-byte swizzle. A consumer warpgroup holds O in D / 2 f32 registers a thread (128
// at D = 256), S in 32, P in 16.
//
// Measured (session 14, H200, D 256, 8K causal): 1.78 ms for Serial against 1.93 with all threads
// loading (no producer). The Overlap and PingPong schedules are written and compile without
// serialised wgmma, but have not run yet; their first forms (p packed to f16 inside the window)
// ran 2.0 / 2.18 ms because ptxas serialised every wgmma of the kernel (C7513).
#include <cuda_fp16.h>

#include "kernels/cuda/fast_attention_tile.cuh"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBM = 128;      // query rows a block: two consumer warpgroups of 64
constexpr int kBN = 64;       // keys a tile
constexpr int kThreads = 384;  // producer warpgroup + two consumer warpgroups

// How a consumer warpgroup orders its work on a tile (FlashVariant::Wgmma / WgmmaOverlap /
// WgmmaPingPong). Serial: S, wait, softmax, p·v, wait. Overlap (FA3's inside a warpgroup): S of
// tile kt issued together with p·v of tile kt − 1, tile kt's softmax under that p·v. PingPong:
// Overlap with the two consumers taking turns to issue (named barriers 3 and 4), so one's softmax
// runs while the other's products hold the tensor cores.
enum Sched : int { kSerial = 0, kOverlap = 1, kPingPong = 2 };

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
template <int D, int kSched>
__global__ void __launch_bounds__(kThreads, 1)
    flash_wgmma_kernel(float* __restrict__ out, int64_t out_ts, int64_t out_hs, const float* __restrict__ q,
                       int64_t q_ts, int64_t q_hs, int T, int n_head, ref::PagedCache kc, ref::PagedCache vc,
                       AttnPlan plan, float scale_log2, OutGate gate) {
    using C = FlashTiles<D>;
    constexpr int CH = D / 8;  // 16-byte chunks a row
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t* q_s = smem;
    uint8_t* k_s = q_s + C::kQBytes;      // [2][kBN rows]
    uint8_t* v_s = k_s + 2 * C::kKVBytes;  // [2][kBN rows]
    __shared__ uint64_t full_k[2], full_v[2], empty_k[2], empty_v[2];
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
            mbar_init(&full_k[b], 128);
            mbar_init(&full_v[b], 128);
            mbar_init(&empty_k[b], 8);
            mbar_init(&empty_v[b], 8);
        }
    }
    __syncthreads();

    if (wg == 0) {
        // ---- producer: key r = tid / 2 of each tile, chunks (tid % 2)·CH/2 … of its row ----
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
            constexpr bool kTurns = kSched == kPingPong;
            auto turn_begin = [&] {  // (ping-pong: wait for this warpgroup's turn)
                if constexpr (kTurns) named_barrier_sync(3 + cw, 256);
                wgmma_fence();
            };
            auto turn_end = [&](bool last) {  // (ping-pong: the other's turn; warpgroup 1's last hands nothing on)
                if constexpr (kTurns)
                    if (!last || cw == 0) named_barrier_arrive(4 - cw, 256);
            };
            if constexpr (kTurns)
                if (cw == 1) named_barrier_arrive(3, 256);  // warpgroup 0 takes the first turn
            uint32_t pa[kBN / 16][4];
            auto after_pv = [&] {  // o's rescale and p of this tile as the next p·v's A operand
                rescale_rows(o, corr_a, corr_b);
                wgmma_fence_operands(flat(o));
                pack_p<kBN>(sc, pa);
#pragma unroll
                for (int kk = 0; kk < kBN / 16; ++kk) wgmma_fence_operands(pa[kk]);
            };
            mbar_wait(&full_k[0], 0);
            turn_begin();
            issue_s(sc, 0);
            turn_end(false);
            wgmma_wait<0>();
            wgmma_fence_operands(flat(sc));
            release(&empty_k[0]);
            tile_softmax<kBN>(sc, 0, diag(0), pos_a, pos_b, quad, m_a, m_b, l_a, l_b, corr_a, corr_b);
            after_pv();
            for (int kt = 1; kt < n_kt; ++kt) {
                mbar_wait(&full_k[kt & 1], parity(kt));
                mbar_wait(&full_v[(kt - 1) & 1], parity(kt - 1));
                turn_begin();
                issue_s(sc, kt);
                issue_pv(pa, kt - 1);
                turn_end(false);
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
            turn_begin();
            issue_pv(pa, n_kt - 1);
            turn_end(true);
            wgmma_wait<0>();
            wgmma_fence_operands(flat(o));
        }

        if (bad_s) return fill_rows(t0, t0 + rows, ref::quiet_nan(), 128, 256);  // seen after the last full_v
        store_rows(out, out_ts, out_hs, o, l_a, l_b, t0, ra, rows, h, quad, gate);
    }
}

template <int D, int kSched>
cudaError_t launch(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
                   int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan,
                   float scale, OutGate gate, cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        flash_wgmma_kernel<D, kSched>, cudaFuncAttributeMaxDynamicSharedMemorySize, FlashTiles<D>::kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid{unsigned(n_head), unsigned((T + kBM - 1) / kBM + plan.n_seqs)};
    flash_wgmma_kernel<D, kSched><<<grid, kThreads, FlashTiles<D>::kSmem, stream>>>(
        out, out_ts, out_hs, q, q_ts, q_hs, int(T), int(n_head), kc, vc, plan, scale * 1.4426950408889634f, gate);
    return cudaGetLastError();
}

template <int D>
cudaError_t launch_sched(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                         int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                         const AttnPlan& plan, float scale, OutGate gate, int sched, cudaStream_t stream) {
    switch (sched) {
        case kSerial:
            return launch<D, kSerial>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case kOverlap:
            return launch<D, kOverlap>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, stream);
        case kPingPong:
            return launch<D, kPingPong>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate,
                                        stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

cudaError_t launch_flash_attention_wgmma(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                         int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                         const ref::PagedCache& vc, const AttnPlan& plan, float scale, OutGate gate,
                                         int sched, cudaStream_t stream) {
    switch (kc.D) {
        case 64:
            return launch_sched<64>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    stream);
        case 128:
            return launch_sched<128>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    stream);
        case 256:
            return launch_sched<256>(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale, gate, sched,
                                    stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::fast::detail
