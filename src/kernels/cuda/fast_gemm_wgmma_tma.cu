// The prefill GEMM warp-specialised (y[T, N] = x[T, K] · w[N, K]ᵀ, w Int4 in 16-row tiles): the
// arithmetic of fast_gemm_wgmma.cu — weights as wgmma's A dequantized into registers, x as B
// from shared memory in the 128-byte swizzle, m64nBNk16 bf16 → f32 — with the copies moved off
// the consumers' path as in the MoE's tiles (fast_moe_tma_tile.cuh). One producer warp fills a
// ring of STAGES k-tiles by TMA: x's two 64-column k-blocks of the block's BN tokens (boxes of a
// 3-D map over the x pass's output), the block's row tiles' codes (1 KB a tile and k-tile) and
// scales (biases). Two consumer warpgroups wait on full barriers and free slots on empty ones: no
// block barrier a k-tile, no address math or global loads in their loop.
//
// Why: fast_gemm_wgmma.cu's blocks (128 weight rows × 256 tokens) read 64 KB of x for 8 KB of
// codes a k-tile, each from L2 — at 4096 × 14336 and 512 tokens ~470 MB of x for 33 MB of
// weights in 131 µs, ~3.8 TB/s: the L2's bandwidth, not the tensor cores, bounds it. So:
//  * CL = 2: clusters of two blocks along the weight rows (the same tokens), each block loading
//    one of x's two k-blocks into both (multicast): x read once a cluster — half the traffic;
//  * MT = 2: a warpgroup's 64-row A twice (two m64 tiles, B read by both) — 256 weight rows ×
//    128 tokens a block, x read by half as many blocks for twice the codes.
// The registers: 128 accumulators a consumer thread (MT · BN / 2), so one block an SM of 384
// threads at 168 registers, setmaxnreg moving them to the consumers (232) from the producers (40).
//
// The slots: full[s] counts the producer's arrival with the stage's bytes (x's two k-blocks — one
// from each block of a cluster — and this block's weights); empty[s] counts every consumer warp
// of the cluster (a multicast writes into both blocks' slot s, so both must have read it). Rows
// past T and row tiles past N / 16 read zeros (the maps' bounds); their outputs are not written.
// Split K (gridDim.z = 2) adds into y, which the caller zeroed, as fast_gemm_wgmma.cu does.
#include <cuda.h>

#include <cstdint>

#include "kernels/cuda/fast_gemm.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;  // columns a k-tile

template <int BN_, int MT_, int STAGES_, int CL_, int R_ = 1>
struct GemmTmaTile {
    static constexpr int BN = BN_;          // tokens a block: wgmma's N
    static constexpr int MT = MT_;          // m64 tiles a consumer warpgroup
    static constexpr int CL = CL_;          // blocks a cluster along the weight rows, sharing x's boxes
    static constexpr int R = R_;            // k-tiles a stage (> 1: one box each of x, codes, scales)
    static constexpr int BM = 128 * MT;     // weight rows a block: two warpgroups of 64·MT
    static constexpr int STAGES = STAGES_;
    static constexpr int kThreads = 384;    // two consumer warpgroups + the producer's (one warp issues)
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kTiles = BM / 16;  // row tiles a stage
    // A stage: x's 2R k-blocks [2R][BN rows][128 bytes], the row tiles' codes [kTiles][R][1 KB],
    // scales and biases [kTiles][R · 32·128/G bytes] (R = 1: the 2-D boxes' [kTiles][…]).
    static constexpr int kXBlockBytes = BN * 128, kXBytes = 2 * R * kXBlockBytes;
    static constexpr int kWOff = kXBytes, kSOff = kWOff + kTiles * R * 1024, kBOff = kSOff + kTiles * R * 128;
    static constexpr int kStageBytes = (kBOff + kTiles * R * 128 + 1023) / 1024 * 1024;
    static constexpr int kSmem = STAGES * kStageBytes + 1024;  // + room to align the base to 1024
    static_assert(MT * BN / 2 <= 128 && BN % 8 == 0 && BN <= 256, "accumulators; a box's rows");
    static_assert(CL == 1 || CL == 2, "x's two k-blocks: one a block of the cluster");
    static_assert(R == 1 || ((R == 2 || R == 4) && CL == 1), "runs: one block a cluster");
    static_assert(kProducerRegs * 128 + kConsumerRegs * 256 <= 65536, "setmaxnreg moves registers only");
    static_assert(kSmem <= 227 * 1024, "shared memory");
};

struct GemmTmaMaps {
    CUtensorMap x, codes, scales, biases;  // R > 1: x k-block-major, the weights 3-D (packed_tiles_tma_maps_3d)
};

// KT k-tiles in all, per_split a block (blockIdx.z's share); gpt: groups a row and k-tile.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_wgmma_tma_kernel(const __grid_constant__ GemmTmaMaps maps, float* __restrict__ y, int64_t ldy, int64_t T,
                          int64_t N, int KT, int per_split, int gpt, bool biases) {
    constexpr int BN = C::BN, S = C::STAGES, CL = C::CL, MT = C::MT, R = C::R;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    __shared__ uint64_t full[S], empty[S];
    const int64_t n0 = int64_t(blockIdx.x) * C::BM, m0 = int64_t(blockIdx.y) * BN;  // weight row, token
    const int kt0 = int(blockIdx.z) * per_split, nkt = min(per_split, KT - kt0);  // the same in a cluster
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    const uint32_t rank = CL > 1 ? cluster_rank() : 0;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1);         // the producer's arrive.expect_tx
            mbar_init(&empty[s], 8 * CL);   // each consumer warp of the cluster, once its wgmma read the slot
        }
    }
    if constexpr (CL > 1) cluster_barrier();  // every block's barriers ready before a box lands there
    else __syncthreads();

    if (wg == 2) {
        // ---- producer: one lane of warp 8 ----
        setmaxnreg_dec<C::kProducerRegs>();
        if (warp != 8 || lane != 0) return;
        const uint32_t scale_bytes = uint32_t(C::kTiles * R * 32 * gpt);
        const uint32_t bytes = uint32_t(C::kXBytes + C::kTiles * R * 1024) + scale_bytes * (biases ? 2u : 1u);
        const int row_tile = int(n0 >> 4);
        const uint32_t base = smem_addr(smem);
        for (int i = 0; i < (nkt + R - 1) / R; ++i) {  // stage i: k-tiles kt0 + R·i … (past K: zeros)
            const int slot = i % S, kt = kt0 + R * i;
            mbar_wait(&empty[slot], (uint32_t(i / S) & 1) ^ 1);  // stage i − S's wgmma are done (cluster-wide)
            mbar_arrive_expect_tx(&full[slot], bytes);
            const uint32_t to = base + uint32_t(slot * C::kStageBytes);
            if constexpr (R > 1) {
                tma_load_3d(to, &maps.x, 0, int(m0), 2 * kt, &full[slot]);
                tma_load_3d(to + C::kWOff, &maps.codes, 0, kt, row_tile, &full[slot]);
                tma_load_3d(to + C::kSOff, &maps.scales, 0, kt, row_tile, &full[slot]);
                if (biases) tma_load_3d(to + C::kBOff, &maps.biases, 0, kt, row_tile, &full[slot]);
                continue;
            }
            if constexpr (CL > 1) {
                tma_load_3d_multicast(to + rank * C::kXBlockBytes, &maps.x, 0, 2 * kt + int(rank), int(m0),
                                      &full[slot], uint16_t(3));
            } else {
                tma_load_3d(to, &maps.x, 0, 2 * kt, int(m0), &full[slot]);
                tma_load_3d(to + C::kXBlockBytes, &maps.x, 0, 2 * kt + 1, int(m0), &full[slot]);
            }
            tma_load_2d(to + C::kWOff, &maps.codes, kt * kBK, row_tile, &full[slot]);
            tma_load_2d(to + C::kSOff, &maps.scales, kt * 16 * gpt, row_tile, &full[slot]);
            if (biases) tma_load_2d(to + C::kBOff, &maps.biases, kt * 16 * gpt, row_tile, &full[slot]);
        }
        return;
    }

    // ---- consumers: warpgroup wg, warp w4 of it, lane (gq, tq); m-tile j's A rows r(j), r(j) + 8 ----
    setmaxnreg_inc<C::kConsumerRegs>();
    const int w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    auto row = [&](int j) { return wg * 64 * MT + 64 * j + w4 * 16 + gq; };  // in the block
    float acc[MT][BN / 2];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
#pragma unroll
        for (int i = 0; i < BN / 2; ++i) acc[j][i] = 0.f;
        wgmma_fence_operands(acc[j]);
    }
    auto code_row = [&](int r) { return staged_code_row(r, R); };  // (a stage of R k-tiles)
    auto scale_at = [&](int r, int q) { return staged_scale_at(r, tq, gpt, R, q); };
    const int ns = (nkt + R - 1) / R;
    for (int i = 0; i < ns; ++i) {
        const int slot = i % S;
        mbar_wait(&full[slot], uint32_t(i / S) & 1);
        const uint8_t* stage = smem + slot * C::kStageBytes;
        if constexpr (R == 1) {  // (the form every picked configuration runs, as measured)
#pragma unroll
            for (int j = 0; j < MT; ++j)
                wgmma_int4_ktile_staged<BN>(acc[j], stage + C::kWOff, row(j), row(j) + 8, tq, stage + C::kSOff,
                                            stage + C::kBOff, staged_scale_at(row(j), tq, gpt),
                                            staged_scale_at(row(j) + 8, tq, gpt), biases, biases,
                                            wgmma_desc_sw128(smem_addr(stage)), C::kXBlockBytes);
        } else {
#pragma unroll 1
            for (int q = 0; q < min(R, nkt - R * i); ++q)  // k-tile kt0 + R·i + q: x's k-blocks 2q, 2q + 1
#pragma unroll
                for (int j = 0; j < MT; ++j)
                    wgmma_int4_ktile_staged<BN>(acc[j], stage + C::kWOff + 1024 * q, code_row(row(j)),
                                                code_row(row(j) + 8), tq, stage + C::kSOff, stage + C::kBOff,
                                                scale_at(row(j), q), scale_at(row(j) + 8, q), biases, biases,
                                                wgmma_desc_sw128(smem_addr(stage + 2 * q * C::kXBlockBytes)),
                                                C::kXBlockBytes);
        }
        // Every wgmma of stage i − 1 is done: its slot is free here and, a cluster, in the other
        // block (whose producer multicasts into it). Not past the last release a producer waits
        // for: the other block may have left by then.
        if (i > 0 && lane == 0 && i - 1 + S < ns) {
            mbar_arrive(&empty[(i - 1) % S]);
            if constexpr (CL > 1) mbar_arrive_cluster(&empty[(i - 1) % S], rank ^ 1u);
        }
    }
    wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < MT; ++j) wgmma_fence_operands(acc[j]);

    // acc[j][4i + e]: A row row(j) (e < 2) or row(j) + 8, token 8i + 2tq + (e & 1) → y[token, row].
    const bool split = gridDim.z > 1;
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int i = 0; i < BN / 8; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int64_t r = n0 + row(j) + 8 * (e >> 1), tok = m0 + 8 * i + 2 * tq + (e & 1);
                if (r >= N || tok >= T) continue;
                float* out = y + tok * ldy + r;
                if (split) atomicAdd(out, acc[j][4 * i + e]);  // y zeroed; 0 + a + b = 0 + b + a: deterministic
                else *out = acc[j][4 * i + e];
            }
}

template <class C>
cudaError_t prepare() {
    static const cudaError_t err =
        cudaFuncSetAttribute(gemm_wgmma_tma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    return err;
}

template <class C>
cudaError_t launch(const GemmArgs& a, cudaStream_t stream) {
    if (const cudaError_t e = prepare<C>(); e != cudaSuccess) return e;
    const PackedMatrix& w = a.w;
    if (w.kind != PackedKind::Int4 || !w.tiles || !packed_tiles_fit(w.kind, w.n, w.k, w.group) || a.T < 1 ||
        a.splits < 1 || a.splits > 2)
        return cudaErrorInvalidValue;
    GemmTmaMaps maps;
    // x [T, K] bf16 in the wgmma order as (64 columns, K / 64 k-blocks, T rows), boxes of one
    // k-block × BN rows; the weights' row tiles in boxes of the block's. Runs (R > 1): x
    // k-block-major [K / 64][T][64] as (64 columns, T rows, K / 64 k-blocks), boxes of BN rows × 2R
    // k-blocks ([2R][BN][128 bytes], each k-block's rows one swizzle atom), the weights 3-D.
    if constexpr (C::R > 1) {
        const uint64_t dims[3] = {64, uint64_t(a.T), uint64_t(w.k / 64)};
        const uint64_t strides[2] = {128, uint64_t(a.T) * 128};
        const uint32_t box[3] = {64, uint32_t(C::BN), uint32_t(2 * C::R)};
        if (!tma_map_3d_sw128(&maps.x, true, a.xb, dims, strides, box) ||
            !packed_tiles_tma_maps_3d(w, uint64_t(w.n / 16), C::kTiles, C::R, &maps.codes, &maps.scales,
                                      &maps.biases))
            return cudaErrorInvalidValue;
    } else {
        const uint64_t dims[3] = {64, uint64_t(w.k / 64), uint64_t(a.T)};
        const uint64_t strides[2] = {128, uint64_t(w.k) * 2};
        const uint32_t box[3] = {64, 1, uint32_t(C::BN)};
        if (!tma_map_3d_sw128(&maps.x, true, a.xb, dims, strides, box) ||
            !packed_tiles_tma_maps(w, uint64_t(w.n / 16), C::kTiles, &maps.codes, &maps.scales, &maps.biases))
            return cudaErrorInvalidValue;
    }
    const int KT = int(w.k / kBK), per_split = (KT + a.splits - 1) / a.splits;
    const int64_t row_blocks = (w.n + C::BM - 1) / C::BM;
    // a cluster's last block may cover no rows: it loads its share of x (zeros of weights), writes nothing
    const dim3 grid(unsigned((row_blocks + C::CL - 1) / C::CL * C::CL), unsigned((a.T + C::BN - 1) / C::BN),
                    unsigned(a.splits));
    const int gpt = int(kBK / w.group);
    const bool biases = w.biases != nullptr;
    if constexpr (C::CL == 1) {
        gemm_wgmma_tma_kernel<C>
            <<<grid, C::kThreads, C::kSmem, stream>>>(maps, a.y, a.ldy, a.T, w.n, KT, per_split, gpt, biases);
        return cudaGetLastError();
    } else {
        return pdl::launch_cluster_serial(gemm_wgmma_tma_kernel<C>, grid, dim3(C::kThreads), C::kSmem, stream,
                                          dim3(C::CL, 1, 1), maps, a.y, a.ldy, a.T, w.n, KT, per_split, gpt, biases);
    }
}

template <class C>
int blocks_per_sm() {
    static const int n = occupancy_blocks(prepare<C>(), gemm_wgmma_tma_kernel<C>, C::kThreads, C::kSmem);
    return n;
}

// A TMA configuration of kGemmConfigs as a GemmTmaTile (bm = tokens = BN, bn = weight rows = 128·MT).
template <class Fn>
cudaError_t with_tile(const GemmConfig& c, Fn&& fn) {
    auto is = [&](int bm, int bn, int stages, int cluster, int runs) {
        return c.bm == bm && c.bn == bn && c.stages == stages && c.tma_cluster == cluster && c.tma_runs == runs;
    };
    if (is(256, 128, 3, 1, 1)) return fn(GemmTmaTile<256, 1, 3, 1>{});
    if (is(256, 128, 3, 2, 1)) return fn(GemmTmaTile<256, 1, 3, 2>{});
    if (is(128, 256, 4, 1, 1)) return fn(GemmTmaTile<128, 2, 4, 1>{});
    if (is(128, 256, 4, 2, 1)) return fn(GemmTmaTile<128, 2, 4, 2>{});
    if (is(128, 128, 5, 1, 1)) return fn(GemmTmaTile<128, 1, 5, 1>{});
    if (is(64, 128, 8, 1, 1)) return fn(GemmTmaTile<64, 1, 8, 1>{});
    if (is(64, 128, 4, 1, 2)) return fn(GemmTmaTile<64, 1, 4, 1, 2>{});
    if (is(64, 128, 2, 1, 4)) return fn(GemmTmaTile<64, 1, 2, 1, 4>{});
    if (is(128, 128, 2, 1, 2)) return fn(GemmTmaTile<128, 1, 2, 1, 2>{});
    return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_gemm_wgmma_tma(int config, const GemmArgs& a, cudaStream_t stream) {
    return with_tile(kGemmConfigs[config], [&](auto tile) { return launch<decltype(tile)>(a, stream); });
}

int gemm_wgmma_tma_blocks_per_sm(int config, PackedKind kind) {
    if (kind != PackedKind::Int4) return 0;
    int n = 0;
    const cudaError_t e = with_tile(kGemmConfigs[config], [&](auto tile) {
        n = blocks_per_sm<decltype(tile)>();
        return cudaSuccess;
    });
    return e == cudaSuccess ? n : 0;
}

}  // namespace tessera::cuda::fast::detail
