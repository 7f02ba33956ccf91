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
// consumers do). The first stages are asked for before pdl::wait: the weights are no kernel's
// output, so they stream while the kernel before still runs.
//
// Work. One block an SM (grid = min(row tiles, SMs)), row tiles rt = blockIdx.x, + gridDim.x, …;
// a row tile's k-tiles in stages of kGemvBulkWarps. Consumer warp w takes k-tile w of each stage:
// lane (g, t) = (lane / 4, lane % 4) holds chunk t (32 columns, one 16-byte load) of rows g and
// g + 8 — the two 512-byte halves of the k-tile, conflict-free — and the k-tile is four mma on
// Imma's (chunk, limb) columns (fast_imma.cuh: the nibbles as they lie against Dp4a's two int8
// limbs of x, exact integer sums a chunk, scaled and joined in f32). At a row tile's end: the
// chunk lanes summed by shuffles, the 16 warps' parts by a fixed shuffle tree (deterministic),
// one lane a row and token writes y.
//
// x is quantized by the consumer warps into shared memory after pdl::wait, four batches' loads in
// flight at once, while the first stages land.
//
// Measured (H200, session 27, bench_fast_gemv, µs cold / 16 calls back to back): 4096x14336 one
// token 15.5 / 12.6 (Imma's register pipeline 18.2 / 14.8; its own copies without the arithmetic
// 11.6 / 9.3, with 8 stages 11.7 / 8.1 — 4.1 TB/s), two tokens 19.4 / 17.1 (MmaRows 25.4 / 22.3) —
// gemv_pick_packed takes it there; slower at K = 2048–4096 and at four tokens or more. An earlier
// form of the consumers on dp4a measured faster at every shape (11.9 back to back at one token)
// but its tests never reported; docs/cuda.md, twenty-fourth round.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_imma.cuh"
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

// TT: token slots (T ≤ TT). BIAS: the matrix has biases (else b = −8·s). MATH false: the copies
// and barriers only (the bench's floor for them; y garbage). NS: ring stages.
// One token: two blocks an SM fit (≤ 56 registers), so the next kernel's blocks can start
// streaming beside this one's (programmatic launch).
template <int TT, bool BIAS, bool MATH = true, int NS = kGemvBulkStages>
__global__ void __launch_bounds__(kThreads, TT == 1 ? 2 : 1)
    gemv_bulk_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                     PackedMatrix w, bool x_aligned) {
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
    uint8_t* const zero32 = smem + kNS * stage_bytes;  // NS · gemv_bulk_stage_bytes; then x (gemv_bulk_x_bytes)
    uint8_t* const xh = zero32 + 32;
    auto* const st = reinterpret_cast<float2*>(xh + 2 * T * K);  // (dx / 254, sx) [k-tile][chunk][TT]
    if (threadIdx.x < 8) reinterpret_cast<uint32_t*>(zero32)[threadIdx.x] = 0u;
    if constexpr (MATH) imma_stage_x<true, kCW * 32, kXBatches>(x, ldx, T, nkt, x_aligned, xh, nullptr, st, K, TT);
    named_barrier_sync(kConsumerBar, kCW * 32);
    const int g = lane >> 2, t = lane & 3;
    const int gi = t >> (__ffs(w.group / 32) - 1);  // chunk t's scale group in its tile row
    const bool active = t == (g >> 1);              // this lane's B column is (chunk t, limb g % 2)
    const uint8_t* const xb = active ? xh + 32 * (4 * (g & 1) + t) : zero32;
    const int kstride = active ? 256 : 0, tstride = active ? 2 * K : 0;
    unsigned it = 0;  // stages consumed so far
    int buf = 0;
    for (int rt = int(blockIdx.x); rt < row_tiles; rt += int(gridDim.x), buf ^= 1) {
        float acc[TT][2];
#pragma unroll
        for (int u = 0; u < TT; ++u) acc[u][0] = acc[u][1] = 0.f;
        for (int st_i = 0; st_i < stages_rt; ++st_i, ++it) {
            const int s = it % kNS, kt = st_i * kCW + warp;
            mbar_wait(&full[s], (it / kNS) & 1);
            if (MATH && kt < nkt) {
                const uint8_t* const tile = smem + s * stage_bytes + warp * 1024;
                const auto* ss = reinterpret_cast<const uint16_t*>(smem + s * stage_bytes + kCW * 1024 + warp * stb);
                ImmaRegTile tl;
                tl.qg = *reinterpret_cast<const uint4*>(tile + 16 * lane);        // chunk t of row g
                tl.q8 = *reinterpret_cast<const uint4*>(tile + 512 + 16 * lane);  // … of row g + 8
                tl.s = uint32_t(ss[g * gpt + gi]) | uint32_t(ss[(g + 8) * gpt + gi]) << 16;
                tl.b = 0;
                if constexpr (BIAS) {
                    const auto* bs = reinterpret_cast<const uint16_t*>(smem + s * stage_bytes + kCW * (1024 + stb) +
                                                                       warp * stb);
                    tl.b = uint32_t(bs[g * gpt + gi]) | uint32_t(bs[(g + 8) * gpt + gi]) << 16;
                }
                imma_regs_step<BIAS, TT>(acc, tl, xb + kstride * kt, tstride, st + (4 * kt + t) * TT, T);
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&empty[s]);  // release: this warp's reads of the stage are done
        }
        // The row tile's sums: the chunk lanes by shuffles, then the warps by a fixed tree.
#pragma unroll
        for (int u = 0; u < TT; ++u)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float v = acc[u][h];
                v += __shfl_xor_sync(0xffffffffu, v, 1);
                v += __shfl_xor_sync(0xffffffffu, v, 2);
                if (t == 0) red[buf][u][g + 8 * h][warp] = v;
            }
        named_barrier_sync(kConsumerBar, kCW * 32);  // red[buf] written (red[buf ^ 1]'s readers long done)
        // Thread e: token u = e / 256, row r = e / 16 % 16, warp part p = e % 16 — the 16 parts of
        // (u, r) in 16 neighbouring lanes, summed by shuffles (the same tree every call).
        for (int e0 = 0; e0 < 256 * T; e0 += kCW * 32) {
            const int e = e0 + int(threadIdx.x), u = e >> 8, r = (e >> 4) & 15, p = e & 15;
            float v = e < 256 * T ? red[buf][u][r][p] : 0.f;
#pragma unroll
            for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (p == 0 && e < 256 * T) {
                if constexpr (MATH) y[u * ldy + int64_t(rt) * 16 + r] = v;
                else if (v == 1.2345e-30f) y[0] = v;  // practically never: keeps the barriers' work
            }
        }
    }
}

// grid: blocks (0: gemv_grid_blocks); min_smem: dynamic shared memory asked for at least (the
// bench's way to keep a second block off an SM).
template <int TT, bool BIAS, bool MATH, int NS = kGemvBulkStages>
cudaError_t launch_tt(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                      cudaStream_t stream, int grid = 0, int64_t min_smem = 0) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    auto* kernel = gemv_bulk_kernel<TT, BIAS, MATH, NS>;
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvBulkMaxSmem));
    if (opt_in != cudaSuccess) return opt_in;
    const int64_t need = NS * gemv_bulk_stage_bytes(w.group, BIAS) + gemv_bulk_x_bytes(w.k, T);
    const size_t smem = size_t(std::min<int64_t>(std::max(need, min_smem), kGemvBulkMaxSmem));
    const GemvPlan plan{GemvVariant::Bulk};
    const unsigned blocks = unsigned(grid > 0 ? grid : gemv_grid_blocks(plan, w.n));
    return pdl::launch(kernel, dim3(blocks), kThreads, smem, stream, y, ldy, x, ldx, int(T), w, aligned);
}

template <bool BIAS>
cudaError_t launch_bias(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    if (T <= 1) return launch_tt<1, BIAS, true>(y, ldy, x, ldx, T, w, stream);
    if (T <= 2) return launch_tt<2, BIAS, true>(y, ldy, x, ldx, T, w, stream);
    if (T <= 4) return launch_tt<4, BIAS, true>(y, ldy, x, ldx, T, w, stream);
    return launch_tt<8, BIAS, true>(y, ldy, x, ldx, T, w, stream);
}

}  // namespace

// Arguments checked by gemv_packed_plan (gemv_bulk_takes).
cudaError_t launch_gemv_bulk(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                             cudaStream_t stream) {
    return w.biases ? launch_bias<true>(y, ldy, x, ldx, T, w, stream)
                    : launch_bias<false>(y, ldy, x, ldx, T, w, stream);
}

cudaError_t launch_gemv_bulk_diag(const GemvBulkDiag& d, float* y, const float* x, const PackedMatrix& w,
                                  cudaStream_t stream) {
    if (!gemv_bulk_takes(w, 1) || w.biases) return cudaErrorInvalidValue;
    const int64_t min_smem = d.exclusive ? 116 * 1024 : 0;  // two of 116 KiB exceed an SM's 228
#define TS_BULK_DIAG(NS)                                                                                 \
    if (d.stages == NS)                                                                                  \
        return d.math ? launch_tt<1, false, true, NS>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem)   \
                      : launch_tt<1, false, false, NS>(y, w.n, x, w.k, 1, w, stream, d.grid, min_smem);
    TS_BULK_DIAG(2)
    TS_BULK_DIAG(4)
    TS_BULK_DIAG(8)
#undef TS_BULK_DIAG
    return cudaErrorInvalidValue;
}

}  // namespace tessera::cuda::fast::detail
