// The decode GEMV's variant Bulk (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w in
// 16-row tiles and 1 ≤ T ≤ 8, the weights streamed by the bulk-copy engine.
//
// Why. A GEMV at one token is a read of its weights; what bounds it is how many bytes each SM
// keeps in flight. Through registers (Dp4a, Imma's register pipeline) that is what a warp's
// registers hold times the warps resident, and the arithmetic between the loads stretches the
// gaps; through per-lane cp.async (Imma's ring) the copies alone took 16–20 µs for the 33 MB that
// plain loads read in 9.7 (bench_fast_gemv, sessions 17–18). Here one producer lane asks the
// bulk-copy engine for whole stages — kGemvBulkWarps k-tiles of a row tile, contiguous in the
// tiled order (16 KB of codes, their scales, their biases) — kGemvBulkStages of them ahead, each
// completing on a shared-memory mbarrier (72 KB in flight an SM at group 32, whatever the
// consumers do). The first kGemvBulkPrewait stages are asked for before pdl::wait: the weights are
// no kernel's output, so they stream while the kernel before still runs (more than one takes the
// running kernel's bandwidth: fast_gemv_plan.h).
//
// Work. One block an SM (grid = min(row tiles, SMs)), row tiles rt = blockIdx.x, + gridDim.x, …;
// a row tile's k-tiles in stages of kGemvBulkWarps. Consumer warp w takes k-tile w of each stage:
// lane (g, t) = (lane / 4, lane % 4) holds chunk t (32 columns, one 16-byte load) of rows g and
// g + 8 — the two 512-byte halves of the k-tile, conflict-free — and multiplies its nibbles by
// dp4a against x's two int8 limbs in Dp4a's layout (fast_dp4a.cuh: exact integer sums a chunk,
// scaled and joined in f32). At a row tile's end the chunk lanes are summed by shuffles; then,
// while the other warps go on, 16·T threads sum the 16 warps' parts in warp order
// (deterministic) and write y.
//
// x is quantized by the consumer warps into shared memory after pdl::wait, four batches' loads in
// flight at once, while the first stages land — or (XJIT, GemvPlan::xwarp: the pick's at two
// tokens) each consumer warp quantizes the columns of its own k-tiles as it goes.
//
// Measured (H200, bench_fast_gemv, µs cold / 16 calls back to back; docs/cuda-rounds.md, twenty-fourth
// to twenty-sixth rounds): 4096x14336 one token 14.8 / 11.5 with 8 stages (gemv_bulk_stages; 4
// stages 15.1 / 12.3; Imma's register pipeline 18.2 / 14.8; the copies alone 11.6 / 8.7; without
// x's staging 13.0 / 10.0, without the arithmetic 12.1 / 9.3), two tokens 18.7 / 15.9 with x
// staged by each warp (XJIT; 20.1 / 17.1 whole; MmaRows 28.5 / 25.3) — gemv_pick_packed takes it
// there. Faster back to back at K = 2048 too (8192x2048 6.3 against Dp4a's 7.0, lm_head 74 against
// 83), but slower in the decode step (the flagship at 4K: 525 against 550 tok/s with it from 16 Mi
// weights), so not picked there. A warp's k-tiles of two stages a step: no faster.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kCW = kGemvBulkWarps;       // consumer warps; a stage holds one k-tile each
constexpr int kThreads = (kCW + 1) * 32;  // + the producer warp
constexpr int kXBatches = 4;  // x staging: batches of kCW·32 items loaded before quantizing
constexpr int kConsumerBar = 1;  // named barrier of the consumer warps

// Consumer warp `warp`'s k-tile kt of the stage at `stage`: p[u][h] = its part of row g + 8h,
// token u — lane (g, t)'s chunk t of rows g and g + 8, dp4a against x's limbs, scaled in f32.
// `ok` false gives zeros (kt is then any valid k-tile: what the stage holds there is not used) —
// no branch, so two calls interleave.
template <int TT, bool BIAS>
__device__ __forceinline__ void bulk_ktile(float (&p)[TT][2], const uint8_t* stage, int kt, bool ok, const Dp4aX& X,
                                           int T, int stb, int gpt, int gi) {
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const uint4 q0 = *reinterpret_cast<const uint4*>(stage + warp * 1024 + 16 * lane);        // row g
    const uint4 q1 = *reinterpret_cast<const uint4*>(stage + warp * 1024 + 512 + 16 * lane);  // row g + 8
    const auto* ss = reinterpret_cast<const uint16_t*>(stage + kCW * 1024 + warp * stb);
    const float s0 = half_bits(ss[g * gpt + gi]), s1 = half_bits(ss[(g + 8) * gpt + gi]);
    float b0 = -8.f * s0, b1 = -8.f * s1;
    if constexpr (BIAS) {
        const auto* bs = reinterpret_cast<const uint16_t*>(stage + kCW * (1024 + stb) + warp * stb);
        b0 = half_bits(bs[g * gpt + gi]), b1 = half_bits(bs[(g + 8) * gpt + gi]);
    }
    const int col = kt * 128 + 32 * t;
#pragma unroll
    for (int u = 0; u < TT; ++u) {
        p[u][0] = p[u][1] = 0.f;
        if (u >= T) continue;
        const auto* ph = reinterpret_cast<const uint4*>(X.hi + u * X.Kp + col);
        const auto* pl = reinterpret_cast<const uint4*>(X.lo + u * X.Kp + col);
        const float2 ds = X.st[u * (X.Kp / 32) + col / 32];  // (dx, sx)
        const float v0 = fmaf(float(dp4a_chunk32(q0, pl)), 1.f / 254.f, float(dp4a_chunk32(q0, ph)));
        const float v1 = fmaf(float(dp4a_chunk32(q1, pl)), 1.f / 254.f, float(dp4a_chunk32(q1, ph)));
        const float a0 = fmaf(s0 * ds.x, v0, b0 * ds.y), a1 = fmaf(s1 * ds.x, v1, b1 * ds.y);
        p[u][0] = ok ? a0 : 0.f;
        p[u][1] = ok ? a1 : 0.f;
    }
}

// TT: token slots (T ≤ TT). BIAS: the matrix has biases (else b = −8·s). MATH false: the copies
// and barriers only (the bench's floor for them; y garbage). NS: ring stages. PAIR: stages a
// consumer step takes (1 or 2: a warp's k-tile of each). SKIP (diagnosis; y garbage): 1 leaves out
// x's staging (the consumers read what shared memory holds), 2 the consumers' arithmetic. XJIT:
// each consumer warp stages x's columns of its own k-tiles (k-tile w of every stage: the same
// columns every row tile) as it walks the block's first row tile, a stage's loads ahead — the
// arithmetic starts after one k-tile's staging, and no barrier joins the warps; else (the launched
// form) the consumers stage the whole of x first (dp4a_quantize_x) and meet at a barrier. Either
// way the same bytes. H200 (session 29), XJIT against x first: slower alone (4096x14336 one token,
// 8 stages: 14.28 / 17.22 against 11.46 / 14.75 µs back to back / cold; lm_head 80.9 against 75.3),
// but inside the decode step it lost less — Bulk at every shape of the flagship (TESSERA_GEMV=bulk)
// 539.4 against 509–512 tok/s at 4K (the default pick 550–552): the lead for a wider pick.
// One token with 4 stages: two blocks an SM fit (≤ 56 registers), so the next kernel's blocks
// can start streaming beside this one's (programmatic launch); 8 stages fill the SM alone.
template <int TT, bool BIAS, bool MATH = true, int NS = kGemvBulkStages, int PAIR = 1, int SKIP = 0,
          bool XJIT = kGemvBulkXJit>
__global__ void __launch_bounds__(kThreads, TT == 1 && NS <= kGemvBulkStages ? 2 : 1)
    gemv_bulk_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                     PackedMatrix w, bool x_aligned, int prewait) {
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr int kNS = NS;
    __shared__ uint64_t full[kNS], empty[kNS];
    __shared__ float red[2][TT][16][kCW];  // [buffer][token][row][warp]
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int K = int(w.k), nkt = K / 128, row_tiles = int(w.n / 16);
    const int stages_rt = (nkt + kCW - 1) / kCW;  // stages a row tile
    const int gpt = 128 / w.group;                 // scale groups a tile row: 4, 2 or 1
    const int stb = 32 * gpt;                      // scale (bias) bytes a k-tile
    const int tile_bytes = 1024 + stb * (BIAS ? 2 : 1);
    const int stage_bytes = kCW * tile_bytes;      // gemv_bulk_stage_bytes
    if (threadIdx.x == 0) {
        for (int s = 0; s < kNS; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kCW);
    }
    __syncthreads();

    if (warp == kCW) {  // ---- producer: one lane asks for every stage of the block, in order ----
        if (lane != 0) return;
        const uint64_t policy = l2_evict_first();
        const auto* sc = reinterpret_cast<const uint8_t*>(w.scales);
        const auto* bi = reinterpret_cast<const uint8_t*>(w.biases);
        unsigned it = 0;  // stages asked for so far
        for (int rt = int(blockIdx.x); rt < row_tiles; rt += int(gridDim.x))
            for (int st = 0; st < stages_rt; ++st, ++it) {
                if (int(it) == prewait) pdl::wait();  // the rest once the kernel before is done
                const int s = it % kNS;
                mbar_wait(&empty[s], ((it / kNS) & 1) ^ 1);  // the consumers are done with its last use
                const int kt0 = st * kCW, nt = min(kCW, nkt - kt0);
                const int64_t tile0 = int64_t(rt) * nkt + kt0;
                uint8_t* dst = smem + s * stage_bytes;
                mbar_arrive_expect_tx(&full[s], uint32_t(nt * tile_bytes));
                bulk_load(smem_addr(dst), w.codes + tile0 * 1024, uint32_t(nt * 1024), &full[s], policy);
                bulk_load(smem_addr(dst + kCW * 1024), sc + tile0 * stb, uint32_t(nt * stb), &full[s], policy);
                if constexpr (BIAS)
                    bulk_load(smem_addr(dst + kCW * (1024 + stb)), bi + tile0 * stb, uint32_t(nt * stb), &full[s],
                              policy);
            }
        return;
    }

    // ---- consumers ----
    pdl::wait();  // x comes from the kernel before
    pdl::trigger();
    uint8_t* const xs = smem + kNS * stage_bytes;  // NS · gemv_bulk_stage_bytes; then x (gemv_bulk_x_bytes)
    constexpr bool kStageX = MATH && !(SKIP & 1);
    if constexpr (kStageX && !XJIT) dp4a_quantize_x<kCW * 32, 1, kXBatches>(x, ldx, T, K, x_aligned, xs);
    if constexpr (!XJIT) named_barrier_sync(kConsumerBar, kCW * 32);
    const Dp4aX X = dp4a_x(xs, K, T);
    const int g = lane >> 2, t = lane & 3;
    const int gi = t >> (__ffs(w.group / 32) - 1);  // chunk t's scale group in its tile row
    static_assert(PAIR == 1 || (PAIR == 2 && NS >= 2), "a pair of stages needs a ring of two or more");
    static_assert(!XJIT || PAIR == 1, "x staged a warp's k-tile at a time: one stage a step");
    // XJIT: this warp's x for k-tile st·kCW + warp — items of 8 columns (dp4a_quantize_x's), item
    // lane + 32m being token i / 16, columns 8·(i % 16) … of the k-tile; loaded into xv, then
    // quantized into X's place (the same bytes as dp4a_quantize_x).
    constexpr int kXI = (16 * TT + 31) / 32;
    float xv[kXI][8];
    auto x_load = [&](int st) {
        const int kt = st * kCW + warp;
#pragma unroll
        for (int m = 0; m < kXI; ++m) {
            const int i = lane + 32 * m, u = i >> 4, c0 = kt * 128 + 8 * (i & 15);
#pragma unroll
            for (int e = 0; e < 8; ++e) xv[m][e] = 0.f;
            if (u < T && kt < nkt) load8(x + u * ldx + c0, x_aligned, xv[m]);
        }
    };
    auto x_store = [&](int st) {
        const int kt = st * kCW + warp;
        uint8_t* const xh = xs;
        uint8_t* const xl = xs + T * X.Kp;
        auto* const xst = reinterpret_cast<float2*>(xs + 2 * T * X.Kp);
#pragma unroll
        for (int m = 0; m < kXI; ++m) {
            const int i = lane + 32 * m, u = i >> 4, j = i & 15, c0 = kt * 128 + 8 * j;
            const Dp4aQ8 q = dp4a_quantize8(xv[m]);  // (every lane: it shuffles in groups of 4)
            if (u < T && kt < nkt) {
                *reinterpret_cast<uint2*>(xh + u * X.Kp + c0) = q.H;
                *reinterpret_cast<uint2*>(xl + u * X.Kp + c0) = q.L;
                if ((j & 3) == 0) xst[u * (X.Kp / 32) + c0 / 32] = make_float2(q.dx, q.sx);
            }
        }
        __syncwarp();  // the warp's lanes read each other's bytes
    };
    // The block's stages in the producer's order, PAIR at a time: a warp's k-tiles of two stages
    // are independent chains the scheduler interleaves. Two stages may belong to two row tiles
    // (always at K ≤ 2048, a stage a row tile), so the sums are kept by row-tile parity.
    const int my_rts = (row_tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
    const int items = my_rts * stages_rt;
    float acc[2][TT][2];
#pragma unroll
    for (int p = 0; p < 2; ++p)
#pragma unroll
        for (int u = 0; u < TT; ++u) acc[p][u][0] = acc[p][u][1] = 0.f;
    int buf = 0;
    // The sums of the block's row tile r (parity p): the chunk lanes by shuffles; then, while the
    // other warps go on to the next stages, 16·T threads sum the 16 warps' parts in order.
    auto finish = [&](int r, int p) {
#pragma unroll
        for (int u = 0; u < TT; ++u)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v = p ? acc[1][u][h] : acc[0][u][h];
                v += __shfl_xor_sync(0xffffffffu, v, 1);
                v += __shfl_xor_sync(0xffffffffu, v, 2);
                if (t == 0) red[buf][u][g + 8 * h][warp] = v;
                acc[0][u][h] = p ? acc[0][u][h] : 0.f;  // selects, not an index: acc stays in registers
                acc[1][u][h] = p ? 0.f : acc[1][u][h];
            }
        named_barrier_sync(kConsumerBar, kCW * 32);  // red[buf] written (red[buf ^ 1]'s readers long done)
        if (int(threadIdx.x) < 16 * T) {
            const int u = int(threadIdx.x) >> 4, rr = int(threadIdx.x) & 15;
            float v = 0.f;
            for (int q = 0; q < kCW; ++q) v += red[buf][u][rr][q];
            const int64_t rt = int64_t(blockIdx.x) + int64_t(r) * gridDim.x;
            if constexpr (MATH) y[u * ldy + rt * 16 + rr] = v;
            else if (v == 1.2345e-30f) y[0] = v;  // practically never: keeps the barriers' work
        }
        buf ^= 1;
    };
    int r0 = 0, st0 = 0;  // stage i: the block's row tile r0, its stage st0
    if constexpr (kStageX && XJIT)
        if (items > 0) x_load(0);
    for (int i = 0; i < items; i += PAIR) {
        const bool two = PAIR == 2 && i + 1 < items;
        const int r1 = st0 + 1 < stages_rt ? r0 : r0 + 1, st1 = st0 + 1 < stages_rt ? st0 + 1 : 0;  // stage i + 1
        const int s0 = i % kNS, s1 = (i + 1) % kNS;
        if constexpr (kStageX && XJIT) {
            if (r0 == 0) {  // the block's first row tile: this stage's x in place, the next one's loads out
                x_store(st0);
                if (st0 + 1 < stages_rt) x_load(st0 + 1);
            }
        }
        mbar_wait(&full[s0], (i / kNS) & 1);
        if (two) mbar_wait(&full[s1], ((i + 1) / kNS) & 1);
        if constexpr (MATH && !(SKIP & 2)) {
            const int kt0 = st0 * kCW + warp, kt1 = st1 * kCW + warp;
            float p0[TT][2], p1[TT][2];
            bulk_ktile<TT, BIAS>(p0, smem + s0 * stage_bytes, min(kt0, nkt - 1), kt0 < nkt, X, T, stb, gpt, gi);
            if constexpr (PAIR == 2)
                bulk_ktile<TT, BIAS>(p1, smem + s1 * stage_bytes, min(kt1, nkt - 1), two && kt1 < nkt, X, T, stb, gpt,
                                     gi);
#pragma unroll
            for (int u = 0; u < TT; ++u)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const float q1 = PAIR == 2 ? p1[u][h] : 0.f;
                    acc[0][u][h] += ((r0 & 1) ? 0.f : p0[u][h]) + ((r1 & 1) ? 0.f : q1);
                    acc[1][u][h] += ((r0 & 1) ? p0[u][h] : 0.f) + ((r1 & 1) ? q1 : 0.f);
                }
        }
        __syncwarp();
        if (lane == 0) {  // release: this warp's reads of the stages are done
            mbar_arrive(&empty[s0]);
            if (two) mbar_arrive(&empty[s1]);
        }
        if (st0 == stages_rt - 1) finish(r0, r0 & 1);
        if (two && st1 == stages_rt - 1) finish(r1, r1 & 1);
        // on to stage i + PAIR
        r0 = two ? (st1 + 1 < stages_rt ? r1 : r1 + 1) : r1;
        st0 = two ? (st1 + 1 < stages_rt ? st1 + 1 : 0) : st1;
    }
}

// grid: blocks (0: gemv_grid_blocks); min_smem: dynamic shared memory asked for at least (the
// bench's way to keep a second block off an SM).
template <int TT, bool BIAS, bool MATH, int NS = kGemvBulkStages, int PAIR = 1, int SKIP = 0,
          bool XJIT = kGemvBulkXJit>
cudaError_t launch_tt(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                      cudaStream_t stream, int grid = 0, int64_t min_smem = 0, int prewait = kGemvBulkPrewait) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    auto* kernel = gemv_bulk_kernel<TT, BIAS, MATH, NS, PAIR, SKIP, XJIT>;
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvBulkMaxSmem));
    if (opt_in != cudaSuccess) return opt_in;
    const int64_t need = gemv_bulk_smem(w.k, T, w.group, BIAS, NS);
    if (need > kGemvBulkMaxSmem) return cudaErrorInvalidValue;  // the diagnosis's deep rings at a large K
    const size_t smem = size_t(std::min<int64_t>(std::max(need, min_smem), kGemvBulkMaxSmem));
    const GemvPlan plan{GemvVariant::Bulk};
    const unsigned blocks = unsigned(grid > 0 ? grid : gemv_grid_blocks(plan, w.n));
    return pdl::launch(kernel, dim3(blocks), kThreads, smem, stream, y, ldy, x, ldx, int(T), w, aligned, prewait);
}

template <bool BIAS, bool XJIT>
cudaError_t launch_bias(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    constexpr int kNS = kGemvBulkStages, kDeep = kGemvBulkDeepStages;
    if (T <= 1 && gemv_bulk_stages(w.k, T, w.group, BIAS) == kDeep)
        return launch_tt<1, BIAS, true, kDeep, 1, 0, XJIT>(y, ldy, x, ldx, T, w, stream);
    if (T <= 1) return launch_tt<1, BIAS, true, kNS, 1, 0, XJIT>(y, ldy, x, ldx, T, w, stream);
    if (T <= 2) return launch_tt<2, BIAS, true, kNS, 1, 0, XJIT>(y, ldy, x, ldx, T, w, stream);
    if (T <= 4) return launch_tt<4, BIAS, true>(y, ldy, x, ldx, T, w, stream);  // (x staged whole: XJIT's
    return launch_tt<8, BIAS, true>(y, ldy, x, ldx, T, w, stream);              // staging registers spill)
}

}  // namespace

// Arguments checked by gemv_packed_plan (gemv_bulk_takes). plan.xwarp: XJIT at one or two tokens.
cudaError_t launch_gemv_bulk(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream) {
    if (plan.xwarp)
        return w.biases ? launch_bias<true, true>(y, ldy, x, ldx, T, w, stream)
                        : launch_bias<false, true>(y, ldy, x, ldx, T, w, stream);
    return w.biases ? launch_bias<true, false>(y, ldy, x, ldx, T, w, stream)
                    : launch_bias<false, false>(y, ldy, x, ldx, T, w, stream);
}

cudaError_t launch_gemv_bulk_diag(const GemvBulkDiag& d, float* y, const float* x, const PackedMatrix& w,
                                  cudaStream_t stream) {
    if (!gemv_bulk_takes(w, 1) || w.biases) return cudaErrorInvalidValue;
    const int64_t min_smem = d.exclusive ? 116 * 1024 : 0;  // two of 116 KiB exceed an SM's 228
#define TS_BULK_DIAG(NS)                                                                                 \
    if (d.stages == NS && d.pairs)                                                                       \
        return d.math ? launch_tt<1, false, true, NS, 2>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem) \
                      : cudaErrorInvalidValue;                                                           \
    if (d.stages == NS)                                                                                  \
        return d.math ? launch_tt<1, false, true, NS>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem)   \
                      : launch_tt<1, false, false, NS>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem);
    if (d.stages == 8 && d.math && d.skip == 1)
        return launch_tt<1, false, true, 8, 1, 1>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem);
    if (d.stages == 8 && d.math && d.skip == 2)
        return launch_tt<1, false, true, 8, 1, 2>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem);
    if (d.stages == 8 && d.math && d.x_by_warp)
        return launch_tt<1, false, true, 8, 1, 0, true>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem);
    if (d.skip != 0) return cudaErrorInvalidValue;
    TS_BULK_DIAG(2)
    TS_BULK_DIAG(4)
    TS_BULK_DIAG(8)
#undef TS_BULK_DIAG
    return cudaErrorInvalidValue;
}

}  // namespace tessera::cuda::fast::detail
