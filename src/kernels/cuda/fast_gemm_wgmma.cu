// Prefill GEMM on Hopper's warpgroup MMA: y[T, N] = x[T, K] · w[N, K]ᵀ with w packed Int4
// (packed_weight.h), wgmma.mma_async m64nBNk16 bf16 → f32 (fast_wgmma.cuh). The roles are the
// transpose of fast_gemm.cu's: the weights are wgmma's A, dequantized straight into the A
// registers (64 weight rows a warpgroup), and x is B, read by the tensor cores from shared memory
// (BN tokens); D [weight rows, tokens] is stored transposed into y.
//
// A block: WG warpgroups (64·WG weight rows) × BN tokens, k in tiles of 128 through a cp.async
// pipeline of STAGES slots; a slot holds the x tile as two 64-column k-blocks in the 128-byte
// swizzle (each token's 64 k values one 128-byte row) and the weights' codes [64·WG rows, 64 bytes].
// Each k-tile runs as two halves (its two k-blocks): dequantize the half's 4 k-steps into one of
// two A register sets, fence, issue 4 wgmma, commit, and wait until only this group is in flight —
// so the tensor cores work on one half while the warps dequantize the next.
//
// The k pairing, the activations' "wgmma order" and the B tile's layout: fast_wgmma_int4.cuh
// (x is converted into that order by convert_x_wgmma_kernel).
#include "kernels/cuda/fast_gemm.h"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"

#include <cstdint>

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;  // k per pipeline stage

template <int WG_, int BN_, int STAGES_>
struct WTile {
    static constexpr int BM = 64 * WG_;  // weight rows a block: WG_ warpgroups of 64
    static constexpr int BN = BN_;       // tokens a block
    static constexpr int STAGES = STAGES_;
    static constexpr int kThreads = 128 * WG_;
    static constexpr int kXBlockBytes = BN * 128;  // one 64-column k-block of x
    static constexpr int kXBytes = 2 * kXBlockBytes;
    static constexpr int kWBytes = BM * 64;
    static constexpr int kStageBytes = kXBytes + kWBytes;
    static constexpr int kSmem = STAGES * kStageBytes + 1024;  // + room to align the base to 1024
    static_assert(BN % 8 == 0 && kStageBytes % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
    static_assert(STAGES >= 3, "the slot refilled is two k-tiles behind");
    static_assert(kSmem <= 227 * 1024, "shared memory");
};

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) gemm_wgmma_kernel(GemmArgs p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    constexpr int BN = C::BN, S = C::STAGES;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int64_t n0 = int64_t(blockIdx.x) * C::BM, m0 = int64_t(blockIdx.y) * BN;  // weight row, token
    const int64_t T = p.T, N = p.w.n, K = p.w.k;
    const int64_t K128 = wgmma_row_len(K);  // the x pass's row length
    const int KT = int(K128 / kBK);
    const int per_split = (KT + int(gridDim.z) - 1) / int(gridDim.z);
    const int kt0 = int(blockIdx.z) * per_split;
    const int nkt = KT - kt0 < per_split ? KT - kt0 : per_split;

    // Copies of a stage. x: 16 chunks a token (chunk c → k-block c / 8, swizzled chunk (c % 8) ^ r);
    // a thread takes chunk column x_c of tokens x_r0, x_r0 + step, ... (steps of 8 rows: one swizzle).
    constexpr int kXIters = BN * 16 / C::kThreads, kXRowStep = C::kThreads / 16;
    static_assert(BN * 16 % C::kThreads == 0 && kXRowStep % 8 == 0, "x copy split");
    const int x_c = tid % 16, x_r0 = tid / 16;
    const int x_dst = wgmma_b_offset(x_r0, x_c, BN);
    const uint8_t* xbytes = reinterpret_cast<const uint8_t*>(p.xb);
    const uint8_t* x_src = xbytes + (m0 + x_r0) * K128 * 2 + 16 * x_c;
    uint32_t x_rows_ok = 0;
#pragma unroll
    for (int k = 0; k < kXIters; ++k) x_rows_ok |= uint32_t(m0 + x_r0 + k * kXRowStep < T) << k;
    // Codes: 4 chunks (32 columns each) a row and k-tile.
    constexpr int kWIters = C::BM * 4 / C::kThreads, kWRowStep = C::kThreads / 4;
    static_assert(kWRowStep % 16 == 0, "row steps of whole 16-row tiles");
    const int w_c = tid % 4, w_r0 = tid / 4;
    const PackedLayout lay = packed_layout(p.w);
    const uint8_t* w_src = p.w.codes + lay.code_row(n0 + w_r0);
    const int64_t w_step = lay.code_row(n0 + w_r0 + kWRowStep) - lay.code_row(n0 + w_r0);
    uint32_t w_rows_ok = 0;
#pragma unroll
    for (int k = 0; k < kWIters; ++k) w_rows_ok |= uint32_t(n0 + w_r0 + k * kWRowStep < N) << k;
    const int w_dst = C::kXBytes + w_r0 * 64 + w_c * 16;
    auto load_stage = [&](int slot, int kt) {
        const uint32_t base = smem_addr(smem + slot * C::kStageBytes);
#pragma unroll
        for (int k = 0; k < kXIters; ++k) {
            const bool ok = (x_rows_ok >> k) & 1;
            cp_async16(base + x_dst + k * kXRowStep * 128,
                       ok ? x_src + int64_t(kt) * kBK * 2 + int64_t(k) * kXRowStep * K128 * 2 : xbytes, ok);
        }
        const bool col_ok = int64_t(kt) * kBK + 32 * w_c < K;
#pragma unroll
        for (int k = 0; k < kWIters; ++k) {
            const bool ok = col_ok && ((w_rows_ok >> k) & 1);
            cp_async16(base + w_dst + k * kWRowStep * 64,
                       ok ? w_src + lay.chunk(int64_t(kt) * 4 + w_c) + k * w_step : p.w.codes, ok);
        }
    };

    // This lane's two weight rows (g and g + 8 of its warp's 16) and their scales (biases), raw f16,
    // for k-tile kt; 0 past N or K.
    const int wg = warp / 4, wq = warp % 4;
    const int lrow = wg * 64 + wq * 16 + g;  // the row in the block
    const int lg_group = __ffs(p.w.group) - 1;
    int64_t s_row_at[2];
    uint32_t s_rows_ok = 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        s_row_at[h] = lay.scale_row(n0 + lrow + 8 * h);
        s_rows_ok |= uint32_t(n0 + lrow + 8 * h < N) << h;
    }
    auto load_scales = [&](int kt, uint16_t (&s)[2], uint16_t (&b)[2]) {
        const int64_t col = int64_t(kt) * kBK + 32 * t;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const bool ok = ((s_rows_ok >> h) & 1) && col < K;
            const int64_t at = s_row_at[h] + lay.scale_group(col >> lg_group);
            s[h] = ok ? p.w.scales[at] : uint16_t(0);
            b[h] = ok && p.w.biases ? p.w.biases[at] : uint16_t(0);
        }
    };
    const uint32_t negc = p.w.biases ? 0xc300c300u : 0xc308c308u;  // −128 or −136 as bf16x2

    float acc[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

#pragma unroll
    for (int s = 0; s < S - 2; ++s) {
        if (s < nkt) load_stage(s, kt0 + s);
        cp_async_commit();
    }
    uint16_t sc_raw[2] = {0, 0}, bi_raw[2] = {0, 0};
    if (nkt > 0) load_scales(kt0, sc_raw, bi_raw);

    for (int i = 0; i < nkt; ++i) {
        cp_async_wait<S - 3>();    // k-tile i has landed (this thread's copies)
        fence_proxy_async_smem();  // ... visible to the tensor cores' reads
        __syncthreads();           // ... and everyone's; k-tile i − 2's wgmma are done everywhere
        {
            const int nk = i + S - 2;
            if (nk < nkt) load_stage(nk % S, kt0 + nk);
            cp_async_commit();
        }
        uint32_t s2[2], b2[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) s2[h] = f16_to_bf16x2(sc_raw[h]), b2[h] = f16_to_bf16x2(bi_raw[h]);
        if (i + 1 < nkt) load_scales(kt0 + i + 1, sc_raw, bi_raw);  // lands while this tile computes

        const uint8_t* stage = smem + (i % S) * C::kStageBytes;
        const uint4 q0 = *reinterpret_cast<const uint4*>(stage + C::kXBytes + lrow * 64 + t * 16);
        const uint4 q1 = *reinterpret_cast<const uint4*>(stage + C::kXBytes + (lrow + 8) * 64 + t * 16);
        wgmma_int4_ktile<BN>(acc, q0, q1, s2, b2, negc, wgmma_desc_sw128(smem_addr(stage)), C::kXBlockBytes);
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    cp_async_wait<0>();  // only empty groups can be pending; leave clean

    // D (row g | g + 8 of the warp's 16, tokens 8i + 2t, 8i + 2t + 1) → y[token, row].
    const bool split = gridDim.z > 1;
#pragma unroll
    for (int i = 0; i < BN / 8; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int64_t row = n0 + lrow + 8 * (e >> 1), tok = m0 + 8 * i + 2 * t + (e & 1);
            if (row >= N || tok >= T) continue;
            float* out = p.y + tok * p.ldy + row;
            if (split) atomicAdd(out, acc[4 * i + e]);  // y zeroed; 0 + a + b = 0 + b + a: deterministic
            else *out = acc[4 * i + e];
        }
}

// x [T, K] f32 → xb [T, K128] bf16 in the wgmma order (zeros past K). A thread takes one k-step
// of a row's k-tile (wgmma_store_kstep): 8 lanes a k-tile, a warp 1 KB of contiguous stores.
__global__ void convert_x_wgmma_kernel(uint32_t* __restrict__ xb, const float* __restrict__ x, int64_t ldx,
                                       int64_t T, int64_t K, bool vec2) {
    const int64_t K128 = wgmma_row_len(K), per_row = K128 / 16, n = T * per_row;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, q = i - r * per_row;  // row r, k-step q of it (k-tile q / 8)
        wgmma_store_kstep(xb + r * (K128 / 2) + (q >> 3) * (kWgmmaK / 2), x + r * ldx, (q >> 3) * kWgmmaK, K,
                          int(q & 7), vec2);
    }
}

// The same values k-block-major — xb [K128 / 64][T][64]: k-step σ of row r's k-tile kt is 32
// bytes of k-block 2kt + σ / 4, at (σ mod 4)·32 in that k-block's 128 bytes of the row.
__global__ void convert_x_wgmma_kblocks_kernel(uint32_t* __restrict__ xb, const float* __restrict__ x, int64_t ldx,
                                               int64_t T, int64_t K, bool vec2) {
    const int64_t K128 = wgmma_row_len(K), per_row = K128 / 16, n = T * per_row;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, q = i - r * per_row;  // row r, k-step q of it (k-tile q / 8)
        const int sigma = int(q & 7);
        uint4 lo, hi;
        wgmma_kstep_words(x + r * ldx, (q >> 3) * kWgmmaK, K, sigma, vec2, lo, hi);
        const int64_t kb = 2 * (q >> 3) + (sigma >> 2);
        uint4* out = reinterpret_cast<uint4*>(xb + (kb * T + r) * 32 + (sigma & 3) * 8);
        out[0] = lo;
        out[1] = hi;
    }
}

template <class C>
cudaError_t prepare() {
    static const cudaError_t err =
        cudaFuncSetAttribute(gemm_wgmma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    return err;
}

template <class C>
cudaError_t launch(const GemmArgs& a, cudaStream_t stream) {
    if (const cudaError_t e = prepare<C>(); e != cudaSuccess) return e;
    const dim3 grid(unsigned((a.w.n + C::BM - 1) / C::BM), unsigned((a.T + C::BN - 1) / C::BN), unsigned(a.splits));
    gemm_wgmma_kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(a);
    return cudaGetLastError();
}

template <class C>
int blocks_per_sm() {
    static const int n = occupancy_blocks(prepare<C>(), gemm_wgmma_kernel<C>, C::kThreads, C::kSmem);
    return n;
}

// A wgmma configuration of kGemmConfigs as a WTile (bm = tokens = BN, bn = weight rows = 64·WG).
template <class Fn>
cudaError_t with_tile(const GemmConfig& c, Fn&& fn) {
    if (c.bm == 128 && c.bn == 128 && c.stages == 4) return fn(WTile<2, 128, 4>{});
    if (c.bm == 256 && c.bn == 128 && c.stages == 3) return fn(WTile<2, 256, 3>{});
    if (c.bm == 64 && c.bn == 128 && c.stages == 4) return fn(WTile<2, 64, 4>{});
    if (c.bm == 128 && c.bn == 256 && c.stages == 4) return fn(WTile<4, 128, 4>{});
    return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_convert_x_wgmma(uint16_t* xb, const float* x, int64_t ldx, int64_t T, int64_t K,
                                   cudaStream_t stream, bool kblocks) {
    constexpr int threads = 256;
    const int64_t n = T * (wgmma_row_len(K) / 16);
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 8192) blocks = 8192;
    if (blocks == 0) return cudaSuccess;
    const bool vec = reinterpret_cast<uintptr_t>(x) % 8 == 0 && ldx % 2 == 0;
    auto* out = reinterpret_cast<uint32_t*>(xb);
    if (kblocks)
        convert_x_wgmma_kblocks_kernel<<<unsigned(blocks), threads, 0, stream>>>(out, x, ldx, T, K, vec);
    else
        convert_x_wgmma_kernel<<<unsigned(blocks), threads, 0, stream>>>(out, x, ldx, T, K, vec);
    return cudaGetLastError();
}

cudaError_t launch_gemm_wgmma(int config, const GemmArgs& a, cudaStream_t stream) {
    if (a.w.kind != PackedKind::Int4) return cudaErrorInvalidValue;
    return with_tile(kGemmConfigs[config], [&](auto tile) { return launch<decltype(tile)>(a, stream); });
}

int gemm_wgmma_blocks_per_sm(int config, PackedKind kind) {
    if (kind != PackedKind::Int4) return 0;
    int n = 0;
    const cudaError_t e = with_tile(kGemmConfigs[config], [&](auto tile) {
        n = blocks_per_sm<decltype(tile)>();
        return cudaSuccess;
    });
    return e == cudaSuccess ? n : 0;
}

}  // namespace tessera::cuda::fast::detail
