// fast::gemm_f32_tf32x3 (fast_gemm_f32.h): y = x · wᵀ, f32 operands, 3×TF32 on mma.sync m16n8k8.
//
// A block computes a 64 (tokens) × 32 (rows of w) tile of y: its 4 warps a 32 × 16 quarter each
// (two m-tiles × two n-tiles of m16n8). k-steps of 32 columns come through a 3-stage ring of
// shared-memory tiles filled by cp.async (16 bytes a copy; chunks past T, N or K zero-filled), rows
// padded to 36 floats so that a fragment's 32 lanes read 32 banks. A warp splits each operand it
// reads into its TF32 hi and lo halves (two instructions) and issues, per m16n8 tile and k8, the
// small products (lo·hi, hi·lo) into one accumulator and hi·hi into another — summed once at the end
// (the same order every call: the same bits).
#include "kernels/cuda/fast_gemm_f32.h"
#include "kernels/cuda/fast_mma.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kBM = 64, kBN = 32, kBK = 32;  // tile of y, k-step
constexpr int kLd = kBK + 4;                 // floats a shared row: (4·row + col) mod 32 banks
constexpr int kStages = 3;
constexpr int kThreads = 128;  // 4 warps: 2 along m (32 tokens each) × 2 along n (16 rows each)

struct __align__(16) Tiles {
    float x[kStages][kBM][kLd];
    float w[kStages][kBN][kLd];
};
static_assert(sizeof(Tiles) <= 48 * 1024, "static shared memory");

__global__ void __launch_bounds__(kThreads) gemm_f32_tf32x3_kernel(float* __restrict__ y, int64_t ldy,
                                                                   const float* __restrict__ x, int64_t ldx,
                                                                   const float* __restrict__ w, int T, int N, int K) {
    __shared__ Tiles sm;
    const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
    const int m0 = int(blockIdx.x) * kBM, n0 = int(blockIdx.y) * kBN;
    const int wm = (warp & 1) * 32, wn = (warp >> 1) * 16;
    const int n_k = (K + kBK - 1) / kBK;

    // k-step kt into stage st: x's 64 × 8 chunks of 4 floats (4 a thread), w's 32 × 8 (2 a thread).
    auto load = [&](int st, int kt) {
        const int k0 = kt * kBK;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int c = tid + i * kThreads, r = c >> 3, k = k0 + (c & 7) * 4;
            const bool ok = m0 + r < T && k < K;  // K % 4 == 0: a chunk is all in or all out
            dev::cp_async16(dev::smem_addr(&sm.x[st][r][(c & 7) * 4]), ok ? x + int64_t(m0 + r) * ldx + k : x, ok);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            const int c = tid + i * kThreads, r = c >> 3, k = k0 + (c & 7) * 4;
            const bool ok = n0 + r < N && k < K;
            dev::cp_async16(dev::smem_addr(&sm.w[st][r][(c & 7) * 4]), ok ? w + int64_t(n0 + r) * K + k : w, ok);
        }
    };

    float big[2][2][4] = {}, small[2][2][4] = {};  // [m-tile][n-tile][m16n8 accumulator]
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < n_k) load(s, s);
        dev::cp_async_commit();
    }
    for (int kt = 0; kt < n_k; ++kt) {
        dev::cp_async_wait<kStages - 2>();  // k-step kt has landed (this thread's copies) …
        __syncthreads();                    // … everyone's; and k-step kt − 1's stage is free
        if (kt + kStages - 1 < n_k) load((kt + kStages - 1) % kStages, kt + kStages - 1);
        dev::cp_async_commit();
        const int st = kt % kStages;
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 8) {
            uint32_t ah[2][4], al[2][4], bh[2][2], bl[2][2];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {  // a = A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4)
                const float* r0 = sm.x[st][wm + 16 * mt + gid];
                const float* r8 = sm.x[st][wm + 16 * mt + gid + 8];
                dev::tf32_split(r0[kk + tig], ah[mt][0], al[mt][0]);
                dev::tf32_split(r8[kk + tig], ah[mt][1], al[mt][1]);
                dev::tf32_split(r0[kk + tig + 4], ah[mt][2], al[mt][2]);
                dev::tf32_split(r8[kk + tig + 4], ah[mt][3], al[mt][3]);
            }
#pragma unroll
            for (int nt = 0; nt < 2; ++nt) {  // b = B(t, g), B(t + 4, g) with B(k, n) = w(n, k)
                const float* rn = sm.w[st][wn + 8 * nt + gid];
                dev::tf32_split(rn[kk + tig], bh[nt][0], bl[nt][0]);
                dev::tf32_split(rn[kk + tig + 4], bh[nt][1], bl[nt][1]);
            }
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
                for (int nt = 0; nt < 2; ++nt) {
                    dev::mma_tf32(small[mt][nt], al[mt], bh[nt]);
                    dev::mma_tf32(small[mt][nt], ah[mt], bl[nt]);
                    dev::mma_tf32(big[mt][nt], ah[mt], bh[nt]);
                }
        }
    }
    // c = C(g, 2t), C(g, 2t + 1), C(g + 8, 2t), C(g + 8, 2t + 1) of each m16n8 tile
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = m0 + wm + 16 * mt + gid + 8 * (e >> 1), c = n0 + wn + 8 * nt + 2 * tig + (e & 1);
                if (r < T && c < N) y[int64_t(r) * ldy + c] = big[mt][nt][e] + small[mt][nt][e];
            }
}

}  // namespace

cudaError_t launch_gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int T, int N,
                                   int K, cudaStream_t stream) {
    const dim3 grid(unsigned((T + kBM - 1) / kBM), unsigned((N + kBN - 1) / kBN));
    gemm_f32_tf32x3_kernel<<<grid, kThreads, 0, stream>>>(y, ldy, x, ldx, w, T, N, K);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
