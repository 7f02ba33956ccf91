// fast::gemm_f32_tf32x3 (fast_gemm_f32.h): y = x · wᵀ, f32 operands, 3×TF32 on mma.sync m16n8k8.
//
// A block computes a BM (tokens) × BN (rows of w) tile of y, its warps a WM × WN part each (MT × NT
// m16n8 tiles). k-steps of 32 columns come through a ring of STAGES shared-memory tiles filled by
// cp.async (16 bytes a copy; chunks past T, N or K zero-filled), rows padded to 36 floats so that
// the 8 rows an ldmatrix reads fall on 32 different banks. The fragments arrive by ldmatrix (an
// m16n8k8 TF32 fragment is an 8 × 4-float block's words: one x4 gives A's four registers, or two
// n-tiles' B), each operand is split into its TF32 hi and lo halves (two instructions), and each
// tile takes lo·hi and hi·lo into one f32 accumulator and hi·hi into another (two chains of
// dependent products, not three in one), summed at the end — the same order every call: the same
// bits.
//
// Configurations (launch_gemm_f32_tf32x3_config; the launch takes kGemmF32Default): 0 tiles of 64 ×
// 32, warps of 32 × 16; 1 tiles of 64 × 64, warps of 32 × 32. H100 (session 47, gemm_f32_check.cu),
// the router's 257 × 2,048 at 512 / 2,048 / 8,192 tokens, µs: config 0 31.4 / 63.2 / 187.2, config 1
// 50.4 / 75.4 / 177.4, cublasSgemm 27.6 / 69.9 / 233.1 (session 46's first form, one ldmatrix-free
// k-step loop: 34.3 / 69.3 / 212.3). Tried and dropped there: warps of 64 × 32 (73.8 / 84.4 / 238.5,
// two warps a block), of 32 × 32 four warps along m (48.5 / 75.7 / 191.2) or two (40.4 / 70.2 /
// 204.2), of 16 × 32 (36.3 / 67.8 / 219.0); the three products in one accumulator, and the copies in
// a loop over both operands with a branch a chunk (77.0 / 86.5 / 231.4 at config 0: the chain of
// three dependent products a tile, and ~300 instructions of copy issue a k-step).
//
// What would pay (not written): the warpgroup MMA's TF32 (wgmma m64nNk8, both operands K-major as
// x [T, K] and w [N, K] lie; a k-step of 32 floats is one 128-byte swizzle row, as a bf16 k-step of
// 64) at ~2–3× mma.sync's rate. If the tensor cores read a TF32 operand from f32 bits ignoring the
// low 13 (to be checked: this file truncates hi explicitly), x and w serve as their own hi halves
// from shared memory, w's lo halves are a second weight array made at load (the router's 2 MB a
// layer), and only x's lo needs computing a block.
#include "kernels/cuda/fast_gemm_f32.h"
#include "kernels/cuda/fast_mma.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kBK = 32;       // columns a k-step
constexpr int kLd = kBK + 4;  // floats a shared row: row r at bank 4r, so 8 rows of 4 words cover 32 banks

// Four 8 × 4-float blocks (32-bit words) from shared memory, lanes 8i … 8i + 7 the rows of block i;
// lane (g, t) receives word t of row g of each. Not volatile: the scheduler may move it.
__device__ __forceinline__ void ldsm4(uint32_t (&r)[4], uint32_t addr) {
    asm("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(addr));
}
__device__ __forceinline__ void mma_tf32_nv(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void split(uint32_t x, uint32_t& hi, uint32_t& lo) {
    dev::tf32_split(__uint_as_float(x), hi, lo);
}

template <int WM_, int WN_, int WARPS_M_, int WARPS_N_, int STAGES_>
struct Cfg {
    static constexpr int WM = WM_, WN = WN_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_, STAGES = STAGES_;
    static constexpr int BM = WM * WARPS_M, BN = WN * WARPS_N, kThreads = 32 * WARPS_M * WARPS_N;
    static constexpr int MT = WM / 16, NT = WN / 8;
    static constexpr int kSmem = STAGES * (BM + BN) * kLd * 4;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "whole m16 tiles and pairs of n8 tiles a warp");
};

template <class C>
__global__ void __launch_bounds__(C::kThreads) gemm_f32_tf32x3_kernel(float* __restrict__ y, int64_t ldy,
                                                                      const float* __restrict__ x, int64_t ldx,
                                                                      const float* __restrict__ w, int T, int N,
                                                                      int K) {
    extern __shared__ __align__(16) float smem[];
    float* const xs = smem;                                // [STAGES][BM][kLd]
    float* const ws = smem + C::STAGES * C::BM * kLd;      // [STAGES][BN][kLd]
    const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
    const int m0 = int(blockIdx.x) * C::BM, n0 = int(blockIdx.y) * C::BN;
    const int wm = (warp % C::WARPS_M) * C::WM, wn = (warp / C::WARPS_M) * C::WN;
    const int n_k = (K + kBK - 1) / kBK;

    // k-step kt into stage st: x's BM × 8 chunks of 4 floats, w's BN × 8 — chunk c = tid + j·threads
    // of each, row c / 8, its four columns 4·(c % 8) on (K % 4 == 0: a chunk is all in or all out).
    constexpr int kXChunks = C::BM * 8 / C::kThreads, kWChunks = C::BN * 8 / C::kThreads;
    static_assert(kXChunks * C::kThreads == C::BM * 8 && kWChunks * C::kThreads == C::BN * 8, "whole chunks a thread");
    const int cc = 4 * (tid & 7), cr = tid >> 3;  // this thread's column and first row
    constexpr int kRowStep = C::kThreads / 8;
    auto load = [&](int st, int kt) {
        const int k = kt * kBK + cc;
        const bool k_ok = k < K;
        const float* xp = x + int64_t(m0 + cr) * ldx + k;
        const uint32_t xd = dev::smem_addr(xs + (st * C::BM + cr) * kLd + cc);
#pragma unroll
        for (int j = 0; j < kXChunks; ++j) {
            const bool ok = k_ok && m0 + cr + j * kRowStep < T;
            dev::cp_async16(xd + uint32_t(j * kRowStep * kLd * 4), ok ? xp + int64_t(j * kRowStep) * ldx : x, ok);
        }
        const float* wp = w + int64_t(n0 + cr) * K + k;
        const uint32_t wd = dev::smem_addr(ws + (st * C::BN + cr) * kLd + cc);
#pragma unroll
        for (int j = 0; j < kWChunks; ++j) {
            const bool ok = k_ok && n0 + cr + j * kRowStep < N;
            dev::cp_async16(wd + uint32_t(j * kRowStep * kLd * 4), ok ? wp + int64_t(j * kRowStep) * K : w, ok);
        }
    };

    float big[C::MT][C::NT][4] = {}, small[C::MT][C::NT][4] = {};  // hi·hi; lo·hi + hi·lo
#pragma unroll
    for (int s = 0; s < C::STAGES - 1; ++s) {
        if (s < n_k) load(s, s);
        dev::cp_async_commit();
    }
    // ldmatrix rows of this lane: A (x) blocks (rows 0–7 | 8–15) × (words 0–3 | 4–7) in a0..a3's
    // order; B (w) blocks (n-tile 0 words 0–3 | 4–7, n-tile 1 …) in b0, b1 of each n-tile.
    const int a_row = (lane & 7) + 8 * ((lane >> 3) & 1), a_col = 4 * (lane >> 4);
    const int b_row = (lane & 7) + 8 * (lane >> 4), b_col = 4 * ((lane >> 3) & 1);
    for (int kt = 0; kt < n_k; ++kt) {
        dev::cp_async_wait<C::STAGES - 2>();  // k-step kt has landed (this thread's copies) …
        __syncthreads();                      // … everyone's; and k-step kt − 1's stage is free
        if (kt + C::STAGES - 1 < n_k) load((kt + C::STAGES - 1) % C::STAGES, kt + C::STAGES - 1);
        dev::cp_async_commit();
        const int st = kt % C::STAGES;
        const uint32_t xa = dev::smem_addr(xs + (st * C::BM + wm + a_row) * kLd + a_col);
        const uint32_t wa = dev::smem_addr(ws + (st * C::BN + wn + b_row) * kLd + b_col);
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 8) {
            uint32_t ah[C::MT][4], al[C::MT][4], bh[C::NT][2], bl[C::NT][2];
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt) {
                uint32_t r[4];
                ldsm4(r, xa + uint32_t((16 * mt * kLd + kk) * 4));
#pragma unroll
                for (int e = 0; e < 4; ++e) split(r[e], ah[mt][e], al[mt][e]);
            }
#pragma unroll
            for (int np = 0; np < C::NT / 2; ++np) {
                uint32_t r[4];
                ldsm4(r, wa + uint32_t((16 * np * kLd + kk) * 4));
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    split(r[e], bh[2 * np][e], bl[2 * np][e]);
                    split(r[2 + e], bh[2 * np + 1][e], bl[2 * np + 1][e]);
                }
            }
#pragma unroll
            for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
                for (int nt = 0; nt < C::NT; ++nt) {
                    mma_tf32_nv(small[mt][nt], al[mt], bh[nt][0], bh[nt][1]);
                    mma_tf32_nv(small[mt][nt], ah[mt], bl[nt][0], bl[nt][1]);
                    mma_tf32_nv(big[mt][nt], ah[mt], bh[nt][0], bh[nt][1]);
                }
        }
    }
    // c = C(g, 2t), C(g, 2t + 1), C(g + 8, 2t), C(g + 8, 2t + 1) of each m16n8 tile
#pragma unroll
    for (int mt = 0; mt < C::MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < C::NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = m0 + wm + 16 * mt + gid + 8 * (e >> 1), c = n0 + wn + 8 * nt + 2 * tig + (e & 1);
                if (r < T && c < N) y[int64_t(r) * ldy + c] = big[mt][nt][e] + small[mt][nt][e];
            }
}

template <class C>
cudaError_t launch_cfg(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int T, int N, int K,
                       cudaStream_t stream) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(gemm_f32_tf32x3_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid(unsigned((T + C::BM - 1) / C::BM), unsigned((N + C::BN - 1) / C::BN));
    gemm_f32_tf32x3_kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(y, ldy, x, ldx, w, T, N, K);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemm_f32_tf32x3_config(int config, float* y, int64_t ldy, const float* x, int64_t ldx,
                                          const float* w, int T, int N, int K, cudaStream_t stream) {
    switch (config) {
        case 0: return launch_cfg<Cfg<32, 16, 2, 2, 3>>(y, ldy, x, ldx, w, T, N, K, stream);  // 64 × 32
        case 1: return launch_cfg<Cfg<32, 32, 2, 2, 3>>(y, ldy, x, ldx, w, T, N, K, stream);  // 64 × 64
        default: return cudaErrorInvalidValue;
    }
}

cudaError_t launch_gemm_f32_tf32x3(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int T, int N,
                                   int K, cudaStream_t stream) {
    return launch_gemm_f32_tf32x3_config(kGemmF32Default, y, ldy, x, ldx, w, T, N, K, stream);
}

}  // namespace tessera::cuda::fast::detail
