// The decode GEMV's variant BulkMma (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ for Int4 w in
// 16-row tiles and 1 ≤ T ≤ 8 — Bulk's stream of the weights (fast_gemv_bulk.cu: one producer lane,
// the bulk-copy engine, a ring of shared-memory stages on mbarriers), its arithmetic on the tensor
// cores, so the work a weight does not grow with T.
//
// Why. Bulk's consumers are dp4a against x's two int8 limbs: their work grows with the tokens (one
// token 11.5 µs back to back at 4096x14336, four 27.9), and the limbs of 8 tokens of K = 14336 do
// not fit beside the ring (229 KiB). MmaRows, the tensor-core form at 3–8 tokens, reads its weights
// through registers and turns nibbles into bf16 fragments group by group (~390 lane-instructions a
// k-tile: 24.6 µs back to back at 8 tokens).
//
// The arithmetic. mma.sync m16n8k16 f16 → f32, the 16 rows of a tile as A, the tokens as B's 8
// columns (zeros past T). A lane dequantizes its own chunk — lane (g, t) = (lane / 4, lane % 4)
// holds chunk t (32 columns, one 16-byte load) of rows g and g + 8, as Bulk — into f16 with the
// chunk's scale folded in:  w = (code − 8)·s  (or code·s + b with biases), one rounding:
//   0x6400 | nibble is 1024 + nibble exactly, so (1024 + nibble) − 1032 (or · 1/16 − 72 for the
//   nibble in bits 4–7) is code − 8 exactly, and · s (fma with b) rounds once.
// With the scale inside A, the mma's k may run across the four chunks of a quad (four scale groups)
// — no transpose, no per-group scaling after the mma (what MmaRows pays for): a code word of 8
// columns makes two k-steps, its pairs of columns (i, i + 4) as the fragments' pairs, and x is
// staged in the same order. ~13 lane-instructions a word of 8 weights, 8 mma a k-tile, for any T.
//
// x as f16, per token scaled by a power of two (exact) so its largest value sits near 2¹⁴: no
// overflow for any finite x, 11 significant bits (Bulk's limbs ~16 against the group's largest,
// MmaRows' bf16 8). Weights rounded to f16 (11 bits) where the integer variants keep them exact.
//
// Work. The K range is split over the S blocks of a thread-block cluster (plan.cluster): block
// rank r stages only its slice of x (K / S columns of T tokens: 8 tokens × 1792 columns at K =
// 14336, S = 8), the cluster walks row tiles rt = cluster, + clusters, … (persistent, one block an
// SM), each block streaming its slice of each. A stage is up to kGemvBulkWarps k-tiles of one
// (row tile, slice); consumer warp w takes k-tile w. At a row tile's end the 16 warps' fragments
// are summed in warp order into the block's part (scaled back by x's powers of two) — by 16·T
// consumer threads after a barrier of the consumer warps, or (GemvPlan::reducer, where a block
// walks 8 row tiles or more) by a warp of their own while the consumers go on: the same sums in
// the same order, the same bits; with S = 1 that is y, else the parts stay in shared memory until
// every row tile is done, and the blocks of the cluster each sum a share of them over the S ranks
// in rank order (distributed shared memory) — deterministic, no scratch, no atomics.
//
// Measured (H200, bench_fast_gemv, µs 16 calls back to back / cold; docs/cuda-rounds.md, twenty-seventh to
// twenty-ninth rounds): 4096x14336 2 / 4 / 8 tokens 15.3 / 17.0 / 19.5 (session 31: — / 18.3 / 19.8;
// barrier 18.8 / 22.2 cold at 4; MmaRows 24.7 / 28.2 at 8); 8192x2048 2 / 4 / 8 tokens 5.7 / 6.5 /
// 8.2 (MmaRows 9.5 / 9.6 / 10.0); lm_head 87 / 87 / 89 (Mma 184 / 194 / 213). At one token Bulk's
// dp4a is faster (11.5 against 14.9), below 16 Mi weights MmaRows. Where the time goes at 8 tokens
// of 4096x14336 (diagnosis rows, session 31): the ring alone 11.9 (clusters of 8, 14-k-tile stages;
// Bulk's ring at one block 8.7), x's staging ~1.9, the arithmetic ~6.7, the row tiles' sums ~2.0
// (~1.0 with the reducer warp). Tried and measured slower (session 31): each warp its own row tile,
// a stage several row tiles' k-tiles — one bulk copy per row tile and stage costs ~65 ns of the copy
// engine's time, so stages of 1–2 KB copies stream at a third of the bandwidth.
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

namespace cg = cooperative_groups;
using namespace dev;

constexpr int kCW = kGemvBulkWarps;       // consumer warps; a stage holds one k-tile each
constexpr int kThreads = (kCW + 1) * 32;  // + the producer warp
constexpr int kConsumerBar = 1;           // named barrier of the consumer warps
constexpr int kXItems = 4;                // x's items (8 columns of a token) a consumer thread at most

__device__ __forceinline__ uint32_t hfma2_bits(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// A code word's 8 weights (columns 0..7; nibble i is column i) as four f16 pairs (i, i + 4),
// i = 0..3: w = (code − 8)·s without biases, code·s + b with them (s2, b2: the pair (s, s), (b, b)).
template <bool BIAS>
__device__ __forceinline__ void dequant_word(uint32_t q, uint32_t s2, uint32_t b2, uint32_t (&d)[4]) {
    constexpr uint32_t kExp = 0x64006400u;                          // (1024, 1024)
    constexpr uint32_t kOne = 0x3c003c00u, kSixteenth = 0x2c002c00u;  // 1, 1/16
    // −(1024 + c) and −(64 + c): c = 8 without biases (the code's offset), 0 with (b holds it)
    constexpr uint32_t kLo = BIAS ? 0xe400e400u : 0xe408e408u;  // −1024 / −1032
    constexpr uint32_t kHi = BIAS ? 0xd400d400u : 0xd480d480u;  // −64 / −72
    const uint32_t q8 = q >> 8;
    const uint32_t v[4] = {and_or(q, 0x000f000fu, kExp), and_or(q, 0x00f000f0u, kExp),
                           and_or(q8, 0x000f000fu, kExp), and_or(q8, 0x00f000f0u, kExp)};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t c = (i & 1) ? hfma2_bits(v[i], kSixteenth, kHi) : hfma2_bits(v[i], kOne, kLo);  // code − c, exact
        d[i] = hfma2_bits(c, s2, b2);  // one rounding (b2 = −0 without biases)
    }
}

// One k-tile of a row tile: 8 mma into acc (acc[c]: code word c's two k-steps — four chains the
// scheduler interleaves). codes: the k-tile's 1024 code bytes (rows 0..7, then 8..15: 512 bytes,
// 16 a lane each); scales, biases: its 16 rows × gpt f16. xv: this lane's B at the k-tile (token g's
// pairs of chunk t, per code word; zeros past T).
template <bool BIAS>
__device__ __forceinline__ void mma_tile(float (&acc)[4][4], const uint8_t* codes, const uint8_t* scales,
                                         const uint8_t* biases, int gpt, int gi, const uint4 (&xv)[4]) {
    const int lane = int(threadIdx.x & 31), g = lane >> 2;
    const uint4 q0 = *reinterpret_cast<const uint4*>(codes + 16 * lane);        // row g
    const uint4 q1 = *reinterpret_cast<const uint4*>(codes + 512 + 16 * lane);  // row g + 8
    const auto* ss = reinterpret_cast<const uint16_t*>(scales);
    const uint32_t h0 = ss[g * gpt + gi], h1 = ss[(g + 8) * gpt + gi];
    const uint32_t s0 = h0 | (h0 << 16), s1 = h1 | (h1 << 16);
    uint32_t b0 = 0x80008000u, b1 = 0x80008000u;  // −0: (code − 8)·s + (−0) is the product, rounded
    if constexpr (BIAS) {
        const auto* bs = reinterpret_cast<const uint16_t*>(biases);
        const uint32_t c0 = bs[g * gpt + gi], c1 = bs[(g + 8) * gpt + gi];
        b0 = c0 | (c0 << 16), b1 = c1 | (c1 << 16);
    }
    const uint32_t w0[4] = {q0.x, q0.y, q0.z, q0.w}, w1[4] = {q1.x, q1.y, q1.z, q1.w};
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        uint32_t d0[4], d1[4];
        dequant_word<BIAS>(w0[c], s0, b0, d0);
        dequant_word<BIAS>(w1[c], s1, b1, d1);
        // k-step 2c: A's (2t, 2t+1) = pair 0, (2t+8, 2t+9) = pair 1; 2c + 1: pairs 2 and 3
        mma_f16(acc[c], {d0[0], d1[0], d0[1], d1[1]}, xv[c].x, xv[c].y);
        mma_f16(acc[c], {d0[2], d1[2], d0[3], d1[3]}, xv[c].z, xv[c].w);
    }
}

// The k-tile of consumer warp `warp` in a stage of one (row tile, slice): kCW k-tiles' codes, then
// their scales, then their biases.
template <bool BIAS>
__device__ __forceinline__ void mma_ktile(float (&acc)[4][4], const uint8_t* stage, int stb, int gpt, int gi,
                                          const uint4 (&xv)[4]) {
    const int warp = int(threadIdx.x >> 5);
    mma_tile<BIAS>(acc, stage + warp * 1024, stage + kCW * 1024 + warp * stb, stage + kCW * (1024 + stb) + warp * stb,
                   gpt, gi, xv);
}

// The consumer warps stage x's slice — columns kt0·128 … (kt0 + nk)·128 of T tokens — as f16 into
// xs [T][xrow] (k-tile j's code word c of chunk t at 256·j + 64·c + 16·t: the word's 4 pairs),
// each token under a power of two (xmul[u]: what its products are multiplied back by), then 256
// zero bytes (B's columns past T); they end at their barrier. amax_bits: zeroed before. skip (the
// bench's diagnosis): nothing staged.
__device__ __forceinline__ void stage_x(uint8_t* xs, int64_t xrow, const float* __restrict__ x, int64_t ldx, int T,
                                        int kt0, int nk, bool x_aligned, bool skip, uint32_t* amax_bits,
                                        float* xmul) {
    const int tid = int(threadIdx.x), lane = tid & 31;
    // x's slice: items of 8 columns (token u, k-tile j, chunk t, word c), item
    // i = ((u·nk + j)·4 + t)·4 + c — neighbouring items neighbouring 32 bytes of x.
    const int items = skip ? 0 : T * nk * 16;
    // Every item's loads first, then the largest |x|: a warp-synchronous reduction between one
    // item's loads and the next's kept them one round trip each (session 32's profile: the four
    // items' first uses were four stalls). What the staging costs now is the L2's bandwidth — every
    // block reads its slice of x in f32 (8192x2048, 8 tokens: ~1.9 µs for 132 × 64 KiB;
    // docs/cuda-rounds.md, twenty-ninth round).
    float xv[kXItems][8];
#pragma unroll
    for (int m = 0; m < kXItems; ++m) {
        const int i = tid + kCW * 32 * m;
#pragma unroll
        for (int e = 0; e < 8; ++e) xv[m][e] = 0.f;
        if (i < items) {
            const int u = i / (nk * 16), r = i - u * nk * 16;
            load8(x + u * ldx + int64_t(kt0) * 128 + 8 * r, x_aligned, xv[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < kXItems; ++m) {
        const int i = tid + kCW * 32 * m;
        const bool ok = i < items;
        const int u = ok ? i / (nk * 16) : -1;
        float a = 0.f;
#pragma unroll
        for (int e = 0; e < 8; ++e) a = fmaxf(a, fabsf(xv[m][e]));
        // the token's largest |x|: lanes of one token together, then one atomic a warp-token
        const unsigned same = __match_any_sync(0xffffffffu, u);
        const unsigned mx = __reduce_max_sync(same, __float_as_uint(a));
        if (ok && lane == __ffs(same) - 1) atomicMax(&amax_bits[u], mx);
    }
    named_barrier_sync(kConsumerBar, kCW * 32);
    auto exponent = [&](int u) {  // e: amax · 2^−e in [2^13, 2^14); 0 for x = 0 (no clamp needed
        const uint32_t b = amax_bits[u];                  // past ±126: f32's own range)
        return b == 0 ? 0 : max(-126, min(126, int(b >> 23) - 127 - 13));
    };
    if (tid < T) xmul[tid] = __uint_as_float(uint32_t(127 + exponent(tid)) << 23);
#pragma unroll
    for (int m = 0; m < kXItems; ++m) {
        const int i = tid + kCW * 32 * m;
        if (i >= items) continue;
        const int u = i / (nk * 16), r = i - u * nk * 16, j = r >> 4, t = (r >> 2) & 3, c = r & 3;
        const float sc = __uint_as_float(uint32_t(127 - exponent(u)) << 23);
        uint4 h;
        h.x = pack_half2(xv[m][0] * sc, xv[m][4] * sc), h.y = pack_half2(xv[m][1] * sc, xv[m][5] * sc);
        h.z = pack_half2(xv[m][2] * sc, xv[m][6] * sc), h.w = pack_half2(xv[m][3] * sc, xv[m][7] * sc);
        *reinterpret_cast<uint4*>(xs + u * xrow + j * 256 + c * 64 + t * 16) = h;
    }
    if (tid < 16) reinterpret_cast<uint4*>(xs + T * xrow)[tid] = make_uint4(0, 0, 0, 0);
    named_barrier_sync(kConsumerBar, kCW * 32);
}

// Shared memory past the ring: x [T][per·256 + 64 bytes] (a row tile slice's k-tile j at 256·j: per
// code word c of its 4 chunks t, at 64·c + 16·t, the word's 4 pairs of f16) and 256 zero bytes
// (what the lanes of tokens past T read: B's columns past T), then the warps'
// fragments at a row tile's end [2][kCW][32] float4, then the block's parts [rts][T][16] (S > 1).
struct Layout {
    int64_t ring, xrow, x, red, parts, total;
};
constexpr Layout layout(int64_t stage_bytes, int ns, int64_t per, int64_t T, int64_t part_rts) {
    Layout L{};
    L.ring = stage_bytes * ns;
    L.xrow = per * 256 + 64;  // + 64: neighbouring tokens' rows in the other half of the banks
    L.x = L.ring;
    L.red = L.x + T * L.xrow + 256;
    L.parts = L.red + int64_t(2) * kCW * 32 * 16;
    L.total = L.parts + part_rts * T * 16 * 4;
    return L;
}

// The cluster's sum (S > 1), every block's parts [rts][T][16] written: block `rank` sums the row
// tiles i ≡ rank (mod S) over the S ranks in rank order into y. Every thread of every block of the
// cluster calls it.
__device__ __forceinline__ void cluster_sum(const cg::cluster_group& cluster, float* parts, int my_rts, int T,
                                            float* __restrict__ y, int64_t ldy, int cid, int ncl) {
    const int S = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    pdl::wait();  // (the producer warp writes y too)
    cluster_barrier();  // every thread (a warp may arrive diverged: fast_mbarrier.cuh)
    for (int e = int(threadIdx.x); e < my_rts * T * 16; e += int(blockDim.x)) {
        const int i = e / (T * 16), u = (e / 16) % T, rr = e % 16;
        if (i % S != rank) continue;
        float v = 0.f;
        for (int r = 0; r < S; ++r) v += cluster.map_shared_rank(parts, r)[e];
        y[u * ldy + (int64_t(cid) + int64_t(i) * ncl) * 16 + rr] = v;
    }
    cluster_barrier();  // no block leaves while another reads its parts (fast_mbarrier.cuh)
}

// NS: ring stages. per: k-tiles a slice (the last slices may hold fewer, or none); part_rts: the
// row tiles a cluster walks at most (its parts' rows, S > 1). SKIP (the bench's diagnosis; y
// garbage): bits of kGemvBulkMmaSkip* — x's staging, the consumers' arithmetic, the row tiles' sums
// left out. RW (GemvPlan::reducer): a row tile's fragments are summed by a warp of their own (see
// the consumers' `finish`), else by 16·T consumer threads after a barrier of the consumer warps.
template <bool BIAS, int NS, int SKIP = 0, bool RW = false>
__global__ void __launch_bounds__(kThreads + (RW ? 32 : 0), 1)
    gemv_bulk_mma_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                         PackedMatrix w, bool x_aligned, int per, int part_rts, int prewait) {
    extern __shared__ __align__(128) uint8_t smem[];
    __shared__ uint64_t full[NS], empty[NS];
    __shared__ uint64_t red_full[2], red_empty[2];  // RW: the fragments' buffers
    __shared__ uint32_t amax_bits[8];
    __shared__ float xmul[8];  // x's power of two a token (what the parts are multiplied back by)
    const cg::cluster_group cluster = cg::this_cluster();
    const int S = int(cluster.num_blocks()), rank = int(cluster.block_rank());
    const int cid = int(blockIdx.x) / S, ncl = int(gridDim.x) / S;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int nkt = int(w.k / 128), row_tiles = int(w.n / 16);
    const int kt0 = min(nkt, rank * per), nk = min(nkt, kt0 + per) - kt0;  // this block's k-tiles
    const int stages_rt = (nk + kCW - 1) / kCW;
    const int my_rts = cid < row_tiles ? (row_tiles - cid + ncl - 1) / ncl : 0;
    const int gpt = 128 / w.group, stb = 32 * gpt;  // scale groups a tile row; scale bytes a k-tile
    const int tile_bytes = 1024 + stb * (BIAS ? 2 : 1);
    const int stage_bytes = kCW * tile_bytes;
    const Layout L = layout(stage_bytes, NS, per, T, part_rts);
    if (threadIdx.x == 0) {
        for (int s = 0; s < NS; ++s) mbar_init(&full[s], 1), mbar_init(&empty[s], kCW);
        if constexpr (RW)
            for (int b = 0; b < 2; ++b) mbar_init(&red_full[b], kCW), mbar_init(&red_empty[b], 1);
    }
    if (threadIdx.x < 8) amax_bits[threadIdx.x] = 0;
    __syncthreads();
    float* const parts = reinterpret_cast<float*>(smem + L.parts);  // [part_rts][T][16]
    auto* const red = reinterpret_cast<float4*>(smem + L.red);       // [2][kCW][32]

    if (warp == kCW) {  // ---- producer: one lane asks for every stage of the block, in order ----
        if (lane == 0) {
            const uint64_t policy = l2_evict_first();
            const auto* sc = reinterpret_cast<const uint8_t*>(w.scales);
            const auto* bi = reinterpret_cast<const uint8_t*>(w.biases);
            int it = 0;
            for (int i = 0; i < my_rts; ++i)
                for (int st = 0; st < stages_rt; ++st, ++it) {
                    if (it == prewait) pdl::wait();  // the rest once the kernel before is done
                    const int s = it % NS;
                    mbar_wait(&empty[s], ((it / NS) & 1) ^ 1);
                    const int k0 = kt0 + st * kCW, nt = min(kCW, kt0 + nk - k0);
                    const int64_t tile0 = (int64_t(cid) + int64_t(i) * ncl) * nkt + k0;
                    uint8_t* dst = smem + s * stage_bytes;
                    mbar_arrive_expect_tx(&full[s], uint32_t(nt * tile_bytes));
                    bulk_load(smem_addr(dst), w.codes + tile0 * 1024, uint32_t(nt * 1024), &full[s], policy);
                    bulk_load(smem_addr(dst + kCW * 1024), sc + tile0 * stb, uint32_t(nt * stb), &full[s], policy);
                    if constexpr (BIAS)
                        bulk_load(smem_addr(dst + kCW * (1024 + stb)), bi + tile0 * stb, uint32_t(nt * stb),
                                  &full[s], policy);
                }
        }
    } else if (RW && warp == kCW + 1) {  // ---- the reducer: each row tile's fragments, in warp order ----
        pdl::wait();  // (it writes y)
        const int g = lane >> 2, t = lane & 3;  // lane = the fragments' lane: rows g, g + 8 × tokens 2t, 2t + 1
        for (int i = 0; i < my_rts; ++i) {
            const int buf = i & 1;
            mbar_wait(&red_full[buf], (i >> 1) & 1);
            if (2 * t < T) {
                float v[4] = {0.f, 0.f, 0.f, 0.f};
                for (int q = 0; q < kCW; ++q) {
                    const float4 f = red[(buf * kCW + q) * 32 + lane];
                    v[0] += f.x, v[1] += f.y, v[2] += f.z, v[3] += f.w;
                }
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int u = 2 * t + (e & 1), rr = g + 8 * (e >> 1);
                    if (u >= T) continue;
                    if (S == 1) y[u * ldy + (int64_t(cid) + int64_t(i) * ncl) * 16 + rr] = v[e] * xmul[u];
                    else parts[(i * T + u) * 16 + rr] = v[e] * xmul[u];
                }
            }
            __syncwarp();
            if (lane == 0) mbar_arrive(&red_empty[buf]);  // red[buf] read: the consumers may write it again
        }
    } else {  // ---- consumers ----
        pdl::wait();  // x comes from the kernel before
        pdl::trigger();
        stage_x(smem + L.x, L.xrow, x, ldx, T, kt0, nk, x_aligned, (SKIP & kGemvBulkMmaSkipX) != 0, amax_bits, xmul);
        const int tid = int(threadIdx.x);
        const int g = lane >> 2, t = lane & 3;
        const int gi = t >> (__ffs(w.group / 32) - 1);  // chunk t's scale group in its tile row
        // A row tile's end: the warps' fragments (c0..c3: rows g, g, g + 8, g + 8 × tokens 2t,
        // 2t + 1) into red[buf], summed in warp order — RW: by the reducer warp, the consumers
        // going on at once (they wait only for red[buf] to be free, two row tiles later); else by
        // 16·T consumer threads after a barrier of the consumer warps, the other warps going on.
        // (Tried: only those 16·T threads' warps waiting for the fragments, the others arriving at
        // named barriers full / empty a buffer and running ahead — slower at every shape, H200
        // session 30: lm_head 8 tokens 114.2 against 94.2 µs, 4096x14336 23.2 against 20.8: the
        // reducing warps fell behind and held the ring's stages.)
        auto finish = [&](float (&acc)[4][4], int i, int buf) {
            if constexpr ((SKIP & kGemvBulkMmaSkipSums) != 0) {
                // Every accumulator kept alive (session 30's form tested acc[0] alone, so the compiler
                // dropped three quarters of the arithmetic: its "no row-tile sums" row ran 14.5 µs
                // against 20.7 at 8 tokens of 4096x14336; kept whole, 18.8 — session 31).
                float any = 0.f;
#pragma unroll
                for (int c = 0; c < 4; ++c)
#pragma unroll
                    for (int e = 0; e < 4; ++e) any += acc[c][e];
                if (any == 1.2345e-30f) y[0] = any;  // practically never
                return;
            }
            float4 f;
            f.x = acc[0][0] + acc[1][0] + acc[2][0] + acc[3][0], f.y = acc[0][1] + acc[1][1] + acc[2][1] + acc[3][1];
            f.z = acc[0][2] + acc[1][2] + acc[2][2] + acc[3][2], f.w = acc[0][3] + acc[1][3] + acc[2][3] + acc[3][3];
#pragma unroll
            for (int c = 0; c < 4; ++c)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[c][e] = 0.f;
            if constexpr (RW) {
                mbar_wait(&red_empty[buf], ((i >> 1) & 1) ^ 1);
                red[(buf * kCW + warp) * 32 + lane] = f;
                __syncwarp();
                if (lane == 0) mbar_arrive(&red_full[buf]);
                return;
            }
            red[(buf * kCW + warp) * 32 + lane] = f;
            named_barrier_sync(kConsumerBar, kCW * 32);  // red[buf] written (red[buf ^ 1]'s readers long done)
            if (tid < 16 * T) {
                const int u = tid >> 4, rr = tid & 15, src = (rr & 7) * 4 + (u >> 1), e = (rr >> 3) * 2 + (u & 1);
                const auto* rf = reinterpret_cast<const float*>(red + buf * kCW * 32);
                float v = 0.f;
                for (int q = 0; q < kCW; ++q) v += rf[(q * 32 + src) * 4 + e];
                v *= xmul[u];
                if (S == 1) y[u * ldy + (int64_t(cid) + int64_t(i) * ncl) * 16 + rr] = v;
                else parts[(i * T + u) * 16 + rr] = v;
            }
        };
        // The block's stages in the producer's order. XREG: every row tile gives this warp the same
        // one k-tile (a slice of at most kCW k-tiles), so its B fragments stay in registers (H200,
        // session 30, against reading them every k-tile: lm_head 2 / 8 tokens 87.0 / 94.3 against
        // 99.3 / 106.3 µs, 8192x2048 6.0 / 8.5 against 6.3 / 8.8).
        auto walk = [&](auto xreg) {
            constexpr bool XREG = decltype(xreg)::value;
            uint4 xv[4];
            const uint8_t* const xb = smem + L.x + (g < T ? g * L.xrow : T * L.xrow) + t * 16;  // token g (zeros past T)
            const int xstep = g < T ? 256 : 0;                                                  // a k-tile
            if constexpr (XREG) {
                if (warp < nk) {
#pragma unroll
                    for (int c = 0; c < 4; ++c) xv[c] = *reinterpret_cast<const uint4*>(xb + warp * xstep + 64 * c);
                }
            }
            float acc[4][4] = {};
            unsigned it = 0;
            for (int i = 0; i < my_rts; ++i) {
                for (int st = 0; st < stages_rt; ++st, ++it) {
                    const unsigned s = it % NS;
                    const int j = st * kCW + warp;
                    mbar_wait(&full[s], (it / NS) & 1);
                    if (j < nk) {
                        if constexpr (!XREG) {
#pragma unroll
                            for (int c = 0; c < 4; ++c) xv[c] = *reinterpret_cast<const uint4*>(xb + j * xstep + 64 * c);
                        }
                        if constexpr ((SKIP & kGemvBulkMmaSkipMath) == 0)
                            mma_ktile<BIAS>(acc, smem + s * stage_bytes, stb, gpt, gi, xv);
                        else if (xv[0].x == 0x12345u)
                            acc[0][0] += 1.f;  // practically never: keeps the B loads
                    }
                    __syncwarp();
                    if (lane == 0) mbar_arrive(&empty[s]);  // this warp's reads of the stage are done
                }
                finish(acc, i, i & 1);
            }
        };
        if (stages_rt == 1) walk(std::true_type{});
        else walk(std::false_type{});
    }
    if (S > 1) cluster_sum(cluster, parts, my_rts, T, y, ldy, cid, ncl);
}


// NS: ring stages; plan.reducer: the form (RW).
template <bool BIAS, int NS, int SKIP = 0>
cudaError_t launch_ns(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream, int* grid_out) {
    if (plan.reducer != 0 && plan.reducer != 1) return cudaErrorInvalidValue;
    if (SKIP != 0 && plan.reducer != 0) return cudaErrorInvalidValue;  // (the diagnosis is the barrier form's)
    auto* barrier = gemv_bulk_mma_kernel<BIAS, NS, SKIP, false>;
    auto* reducer = gemv_bulk_mma_kernel<BIAS, NS, SKIP, true>;
    static const cudaError_t opt_in = [&] {
        for (const void* k : {reinterpret_cast<const void*>(barrier), reinterpret_cast<const void*>(reducer)}) {
            const cudaError_t e =
                cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kGemvBulkMaxSmem));
            if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
    }();
    if (opt_in != cudaSuccess) return opt_in;
    const void* kernel = plan.reducer ? reinterpret_cast<const void*>(reducer) : reinterpret_cast<const void*>(barrier);
    const int threads = kThreads + (plan.reducer ? 32 : 0);
    const int S = plan.cluster;
    const int64_t nkt = w.k / 128, row_tiles = w.n / 16;
    const int per = int((nkt + S - 1) / S);
    // The parts' rows depend on the clusters resident, which depend on the shared memory: from
    // the most clusters an SM count allows, down to what fits (at most a few rounds).
    int64_t ncl = std::max<int64_t>(1, gemv_sm_count() / S), part_rts = 0;
    size_t smem = 0;
    for (int round = 0; round < 4; ++round) {
        ncl = std::min(ncl, row_tiles);
        part_rts = S > 1 ? (row_tiles + ncl - 1) / ncl : 0;
        const int64_t need =
            layout(gemv_bulk_stage_bytes(w.group, w.biases != nullptr), NS, per, T, part_rts).total;
        if (need > kGemvBulkMaxSmem) return cudaErrorInvalidValue;  // gemv_bulk_mma_takes holds this off
        smem = size_t(need);
        const int fit = gemv_resident_clusters(reinterpret_cast<const void*>(kernel), threads, S, smem);
        if (fit <= 0) return cudaErrorInvalidConfiguration;
        if (fit >= ncl) break;
        ncl = fit;
    }
    if (S > 1 && (row_tiles + ncl - 1) / ncl > part_rts) return cudaErrorInvalidConfiguration;
    if (grid_out) *grid_out = int(ncl * S);
    if (!y) return cudaSuccess;  // (the bench's question: the grid)
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    return pdl::launch_cluster(plan.reducer ? reducer : barrier, dim3(unsigned(ncl * S)), dim3(unsigned(threads)),
                               smem, stream, dim3(unsigned(S), 1, 1), y, ldy, x, ldx, int(T), w, aligned, per,
                               int(part_rts), kGemvBulkPrewait);
}

// The ring at a depth the bench asks for (launch_gemv_bulk_mma_diag: 4, 6 or 8 stages).
template <bool BIAS, int SKIP = 0>
cudaError_t launch_depth(int stages, const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx,
                         int64_t T, const PackedMatrix& w, cudaStream_t stream, int* grid_out) {
    switch (stages) {
        case 8: return launch_ns<BIAS, 8, SKIP>(plan, y, ldy, x, ldx, T, w, stream, grid_out);
        case 6: return launch_ns<BIAS, 6, SKIP>(plan, y, ldy, x, ldx, T, w, stream, grid_out);
        case 4: return launch_ns<BIAS, 4, SKIP>(plan, y, ldy, x, ldx, T, w, stream, grid_out);
        default: return cudaErrorInvalidValue;
    }
}

// The ring: kGemvBulkStages (4), not Bulk's deep ring — deeper measured slower wherever it
// differed (H200, session 32, the pick's plan at 4 / 6 / 8 stages, µs back to back: 4096x14336
// 2 / 3 / 4 / 8 tokens 15.48 / 16.79 / 17.23 / 19.51 against 16.08 / 17.24 / 17.65 / 19.94 and
// 16.66 / 17.91 / 18.29 / 20.69; lm_head 86.4 / 88.2 / 88.2 / 93.8 against ~90–97; 12352x2048 at 8
// tokens 9.96 against 10.6; level at the other K = 2048 shapes; the depths timed in that order,
// one after another, and the 8-stage row matched the pick's own then). Bulk's 8 stages at one
// token stay (fast_gemv_bulk.cu).
template <bool BIAS>
cudaError_t launch_bias(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                        const PackedMatrix& w, cudaStream_t stream, int* grid_out) {
    return launch_ns<BIAS, kGemvBulkStages>(plan, y, ldy, x, ldx, T, w, stream, grid_out);
}

}  // namespace

// fast_gemv_plan.h.
int gemv_resident_clusters(const void* kernel, int threads, int S, size_t smem) {
    struct Entry {
        int device;
        const void* kernel;
        int threads;
        int S;
        size_t smem;
        int clusters;
    };
    static std::mutex mu;
    static std::vector<Entry> cache;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 0;
    std::lock_guard<std::mutex> lock(mu);
    for (const Entry& e : cache)
        if (e.device == device && e.kernel == kernel && e.threads == threads && e.S == S && e.smem == smem)
            return e.clusters;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(S * gemv_sm_count()));
    cfg.blockDim = dim3(unsigned(threads));
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = unsigned(S), at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    cache.push_back({device, kernel, threads, S, smem, n});
    return n;
}

// Arguments checked by gemv_packed_plan (gemv_bulk_mma_fits).
cudaError_t launch_gemv_bulk_mma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                                 const PackedMatrix& w, cudaStream_t stream) {
    return w.biases ? launch_bias<true>(plan, y, ldy, x, ldx, T, w, stream, nullptr)
                    : launch_bias<false>(plan, y, ldy, x, ldx, T, w, stream, nullptr);
}

cudaError_t launch_gemv_bulk_mma_diag(const GemvPlan& plan, int skip, int stages, float* y, const float* x,
                                      int64_t T, const PackedMatrix& w, cudaStream_t stream) {
    if (w.biases || !gemv_bulk_mma_fits(w, T, plan.cluster, gemv_sm_count())) return cudaErrorInvalidValue;
    if (stages == 0) stages = kGemvBulkStages;
#define TS_BULK_MMA_DIAG(K) \
    if (skip == (K)) return launch_depth<false, K>(stages, plan, y, w.n, x, w.k, T, w, stream, nullptr);
    TS_BULK_MMA_DIAG(0)
    TS_BULK_MMA_DIAG(kGemvBulkMmaSkipX)
    TS_BULK_MMA_DIAG(kGemvBulkMmaSkipMath)
    TS_BULK_MMA_DIAG(kGemvBulkMmaSkipSums)
    TS_BULK_MMA_DIAG(kGemvBulkMmaSkipMath | kGemvBulkMmaSkipSums)
    TS_BULK_MMA_DIAG(kGemvBulkMmaSkipX | kGemvBulkMmaSkipMath | kGemvBulkMmaSkipSums)
#undef TS_BULK_MMA_DIAG
    return cudaErrorInvalidValue;
}

int gemv_bulk_mma_grid(const GemvPlan& plan, const PackedMatrix& w, int64_t T) {
    int grid = -1;
    const cudaError_t e = w.biases ? launch_bias<true>(plan, nullptr, 0, nullptr, 0, T, w, nullptr, &grid)
                                   : launch_bias<false>(plan, nullptr, 0, nullptr, 0, T, w, nullptr, &grid);
    return e == cudaSuccess ? grid : -1;
}

}  // namespace tessera::cuda::fast::detail
