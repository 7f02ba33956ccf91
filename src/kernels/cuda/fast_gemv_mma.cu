// The decode GEMV on the tensor cores (fast_gemv_plan.h, variant Mma): y[T, N] = x[T, K] · w[N, K]ᵀ,
// 1 ≤ T ≤ 8, mma.sync m16n8k16 bf16 → f32 with 16 weight rows as A and the T tokens as B's 8
// columns (x rounded to bf16, zero columns past T).
//
// Layout. Warp w of a block owns rows 16·mt + g, 16·mt + g + 8 (g = lane / 4, t = lane % 4) of
// its 16·MT rows; the blocks of a cluster split K (k-tiles of 4 chunks of 16 code bytes a row),
// and add their partial sums through distributed shared memory at the end (deterministic, no
// scratch, no atomics). Lane (g, t) loads chunk t of a k-tile of each of its rows (128-bit,
// streamed), then a 4×4 word transpose inside the quad leaves it word t of every chunk, so the
// 4 lanes of an mma k-row quad always hold the SAME chunk — one scale group — and each chunk's
// mma sums can be scaled in f32:  acc += s·P + e·S.
//
// Codes are exact in bf16: ((word >> 4i) & 0x000f000f) | 0x43004300 is the pair (128 + nibble i,
// 128 + nibble i + 4). A word gives 2 k-steps: step s takes nibbles (2s, 2s+4) as k (2t, 2t+1) and
// (2s+1, 2s+5) as k (2t+8, 2t+9); the x fragments are staged in that order. Int8 codes (xor 0x80 =
// code + 128 = 16·hi + lo) run as twice as many nibbles against (x, 16·x). P = Σ (128 + nibble)·x
// and S = Σ x over the chunk (one more mma with A = 1, on the lo nibbles only for Int8) give
//   Int4:   Σ w·x = s·P + (b − 128·s)·S        (no biases: b = −8·s)
//   Int8:   Σ w·x = s·P − 2304·s·S             (2304 = 128 + 17·128)
#include <cooperative_groups.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

namespace cg = cooperative_groups;
using namespace dev;

constexpr int kThreads = kGemvMmaWarps * 32;

// 16 · (a bf16 pair), exact.
__device__ __forceinline__ uint32_t times16(uint32_t v) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(v), "r"(0x41804180u), "r"(0x80008000u));
    return d;
}

// V floats of x from p (V a multiple of 4): float4 loads where x is 16-byte aligned.
template <int V>
__device__ __forceinline__ void load_x(float (&v)[V], const float* p, bool x_aligned) {
#pragma unroll
    for (int i = 0; i < V; i += 4) {
        if (x_aligned) {
            const float4 f = __ldg(reinterpret_cast<const float4*>(p + i));
            v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) v[i + k] = __ldg(p + i + k);
        }
    }
}

// The bf16 words lane t pairs with its code words, from the V floats of x it covers (Int4: 8
// columns 8·t…, as (0,4) (1,5) (2,6) (3,7); Int8: 4 columns 4·t…, as (0,2) in .x and (1,3) in .z,
// .y and .w zero — the B fragment's 16·x halves are times16 of those).
template <PackedKind KIND>
__device__ __forceinline__ uint4 pack_x(const float (&v)[KIND == PackedKind::Int4 ? 8 : 4]) {
    if constexpr (KIND == PackedKind::Int4)
        return make_uint4(pack_bf16x2(v[0], v[4]), pack_bf16x2(v[1], v[5]), pack_bf16x2(v[2], v[6]),
                          pack_bf16x2(v[3], v[7]));
    else
        return make_uint4(pack_bf16x2(v[0], v[2]), 0u, pack_bf16x2(v[1], v[3]), 0u);
}

// A packed matrix's row geometry as the row-tile kernels walk it: 16-byte chunks a row (Int4 32
// columns, Int8 16), k-tiles of 4 chunks, bytes and scale groups a row, and chunk → group.
template <PackedKind KIND>
struct RowGeometry {
    int nch, nkt, cpg, lg_cpg;
    bool cpg_pow2;
    int64_t row_bytes, gpr;
    __device__ explicit RowGeometry(const PackedMatrix& w) {
        constexpr bool kInt4 = KIND == PackedKind::Int4;
        nch = int(kInt4 ? w.k / 32 : w.k / 16);
        nkt = (nch + 3) / 4;
        row_bytes = kInt4 ? w.k / 2 : w.k;
        gpr = w.k / w.group;
        cpg = w.group / (kInt4 ? 32 : 16);
        cpg_pow2 = (cpg & (cpg - 1)) == 0;
        lg_cpg = __ffs(cpg) - 1;
    }
    __device__ int group_of(int ch) const { return cpg_pow2 ? ch >> lg_cpg : ch / cpg; }
};

// One k-tile as loaded by a lane: chunk t of rows (mt, h), and those chunks' scales (biases) as
// f16 pairs (row g low, row g + 8 high).
template <int MT>
struct Tile {
    uint4 q[MT][2];
    uint32_t sc[MT], bi[MT];
};

// The math of one k-tile of a warp: tl as the lane loaded it (chunk t of its rows), b[c] the B
// fragments of chunk c {step 0: k 2t.., k 2t+8..; step 1: the same}; adds s·P + e·S into acc.
template <PackedKind KIND, int MT, bool BIAS>
__device__ __forceinline__ void tile_math(const Tile<MT>& tl, const uint32_t (&b)[4][4], float (&acc)[MT][4],
                                          int lane) {
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    constexpr uint32_t kOne = 0x3f803f80u, kOneHi = kInt4 ? kOne : 0u;
    uint32_t X[MT][2][4];  // word t of chunk c (after the transpose)
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            X[mt][h][0] = tl.q[mt][h].x;
            X[mt][h][1] = tl.q[mt][h].y;
            X[mt][h][2] = tl.q[mt][h].z;
            X[mt][h][3] = tl.q[mt][h].w;
            quad_transpose(X[mt][h], lane & 3);
            if constexpr (!kInt4)
#pragma unroll
                for (int c = 0; c < 4; ++c) X[mt][h][c] ^= 0x80808080u;
        }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        float S[4] = {0.f, 0.f, 0.f, 0.f};
        mma_bf16(S, kOne, kOne, kOneHi, kOneHi, b[c][0], b[c][1]);
        mma_bf16(S, kOne, kOne, kOneHi, kOneHi, b[c][2], b[c][3]);
        const int src = (lane & ~3) | c;  // the lane that loaded chunk c's scales
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float P[4] = {0.f, 0.f, 0.f, 0.f};
            const uint32_t w0 = X[mt][0][c], w1 = X[mt][1][c];
            mma_bf16(P, nib_pair<0>(w0), nib_pair<0>(w1), nib_pair<1>(w0), nib_pair<1>(w1), b[c][0], b[c][1]);
            mma_bf16(P, nib_pair<2>(w0), nib_pair<2>(w1), nib_pair<3>(w0), nib_pair<3>(w1), b[c][2], b[c][3]);
            const uint32_t sc = __shfl_sync(0xffffffffu, tl.sc[mt], src);
            const float s0 = half_bits(uint16_t(sc & 0xffffu)), s1 = half_bits(uint16_t(sc >> 16));
            float e0, e1;
            if constexpr (BIAS) {
                const uint32_t bi = __shfl_sync(0xffffffffu, tl.bi[mt], src);
                e0 = fmaf(-128.f, s0, half_bits(uint16_t(bi & 0xffffu)));
                e1 = fmaf(-128.f, s1, half_bits(uint16_t(bi >> 16)));
            } else {
                constexpr float kOff = kInt4 ? -136.f : -2304.f;
                e0 = kOff * s0;
                e1 = kOff * s1;
            }
            acc[mt][0] = fmaf(s0, P[0], fmaf(e0, S[0], acc[mt][0]));
            acc[mt][1] = fmaf(s0, P[1], fmaf(e0, S[1], acc[mt][1]));
            acc[mt][2] = fmaf(s1, P[2], fmaf(e1, S[2], acc[mt][2]));
            acc[mt][3] = fmaf(s1, P[3], fmaf(e1, S[3], acc[mt][3]));
        }
    }
}

// Block (x, y): rows blockIdx.x·16·MT·kWarps …, k-tiles [y·per, y·per + per). Dynamic shared
// memory: x fragments [per][4 chunks][32 lanes] (Int4 uint4, Int8 uint2).
template <PackedKind KIND, int MT, bool BIAS>
__global__ void __launch_bounds__(kThreads, MT == 1 ? 4 : 2) gemv_mma_kernel(float* __restrict__ y, int64_t ldy,
                                                            const float* __restrict__ x, int64_t ldx, int T,
                                                            PackedMatrix w, int per, bool x_aligned) {
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    constexpr int U = MT == 1 ? 4 : 2;  // k-tiles a batch (two batches in flight)
    extern __shared__ uint4 xsm[];
    __shared__ float red[kGemvMmaWarps * MT * 4 * 32];
    cg::cluster_group cluster = cg::this_cluster();

    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    // Chunk and k-tile indices fit 32 bits (K ≤ 20480 here).
    const int nch = int(kInt4 ? w.k / 32 : w.k / 16);  // 16-byte chunks a row
    const int nkt = (nch + 3) / 4;
    const PackedLayout lay = packed_layout(w);
    const int cpg = w.group / (kInt4 ? 32 : 16);  // chunks a group
    const bool cpg_pow2 = (cpg & (cpg - 1)) == 0;
    const int lg_cpg = __ffs(cpg) - 1;
    const int kt0 = int(blockIdx.y) * per;
    const int kt1 = kt0 + per < nkt ? kt0 + per : nkt;
    const int64_t block_row0 = int64_t(blockIdx.x) * (16 * MT * kGemvMmaWarps);
    const int64_t warp_row0 = block_row0 + warp * 16 * MT;

    const uint8_t* rp[MT][2];
    const uint16_t* sp[MT][2];
    const uint16_t* bp[MT][2];
    bool rok[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t r = warp_row0 + 16 * mt + g + 8 * h;
            rok[mt][h] = r < w.n;
            const int64_t rr = rok[mt][h] ? r : 0;
            rp[mt][h] = w.codes + lay.code_row(rr);
            sp[mt][h] = w.scales + lay.scale_row(rr);
            bp[mt][h] = BIAS ? w.biases + lay.scale_row(rr) : nullptr;
        }

    auto load = [&](Tile<MT>& tl, int kt) {
        const int ch = kt * 4 + t;
        const bool cok = kt < kt1 && ch < nch;
        const int64_t gi = lay.scale_group(cpg_pow2 ? ch >> lg_cpg : ch / cpg);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            uint32_t s[2] = {0, 0}, b[2] = {0, 0};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const bool ok = cok && rok[mt][h];
                tl.q[mt][h] = ok ? load_stream(rp[mt][h] + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
                s[h] = ok ? __ldg(sp[mt][h] + gi) : 0u;
                if constexpr (BIAS) b[h] = ok ? __ldg(bp[mt][h] + gi) : 0u;
            }
            tl.sc[mt] = s[0] | s[1] << 16;
            tl.bi[mt] = b[0] | b[1] << 16;
        }
    };

    // The first batch of weights is in flight before x is staged.
    Tile<MT> cur[U];
#pragma unroll
    for (int u = 0; u < U; ++u) load(cur[u], kt0 + u);

    // x → bf16 fragments: entry (lt, c, lane (tok, tq)) = token tok's columns of chunk c that
    // lane tq pairs with its words (Int4: 8 columns 8·tq…, Int8: 4 columns 4·tq…); zeros past T
    // and past K. A thread issues kBatch entries' loads before converting any: one memory latency
    // a round, not one an entry.
    const int nt = kt1 > kt0 ? int(kt1 - kt0) : 0;
    constexpr int V = kInt4 ? 8 : 4, kBatch = kInt4 ? 4 : 8;
    auto store_x = [&](int e, const float (&v)[V]) {
        const uint4 p = pack_x<KIND>(v);
        if constexpr (kInt4) xsm[e] = p;
        else reinterpret_cast<uint2*>(xsm)[e] = make_uint2(p.x, p.z);
    };
    if (T < 8) {
        const float zero[V] = {};
        for (int e = int(threadIdx.x); e < nt * 128; e += kThreads)
            if (((e & 31) >> 2) >= T) store_x(e, zero);
    }
    const int valid = nt * 16 * T;  // entries (lt, c, tok < T, tq)
    for (int base = 0; base < valid; base += kThreads * kBatch) {
        float v[kBatch][V];
        int ent[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
#pragma unroll
            for (int i = 0; i < V; ++i) v[j][i] = 0.f;
            const int idx = base + j * kThreads + int(threadIdx.x);
            ent[j] = -1;
            if (idx >= valid) continue;
            const int lt = idx / (16 * T), rem = idx - lt * 16 * T, c = rem / (4 * T), r2 = rem - c * 4 * T;
            const int tok = r2 >> 2, tq = r2 & 3;
            ent[j] = (lt * 4 + c) * 32 + r2;
            const int ch = (kt0 + lt) * 4 + c;
            if (ch >= nch) continue;
            load_x(v[j], x + tok * ldx + (kInt4 ? ch * 32 + tq * 8 : ch * 16 + tq * 4), x_aligned);
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
            if (ent[j] >= 0) store_x(ent[j], v[j]);
    }
    __syncthreads();

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;

    auto compute = [&](const Tile<MT>& tl, int lt) {
        uint32_t b[4][4];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            if constexpr (kInt4) {
                const uint4 v = xsm[(lt * 4 + c) * 32 + lane];
                b[c][0] = v.x, b[c][1] = v.y, b[c][2] = v.z, b[c][3] = v.w;
            } else {
                const uint2 v = reinterpret_cast<const uint2*>(xsm)[(lt * 4 + c) * 32 + lane];
                b[c][0] = v.x, b[c][1] = times16(v.x), b[c][2] = v.y, b[c][3] = times16(v.y);
            }
        }
        tile_math<KIND, MT, BIAS>(tl, b, acc, lane);
    };

    // Two batches in flight: load one, compute the other. One row tile: ping-pong (no register
    // copies); two: the next batch copied into place (fewer registers live — 151 against 171, and
    // 10 % faster on the H200 at 4096x14336 and lm_head; the ping-pong is 10 % faster for one).
    Tile<MT> nxt[U];
    if constexpr (MT == 1) {
        auto step = [&](Tile<MT>(&ld)[U], int kl, Tile<MT>(&cp)[U], int kc) {
#pragma unroll
            for (int u = 0; u < U; ++u) load(ld[u], kl + u);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (kc + u < kt1) compute(cp[u], kc + u - kt0);
        };
        for (int kb = kt0; kb < kt1; kb += 2 * U) {
            step(nxt, kb + U, cur, kb);
            if (kb + U < kt1) step(cur, kb + 2 * U, nxt, kb + U);
        }
    } else {
        for (int kb = kt0; kb < kt1; kb += U) {
#pragma unroll
            for (int u = 0; u < U; ++u) load(nxt[u], kb + U + u);
#pragma unroll
            for (int u = 0; u < U; ++u)
                if (kb + u < kt1) compute(cur[u], kb + u - kt0);
#pragma unroll
            for (int u = 0; u < U; ++u) cur[u] = nxt[u];
        }
    }

    // The cluster's partial sums: block r adds up its share of the outputs from every block.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[((warp * MT + mt) * 4 + i) * 32 + lane] = acc[mt][i];
    cluster.sync();
    constexpr int E = kGemvMmaWarps * MT * 128;
    const int ks = int(gridDim.y), rank = int(blockIdx.y);
    const int share = (E + ks - 1) / ks, e_end = (rank + 1) * share < E ? (rank + 1) * share : E;
    for (int e = rank * share + int(threadIdx.x); e < e_end; e += kThreads) {
        const int ln = e & 31, i = (e >> 5) & 3, wm = e >> 7;
        const int tok = 2 * (ln & 3) + (i & 1);
        const int64_t row = block_row0 + 16 * wm + (ln >> 2) + 8 * (i >> 1);
        if (tok >= T || row >= w.n) continue;
        float part[kGemvMaxSplits];  // all loads in flight at once, then a fixed-order sum
#pragma unroll
        for (int q = 0; q < kGemvMaxSplits; ++q) part[q] = q < ks ? cluster.map_shared_rank(red, q)[e] : 0.f;
        float s = part[0];
#pragma unroll
        for (int q = 1; q < kGemvMaxSplits; ++q) s += part[q];
        y[tok * ldy + row] = s;
    }
    cluster.sync();  // no block leaves while another still reads its shared memory
}

// The B fragments of k-tile kt as lane (g, t) holds them, read straight from x (L1/L2): token g,
// Int4 columns 8t … 8t + 7 of each chunk as (0,4) (1,5) (2,6) (3,7); Int8 columns 4t … 4t + 3 as
// (0,2), 16·(0,2), (1,3), 16·(1,3). Zeros past T and past K.
template <PackedKind KIND>
__device__ __forceinline__ void x_fragments(uint32_t (&b)[4][4], const float* __restrict__ x, int64_t ldx, int T,
                                            int kt, int nch, int g, int t, bool x_aligned) {
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    constexpr int V = kInt4 ? 8 : 4;
    float v[4][V];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int i = 0; i < V; ++i) v[c][i] = 0.f;
        const int ch = kt * 4 + c;
        if (g < T && ch < nch) load_x(v[c], x + g * ldx + (kInt4 ? ch * 32 + t * 8 : ch * 16 + t * 4), x_aligned);
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const uint4 p = pack_x<KIND>(v[c]);
        b[c][0] = p.x, b[c][2] = p.z;
        b[c][1] = kInt4 ? p.y : times16(p.x);
        b[c][3] = kInt4 ? p.w : times16(p.z);
    }
}

// The NW warps' partial sums of 16·MT rows from row0, added in a fixed order into y.
template <int NW, int MT>
__device__ __forceinline__ void sum_warps_store(float* __restrict__ y, int64_t ldy, float* red, const float (&acc)[MT][4],
                                                int64_t row0, int T, int64_t n, int lane, int warp) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) red[((warp * MT + mt) * 4 + i) * 32 + lane] = acc[mt][i];
    __syncthreads();
    for (int e = int(threadIdx.x); e < MT * 128; e += NW * 32) {
        const int ln = e & 31, i = (e >> 5) & 3, mt = e >> 7;
        const int tok = 2 * (ln & 3) + (i & 1);
        const int64_t row = row0 + 16 * mt + (ln >> 2) + 8 * (i >> 1);
        if (tok >= T || row >= n) continue;
        float s = red[e];
#pragma unroll
        for (int q = 1; q < NW; ++q) s += red[q * MT * 128 + e];
        y[tok * ldy + row] = s;
    }
}

// Variant MmaRows: block = kRowWarps warps on the same 16·MT rows, warp w takes k-tiles w,
// w + kRowWarps, …; each lane reads its B fragments straight from x (L1/L2: no staging, no
// barrier before the first weight loads), one shared-memory sum over the warps at the end. No
// cluster and no limit on K.
constexpr int kRowWarps = kGemvMmaRowWarps;

template <PackedKind KIND, int MT, bool BIAS>
__global__ void __launch_bounds__(kRowWarps * 32, MT == 1 ? 2 : 1)
    gemv_mma_rows_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                         PackedMatrix w, bool x_aligned) {
    constexpr int U = 2;  // k-tiles a batch (two batches in flight)
    __shared__ float red[kRowWarps * MT * 4 * 32];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const RowGeometry<KIND> geo(w);
    const int nch = geo.nch, nkt = geo.nkt;
    const PackedLayout lay = packed_layout(w);
    const int64_t row0 = int64_t(blockIdx.x) * (16 * MT);
    const int nj = warp < nkt ? (nkt - warp + kRowWarps - 1) / kRowWarps : 0;  // this warp's k-tiles

    const uint8_t* rp[MT][2];
    const uint16_t* sp[MT][2];
    const uint16_t* bp[MT][2];
    bool rok[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int64_t r = row0 + 16 * mt + g + 8 * h;
            rok[mt][h] = r < w.n;
            const int64_t rr = rok[mt][h] ? r : 0;
            rp[mt][h] = w.codes + lay.code_row(rr);
            sp[mt][h] = w.scales + lay.scale_row(rr);
            bp[mt][h] = BIAS ? w.biases + lay.scale_row(rr) : nullptr;
        }
    // The j-th k-tile of this warp (masked past this warp's last).
    auto load = [&](Tile<MT>& tl, int j) {
        const int kt = warp + kRowWarps * j, ch = kt * 4 + t;
        const bool cok = j < nj && ch < nch;
        const int64_t gi = lay.scale_group(geo.group_of(ch));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            uint32_t s[2] = {0, 0}, b[2] = {0, 0};
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const bool ok = cok && rok[mt][h];
                tl.q[mt][h] = ok ? load_stream(rp[mt][h] + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
                s[h] = ok ? __ldg(sp[mt][h] + gi) : 0u;
                if constexpr (BIAS) b[h] = ok ? __ldg(bp[mt][h] + gi) : 0u;
            }
            tl.sc[mt] = s[0] | s[1] << 16;
            tl.bi[mt] = b[0] | b[1] << 16;
        }
    };
    Tile<MT> cur[U], nxt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) load(cur[u], u);
    // Launched with PDL (pdl.cuh): the first weights are in flight while the kernel before ends;
    // x comes from it.
    pdl::wait();
    pdl::trigger();

    float acc[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;

    auto compute = [&](const Tile<MT>& tl, int j) {
        uint32_t b[4][4];
        x_fragments<KIND>(b, x, ldx, T, warp + kRowWarps * j, nch, g, t, x_aligned);
        tile_math<KIND, MT, BIAS>(tl, b, acc, lane);
    };
    ping_pong_tiles(nj, cur, nxt, load, compute);

    sum_warps_store<kRowWarps, MT>(y, ldy, red, acc, row0, T, w.n, lane, warp);
}

// Variant MmaStaged: one 16-row tile a block, its whole weight slab — the 16 rows of codes, then
// their scales (and biases) — copied into shared memory by cp.async before anything else. Every
// byte of it is in flight at once and none of it holds registers, so an SM keeps as many blocks
// (and their loads) in flight as shared memory and registers allow. While the slab lands, the
// block stages x once for all its warps: each chunk's B fragments per (token, lane t) in bf16,
// and each chunk's S = Σ x (of those bf16 values) per token — so a k-tile costs the codes'
// transpose, 8 mma for P and the f32 scaling, not MmaRows' x loads, conversions and S mma.
// kStagedWarps warps a block, warp w takes k-tiles w, w + kStagedWarps, …; slab bytes
// gemv_staged_smem ≤ kGemvStagedMaxSmem, x bytes staged_x_smem on top (an opt-in past 48 KiB).
constexpr int kStagedWarps = kGemvStagedWarps;
constexpr int kStagedSmemOptIn = 200 * 1024;

// Shared-memory bytes of the staged x: T × nch × (4 uint4 fragments + 1 float S).
constexpr int64_t staged_x_smem(int64_t K, PackedKind kind, int64_t T) {
    const int64_t nch = kind == PackedKind::Int4 ? K / 32 : K / 16;
    return T * nch * (64 + 4);
}

// One k-tile of the staged kernel: q the codes as loaded (chunk t of rows g, g + 8), xb[c] chunk
// c's B fragments, sc / e[c][h] chunk c's scale and offset (b − 128·s) for row g + 8h, S[c][p]
// chunk c's Σ x of token 2t + p. ONE (T = 1): only the even columns (token 0) are kept.
template <PackedKind KIND, bool ONE>
__device__ __forceinline__ void staged_tile_math(const uint4 (&q)[2], const uint4 (&xb)[4], const float (&sc)[4][2],
                                                 const float (&e)[4][2], const float (&S)[4][2], float (&acc)[4],
                                                 int lane) {
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    uint32_t X[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        X[h][0] = q[h].x, X[h][1] = q[h].y, X[h][2] = q[h].z, X[h][3] = q[h].w;
        quad_transpose(X[h], lane & 3);
        if constexpr (!kInt4)
#pragma unroll
            for (int c = 0; c < 4; ++c) X[h][c] ^= 0x80808080u;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const uint32_t b0 = xb[c].x, b2 = xb[c].z;
        const uint32_t b1 = kInt4 ? xb[c].y : times16(b0), b3 = kInt4 ? xb[c].w : times16(b2);
        float P[4] = {0.f, 0.f, 0.f, 0.f};
        const uint32_t w0 = X[0][c], w1 = X[1][c];
        mma_bf16(P, nib_pair<0>(w0), nib_pair<0>(w1), nib_pair<1>(w0), nib_pair<1>(w1), b0, b1);
        mma_bf16(P, nib_pair<2>(w0), nib_pair<2>(w1), nib_pair<3>(w0), nib_pair<3>(w1), b2, b3);
        acc[0] = fmaf(sc[c][0], P[0], fmaf(e[c][0], S[c][0], acc[0]));
        acc[2] = fmaf(sc[c][1], P[2], fmaf(e[c][1], S[c][0], acc[2]));
        if constexpr (!ONE) {
            acc[1] = fmaf(sc[c][0], P[1], fmaf(e[c][0], S[c][1], acc[1]));
            acc[3] = fmaf(sc[c][1], P[3], fmaf(e[c][1], S[c][1], acc[3]));
        }
    }
}

template <PackedKind KIND, bool BIAS, bool ONE>
__global__ void __launch_bounds__(kStagedWarps * 32)
    gemv_mma_staged_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x, int64_t ldx, int T,
                           PackedMatrix w, bool x_aligned) {
    // codes [16][row_bytes] | scales [16][gpr] | biases | x fragments [T][nch][4] uint4 | S [T][nch]
    extern __shared__ __align__(16) uint8_t slab[];
    __shared__ float red[kStagedWarps * 4 * 32];
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const RowGeometry<KIND> geo(w);
    const int nch = geo.nch, nkt = geo.nkt;
    const int64_t row_bytes = geo.row_bytes, gpr = geo.gpr;
    const PackedLayout lay = packed_layout(w);  // a 16-row slab: tiles are already row tiles
    const int64_t row0 = int64_t(blockIdx.x) * 16;
    const int rows = int(w.n - row0 < 16 ? w.n - row0 : 16);
    uint8_t* const sc_sm = slab + 16 * row_bytes;  // 16-byte aligned: row_bytes is whole chunks
    uint8_t* const bi_sm = sc_sm + 32 * gpr;       // 16 rows of gpr halves: 32·gpr bytes
    uint4* const xs = reinterpret_cast<uint4*>(bi_sm + (BIAS ? 32 * gpr : 0));  // 32·gpr: whole 16 bytes
    float* const s_sm = reinterpret_cast<float*>(xs + int64_t(T) * nch * 4);

    // The slab: codes rows·row_bytes bytes (whole chunks), scales / biases rows·gpr halves (the
    // last chunk zero-filled past them). All in flight before the wait for the kernel before.
    auto copy = [&](uint8_t* dst, const uint8_t* src, int64_t bytes) {
        for (int64_t o = int64_t(threadIdx.x) * 16; o < bytes; o += kStagedWarps * 32 * 16)
            cp_async16_n(smem_addr(dst + o), src + o, int(bytes - o < 16 ? bytes - o : 16));
    };
    copy(slab, w.codes + row0 * row_bytes, rows * row_bytes);
    copy(sc_sm, reinterpret_cast<const uint8_t*>(w.scales + row0 * gpr), rows * gpr * 2);
    if constexpr (BIAS) copy(bi_sm, reinterpret_cast<const uint8_t*>(w.biases + row0 * gpr), rows * gpr * 2);
    cp_async_commit();
    pdl::wait();  // launched with PDL (pdl.cuh): x comes from the kernel before
    pdl::trigger();

    // x while the slab lands: entry (token n, chunk ch, lane tq) as x_fragments builds it, and
    // S[n][ch] = Σ of the chunk's bf16 x, its 4 lanes' parts added by shuffles (whole quads: the
    // loop runs the warp's lanes together).
    constexpr int V = kInt4 ? 8 : 4;
    const int entries = T * nch * 4;
    for (int e0 = warp * 32; e0 < entries; e0 += kStagedWarps * 32) {
        const int e = e0 + lane;
        float v[V];
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = 0.f;
        const int n = e / (nch * 4), ch = (e >> 2) - n * nch, tq = e & 3;
        if (e < entries) load_x(v, x + n * ldx + (kInt4 ? ch * 32 + tq * 8 : ch * 16 + tq * 4), x_aligned);
        float part = 0.f;
        const uint4 f = pack_x<KIND>(v);
        const uint32_t words[4] = {f.x, f.y, f.z, f.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            if (!kInt4 && (i & 1)) continue;
            part += __uint_as_float(words[i] << 16) + __uint_as_float(words[i] & 0xffff0000u);  // the bf16 pair
        }
        part += __shfl_xor_sync(0xffffffffu, part, 1);
        part += __shfl_xor_sync(0xffffffffu, part, 2);
        if (e < entries) {
            xs[e] = f;
            if (tq == 0) s_sm[n * nch + ch] = part;
        }
    }
    cp_async_wait<0>();
    __syncthreads();

    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    const auto* sc16 = reinterpret_cast<const uint16_t*>(sc_sm);
    const auto* bi16 = reinterpret_cast<const uint16_t*>(bi_sm);
    const int tok_b = g < T ? g : 0;  // B column g: token g, or token 0 again past T (finite, never stored)
    const int tok0 = 2 * t, tok1 = 2 * t + 1;
    for (int kt = warp; kt < nkt; kt += kStagedWarps) {
        uint4 q[2];
        uint4 xb[4];
        float sc[4][2], e[4][2], S[4][2];
        {
            const int ch = kt * 4 + t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = g + 8 * h;
                q[h] = ch < nch && r < rows ? *reinterpret_cast<const uint4*>(slab + lay.code_row(r) + lay.chunk(ch))
                                            : make_uint4(0, 0, 0, 0);
            }
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const int ch = kt * 4 + c;
            const bool cok = ch < nch;
            xb[c] = cok ? xs[(tok_b * nch + ch) * 4 + t] : make_uint4(0, 0, 0, 0);
            S[c][0] = cok && tok0 < T ? s_sm[tok0 * nch + ch] : 0.f;
            S[c][1] = cok && tok1 < T ? s_sm[tok1 * nch + ch] : 0.f;
            const int64_t gi = lay.scale_group(geo.group_of(cok ? ch : 0));
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = g + 8 * h;
                const bool ok = cok && r < rows;
                const float s = ok ? half_bits(sc16[lay.scale_row(r) + gi]) : 0.f;
                sc[c][h] = s;
                if constexpr (BIAS) e[c][h] = ok ? fmaf(-128.f, s, half_bits(bi16[lay.scale_row(r) + gi])) : 0.f;
                else e[c][h] = (kInt4 ? -136.f : -2304.f) * s;
            }
        }
        staged_tile_math<KIND, ONE>(q, xb, sc, e, S, acc, lane);
    }
    const float accs[1][4] = {{acc[0], acc[1], acc[2], acc[3]}};
    sum_warps_store<kStagedWarps, 1>(y, ldy, red, accs, row0, T, w.n, lane, warp);
}

template <PackedKind KIND, bool BIAS>
cudaError_t launch_staged(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                          cudaStream_t stream) {
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const size_t smem = size_t(gemv_staged_smem(w.k, w.kind, BIAS, w.group) + staged_x_smem(w.k, KIND, T));
    static const cudaError_t attr[2] = {
        cudaFuncSetAttribute(gemv_mma_staged_kernel<KIND, BIAS, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStagedSmemOptIn),
        cudaFuncSetAttribute(gemv_mma_staged_kernel<KIND, BIAS, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             kStagedSmemOptIn)};
    if (attr[0] != cudaSuccess) return attr[0];
    if (attr[1] != cudaSuccess) return attr[1];
    const dim3 grid(unsigned((w.n + 15) / 16));
    if (T == 1)
        return pdl::launch(gemv_mma_staged_kernel<KIND, BIAS, true>, grid, kStagedWarps * 32, smem, stream, y, ldy, x,
                           ldx, int(T), w, aligned);
    return pdl::launch(gemv_mma_staged_kernel<KIND, BIAS, false>, grid, kStagedWarps * 32, smem, stream, y, ldy, x, ldx,
                       int(T), w, aligned);
}

template <PackedKind KIND, int MT, bool BIAS>
cudaError_t launch_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    const int64_t rows = int64_t(16) * MT;
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    return pdl::launch(gemv_mma_rows_kernel<KIND, MT, BIAS>, dim3(unsigned((w.n + rows - 1) / rows)), kRowWarps * 32,
                       0, stream, y, ldy, x, ldx, int(T), w, aligned);
}

template <PackedKind KIND, int MT, bool BIAS>
cudaError_t launch(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                   const PackedMatrix& w, cudaStream_t stream) {
    const int64_t tiles = gemv_k_tiles(w.k, KIND);
    const int per = int((tiles + plan.splits - 1) / plan.splits);
    const int64_t rows = int64_t(16) * MT * kGemvMmaWarps;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned((w.n + rows - 1) / rows), unsigned(plan.splits), 1);
    cfg.blockDim = dim3(kThreads, 1, 1);
    cfg.dynamicSmemBytes = size_t(per) * size_t(gemv_tile_smem(KIND));
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = unsigned(plan.splits);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    return cudaLaunchKernelEx(&cfg, gemv_mma_kernel<KIND, MT, BIAS>, y, ldy, x, ldx, int(T), w, per, aligned);
}

template <int MT>
cudaError_t launch_mt(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                      const PackedMatrix& w, cudaStream_t stream) {
    if (plan.variant == GemvVariant::MmaStaged) {
        if (w.kind == PackedKind::Int8) return launch_staged<PackedKind::Int8, false>(y, ldy, x, ldx, T, w, stream);
        if (w.biases) return launch_staged<PackedKind::Int4, true>(y, ldy, x, ldx, T, w, stream);
        return launch_staged<PackedKind::Int4, false>(y, ldy, x, ldx, T, w, stream);
    }
    if (plan.variant == GemvVariant::MmaRows) {
        if (w.kind == PackedKind::Int8) return launch_rows<PackedKind::Int8, MT, false>(y, ldy, x, ldx, T, w, stream);
        if (w.biases) return launch_rows<PackedKind::Int4, MT, true>(y, ldy, x, ldx, T, w, stream);
        return launch_rows<PackedKind::Int4, MT, false>(y, ldy, x, ldx, T, w, stream);
    }
    if (w.kind == PackedKind::Int8) return launch<PackedKind::Int8, MT, false>(plan, y, ldy, x, ldx, T, w, stream);
    if (w.biases) return launch<PackedKind::Int4, MT, true>(plan, y, ldy, x, ldx, T, w, stream);
    return launch<PackedKind::Int4, MT, false>(plan, y, ldy, x, ldx, T, w, stream);
}

// Blocks of `plan`'s kernel the device holds at once (clusters × their size for Mma).
template <PackedKind KIND, int MT, bool BIAS>
int resident(const GemvPlan& plan, const PackedMatrix& w) {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        return -1;
    if (plan.variant == GemvVariant::MmaRows || plan.variant == GemvVariant::MmaStaged) {
        int per_sm = 0;
        const cudaError_t err =
            plan.variant == GemvVariant::MmaRows
                ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_mma_rows_kernel<KIND, MT, BIAS>,
                                                                kRowWarps * 32, 0)
                : cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                      &per_sm, gemv_mma_staged_kernel<KIND, BIAS, true>, kStagedWarps * 32,
                      size_t(gemv_staged_smem(w.k, KIND, BIAS, w.group) + staged_x_smem(w.k, KIND, 1)));
        if (err != cudaSuccess) return -1;
        return per_sm * sms;
    }
    const int64_t tiles = gemv_k_tiles(w.k, KIND);
    const int per = int((tiles + plan.splits - 1) / plan.splits);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(sms), unsigned(plan.splits), 1);
    cfg.blockDim = dim3(kThreads, 1, 1);
    cfg.dynamicSmemBytes = size_t(per) * size_t(gemv_tile_smem(KIND));
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = unsigned(plan.splits);
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, gemv_mma_kernel<KIND, MT, BIAS>, &cfg) != cudaSuccess) return -1;
    return clusters * plan.splits;
}

template <int MT>
int resident_mt(const GemvPlan& plan, const PackedMatrix& w) {
    if (w.kind == PackedKind::Int8) return resident<PackedKind::Int8, MT, false>(plan, w);
    if (w.biases) return resident<PackedKind::Int4, MT, true>(plan, w);
    return resident<PackedKind::Int4, MT, false>(plan, w);
}

}  // namespace

int gemv_resident_blocks(const GemvPlan& plan, const PackedMatrix& w) {
    if (plan.variant == GemvVariant::Simt) return -1;
    if (plan.variant == GemvVariant::Imma) {
        const int d = gemv_imma_resident_blocks(plan, w, 1);
        cudaGetLastError();
        return d;
    }
    if (plan.variant == GemvVariant::Dp4a) {
        const int d = gemv_dp4a_resident_blocks(w, 1);
        cudaGetLastError();
        return d;
    }
    const int r = plan.mtiles == 2 ? resident_mt<2>(plan, w) : resident_mt<1>(plan, w);
    cudaGetLastError();  // a failed query leaves no error behind
    return r;
}

// Arguments and plan already checked (fast_gemv.cpp).
cudaError_t launch_gemv_mma(const GemvPlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                            const PackedMatrix& w, cudaStream_t stream) {
    return plan.mtiles == 2 ? launch_mt<2>(plan, y, ldy, x, ldx, T, w, stream)
                            : launch_mt<1>(plan, y, ldy, x, ldx, T, w, stream);
}

}  // namespace tessera::cuda::fast::detail
