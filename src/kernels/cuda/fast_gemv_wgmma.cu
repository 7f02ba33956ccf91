// The decode GEMV's variant WgmmaTma (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w in
// 16-row tiles and 1 ≤ T ≤ 8 on the warpgroup MMA — the prefill GEMM's warp-specialised tiles
// (fast_gemm_wgmma_tma.cu) at wgmma's narrowest N, 8 tokens: weights as A dequantized into
// registers, x as B, m64n8k16 bf16 → f32.
//
// Why. The decode GEMV streams the weights once; its work a weight is the dequantization. Bulk /
// BulkMma (fast_gemv_bulk*.cu) stream them by 1 KB bulk copies — their ring alone takes 11.9 µs at
// 8 tokens of 4096 × 14336 in clusters of 8 (twenty-eighth round). Here a stage is two TMA boxes
// (the block's 8·MT row tiles' codes, 8·MT KB, and their scales; biases a third), the consumers
// wait on mbarriers only, and the MMA is asynchronous: the warps' issue is the dequantization.
//
// Work. A block: 128·MT weight rows (two consumer warpgroups of 64·MT) × its slice of K — the KS
// blocks of a cluster split the k-tiles, each converting only its slice of x (f32 → bf16 in the
// wgmma order, the 128-byte swizzle, rows past T zero) into shared memory once, at the start,
// after its producer lane has put the ring's first stages in flight. At the end the cluster's
// blocks leave their accumulators in shared memory and block rank 0 adds the others' in rank order
// (distributed shared memory): deterministic, no scratch, no atomics, one launch.
//
// Not yet run on a GPU (session 35 wrote it without device time left): opt-in only
// (TESSERA_GEMV=wgmma_tma), tested by FastGemv.WgmmaTma* on the GPU machine.
#include <cuda.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"
#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;   // columns a k-tile
constexpr int kBN = 8;         // tokens: wgmma's N
constexpr int kXTileBytes = 2 * kBN * 128;  // a k-tile of x: two k-blocks of 8 rows × 128 bytes

template <int MT_, int KS_>
struct GemvWgmmaTile {
    static constexpr int MT = MT_;          // m64 tiles a consumer warpgroup
    static constexpr int KS = KS_;          // blocks a cluster, each its slice of K
    static constexpr int BM = 128 * MT;     // weight rows a block
    static constexpr int STAGES = kGemvWgmmaStages;
    static constexpr int kThreads = 384;
    static constexpr int kProducerRegs = 40, kConsumerRegs = 232;
    static constexpr int kTiles = BM / 16;
    static constexpr int kSOff = kTiles * 1024, kBOff = kSOff + kTiles * 128;
    static constexpr int kStageBytes = (kBOff + kTiles * 128 + 1023) / 1024 * 1024;
    static constexpr int kRedBytes = 256 * MT * 4 * 4;  // the consumers' accumulators, for the cluster's sum
    static_assert(KS == 1 || KS == 2 || KS == 4 || KS == 8, "a portable cluster");
    static_assert(kStageBytes == gemv_wgmma_stage_bytes(MT), "fast_gemv_plan.h's sizes");
};

struct GemvWgmmaMaps {
    CUtensorMap codes, scales, biases;
};

// Shared memory: x's slice (per k-tiles × 2 KB, 1024-aligned), the ring, the accumulators.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemv_wgmma_kernel(const __grid_constant__ GemvWgmmaMaps maps, float* __restrict__ y, int64_t ldy,
                      const float* __restrict__ x, int64_t ldx, int T, int64_t N, int64_t K, int KT, int per, int gpt,
                      bool biases, bool vec2) {
    constexpr int S = C::STAGES, MT = C::MT, KS = C::KS;
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    uint8_t* xs = smem;                                  // [per][2 k-blocks][8 rows][128 bytes]
    uint8_t* ring = xs + per * kXTileBytes;              // S stages
    float* red = reinterpret_cast<float*>(ring + S * C::kStageBytes);
    __shared__ uint64_t full[S], empty[S];
    const uint32_t rank = KS > 1 ? cluster_rank() : 0;
    const int64_t n0 = int64_t(blockIdx.x / KS) * C::BM;
    const int kt0 = int(rank) * per, nkt = max(0, min(per, KT - kt0));
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1);  // the producer's arrive.expect_tx
            mbar_init(&empty[s], 8); // each consumer warp, once its wgmma read the slot
        }
    }
    __syncthreads();

    const uint32_t scale_bytes = uint32_t(C::kTiles * 32 * gpt);
    const uint32_t bytes = uint32_t(C::kTiles * 1024) + scale_bytes * (biases ? 2u : 1u);
    const int row_tile = int(n0 >> 4);
    auto issue = [&](int i) {  // k-tile i of the slice into slot i % S
        const int slot = i % S, kt = kt0 + i;
        mbar_arrive_expect_tx(&full[slot], bytes);
        const uint32_t to = smem_addr(ring) + uint32_t(slot * C::kStageBytes);
        tma_load_2d(to, &maps.codes, kt * kBK, row_tile, &full[slot]);
        tma_load_2d(to + C::kSOff, &maps.scales, kt * 16 * gpt, row_tile, &full[slot]);
        if (biases) tma_load_2d(to + C::kBOff, &maps.biases, kt * 16 * gpt, row_tile, &full[slot]);
    };
    const bool producer = warp == 8 && lane == 0;
    if (producer)
        for (int i = 0; i < min(S, nkt); ++i) issue(i);  // the first round: every slot is free

    // x's slice → bf16 in the wgmma order, swizzled: unit u = (k-tile i, row r, k-step σ), two
    // 16-byte chunks (2·(σ mod 4), + 1) of row r in k-block σ / 4, chunk c at c ^ (r mod 8).
    for (int u = tid; u < nkt * 64; u += C::kThreads) {
        const int i = u >> 6, r = (u >> 3) & 7, sigma = u & 7;
        uint4 lo = make_uint4(0, 0, 0, 0), hi = lo;
        if (r < T) wgmma_kstep_words(x + int64_t(r) * ldx, int64_t(kt0 + i) * kBK, K, sigma, vec2, lo, hi);
        uint8_t* row = xs + i * kXTileBytes + (sigma >> 2) * (kBN * 128) + r * 128;
        const int c = 2 * (sigma & 3);
        *reinterpret_cast<uint4*>(row + ((c ^ r) << 4)) = lo;
        *reinterpret_cast<uint4*>(row + (((c + 1) ^ r) << 4)) = hi;
    }
    fence_proxy_async_smem();  // x's stores visible to the tensor cores' reads
    __syncthreads();

    if (wg == 2) {
        setmaxnreg_dec<C::kProducerRegs>();
        if (!producer) return;
        for (int i = S; i < nkt; ++i) {
            mbar_wait(&empty[i % S], (uint32_t(i / S) & 1) ^ 1);  // k-tile i − S's wgmma are done
            issue(i);
        }
        return;
    }

    // ---- consumers: warpgroup wg, warp w4 of it, lane (gq, tq); m-tile j's A rows row(j), row(j) + 8 ----
    setmaxnreg_inc<C::kConsumerRegs>();
    const int w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    auto row = [&](int j) { return wg * 64 * MT + 64 * j + w4 * 16 + gq; };
    float acc[MT][kBN / 2];
#pragma unroll
    for (int j = 0; j < MT; ++j) {
#pragma unroll
        for (int e = 0; e < kBN / 2; ++e) acc[j][e] = 0.f;
        wgmma_fence_operands(acc[j]);
    }
    for (int i = 0; i < nkt; ++i) {
        const int slot = i % S;
        mbar_wait(&full[slot], uint32_t(i / S) & 1);
        const uint8_t* stage = ring + slot * C::kStageBytes;
        const uint64_t desc = wgmma_desc_sw128(smem_addr(xs + i * kXTileBytes));
#pragma unroll
        for (int j = 0; j < MT; ++j)
            wgmma_int4_ktile_staged<kBN>(acc[j], stage, row(j), row(j) + 8, tq, stage + C::kSOff, stage + C::kBOff,
                                         staged_scale_at(row(j), tq, gpt), staged_scale_at(row(j) + 8, tq, gpt),
                                         biases, biases, desc, kBN * 128);
        if (i > 0 && lane == 0 && i - 1 + S < nkt) mbar_arrive(&empty[(i - 1) % S]);  // k-tile i − 1's are done
    }
    wgmma_wait<0>();
#pragma unroll
    for (int j = 0; j < MT; ++j) wgmma_fence_operands(acc[j]);

    // acc[j][e]: row row(j) (e < 2) or row(j) + 8, token 2tq + (e & 1). A cluster: every block's
    // accumulators into its shared memory, then rank 0 adds ranks 1 … KS − 1's in order.
    const int ct = tid;  // consumer thread 0 … 255
    if constexpr (KS > 1) {
#pragma unroll
        for (int j = 0; j < MT; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) red[(j * 4 + e) * 256 + ct] = acc[j][e];
        cluster_barrier();  // (the producer warpgroup has exited: the barrier waits for the others)
        if (rank == 0) {
            for (int r = 1; r < KS; ++r)
#pragma unroll
                for (int j = 0; j < MT; ++j)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc[j][e] += ld_shared_cluster_f32(&red[(j * 4 + e) * 256 + ct], r);
        }
        cluster_barrier();  // the others' accumulators read before they leave
        if (rank != 0) return;
    }
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t r = n0 + row(j) + 8 * (e >> 1);
            const int tok = 2 * tq + (e & 1);
            if (r < N && tok < T) y[tok * ldy + r] = acc[j][e];
        }
}

// The kernel's shared memory opt-in, once a configuration (its largest launch: any K that fits).
template <class C>
cudaError_t prepare() {
    static const cudaError_t err = cudaFuncSetAttribute(
        gemv_wgmma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvWgmmaMaxSmem));
    return err;
}

template <class C>
cudaError_t launch(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                   const PackedMatrix& w, cudaStream_t stream) {
    const int KT = int(w.k / kBK), per = (KT + C::KS - 1) / C::KS;
    const size_t smem = size_t(1024 + per * kXTileBytes + C::STAGES * C::kStageBytes + C::kRedBytes);
    if (smem != size_t(gemv_wgmma_smem(w.k, C::MT, C::KS)) || smem > size_t(kGemvWgmmaMaxSmem))
        return cudaErrorInvalidValue;  // (fast_gemv_plan.h's accounting and this layout agree)
    if (const cudaError_t e = prepare<C>(); e != cudaSuccess) return e;
    GemvWgmmaMaps maps;
    if (!packed_tiles_tma_maps(w, uint64_t(w.n / 16), C::kTiles, &maps.codes, &maps.scales, &maps.biases))
        return cudaErrorInvalidValue;
    const int64_t row_blocks = (w.n + C::BM - 1) / C::BM;
    const dim3 grid(unsigned(row_blocks * C::KS));
    const bool vec2 = reinterpret_cast<uintptr_t>(x) % 8 == 0 && ldx % 2 == 0;
    const int gpt = int(kBK / w.group);
    const bool biases = w.biases != nullptr;
    if constexpr (C::KS == 1) {
        gemv_wgmma_kernel<C><<<grid, C::kThreads, smem, stream>>>(maps, y, ldy, x, ldx, int(T), w.n, w.k, KT, per,
                                                                   gpt, biases, vec2);
        return cudaGetLastError();
    } else {
        return pdl::launch_cluster_serial(gemv_wgmma_kernel<C>, grid, dim3(C::kThreads), smem, stream,
                                          dim3(C::KS, 1, 1), maps, y, ldy, x, ldx, int(T), w.n, w.k, KT, per, gpt,
                                          biases, vec2);
    }
}

template <int MT>
cudaError_t launch_mt(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream) {
    switch (plan.cluster) {
        case 1: return launch<GemvWgmmaTile<MT, 1>>(plan, y, ldy, x, ldx, T, w, stream);
        case 2: return launch<GemvWgmmaTile<MT, 2>>(plan, y, ldy, x, ldx, T, w, stream);
        case 4: return launch<GemvWgmmaTile<MT, 4>>(plan, y, ldy, x, ldx, T, w, stream);
        case 8: return launch<GemvWgmmaTile<MT, 8>>(plan, y, ldy, x, ldx, T, w, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace

cudaError_t launch_gemv_wgmma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                              const PackedMatrix& w, cudaStream_t stream) {
    if (!gemv_wgmma_fits(w, T, plan.mtiles, plan.cluster)) return cudaErrorInvalidValue;
    return plan.mtiles == 2 ? launch_mt<2>(plan, y, ldy, x, ldx, T, w, stream)
                            : launch_mt<1>(plan, y, ldy, x, ldx, T, w, stream);
}

}  // namespace tessera::cuda::fast::detail
