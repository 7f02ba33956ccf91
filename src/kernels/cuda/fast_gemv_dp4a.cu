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
// matmul, which compounds through a model (fast_gemv_q8.h). Here x, per token and 32 columns, is
//   x ≈ dx · (qh + ql / 254),   dx = amax / 127,  qh = rint(x / dx),  ql = rint((x / dx − qh) · 254)
// (|qh|, |ql| ≤ 127), so |x − x̃| ≤ dx / 508 = amax / 64516: ~16 bits against the block's largest
// value, finer than x in bf16 (the tensor-core variants' rounding: |x| / 512) wherever |x| is
// above amax / 126. Each product is exact in int32 and the limbs are joined in f32:
//   Σ_chunk w·x̃ = s · dx · (Σ code·qh + Σ code·ql / 254) + b · sx,   sx = dx · (Σ qh + Σ ql / 254)
// (b = −8·s without biases: Q4_0), which is the packed formula on x̃ up to f32 rounding.
//
// Work. A 16-row × 128-column tile (packed_weight.h) is 1 KB: lane l of a warp reads its 32
// bytes — row l / 2, columns 64·(l % 2) … + 63, two 16-byte chunks (scale groups of 32) — and
// keeps that row for the whole K loop, so its sums need no shuffle until the end. A block of 8
// warps takes 8 / S row tiles, S warps splitting each one's k-tiles (interleaved, neighbours read
// neighbouring kilobytes): S = 8 for few rows (4096 × 14336: 256 blocks), S = 1 for the lm_head
// (K = 2048: a warp walks its row tile's 16 k-tiles alone, 128 rows a block). Tiles stream
// through registers two batches of two (ping_pong_tiles): up to 4 KB in flight a warp.
//
// x is quantized by each block into shared memory (no extra launch, no scratch — graph-safe):
// per token the hi limbs [Kp] and lo limbs [Kp] as bytes in the order the nibbles unpack (per 8
// columns the even ones, then the odd ones: gemv_q8_x_slot), then (dx, sx) per 32 columns; Kp =
// K rounded up to 128, zero past K. The first weight tiles are loaded before pdl::wait, while
// the kernel before this one still runs.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = kGemvDp4aWarps, kThreads = kWarps * 32, kU = 2;
constexpr uint32_t kLow = 0x0F0F0F0Fu;
constexpr float kRound = 12582912.f;  // 1.5 · 2²³: x + kRound rounds x to an integer in its low bits

// A k-tile of a lane: its two 16-byte chunks, their scales and biases (f16 bits).
struct Tile {
    uint4 q[2];
    uint16_t s[2], b[2];
};

// The low bytes of four words, as one word (byte i from word i).
__device__ __forceinline__ uint32_t low_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
    return __byte_perm(__byte_perm(a, b, 0x0040u), __byte_perm(c, d, 0x0040u), 0x5410u);
}

// x[T, K] → the two limbs and (dx, sx) in shared memory. Thread item i: token i / (Kp/8), columns
// 8·j … 8·j + 7 (j = i % (Kp/8)); four neighbouring lanes hold one 32-column group.
__device__ __forceinline__ void quantize_x(const float* __restrict__ x, int64_t ldx, int T, int K, int Kp,
                                           bool x_aligned, uint8_t* __restrict__ xh, uint8_t* __restrict__ xl,
                                           float2* __restrict__ st) {
    const int items = T * (Kp / 8), per_tok = Kp / 8;
    for (int base = 0; base < items; base += kThreads) {  // whole warps: the shuffles need every lane
        const int i = base + int(threadIdx.x);
        const int t = i < items ? i / per_tok : 0, j = i - t * per_tok;
        const int c0 = 8 * j;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (i < items && c0 < K) {  // K is a multiple of 32: a group is all in or all out
            const float* p = x + t * ldx + c0;
            if (x_aligned) {
                const float4 a = __ldg(reinterpret_cast<const float4*>(p));
                const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
                v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
            } else {
#pragma unroll
                for (int e = 0; e < 8; ++e) v[e] = __ldg(p + e);
            }
        }
        float amax = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        // A non-finite value (fmaxf drops NaN: test the values, not amax) makes its group's dx NaN.
        int bad = 0;
#pragma unroll
        for (int e = 0; e < 8; ++e) bad |= !isfinite(v[e]);
        bad |= __shfl_xor_sync(0xffffffffu, bad, 1);
        bad |= __shfl_xor_sync(0xffffffffu, bad, 2);
        const bool finite = !bad;
        const float inv = amax > 0.f && finite ? 127.f / amax : 0.f;
        uint32_t hb[8], lb[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const float f = v[e] * inv;                           // |f| ≤ 127
            const float rh = f + kRound;                          // low byte: rint(f) as int8
            const float r = f - (rh - kRound);                    // |r| ≤ 1/2, exact
            hb[e] = __float_as_uint(rh);
            lb[e] = __float_as_uint(fmaf(r, 254.f, kRound));      // low byte: rint(254 r), |.| ≤ 127
        }
        // Slot order: the even columns' bytes, then the odd columns'.
        const uint2 H = make_uint2(low_bytes(hb[0], hb[2], hb[4], hb[6]), low_bytes(hb[1], hb[3], hb[5], hb[7]));
        const uint2 L = make_uint2(low_bytes(lb[0], lb[2], lb[4], lb[6]), low_bytes(lb[1], lb[3], lb[5], lb[7]));
        int sh = __dp4a(int(H.y), 0x01010101, __dp4a(int(H.x), 0x01010101, 0));
        int sl = __dp4a(int(L.y), 0x01010101, __dp4a(int(L.x), 0x01010101, 0));
        sh += __shfl_xor_sync(0xffffffffu, sh, 1);
        sh += __shfl_xor_sync(0xffffffffu, sh, 2);
        sl += __shfl_xor_sync(0xffffffffu, sl, 1);
        sl += __shfl_xor_sync(0xffffffffu, sl, 2);
        if (i < items) {
            *reinterpret_cast<uint2*>(xh + t * Kp + c0) = H;
            *reinterpret_cast<uint2*>(xl + t * Kp + c0) = L;
            if ((j & 3) == 0) {
                const float dx = finite ? amax / 127.f : quiet_nan();
                st[t * (Kp / 32) + j / 4] = make_float2(dx, dx * (float(sh) + float(sl) * (1.f / 254.f)));
            }
        }
    }
}

// Block: 8 / S row tiles, warp w on row tile w / S and k-tiles w % S, w % S + S, …
template <int TT, bool BIAS>
__global__ void __launch_bounds__(kThreads)
    gemv_dp4a_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                     PackedMatrix w, int S, bool x_aligned) {
    extern __shared__ uint4 smem[];
    __shared__ float red[kWarps][TT][16];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int h = lane & 1, rw = lane >> 1;  // this lane's half (64 columns) and row of a tile
    const int K = int(w.k), nch = K / 32, nkt = (nch + 3) / 4, Kp = nkt * 128;
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

    auto load = [&](Tile& tl, int j) {
        const int kt = ks + S * j;
        const bool kok = rok && j < nj;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int ch = 4 * kt + 2 * h + c;
            const bool ok = kok && ch < nch;
            tl.q[c] = ok ? load_stream(rp + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
            const int64_t gi = lay.scale_group(ch >> gpt_lg);
            tl.s[c] = ok ? __ldg(sp + gi) : uint16_t(0);
            tl.b[c] = BIAS && ok ? __ldg(bp + gi) : uint16_t(0);
        }
    };
    Tile cur[kU], nxt[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) load(cur[u], u);
    pdl::wait();  // x comes from the kernel before
    pdl::trigger();

    uint8_t* const xh = reinterpret_cast<uint8_t*>(smem);
    uint8_t* const xl = xh + T * Kp;
    const float2* const st = reinterpret_cast<const float2*>(xl + T * Kp);
    quantize_x(x, ldx, T, K, Kp, x_aligned, xh, xl, reinterpret_cast<float2*>(xl + T * Kp));
    __syncthreads();

    float acc[TT];
#pragma unroll
    for (int t = 0; t < TT; ++t) acc[t] = 0.f;

    auto compute = [&](const Tile& tl, int j) {
        const int kt = ks + S * j;
        uint32_t lo[8], hi[8];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const uint32_t wd[4] = {tl.q[c].x, tl.q[c].y, tl.q[c].z, tl.q[c].w};
#pragma unroll
            for (int i = 0; i < 4; ++i) lo[4 * c + i] = wd[i] & kLow, hi[4 * c + i] = (wd[i] >> 4) & kLow;
        }
        float sc[2], bi[2];
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            sc[c] = half_bits(tl.s[c]);
            bi[c] = BIAS ? half_bits(tl.b[c]) : -8.f * sc[c];
        }
        const int col = kt * 128 + 64 * h;
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            if (t >= T) break;
            const uint4* ph = reinterpret_cast<const uint4*>(xh + t * Kp + col);
            const uint4* pl = reinterpret_cast<const uint4*>(xl + t * Kp + col);
            const float4 s2 = *reinterpret_cast<const float4*>(st + t * (Kp / 32) + col / 32);  // two (dx, sx)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                int sh = 0, sl = 0;
#pragma unroll
                for (int q = 0; q < 2; ++q) {  // 16 bytes of x: two code words
                    const uint4 a = ph[2 * c + q], b = pl[2 * c + q];
                    const int i = 4 * c + 2 * q;
                    sh = __dp4a(int(lo[i]), int(a.x), sh), sh = __dp4a(int(hi[i]), int(a.y), sh);
                    sh = __dp4a(int(lo[i + 1]), int(a.z), sh), sh = __dp4a(int(hi[i + 1]), int(a.w), sh);
                    sl = __dp4a(int(lo[i]), int(b.x), sl), sl = __dp4a(int(hi[i]), int(b.y), sl);
                    sl = __dp4a(int(lo[i + 1]), int(b.z), sl), sl = __dp4a(int(hi[i + 1]), int(b.w), sl);
                }
                const float dx = c == 0 ? s2.x : s2.z, sx = c == 0 ? s2.y : s2.w;
                const float v = fmaf(float(sl), 1.f / 254.f, float(sh));
                acc[t] = fmaf(sc[c] * dx, v, fmaf(bi[c], sx, acc[t]));
            }
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

template <int TT>
cudaError_t launch_tt(int S, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                      cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const size_t smem = size_t(gemv_dp4a_smem(w.k, T));
    auto* kernel = w.biases ? gemv_dp4a_kernel<TT, true> : gemv_dp4a_kernel<TT, false>;
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in[2] = {
        cudaFuncSetAttribute(gemv_dp4a_kernel<TT, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvDp4aMaxSmem)),
        cudaFuncSetAttribute(gemv_dp4a_kernel<TT, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvDp4aMaxSmem))};
    if (opt_in[w.biases ? 1 : 0] != cudaSuccess) return opt_in[w.biases ? 1 : 0];
    const int64_t rows = int64_t(16) * (kWarps / S);
    return pdl::launch(kernel, dim3(unsigned((w.n + rows - 1) / rows)), kThreads, smem, stream, y, ldy, x, ldx,
                       int(T), w, S, aligned);
}

}  // namespace

// Arguments checked by gemv_packed_plan (Int4, 1 ≤ T ≤ 8, gemv_dp4a_fits, S in 1, 2, 4, 8).
cudaError_t launch_gemv_dp4a(int S, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const PackedMatrix& w, cudaStream_t stream) {
    if (T <= 1) return launch_tt<1>(S, y, ldy, x, ldx, T, w, stream);
    if (T <= 2) return launch_tt<2>(S, y, ldy, x, ldx, T, w, stream);
    if (T <= 4) return launch_tt<4>(S, y, ldy, x, ldx, T, w, stream);
    return launch_tt<8>(S, y, ldy, x, ldx, T, w, stream);
}

int gemv_dp4a_resident_blocks(const PackedMatrix& w, int64_t T) {
    int per_sm = 0;
    auto* kernel = w.biases ? gemv_dp4a_kernel<1, true> : gemv_dp4a_kernel<1, false>;
    if (T > 1) kernel = w.biases ? gemv_dp4a_kernel<8, true> : gemv_dp4a_kernel<8, false>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvDp4aMaxSmem));
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads, size_t(gemv_dp4a_smem(w.k, T))) !=
        cudaSuccess)
        return -1;
    return per_sm * gemv_sm_count();
}

}  // namespace tessera::cuda::fast::detail
