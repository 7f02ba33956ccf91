// The decode GEMV's variant Imma (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w in
// 16-row tiles and 1 ≤ T ≤ 8, on the tensor cores' integer path (mma.sync m16n8k32, u8 codes ×
// s8 limbs → s32) with x in Dp4a's two int8 limbs (fast_dp4a.cuh) — the same exact sums a scale
// group as Dp4a, but the work a weight no longer grows with T (dp4a: two per 4 weights a token).
//
// The mma's operands as they lie. A k-step of m16n8k32 is one scale group of 32 columns (a 16-byte
// chunk of a row): lane (g, t) holds word t of the chunk of rows g and g + 8 — 8 columns each,
// `w & 0x0F0F0F0F` the even ones (A's k 4t … 4t + 3), `(w >> 4) & 0x0F0F0F0F` the odd ones (k 4t +
// 16 … + 19) — and B, token g's limbs of the same columns in the same order, which is the order
// dp4a_quantize8 writes them in. So the per-group sums land in D unscaled and exact, and each is
// scaled in f32 (its row's scale, its token's dx) before it joins the row's sum: 8 outputs a lane
// (rows g, g + 8 × tokens 2t, 2t + 1), 4 chunks a k-tile.
//
// The weights stream through shared memory: each warp a ring of kGemvImmaStages k-tiles of its
// row tile (cp.async, 2 × 16 bytes a lane a k-tile, plus the tile's scales), stored chunk-major so
// that one ldmatrix.x4 gives a lane word t of its row's four chunks without bank conflicts. The
// first stages are requested before pdl::wait (the weights depend on no kernel of the step).
//
// Work. A block of 8 warps holds 8 / S row tiles (S warps a row tile, k-tiles interleaved); the
// blocks of a cluster of C split K into C slices, each block quantizing only its slice of x into
// shared memory — no extra launch, and a K = 14336 row costs a block 1 / 8 of it. The partial sums
// meet in order: the S warps in shared memory, then the C blocks through distributed shared
// memory (block r of the cluster sums its share of the outputs over ranks 0 … C − 1), so y is
// deterministic and written once.
//
// Measured (H200; docs/cuda-rounds.md, fifteenth and sixteenth rounds): through the ring 26.2 µs cold at
// 4096 × 14336, T = 1 (Dp4a 19.3), 38.6 at T = 8 (MmaRows 29.7) — not picked; through registers
// (plan.regs) 18.2 cold / 14.7 back to back at T = 1 — gemv_pick_packed's pick from K = 8192
// where Bulk (fast_gemv_bulk.cu: 15.1 / 12.3) does not fit — but 61.8 at T = 8. TESSERA_GEMV=imma
// / imma_regs, the bench and the tests run every form.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_imma.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = kGemvImmaWarps, kThreads = kWarps * 32, kStages = kGemvImmaStages;
constexpr int kDiagNoMath = kGemvImmaDiagNoMath, kDiagNoStage = kGemvImmaDiagNoStage,
              kDiagNoReduce = kGemvImmaDiagNoReduce;

// One warp's k-tiles of its row tile, T tokens: per chunk two mma (hi and lo limbs, B = tokens),
// each chunk's sums scaled into acc (rows g, g + 8 × tokens 2t, 2t + 1).
template <bool BIAS, typename Issue>
__device__ __forceinline__ void imma_loop(float (&acc)[4], int nj, int ks, int S, int T, const uint8_t* ring,
                                          int stage_bytes, int gpt, int glg, const uint8_t* xh, const uint8_t* xl,
                                          const float2* st, int xs, Issue&& issue) {
    const int lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
    const int tb = g < T ? g : 0;  // B's token (columns past T read token 0, zeroed)
    const uint8_t* const xrow_h = xh + tb * xs + 32 * t;
    const uint8_t* const xrow_l = xl + tb * xs + 32 * t;
    const uint32_t bmask = g < T ? 0xffffffffu : 0u;
    for (int j = 0; j < nj; ++j) {
        cp_async_wait<kStages - 2>();  // stage j has landed (this lane's copies) …
        __syncwarp();                  // … and every lane's; slot (j − 1) % kStages is free
        issue(j + kStages - 1);
        const uint8_t* const tile = ring + (j % kStages) * stage_bytes;
        uint32_t ag[4], a8[4];  // word t of chunk c of rows g and g + 8
        ldsm_x4(ag, smem_addr(tile + 16 * (16 * (lane >> 3) + (lane & 7))));
        ldsm_x4(a8, smem_addr(tile + 16 * (16 * (lane >> 3) + 8 + (lane & 7))));
        const auto* sc = reinterpret_cast<const __half*>(tile + 1024);
        const auto* bi = reinterpret_cast<const __half*>(tile + 1024 + 32 * gpt);
        const int kl = ks + S * j;  // k-tile within the slice
        const uint4 h0 = *reinterpret_cast<const uint4*>(xrow_h + 128 * kl);
        const uint4 h1 = *reinterpret_cast<const uint4*>(xrow_h + 128 * kl + 16);
        const uint4 l0 = *reinterpret_cast<const uint4*>(xrow_l + 128 * kl);
        const uint4 l1 = *reinterpret_cast<const uint4*>(xrow_l + 128 * kl + 16);
        const uint32_t bh[8] = {h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w};
        const uint32_t bl[8] = {l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            constexpr uint32_t kLow = 0x0F0F0F0Fu;
            const uint32_t e0 = ag[c] & kLow, o0 = (ag[c] >> 4) & kLow, e8 = a8[c] & kLow, o8 = (a8[c] >> 4) & kLow;
            int dh[4], dl[4];
            mma_u8s8(dh, e0, e8, o0, o8, bh[2 * c] & bmask, bh[2 * c + 1] & bmask, 0);
            mma_u8s8(dl, e0, e8, o0, o8, bl[2 * c] & bmask, bl[2 * c + 1] & bmask, 0);
            const float4 ab = *reinterpret_cast<const float4*>(st + (4 * kl + c) * 8 + 2 * t);  // tokens 2t, 2t + 1
            const int gi = c >> (2 - glg);
            const float s0 = __half2float(sc[g * gpt + gi]), s8 = __half2float(sc[(g + 8) * gpt + gi]);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float f = float(dh[i] * 254 + dl[i]);  // exact: |.| < 2²⁴
                const float a = i & 1 ? ab.z : ab.x, b = i & 1 ? ab.w : ab.y;
                const float s = i < 2 ? s0 : s8;
                if constexpr (BIAS) {
                    const float bb = __half2float(bi[(i < 2 ? g : g + 8) * gpt + gi]);
                    acc[i] = fmaf(s * a, f, fmaf(bb, b, acc[i]));
                } else {
                    acc[i] = fmaf(s, fmaf(a, f, -8.f * b), acc[i]);
                }
            }
        }
    }
}

// The same for one token: the mma's 8 columns are (chunk, limb) — column 2c + l holds limb l of
// chunk c's x where the k-step is chunk c, 0 elsewhere — so the four chunks of a k-tile accumulate
// in one D without mixing, each lane keeping chunk t of rows g and g + 8 (hi and lo), and the
// scaling runs once a k-tile: 4 mma and ~15 instructions of arithmetic where the token layout
// takes 8 and ~80.
template <bool BIAS, int DIAG, typename Issue>
__device__ __forceinline__ void imma_loop_one(float (&acc)[4], int nj, int ks, int S, const uint8_t* ring,
                                              int stage_bytes, int gpt, int glg, const uint8_t* xh, const float2* st,
                                              Issue&& issue) {
    const int lane = int(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
    const uint8_t* const xg = xh + 8 * (4 * (4 * (g & 1) + (g >> 1)) + t);  // limb g % 2 of chunk g / 2
    const int gi = t >> (2 - glg);                                            // chunk t's scale group
    for (int j = 0; j < nj; ++j) {
        cp_async_wait<kStages - 2>();
        __syncwarp();
        issue(j + kStages - 1);
        const uint8_t* const tile = ring + (j % kStages) * stage_bytes;
        uint32_t ag[4], a8[4];
        ldsm_x4(ag, smem_addr(tile + 16 * (16 * (lane >> 3) + (lane & 7))));
        ldsm_x4(a8, smem_addr(tile + 16 * (16 * (lane >> 3) + 8 + (lane & 7))));
        const int kl = ks + S * j;
        if constexpr (DIAG & kDiagNoMath) {  // the loads and ldmatrix only
            acc[0] += __int_as_float(int((ag[0] ^ ag[1] ^ ag[2] ^ ag[3] ^ a8[0] ^ a8[1] ^ a8[2] ^ a8[3]) & 0x3fffffffu));
            continue;
        }
        const uint2 xb = *reinterpret_cast<const uint2*>(xg + 256 * kl);
        int d[4] = {0, 0, 0, 0};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            constexpr uint32_t kLow = 0x0F0F0F0Fu;
            const uint32_t e0 = ag[c] & kLow, o0 = (ag[c] >> 4) & kLow, e8 = a8[c] & kLow, o8 = (a8[c] >> 4) & kLow;
            const bool mine = (g >> 1) == c;
            mma_u8s8(d, e0, e8, o0, o8, mine ? xb.x : 0u, mine ? xb.y : 0u, d);
        }
        const float2 ab = st[(4 * kl + t) * 8];  // token 0
        const auto* sc = reinterpret_cast<const __half*>(tile + 1024);
        const float s0 = __half2float(sc[g * gpt + gi]), s8 = __half2float(sc[(g + 8) * gpt + gi]);
        const float f0 = float(d[0] * 254 + d[1]), f8 = float(d[2] * 254 + d[3]);  // exact: |.| < 2²⁴
        if constexpr (BIAS) {
            const auto* bi = reinterpret_cast<const __half*>(tile + 1024 + 32 * gpt);
            const float b0 = __half2float(bi[g * gpt + gi]), b8 = __half2float(bi[(g + 8) * gpt + gi]);
            acc[0] = fmaf(s0 * ab.x, f0, fmaf(b0, ab.y, acc[0]));
            acc[1] = fmaf(s8 * ab.x, f8, fmaf(b8, ab.y, acc[1]));
        } else {
            const float m8 = -8.f * ab.y;
            acc[0] = fmaf(s0, fmaf(ab.x, f0, m8), acc[0]);
            acc[1] = fmaf(s8, fmaf(ab.x, f8, m8), acc[1]);
        }
    }
}

// The register pipeline (REGS, one token): fast_imma.cuh's ImmaRegTile and imma_regs_step, the
// tile loaded from global memory as it lies.
template <bool BIAS>
__device__ __forceinline__ ImmaRegTile imma_regs_tile(const uint8_t* tile, const uint16_t* scales,
                                                      const uint16_t* biases, int64_t s0, int gpt, int gi, bool ok) {
    const int lane = int(threadIdx.x & 31), g = lane >> 2;
    ImmaRegTile tl;
    tl.qg = ok ? load_stream(tile + 16 * lane) : make_uint4(0, 0, 0, 0);
    tl.q8 = ok ? load_stream(tile + 512 + 16 * lane) : make_uint4(0, 0, 0, 0);
    tl.s = ok ? uint32_t(__ldg(scales + s0 + g * gpt + gi)) | uint32_t(__ldg(scales + s0 + (g + 8) * gpt + gi)) << 16
              : 0u;
    tl.b = BIAS && ok
               ? uint32_t(__ldg(biases + s0 + g * gpt + gi)) | uint32_t(__ldg(biases + s0 + (g + 8) * gpt + gi)) << 16
               : 0u;
    return tl;
}
// Grid (row groups, C): block (bx, r) holds row tiles bx·(8/S) … of K slice r. Cluster (1, CL, 1).
// REGS (with ONE's columns; up to TT tokens): the weights through registers instead of the ring
// (imma_regs_tile).
template <bool BIAS, int CL, bool ONE, int DIAG = 0, bool REGS = false, int TT = 1>
__global__ void __launch_bounds__(kThreads, REGS ? (TT == 1 ? 3 : 2) : 4)
    gemv_imma_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                     PackedMatrix w, int S, bool x_aligned) {
    extern __shared__ __align__(16) uint8_t smem[];
    __shared__ float red[kWarps][16][8];  // each warp's row tile sums, [row][token]
    __shared__ float part[kWarps][16][8];  // the block's, [row tile][row][token] (8 / S row tiles)
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const int gpt = 128 / w.group, glg = __ffs(gpt) - 1;  // scale groups a k-tile row: 4, 2, 1
    const int stage_bytes = 1024 + 32 * gpt * (BIAS ? 2 : 1);
    const int nkt = int(w.k / 128), slice = CL > 1 ? int(blockIdx.y) : 0;
    const int kt0 = slice * nkt / CL, nks = (slice + 1) * nkt / CL - kt0;  // this block's k-tiles
    const int kc = int(gemv_imma_slice_cols(w.k, CL)), xs = ONE ? kc : kc + 16;
    const int rt_block = kWarps / S, ks = warp % S;
    const int64_t rt = int64_t(blockIdx.x) * rt_block + warp / S;
    const bool rok = rt < w.n / 16;
    const int nj = rok && ks < nks ? (nks - ks + S - 1) / S : 0;  // this warp's k-tiles

    uint8_t* const ring = smem + warp * kStages * stage_bytes;
    uint8_t* const zero32 = smem + (REGS ? 0 : kWarps * kStages * stage_bytes);  // 32 zero bytes (REGS)
    uint8_t* const xh = zero32 + 32;
    uint8_t* const xl = xh + T * xs;
    auto* const st = reinterpret_cast<float2*>(xl + T * xs);

    const PackedLayout lay = packed_layout(w);
    const uint8_t* const codes = w.codes + (rok ? lay.code_row(rt * 16) : 0);
    const int64_t srow = rok ? lay.scale_row(rt * 16) : 0;
    // Stage j (k-tile kt0 + ks + S·j) into slot j % kStages: code piece p (row p / 4, chunk p % 4)
    // to 16·(16·chunk + row); then the tile's scales (and biases), 32·gpt bytes each. One commit
    // a call, empty or not, so the group count stays in step.
    auto issue = [&](int j) {
        if (j < nj) {
            const int64_t kt = kt0 + ks + int64_t(S) * j;
            uint8_t* const dst = ring + (j % kStages) * stage_bytes;
            const uint8_t* const src = codes + kt * lay.ktile;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int p = 32 * h + lane;
                cp_async16(smem_addr(dst + 16 * (16 * (p & 3) + (p >> 2))), src + 16 * p, true);
            }
            const int64_t s0 = srow + kt * lay.s_ktile;  // halves: the tile's 16·gpt, contiguous
            if (lane < 2 * gpt) cp_async16(smem_addr(dst + 1024 + 16 * lane), w.scales + s0 + 8 * lane, true);
            if (BIAS && lane >= 16 && lane < 16 + 2 * gpt)
                cp_async16(smem_addr(dst + 1024 + 32 * gpt + 16 * (lane - 16)), w.biases + s0 + 8 * (lane - 16), true);
        }
        cp_async_commit();
    };
    float acc[4] = {0.f, 0.f, 0.f, 0.f};  // rows g, g + 8 × tokens 2t, 2t + 1 (ONE: rows g, g + 8 only)
    if constexpr (REGS) {
        static_assert(ONE && DIAG == 0, "the register pipeline takes ONE's (chunk, limb) columns");
        const int gi = t >> (2 - glg);  // chunk t's scale group
        auto load = [&](ImmaRegTile& tl, int j) {
            const int64_t kt = kt0 + ks + int64_t(S) * j;
            tl = imma_regs_tile<BIAS>(codes + kt * lay.ktile, w.scales, w.biases, srow + kt * lay.s_ktile, gpt, gi,
                                      j < nj);
        };
        ImmaRegTile cur[2], nxt[2];
        load(cur[0], 0), load(cur[1], 1);
        pdl::wait();  // x comes from the kernel before
        pdl::trigger();
        if (threadIdx.x < 8) reinterpret_cast<uint32_t*>(zero32)[threadIdx.x] = 0u;
        imma_stage_x<true, kThreads>(x + int64_t(kt0) * 128, ldx, T, nks, x_aligned, xh, xl, st, xs);
        __syncthreads();
        const bool active = t == (g >> 1);  // this lane's B column is (chunk t, limb g % 2)
        const uint8_t* const xb = active ? xh + 32 * (4 * (g & 1) + t) : zero32;
        const int kstride = active ? 256 : 0, tstride = active ? 2 * xs : 0;
        float racc[TT][2];
#pragma unroll
        for (int b = 0; b < TT; ++b) racc[b][0] = racc[b][1] = 0.f;
        auto compute = [&](const ImmaRegTile& tl, int j) {
            const int kl = ks + S * j;
            imma_regs_step<BIAS, TT>(racc, tl, xb + kstride * kl, tstride, st + (4 * kl + t) * 8, T);
        };
        ping_pong_tiles(nj, cur, nxt, load, compute);
        // Lane t holds chunk t of every k-tile: the four lanes' sums, in one order.
#pragma unroll
        for (int b = 0; b < TT; ++b)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                racc[b][i] += __shfl_xor_sync(0xffffffffu, racc[b][i], 1);
                racc[b][i] += __shfl_xor_sync(0xffffffffu, racc[b][i], 2);
            }
        if (t == 0)
#pragma unroll
            for (int b = 0; b < TT; ++b)
                if (b < T) red[warp][g][b] = racc[b][0], red[warp][g + 8][b] = racc[b][1];
    } else {
#pragma unroll
        for (int j = 0; j < kStages - 1; ++j) issue(j);
        pdl::wait();  // x comes from the kernel before
        pdl::trigger();
        if constexpr (!(DIAG & kDiagNoStage))
            imma_stage_x<ONE, kThreads>(x + int64_t(kt0) * 128, ldx, T, nks, x_aligned, xh, xl, st, xs);
        __syncthreads();
        if constexpr (ONE)
            imma_loop_one<BIAS, DIAG>(acc, nj, ks, S, ring, stage_bytes, gpt, glg, xh, st, issue);
        else
            imma_loop<BIAS>(acc, nj, ks, S, T, ring, stage_bytes, gpt, glg, xh, xl, st, xs, issue);
    }
    cp_async_wait<0>();  // no copy outlives the block

    // The S warps of a row tile, in order; then the cluster's blocks, in order.
    if constexpr (REGS) {
        // written above
    } else if constexpr (ONE) {  // lane t holds chunk t of every k-tile: the four lanes' sums, in one order
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 1);
            acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], 2);
        }
        if (t == 0) red[warp][g][0] = acc[0], red[warp][g + 8][0] = acc[1];
    } else {
        red[warp][g][2 * t] = acc[0], red[warp][g][2 * t + 1] = acc[1];
        red[warp][g + 8][2 * t] = acc[2], red[warp][g + 8][2 * t + 1] = acc[3];
    }
    __syncthreads();
    const int outs = rt_block * 128;  // (row tile, row, token slot) of this block
    for (int e = int(threadIdx.x); e < outs; e += kThreads) {
        const int rtl = e >> 7, r = (e >> 3) & 15, tk = e & 7;
        float s = 0.f;
        for (int q = 0; q < S; ++q) s += red[rtl * S + q][r][tk];
        part[rtl][r][tk] = s;
    }
    auto store = [&](int e, float v) {
        const int rtl = e >> 7, r = (e >> 3) & 15, tk = e & 7;
        const int64_t n = (int64_t(blockIdx.x) * rt_block + rtl) * 16 + r;
        if (tk < T && n < w.n) y[tk * ldy + n] = v;
    };
    if constexpr (CL == 1 || (DIAG & kDiagNoReduce)) {  // the diagnostic: each block its own part
        __syncthreads();
        for (int e = int(threadIdx.x); e < outs; e += kThreads) store(e, (&part[0][0][0])[e]);
    } else {
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        cluster.sync();  // every block's part is complete
        const int per = (outs + CL - 1) / CL, e0 = int(cluster.block_rank()) * per;
        for (int e = e0 + int(threadIdx.x); e < e0 + per && e < outs; e += kThreads) {
            float s = 0.f;
#pragma unroll
            for (int q = 0; q < CL; ++q) s += cluster.map_shared_rank(&part[0][0][0], q)[e];
            store(e, s);
        }
        cluster.sync();  // no block leaves while another reads its part
    }
}

// One launch of `kernel` (an instance with cluster CL) for plan's grid; the opt-in to more than
// 48 KiB of dynamic shared memory is the caller's, once a kernel.
template <int CL, typename Kernel>
cudaError_t launch_grid(Kernel* kernel, const GemvPlan& plan, size_t smem, float* y, int64_t ldy, const float* x,
                        int64_t ldx, int64_t T, const PackedMatrix& w, cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const dim3 grid(unsigned(gemv_grid_blocks(plan, w.n) / CL), unsigned(CL));
    if constexpr (CL == 1)
        return pdl::launch(kernel, grid, kThreads, smem, stream, y, ldy, x, ldx, int(T), w, plan.splits, aligned);
    else
        return pdl::launch_cluster(kernel, grid, kThreads, smem, stream, dim3(1, CL, 1), y, ldy, x, ldx, int(T), w,
                                   plan.splits, aligned);
}

template <bool BIAS, int CL>
cudaError_t launch_cl(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream) {
    // Ring, tokens as columns (T > 1) | ring, one token | registers, up to 1, 2, 4, 8 tokens.
    static void (*const kernels[6])(float*, int64_t, const float*, int64_t, int, PackedMatrix, int, bool) = {
        gemv_imma_kernel<BIAS, CL, false>,          gemv_imma_kernel<BIAS, CL, true>,
        gemv_imma_kernel<BIAS, CL, true, 0, true, 1>, gemv_imma_kernel<BIAS, CL, true, 0, true, 2>,
        gemv_imma_kernel<BIAS, CL, true, 0, true, 4>, gemv_imma_kernel<BIAS, CL, true, 0, true, 8>};
    const int which = plan.regs ? (T <= 1 ? 2 : T <= 2 ? 3 : T <= 4 ? 4 : 5) : T > 1 ? 0 : 1;
    auto* kernel = kernels[which];
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in = [] {
        for (auto* k : kernels)
            if (cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                     int(kGemvImmaMaxSmem));
                e != cudaSuccess)
                return e;
        return cudaSuccess;
    }();
    if (opt_in != cudaSuccess) return opt_in;
    const size_t smem = size_t(gemv_imma_smem(w.k, T, w.group, w.biases != nullptr, CL, plan.regs));
    return launch_grid<CL>(kernel, plan, smem, y, ldy, x, ldx, T, w, stream);
}

template <bool BIAS>
cudaError_t launch_bias(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                        const PackedMatrix& w, cudaStream_t stream) {
    switch (plan.cluster) {
        case 1: return launch_cl<BIAS, 1>(plan, y, ldy, x, ldx, T, w, stream);
        case 2: return launch_cl<BIAS, 2>(plan, y, ldy, x, ldx, T, w, stream);
        case 4: return launch_cl<BIAS, 4>(plan, y, ldy, x, ldx, T, w, stream);
        default: return launch_cl<BIAS, 8>(plan, y, ldy, x, ldx, T, w, stream);
    }
}

template <int CL, int DIAG>
cudaError_t launch_diag(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx,
                        const PackedMatrix& w, cudaStream_t stream) {
    auto* kernel = gemv_imma_kernel<false, CL, true, DIAG>;
    static const cudaError_t opt_in =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvImmaMaxSmem));
    if (opt_in != cudaSuccess) return opt_in;
    return launch_grid<CL>(kernel, plan, size_t(gemv_imma_smem(w.k, 1, w.group, false, CL)), y, ldy, x, ldx, 1, w,
                           stream);
}

template <int CL>
cudaError_t launch_diag_cl(const GemvPlan& plan, int diag, float* y, int64_t ldy, const float* x, int64_t ldx,
                           const PackedMatrix& w, cudaStream_t stream) {
    switch (diag) {
        case kDiagNoMath: return launch_diag<CL, kDiagNoMath>(plan, y, ldy, x, ldx, w, stream);
        case kDiagNoStage: return launch_diag<CL, kDiagNoStage>(plan, y, ldy, x, ldx, w, stream);
        case kDiagNoReduce: return launch_diag<CL, kDiagNoReduce>(plan, y, ldy, x, ldx, w, stream);
        default: return launch_diag<CL, kDiagNoMath | kDiagNoStage | kDiagNoReduce>(plan, y, ldy, x, ldx, w, stream);
    }
}

}  // namespace

// A diagnostic (bench_fast_gemv): one token, Q4_0-like (no biases), the plan's shape (cluster 1, 2
// or 8), with parts of the kernel left out — `diag` a mask of kGemvImmaDiag* (y is garbage).
cudaError_t launch_gemv_imma_diag(const GemvPlan& plan, int diag, float* y, int64_t ldy, const float* x, int64_t ldx,
                                  const PackedMatrix& w, cudaStream_t stream) {
    if (w.biases || !gemv_imma_fits(w, 1, plan.cluster)) return cudaErrorInvalidValue;
    if (plan.cluster == 1) return launch_diag_cl<1>(plan, diag, y, ldy, x, ldx, w, stream);
    if (plan.cluster == 2) return launch_diag_cl<2>(plan, diag, y, ldy, x, ldx, w, stream);
    if (plan.cluster == 8) return launch_diag_cl<8>(plan, diag, y, ldy, x, ldx, w, stream);
    return cudaErrorInvalidValue;
}

// Arguments checked by gemv_packed_plan (gemv_imma_fits, splits and cluster in 1, 2, 4, 8).
cudaError_t launch_gemv_imma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream) {
    return w.biases ? launch_bias<true>(plan, y, ldy, x, ldx, T, w, stream)
                    : launch_bias<false>(plan, y, ldy, x, ldx, T, w, stream);
}

int gemv_imma_resident_blocks(const GemvPlan& plan, const PackedMatrix& w, int64_t T) {
    auto* kernel = w.biases ? gemv_imma_kernel<true, 1, false> : gemv_imma_kernel<false, 1, false>;
    if (T == 1) kernel = w.biases ? gemv_imma_kernel<true, 1, true> : gemv_imma_kernel<false, 1, true>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvImmaMaxSmem));
    int per_sm = 0;
    const size_t smem = size_t(gemv_imma_smem(w.k, T, w.group, w.biases != nullptr, plan.cluster));
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, smem) != cudaSuccess) return -1;
    return per_sm * gemv_sm_count();
}

}  // namespace tessera::cuda::fast::detail
