// The decode GEMV's variant MmaChunks (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w
// and T ≤ 2, on the tensor cores with the mma's 8 columns spent on scale groups, not tokens.
//
// Why. MmaRows (fast_gemv_mma.cu) puts the T tokens in the mma's columns, so one k-step must sum
// over a single scale group: each lane loads 16 bytes of ONE chunk (32 columns, one group) and a
// quad transpose (4 shuffles, 12 selects a row pair) hands every lane a word of EVERY chunk
// first, then each chunk's scale is shuffled in. With ~390 instructions a 16-row × 128-column
// k-tile it is instruction-bound (ncu: issue slots 50 % busy at 4 warps a scheduler), 2.6× the
// time its reads take (bench_fast_gemv's "loads only" rows). Here lane (g, t) keeps chunk t of
// rows g and g + 8 as loaded, and the columns of B are (token, chunk): column n = 4·tok + c holds
// token tok's x on chunk c's k-rows and zeros elsewhere. In m16n8k16 the k-rows a lane's A
// registers carry (2t, 2t + 1, 2t + 8, 2t + 9) are those lane column t carries for B, so column n
// only ever meets chunk c = n % 4's codes: after the 8 k-steps of a k-tile
//   D[r][4·tok + c] = Σ_{k in chunk c} (128 + code[r][k]) · x̃[tok][k]        (x̃: x in bf16)
// — a partial sum per row, token and scale group, scaled in f32 and added up:
//   Σ w·x over the chunk = s·D + e·S,   S = Σ x̃ over the chunk,  e = b − 128·s (no biases: −136·s).
// No transpose, no shuffle, 8 mma a k-tile (MmaRows: 24 with its S sums).
//
// x is staged once a block in shared memory as the B registers themselves: per (k-tile, token,
// word j, chunk c) a uint4 {(x0, x4), (x1, x5), (x2, x6), (x3, x7)} of columns 128·kt + 32c + 8j …
// (the pairs nib_pair's nibble order meets), and S per (k-tile, token, chunk) in f32, summed from
// the rounded pairs in a fixed order. Lanes whose column is no (token < T, its own chunk) read a
// zero entry. Block: kWarps warps on one 16-row tile splitting K (k-tiles w, w + kWarps, …), two
// batches of two k-tiles of weights in flight a warp, a fixed-order sum over warps at the end.
//
// Measured (session 7, H200, T = 1, 16-row tiles, cold): 24.5 µs at 4096x14336 (MmaRows 27.1, its
// reads alone 10.9), 8.5 at 2048x4096 (10.0) — faster, but far from the reads: each k-tile's 8 mma
// chain into one accumulator (~30 cycles each) and the 8 scale loads a lane are the next suspects.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = kGemvChunksWarps, kThreads = kWarps * 32, kU = 2;

// A k-tile of a lane: chunk t of rows g, g + 8, and the scales (biases) of chunks 2t % 4 and
// 2t % 4 + 1 of both rows (the columns its D registers hold), f16 bits: [row h][chunk i].
struct Tile {
    uint4 q[2];
    uint16_t s[2][2], b[2][2];
};

template <bool BIAS>
__global__ void __launch_bounds__(kThreads, 2)
    gemv_chunks_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                       PackedMatrix w, bool x_aligned) {
    extern __shared__ uint4 xs[];  // [nkt][T][4 words][4 chunks] uint4, then one zero uint4, then S
    __shared__ float red[kWarps][kGemvChunksMaxTokens][16];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const PackedLayout lay = packed_layout(w);
    const int nch = int(w.k / 32), nkt = (nch + 3) / 4, cpg = w.group / 32;
    const int64_t row0 = int64_t(blockIdx.x) * 16;
    const int nj = warp < nkt ? (nkt - warp + kWarps - 1) / kWarps : 0;  // this warp's k-tiles
    const int entries = nkt * T * 16;
    uint4* const zero = xs + entries;
    float* const sums = reinterpret_cast<float*>(zero + 1);  // [nkt][T][4 chunks]

    bool rok[2];
    const uint8_t* rp[2];
    const uint16_t* sp[2];
    const uint16_t* bp[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t r = row0 + g + 8 * h;
        rok[h] = r < w.n;
        const int64_t rr = rok[h] ? r : 0;
        rp[h] = w.codes + lay.code_row(rr);
        sp[h] = w.scales + lay.scale_row(rr);
        bp[h] = BIAS ? w.biases + lay.scale_row(rr) : nullptr;
    }
    const int c0 = (2 * t) & 3;  // the chunk of this lane's D columns 2t (and 2t + 1: c0 + 1)
    auto load = [&](Tile& tl, int j) {
        const int kt = warp + kWarps * j, ch = kt * 4 + t;
        const bool kok = j < nj;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            tl.q[h] = kok && rok[h] && ch < nch ? load_stream(rp[h] + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                const int c = kt * 4 + c0 + i;
                const bool ok = kok && rok[h] && c < nch;
                const int64_t gi = lay.scale_group(c / cpg);
                tl.s[h][i] = ok ? __ldg(sp[h] + gi) : uint16_t(0);
                tl.b[h][i] = BIAS && ok ? __ldg(bp[h] + gi) : uint16_t(0);
            }
        }
    };
    Tile cur[kU], nxt[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) load(cur[u], u);
    // Launched with PDL (pdl.cuh): the first weights are in flight while the kernel before ends;
    // x comes from it.
    pdl::wait();
    pdl::trigger();

    // x → the B registers in shared memory. Thread i takes entry (kt, tok, c, j) with j fastest,
    // so the four words of one chunk are 4 neighbouring lanes that add their S parts in a fixed
    // order; the loop runs whole warps (the shuffles need every lane).
    if (threadIdx.x == 0) *zero = make_uint4(0, 0, 0, 0);
    for (int base = 0; base < entries; base += kThreads) {
        const int i = base + int(threadIdx.x);
        const bool valid = i < entries;
        const int j = i & 3, c = (i >> 2) & 3, tk = i >> 4;  // tk = kt·T + tok
        const int kt = tk / T, tok = tk - kt * T, ch = kt * 4 + c;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (valid && ch < nch) load8(x + tok * ldx + int64_t(ch) * 32 + 8 * j, x_aligned, v);
        const uint4 e = make_uint4(pack_bf16x2(v[0], v[4]), pack_bf16x2(v[1], v[5]), pack_bf16x2(v[2], v[6]),
                                   pack_bf16x2(v[3], v[7]));
        // S from the rounded values (what the mma multiplies), in a fixed order.
        auto lo = [](uint32_t p) { return __uint_as_float(p << 16); };
        auto hi = [](uint32_t p) { return __uint_as_float(p & 0xffff0000u); };
        float s = ((lo(e.x) + hi(e.x)) + (lo(e.y) + hi(e.y))) + ((lo(e.z) + hi(e.z)) + (lo(e.w) + hi(e.w)));
        s += __shfl_xor_sync(0xffffffffu, s, 1);
        s += __shfl_xor_sync(0xffffffffu, s, 2);
        if (valid) {
            xs[(tk * 4 + j) * 4 + c] = e;
            if (j == 0) sums[tk * 4 + c] = s;
        }
    }
    __syncthreads();

    // This lane's B: column n = g is (token g / 4, chunk g % 4); it carries x only on its own
    // chunk's k-rows (g % 4 == t) for a token present.
    const int tok = g >> 2;
    const bool active = (g & 3) == t && tok < T;
    const int dtok = t >> 1;  // the token of this lane's D columns 2t, 2t + 1
    float acc[2] = {0.f, 0.f};  // rows g, g + 8; token dtok

    auto compute = [&](const Tile& tl, int j) {
        const int kt = warp + kWarps * j;
        const uint4* xb = active ? xs + (kt * T + tok) * 16 + t : zero;
        const int step = active ? 4 : 0;
        float d[4] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t w0[4] = {tl.q[0].x, tl.q[0].y, tl.q[0].z, tl.q[0].w};
        const uint32_t w1[4] = {tl.q[1].x, tl.q[1].y, tl.q[1].z, tl.q[1].w};
#pragma unroll
        for (int wd = 0; wd < 4; ++wd) {
            const uint4 b = xb[wd * step];
            mma_bf16(d, nib_pair<0>(w0[wd]), nib_pair<0>(w1[wd]), nib_pair<1>(w0[wd]), nib_pair<1>(w1[wd]), b.x, b.y);
            mma_bf16(d, nib_pair<2>(w0[wd]), nib_pair<2>(w1[wd]), nib_pair<3>(w0[wd]), nib_pair<3>(w1[wd]), b.z, b.w);
        }
        if (dtok >= T) return;  // columns of a token not present: D is zero
        const float S0 = sums[(kt * T + dtok) * 4 + c0], S1 = sums[(kt * T + dtok) * 4 + c0 + 1];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float s0 = half_bits(tl.s[h][0]), s1 = half_bits(tl.s[h][1]);
            float e0, e1;
            if constexpr (BIAS) {
                e0 = fmaf(-128.f, s0, half_bits(tl.b[h][0]));
                e1 = fmaf(-128.f, s1, half_bits(tl.b[h][1]));
            } else {
                e0 = -136.f * s0;
                e1 = -136.f * s1;
            }
            acc[h] = fmaf(s0, d[2 * h], fmaf(e0, S0, acc[h]));
            acc[h] = fmaf(s1, d[2 * h + 1], fmaf(e1, S1, acc[h]));
        }
    };
    ping_pong_tiles(nj, cur, nxt, load, compute);

    // Lanes t and t ^ 1 hold the two chunk pairs of one token: add them, then the warps in order.
#pragma unroll
    for (int h = 0; h < 2; ++h) acc[h] += __shfl_xor_sync(0xffffffffu, acc[h], 1);
    if ((t & 1) == 0 && dtok < T) {
        red[warp][dtok][g] = acc[0];
        red[warp][dtok][g + 8] = acc[1];
    }
    __syncthreads();
    if (int(threadIdx.x) < 16 * T) {
        const int r = int(threadIdx.x) & 15, tk = int(threadIdx.x) >> 4;
        if (row0 + r < w.n) {
            float s = red[0][tk][r];
#pragma unroll
            for (int q = 1; q < kWarps; ++q) s += red[q][tk][r];
            y[tk * ldy + row0 + r] = s;
        }
    }
}

}  // namespace

// Arguments checked by gemv_packed_plan (Int4, T ≤ kGemvChunksMaxTokens, gemv_chunks_fits).
cudaError_t launch_gemv_chunks(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                               cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const size_t smem = size_t(gemv_chunks_smem(w.k, T));
    auto* kernel = w.biases ? gemv_chunks_kernel<true> : gemv_chunks_kernel<false>;
    // The opt-in to more than 48 KiB of dynamic shared memory, once a kernel (not a stream
    // operation: safe while a decode graph is being captured).
    static const cudaError_t opt_in[2] = {
        cudaFuncSetAttribute(gemv_chunks_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvChunksMaxSmem)),
        cudaFuncSetAttribute(gemv_chunks_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(kGemvChunksMaxSmem))};
    if (opt_in[w.biases ? 1 : 0] != cudaSuccess) return opt_in[w.biases ? 1 : 0];
    return pdl::launch(kernel, dim3(unsigned((w.n + 15) / 16)), kThreads, smem, stream, y, ldy, x, ldx, int(T), w,
                       aligned);
}

}  // namespace tessera::cuda::fast::detail
