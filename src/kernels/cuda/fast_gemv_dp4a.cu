// The decode GEMV's variant Dp4a (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w and
// 1 ≤ T ≤ 8, on the integer dot-product units with x in two int8 limbs.
//
// Why. The tensor-core variants spend ~6 lane-instructions a weight turning nibbles into mma
// fragments (MmaRows: ~390 a 16-row × 128-column k-tile) — more than the H200 issues while its
// HBM delivers the weights (~3.5 a weight at 4.8 TB/s). dp4a takes the codes as they lie: a
// 32-bit word of 8 nibbles is two words of 4 bytes (`w & 0x0F0F0F0F`, `(w >> 4) & 0x0F0F0F0F`),
// each one dp4a against 4 int8 x values: ~1.3 instructions a weight here, all included.
//
// Accuracy. One int8 per x value (llama.cpp's q8_1) errs by up to amax/254 per value — ~1 % a
// matmul, which compounds through a model (fast_gemv_q8.h). Here x is split in two int8 limbs
// (fast_dp4a.cuh): |x − x̃| ≤ amax / 64516 per 32 columns, finer than the tensor-core variants'
// bf16 wherever |x| > amax / 126; each product exact in int32, the limbs joined in f32.
//
// Work. A 16-row × 128-column tile (packed_weight.h) is 1 KB: lane l of a warp reads its 32
// bytes — row l / 2, columns 64·(l % 2) … + 63, two 16-byte chunks (scale groups of 32) — and
// keeps that row for the whole K loop, so its sums need no shuffle until the end. A block of 8
// warps takes 8 / S row tiles, S warps splitting each one's k-tiles (interleaved, neighbours read
// neighbouring kilobytes): S = 8 for few rows (4096 × 14336: 256 blocks), S = 1 for the lm_head
// (K = 2048: a warp walks its row tile's 16 k-tiles alone, 128 rows a block). Tiles stream
// through registers two batches of two (ping_pong_tiles): up to 4 KB in flight a warp.
//
// x is quantized by each block into shared memory (dp4a_quantize_x: no extra launch, no scratch
// — graph-safe). The first weight tiles are loaded before pdl::wait, while the kernel before
// this one still runs. With plan.cluster = 8 the blocks run in clusters of 8 that quantize x
// once a cluster, each block an eighth of it stored into all 8 (distributed shared memory): for
// long rows (K = 14336: 7 passes of a block's 256 threads, one a cluster), where quantizing x
// in every block costs about as much as the weights it meets. Not picked: measured slower (H200,
// 4096 × 14336, 1 token, cold: 24.7 µs against 22.8 without; session 12). TESSERA_GEMV=
// dp4a_cluster, the bench and the tests run it.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = kGemvDp4aWarps, kThreads = kWarps * 32, kU = 2;

// Block: 8 / S row tiles, warp w on row tile w / S and k-tiles w % S, w % S + S, …
// CL: blocks a cluster sharing x's quantization (1: none).
template <int TT, bool BIAS, int CL>
__global__ void __launch_bounds__(kThreads)
    gemv_dp4a_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                     PackedMatrix w, int S, bool x_aligned) {
    extern __shared__ uint4 smem[];
    __shared__ float red[kWarps][TT][16];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int h = lane & 1, rw = lane >> 1;  // this lane's half (64 columns) and row of a tile
    const int K = int(w.k), nch = K / 32, nkt = (nch + 3) / 4;
    const int rt_block = kWarps / S, ks = warp % S;
    const int64_t row = (int64_t(blockIdx.x) * rt_block + warp / S) * 16 + rw;
    const bool rok = row < w.n;
    const int nj = ks < nkt ? (nkt - ks + S - 1) / S : 0;  // this warp's k-tiles

    const PackedLayout lay = packed_layout(w);
    const int gpt_lg = __ffs(w.group / 32) - 1;  // chunk → group: >> gpt_lg (G a power of two)
    const int64_t rr = rok ? row : 0;
    const uint8_t* const rp = w.codes + lay.code_row(rr);
    const uint16_t* const sp = w.scales + lay.scale_row(rr);
    const uint16_t* const bp = BIAS ? w.biases + lay.scale_row(rr) : nullptr;

    auto load = [&](Dp4aTile& tl, int j) {
        const int kt = ks + S * j;
        const bool kok = rok && j < nj;
        tl.s = tl.b = 0;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int ch = 4 * kt + 2 * h + c;
            const bool ok = kok && ch < nch;
            tl.q[c] = ok ? load_stream(rp + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
            const int64_t gi = lay.scale_group(ch >> gpt_lg);
            tl.s |= (ok ? uint32_t(__ldg(sp + gi)) : 0u) << (16 * c);
            tl.b |= (BIAS && ok ? uint32_t(__ldg(bp + gi)) : 0u) << (16 * c);
        }
    };
    // A cluster's blocks write into each other's shared memory only once all have started: this
    // block's arrival now, the wait just before its first remote write.
    if constexpr (CL > 1) asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
    Dp4aTile cur[kU], nxt[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) load(cur[u], u);
    pdl::wait();  // x comes from the kernel before
    pdl::trigger();

    if constexpr (CL == 1) {
        dp4a_quantize_x<kThreads>(x, ldx, T, K, x_aligned, smem);
        __syncthreads();
    } else {
        asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
        cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
        dp4a_quantize_x<kThreads, CL>(x, ldx, T, K, x_aligned, smem, cluster.block_rank());
        cluster.sync();  // every block's eighth is in every block; no remote access after this
    }
    const Dp4aX X = dp4a_x(smem, K, T);

    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[t] = 0.f;
    auto compute = [&](const Dp4aTile& tl, int j) {
        const int kt = ks + S * j;
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            if (t >= T) break;
            acc[t] += dp4a_tile_dot(tl, X, t, kt, h, BIAS);
        }
    };
    ping_pong_tiles(nj, cur, nxt, load, compute);

    // Lanes 2r and 2r + 1 hold row r's two halves; then the S warps of a row tile, in order.
#pragma unroll
    for (int t = 0; t < TT; ++t) {
        acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], 1);
        if (h == 0) red[warp][t][rw] = acc[t];
    }
    __syncthreads();
    const int r = int(threadIdx.x) & 15, tk = int(threadIdx.x) >> 4 & 7, rt = int(threadIdx.x) >> 7;
    // Threads (rt, tk, r) for rt < 2: two passes cover the 8 / S row tiles of a block when S = 1.
    for (int pass = rt; pass < rt_block; pass += 2) {
        const int64_t n = (int64_t(blockIdx.x) * rt_block + pass) * 16 + r;
        if (tk < T && n < w.n) {
            float s = 0.f;
            for (int q = 0; q < S; ++q) s += red[pass * S + q][tk][r];
            y[tk * ldy + n] = s;
        }
    }
}

template <int TT, int CL>
cudaError_t launch_tt(int S, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                      cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const size_t smem = size_t(gemv_dp4a_smem(w.k, T));
    auto* kernel = w.biases ? gemv_dp4a_kernel<TT, true, CL> : gemv_dp4a_kernel<TT, false, CL>;
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in[2] = {
        cudaFuncSetAttribute(gemv_dp4a_kernel<TT, false, CL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvDp4aMaxSmem)),
        cudaFuncSetAttribute(gemv_dp4a_kernel<TT, true, CL>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvDp4aMaxSmem))};
    if (opt_in[w.biases ? 1 : 0] != cudaSuccess) return opt_in[w.biases ? 1 : 0];
    const GemvPlan plan{GemvVariant::Dp4a, 1, S, CL};
    const dim3 grid(unsigned(gemv_grid_blocks(plan, w.n)));  // a multiple of CL
    if constexpr (CL == 1)
        return pdl::launch(kernel, grid, kThreads, smem, stream, y, ldy, x, ldx, int(T), w, S, aligned);
    else
        return pdl::launch_cluster(kernel, grid, kThreads, smem, stream, dim3(CL, 1, 1), y, ldy, x, ldx, int(T), w, S,
                                   aligned);
}

template <int CL>
cudaError_t launch_cl(int S, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                      cudaStream_t stream) {
    if (T <= 1) return launch_tt<1, CL>(S, y, ldy, x, ldx, T, w, stream);
    if (T <= 2) return launch_tt<2, CL>(S, y, ldy, x, ldx, T, w, stream);
    if (T <= 4) return launch_tt<4, CL>(S, y, ldy, x, ldx, T, w, stream);
    return launch_tt<8, CL>(S, y, ldy, x, ldx, T, w, stream);
}

}  // namespace

// Arguments checked by gemv_packed_plan (Int4, 1 ≤ T ≤ 8, gemv_dp4a_fits, S in 1, 2, 4, 8,
// cluster 1 or kGemvDp4aCluster).
cudaError_t launch_gemv_dp4a(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream) {
    if (plan.cluster == kGemvDp4aCluster) return launch_cl<kGemvDp4aCluster>(plan.splits, y, ldy, x, ldx, T, w, stream);
    return launch_cl<1>(plan.splits, y, ldy, x, ldx, T, w, stream);
}

int gemv_dp4a_resident_blocks(const PackedMatrix& w, int64_t T) {
    int per_sm = 0;
    auto* kernel = w.biases ? gemv_dp4a_kernel<1, true, 1> : gemv_dp4a_kernel<1, false, 1>;
    if (T > 1) kernel = w.biases ? gemv_dp4a_kernel<8, true, 1> : gemv_dp4a_kernel<8, false, 1>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvDp4aMaxSmem));
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, size_t(gemv_dp4a_smem(w.k, T))) !=
        cudaSuccess)
        return -1;
    return per_sm * gemv_sm_count();
}

}  // namespace tessera::cuda::fast::detail
