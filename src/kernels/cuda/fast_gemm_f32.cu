// fast::gemm_f32_tf32x3 (fast_gemm_f32.h): y = x · wᵀ, f32 operands, 3×TF32 on the warpgroup MMA.
//
// w's TF32 halves first (tf32_split_kernel: hi = w with its low 13 mantissa bits cleared, lo = w −
// hi, exact) into the caller's scratch. Then a block of one consumer warpgroup and a producer warp
// computes a 64 (tokens) × 72 (rows of w) tile of y: the producer asks TMA for each k-step's boxes
// — x's 64 × 32 floats, w_hi's and w_lo's 72 × 32, each row one 128-byte swizzle row (16-byte chunk
// c of row r at c ^ (r % 8)), rows and columns past the tensors read as zeros — into a ring of
// kStages stages on full / empty mbarriers. The consumers wait only for their stage: each warp loads
// its 16 rows of x's box as wgmma A fragments by ldmatrix (an m16n8k8 TF32 fragment is an 8 ×
// 4-float block's words: one x4 gives the four registers) and splits them in registers, then each
// k8 step issues three wgmma m64n72k8 tf32 — small += x_lo·w_hi, small += x_hi·w_lo, big +=
// x_hi·w_hi (two chains of dependent products, summed at the end: the same order every call, the
// same bits) — and a stage goes back to the producer once the next k-step's wgmma are issued and
// its own are waited for (the A registers of a k-step kept alive until then: two sets, their roles
// swapping a k-step).
//
// Measured (session 47, scripts/gpu/gemm_f32_check.cu, µs a call back to back, the router's 257 ×
// 2,048): H100 512 / 2,048 / 8,192 tokens 24.9 / 26.4 / 119.4 against cublasSgemm's (SIMT) 27.6 /
// 70.7 / 241.5 (at 16 / 64 / 128 tokens 23.0 / 24.5 / 24.7 against 12.8 / 12.4 / 17.6: few blocks,
// each walking all of K), and w's split 3.4 at 257 × 2,048 (a call's, in scratch). Session 48: K
// split over the grid where the tiles leave SMs idle (gemm_f32_split, parts summed in split order):
// the check's product alone 9.2 / 9.7 / 11.2 / 14.5 µs at 16 / 64 / 128 / 512 tokens against K
// whole's 23.4 / 24.9 / 25.0 / 24.9 (H100) — hence kGemmF32MinTokens 128. End to end (session 47),
// the flagship's prefill (H100, 2,048-token chunks) 44,029 against 42,768 tok/s at 8K (+2.9 %),
// 37,315 against 36,165 at 32K (+3.2 %). The forms it replaced,
// same card: mma.sync m16n8k8 in tiles of 64 × 32 (warps of 32 × 16, fragments by ldmatrix, copies
// by cp.async) 31.5 / 63.4 / 186.6 — 64 × 64 tiles 49.7 / 76.2 / 175.6; session 46's first form
// (scalar fragment loads) 34.3 / 69.3 / 212.3, level with cuBLAS end to end; the three products in
// one accumulator 77.0 / 86.5 / 231.4 (the chain of three dependent products a tile) — and the
// warpgroup MMA fed by cp.async with w split by the block a k-step, two block barriers a k-step
// (59.8 / 58.8 / 152.3: the k-steps' latency, ~0.9 µs each at one block an SM).
#include "kernels/cuda/fast_gemm_f32.h"

#include <cuda.h>  // CUtensorMap

#include <algorithm>

#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kBK = kGemmF32KStep;  // columns a k-step: a 128-byte row of floats

namespace wgt {
constexpr int BM = kGemmF32TileTokens, BN = kGemmF32TileRows, kStages = 6;  // (gemm_f32_split's tile)
constexpr int kConsumers = 128, kThreads = kConsumers + 32;
constexpr int kXTile = BM * 128, kWTile = BN * 128;  // bytes: rows of 32 floats
constexpr int kStage = kXTile + 2 * kWTile;          // x | w_hi | w_lo, each a whole number of 1 KB atoms
constexpr int kSmem = kStages * kStage + 1024 + 2 * kStages * 8;  // + alignment room, the mbarriers
static_assert(kXTile % 1024 == 0 && kWTile % 1024 == 0, "swizzle atoms stay aligned");
static_assert(BN == 72, "the wgmma wrapper's N (fast_wgmma.cuh: wgmma_m64n72k8_tf32_rs)");
struct Maps {
    CUtensorMap x, hi, lo;
};
// Byte offset of 16-byte chunk c of row r in a box of 128-byte rows in the 128-byte swizzle.
__device__ __forceinline__ uint32_t swz(int r, int c) { return uint32_t(r * 128 + ((c ^ (r & 7)) << 4)); }
}  // namespace wgt

// n4 groups of four floats.
__global__ void tf32_split_kernel(const float4* __restrict__ w, float4* __restrict__ hi, float4* __restrict__ lo,
                                  int64_t n4) {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n4; i += int64_t(gridDim.x) * blockDim.x) {
        const float4 v = w[i];
        uint4 h, l;
        dev::tf32_split(v.x, h.x, l.x);
        dev::tf32_split(v.y, h.y, l.y);
        dev::tf32_split(v.z, h.z, l.z);
        dev::tf32_split(v.w, h.w, l.w);
        hi[i] = *reinterpret_cast<const float4*>(&h);
        lo[i] = *reinterpret_cast<const float4*>(&l);
    }
}

// Split z = blockIdx.z of the grid takes k-steps [z·per, (z + 1)·per): with one split it writes y,
// with several its part of y to parts + z·T·N (rows N apart), summed in split order by
// split_sum_kernel.
__global__ void __launch_bounds__(wgt::kThreads) gemm_f32_tf32x3_tma_kernel(float* __restrict__ y, int64_t ldy,
                                                                           float* __restrict__ parts, int T, int N,
                                                                           int K, int per,
                                                                           const __grid_constant__ wgt::Maps maps) {
    using namespace wgt;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = dev::smem_addr(smem_raw);
    const uint32_t sb = (raw + 1023u) & ~1023u;
    uint8_t* const base = smem_raw + (sb - raw);
    uint64_t* const full = reinterpret_cast<uint64_t*>(base + kStages * kStage);
    uint64_t* const empty = full + kStages;
    const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
    const int m0 = int(blockIdx.x) * BM, n0 = int(blockIdx.y) * BN;
    const int k_first = int(blockIdx.z) * per;                           // this split's first k-step …
    const int n_k = min((K + kBK - 1) / kBK, k_first + per) - k_first;  // … and its count (≥ 1: the launch's)
    if (gridDim.z > 1) {  // this split's part of y
        y = parts + int64_t(blockIdx.z) * T * N;
        ldy = N;
    }
    if (tid == 0) {
        for (int s = 0; s < kStages; ++s) dev::mbar_init(&full[s], 1), dev::mbar_init(&empty[s], kConsumers);
        dev::fence_proxy_async_smem();
    }
    __syncthreads();

    if (warp == 4) {  // ---- producer: lane 0 asks for every k-step's three boxes ----
        if (lane != 0) return;
        for (int kt = 0; kt < n_k; ++kt) {
            const int st = kt % kStages;
            dev::mbar_wait(&empty[st], ((kt / kStages) & 1) ^ 1);
            const uint32_t xs = sb + uint32_t(st * kStage);
            dev::mbar_arrive_expect_tx(&full[st], uint32_t(kStage));
            const int k0 = (k_first + kt) * kBK;
            dev::tma_load_3d(xs, &maps.x, k0, m0, 0, &full[st]);
            dev::tma_load_3d(xs + kXTile, &maps.hi, k0, n0, 0, &full[st]);
            dev::tma_load_3d(xs + kXTile + kWTile, &maps.lo, k0, n0, 0, &full[st]);
        }
        return;
    }

    // ---- consumers ----
    float big[BN / 2] = {}, small[BN / 2] = {};  // hi·hi; lo·hi + hi·lo
    uint32_t a[2][4][2][4];                        // two k-steps' fragments: this one's and the last one's
    // ldmatrix rows: lanes 0–7 rows 0–7 and lanes 8–15 rows 8–15 of the warp's 16 at a k8 step's first
    // 16 bytes (a0, a1), lanes 16–31 the same rows at its second (a2, a3)
    const int r = 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), half = lane >> 4;
    auto step = [&](int kt, uint32_t(&cur)[4][2][4], uint32_t(&prev)[4][2][4]) {
        const int st = kt % kStages;
        dev::mbar_wait(&full[st], (kt / kStages) & 1);
        const uint32_t xs = sb + uint32_t(st * kStage);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t v[4];
            dev::ldsm_x4(v, xs + wgt::swz(r, 2 * j + half));  // four 8 × 4-float blocks: lane (g, t) word t of row g
#pragma unroll
            for (int e = 0; e < 4; ++e) dev::tf32_split(__uint_as_float(v[e]), cur[j][0][e], cur[j][1][e]);
        }
        const uint64_t dh = dev::wgmma_desc_sw128(xs + kXTile);
        const uint64_t dl = dev::wgmma_desc_sw128(xs + kXTile + kWTile);
        dev::wgmma_fence();
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            dev::wgmma_m64n72k8_tf32_rs(small, cur[j][1], dh + uint64_t(2 * j));
            dev::wgmma_m64n72k8_tf32_rs(small, cur[j][0], dl + uint64_t(2 * j));
            dev::wgmma_m64n72k8_tf32_rs(big, cur[j][0], dh + uint64_t(2 * j));
        }
        dev::wgmma_commit();
        dev::wgmma_wait<1>();  // k-step kt − 1's wgmma are done: its stage and A registers are free
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            dev::wgmma_fence_operands(prev[j][0]);
            dev::wgmma_fence_operands(prev[j][1]);
        }
        if (kt > 0) dev::mbar_arrive(&empty[(kt - 1) % kStages]);
    };
    for (int kt = 0; kt < n_k; kt += 2) {
        step(kt, a[0], a[1]);
        if (kt + 1 < n_k) step(kt + 1, a[1], a[0]);
    }
    dev::wgmma_wait<0>();
    dev::wgmma_fence_operands(small);
    dev::wgmma_fence_operands(big);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int rr = m0 + 16 * warp + gid + 8 * (e >> 1), c = n0 + 8 * i + 2 * tig + (e & 1);
            if (rr < T && c < N) y[int64_t(rr) * ldy + c] = big[4 * i + e] + small[4 * i + e];
        }
}

// y [T, ldy] = Σ_z parts[z] [T, N] in split order, an element a thread.
__global__ void split_sum_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ parts, int T, int N,
                                 int splits) {
    const int64_t n_all = int64_t(T) * N;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n_all; i += int64_t(gridDim.x) * blockDim.x) {
        float v = parts[i];
        for (int z = 1; z < splits; ++z) v += parts[int64_t(z) * n_all + i];
        y[(i / N) * ldy + i % N] = v;
    }
}

}  // namespace

cudaError_t launch_tf32_split(const float* w, float* hi, float* lo, int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    if (n % 4 != 0 || (reinterpret_cast<uintptr_t>(w) | reinterpret_cast<uintptr_t>(hi) |
                       reinterpret_cast<uintptr_t>(lo)) % 16 != 0)
        return cudaErrorInvalidValue;
    const int64_t n4 = n / 4;
    const unsigned blocks = unsigned(std::min<int64_t>((n4 + 255) / 256, 4096));
    tf32_split_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(w), reinterpret_cast<float4*>(hi),
                                                  reinterpret_cast<float4*>(lo), n4);
    return cudaGetLastError();
}

cudaError_t launch_gemm_f32_tf32x3_tma(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w_hi,
                                       const float* w_lo, int T, int N, int K, GemmF32Split split, float* parts,
                                       cudaStream_t stream) {
    const int n_k = int(gemm_f32_k_steps(K));
    if (split.splits < 1 || split.per < 1 || (split.splits - 1) * split.per >= n_k || split.splits * split.per < n_k ||
        (split.splits > 1 && !parts))
        return cudaErrorInvalidValue;  // (every split holds at least one k-step; together all of them)
    static const cudaError_t attr = cudaFuncSetAttribute(gemm_f32_tf32x3_tma_kernel,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, wgt::kSmem);
    if (attr != cudaSuccess) return attr;
    wgt::Maps maps;
    const uint32_t bx[3] = {uint32_t(kBK), uint32_t(wgt::BM), 1}, bw[3] = {uint32_t(kBK), uint32_t(wgt::BN), 1};
    const uint64_t dx[3] = {uint64_t(K), uint64_t(T), 1}, dw[3] = {uint64_t(K), uint64_t(N), 1};
    const uint64_t sx[2] = {uint64_t(ldx) * 4, uint64_t(ldx) * 4 * uint64_t(T)};
    const uint64_t sw[2] = {uint64_t(K) * 4, uint64_t(K) * 4 * uint64_t(N)};
    if (!tma_map_3d_sw128(&maps.x, false, x, dx, sx, bx) || !tma_map_3d_sw128(&maps.hi, false, w_hi, dw, sw, bw) ||
        !tma_map_3d_sw128(&maps.lo, false, w_lo, dw, sw, bw))
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned((T + wgt::BM - 1) / wgt::BM), unsigned((N + wgt::BN - 1) / wgt::BN),
                    unsigned(split.splits));
    gemm_f32_tf32x3_tma_kernel<<<grid, wgt::kThreads, wgt::kSmem, stream>>>(y, ldy, parts, T, N, K, split.per, maps);
    if (split.splits == 1) return cudaGetLastError();
    const int64_t n_all = int64_t(T) * N;
    const unsigned blocks = unsigned(std::min<int64_t>((n_all + 255) / 256, 4096));
    split_sum_kernel<<<blocks, 256, 0, stream>>>(y, ldy, parts, T, N, split.splits);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
