// The fast MoE's decode step on the tensor cores (MoePlan::mma_decode), per slot: each block's
// 16 weight rows are mma.sync m16n8k16's A (Int4 by the bf16 magic: (word >> 4i) & 0x000f000f |
// 0x43004300 is the pair 128 + code), the slot's x (act) rounded to bf16 is B's column 0, the
// other 7 columns zero. 7/8 of the MMA is wasted, but a weight costs < 0.1 instruction (the f32
// tiles' decode costs ~3), so both steps can run at the weight stream's rate given enough loads
// in flight. The tile math is fast_gemv_mma.cu's: lane (g, t) loads chunk t of a k-tile (4
// chunks of 32 columns) of rows g and g + 8, a quad transpose leaves it word t of every chunk,
// and a chunk's sums are scaled in f32: Σ w·x = s·P + (b − 128·s)·S, P = Σ (128 + code)·x, S = Σ x.
//   gate_up: block = (16 outputs i, slot s); its 8 warps split H by k-tiles (warp w: w, w + 8,
//            …), each on the 16 gate and 16 up rows: 2 k-tiles × 2 matrices × 2 rows = 8 loads
//            of 16 B a lane in flight. While they land, the block stages the slot's x once as
//            every lane's B fragments with each chunk's Σ x (so no Σ x mma a chunk, and only the
//            token's column of the accumulators is scaled). The warps' partials are added in
//            order in shared memory, SwiGLU → act [T·k, I] f32.
//   down:    block = (16 outputs h, token t); the token's k·⌈I/128⌉ (slot, k-tile) items over the
//            8 or 16 warps (item n on warp n % warps), U items a warp in flight (2·U loads of 16 B
//            a lane).
//            Each item's partial goes to shared memory; then y[t, h] = Σ_j weights[t, j]·o_j,
//            o_j the sum of slot j's k-tile partials, slots in order (no atomics).
// Each warp stages its own batch's B fragments (bf16) in shared memory: no block barrier before
// the first weight loads, which are issued before x is read. With programmatic dependent launch
// (pdl), the down kernel starts while gate_up runs: its first weight loads are issued before it
// waits for gate_up's act (griddepcontrol.wait); ids and weights come from before gate_up.
// Each matrix is read in the order its descriptor names (row-major or 16-row tiles: PackedLayout).
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_slots.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kRows = 16;     // outputs a block: one m16 row tile
constexpr int kDownSmemMax = 96 * 1024;
constexpr int kMaxChunks = int(kMoeDecodeMmaMaxH / 32);  // gate_up: x staged in 64·H/32 bytes ≤ 32 KiB

// Rows r and r + 8 of a packed Int4 matrix as lane (g, t) reads them (r = row tile + g, so both
// in one tile of 16 rows), and the matrix's PackedLayout::chunk and scale_group in 32-bit math
// (offsets within a row fit; the layout's fields, ≤ 1024, copied). Few registers: 32-bit steps.
struct Rows {
    const uint8_t* codes;     // row r
    const uint16_t* scales;   // row r
    const uint16_t* biases;   // row r, or null (bias = −8·scale)
    int code_step;            // code bytes from row r to r + 8: 8·lay.row (4·K or 512)
    int scale_step;           // halves from row r's scales (biases) to r + 8's: 8·lay.s_row (H, I ≤ 65535·8: fits)
    int cpg;                  // chunks a scale group
    PackedRowSteps st;        // chunk and scale_group of its matrix (32-bit)
};
// From a matrix's codes, scales, biases (addresses, 0 for none), group size and order (tiles);
// K = its columns.
__device__ __forceinline__ Rows rows_of(uint64_t codes, uint64_t scales, uint64_t biases, int group, bool tiles, int K,
                                        int r) {
    const PackedLayout lay = packed_layout_k32(group, tiles, K);
    const uint64_t so = uint64_t(lay.scale_row(unsigned(r))) * 2u;  // bytes
    Rows o;
    o.codes = reinterpret_cast<const uint8_t*>(codes + uint64_t(lay.code_row(unsigned(r))));
    o.scales = reinterpret_cast<const uint16_t*>(scales + so);
    o.biases = biases ? reinterpret_cast<const uint16_t*>(biases + so) : nullptr;
    o.code_step = int(8 * lay.row);
    o.scale_step = int(8 * lay.s_row);
    o.cpg = int(unsigned(group) / 32u);
    o.st = packed_row_steps(lay);
    return o;
}
__device__ __forceinline__ Rows rows_of(const PackedMatrix& m, int K, int r) {
    return rows_of(reinterpret_cast<uint64_t>(m.codes), reinterpret_cast<uint64_t>(m.scales),
                   reinterpret_cast<uint64_t>(m.biases), m.group, m.tiles, K, r);
}

// Chunk ch of rows r, r + 8 in flight: codes, and scales (biases) as f16 pairs (row r low).
struct Chunk {
    uint4 q[2];
    uint32_t sc, bi;
};
__device__ __forceinline__ Chunk load_chunk(const Rows& r, int ch, bool ok) {
    Chunk c;
    c.q[0] = c.q[1] = make_uint4(0, 0, 0, 0);
    c.sc = c.bi = 0;
    if (ok) {
        const int gi = r.st.scale_group((r.cpg & (r.cpg - 1)) == 0 ? ch >> (__ffs(r.cpg) - 1) : ch / r.cpg);
        const uint8_t* const p = r.codes + r.st.chunk(ch);
        c.q[0] = load_stream(p);
        c.q[1] = load_stream(p + r.code_step);
        c.sc = uint32_t(__ldg(r.scales + gi)) | uint32_t(__ldg(r.scales + r.scale_step + gi)) << 16;
        if (r.biases) c.bi = uint32_t(__ldg(r.biases + gi)) | uint32_t(__ldg(r.biases + r.scale_step + gi)) << 16;
    }
    return c;
}

// 8 floats of a B fragment entry: columns 8·tq … 8·tq + 7 of a chunk, paired (0,4) (1,5) (2,6)
// (3,7) as the words' nibbles are (nib_pair).
__device__ __forceinline__ uint4 b_entry(const float* p, bool aligned) {
    float v[8];
    load8(p, aligned, v);
    return make_uint4(pack_bf16x2(v[0], v[4]), pack_bf16x2(v[1], v[5]), pack_bf16x2(v[2], v[6]),
                      pack_bf16x2(v[3], v[7]));
}

// The loaded chunks (lane t: chunk t of rows g, g + 8) as word t of every chunk: a 4×4 word
// transpose inside each quad.
template <int MT>
__device__ __forceinline__ void transposed_words(const Chunk (&w)[MT], uint32_t (&X)[MT][2][4], int lane) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            X[mt][h][0] = w[mt].q[h].x;
            X[mt][h][1] = w[mt].q[h].y;
            X[mt][h][2] = w[mt].q[h].z;
            X[mt][h][3] = w[mt].q[h].w;
            quad_transpose(X[mt][h], lane & 3);
        }
}

// acc[mt] += one k-tile of row tile mt (as loaded: lane t has chunk t) times B: the staged
// entries xs [4 chunks][4] of the k-tile, entry (c, t) as lane (g = 0, t)'s fragment of chunk c
// (B's column 0), zeros in the other columns. bias[mt]: the matrix has f16 biases (else bias =
// −8·scale). Accumulators of m16n8: acc[0] (row g, column 2t), acc[1] (g, 2t + 1), acc[2]
// (g + 8, 2t), acc[3] (g + 8, 2t + 1).
template <int MT>
__device__ __forceinline__ void tile_math(const Chunk (&w)[MT], const bool (&bias)[MT], const uint4* xs,
                                          float (&acc)[MT][4], int lane) {
    const bool on = lane < 4;  // g == 0
    constexpr uint32_t kOne = 0x3f803f80u;
    uint32_t X[MT][2][4];  // word t of chunk c (after the transpose)
    transposed_words(w, X, lane);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const uint4 v = xs[c * 4 + (lane & 3)];
        const uint32_t b[4] = {on ? v.x : 0u, on ? v.y : 0u, on ? v.z : 0u, on ? v.w : 0u};
        float S[4] = {0.f, 0.f, 0.f, 0.f};
        mma_bf16(S, kOne, kOne, kOne, kOne, b[0], b[1]);
        mma_bf16(S, kOne, kOne, kOne, kOne, b[2], b[3]);
        const int src = (lane & ~3) | c;  // the lane that loaded chunk c's scales
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float P[4] = {0.f, 0.f, 0.f, 0.f};
            const uint32_t w0 = X[mt][0][c], w1 = X[mt][1][c];
            mma_bf16(P, nib_pair<0>(w0), nib_pair<0>(w1), nib_pair<1>(w0), nib_pair<1>(w1), b[0], b[1]);
            mma_bf16(P, nib_pair<2>(w0), nib_pair<2>(w1), nib_pair<3>(w0), nib_pair<3>(w1), b[2], b[3]);
            const uint32_t sc = __shfl_sync(kFull, w[mt].sc, src), bi = __shfl_sync(kFull, w[mt].bi, src);
            const float s0 = half_bits(uint16_t(sc & 0xffffu)), s1 = half_bits(uint16_t(sc >> 16));
            const float e0 = bias[mt] ? fmaf(-128.f, s0, half_bits(uint16_t(bi & 0xffffu))) : -136.f * s0;
            const float e1 = bias[mt] ? fmaf(-128.f, s1, half_bits(uint16_t(bi >> 16))) : -136.f * s1;
            acc[mt][0] = fmaf(s0, P[0], fmaf(e0, S[0], acc[mt][0]));
            acc[mt][1] = fmaf(s0, P[1], fmaf(e0, S[1], acc[mt][1]));
            acc[mt][2] = fmaf(s1, P[2], fmaf(e1, S[2], acc[mt][2]));
            acc[mt][3] = fmaf(s1, P[3], fmaf(e1, S[3], acc[mt][3]));
        }
    }
}

// tile_math with the block's x staged once (mma_gate_up_kernel): xs the k-tile's entries (c, t)
// as every lane's B fragment (the slot's x in all 8 columns: columns 1–7 repeat column 0 and are
// never read), S[c] = Σ x of chunk c (of the bf16 values) instead of an mma, only acc[mt][0] and
// acc[mt][2] (column 0 of rows g, g + 8) kept.
template <int MT>
__device__ __forceinline__ void tile_math_x1(const Chunk (&w)[MT], const bool (&bias)[MT], const uint4* xs,
                                             const float* S, float (&acc)[MT][4], int lane) {
    uint32_t X[MT][2][4];  // word t of chunk c (after the transpose)
    transposed_words(w, X, lane);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const uint4 b = xs[c * 4 + (lane & 3)];
        const float Sc = S[c];
        const int src = (lane & ~3) | c;  // the lane that loaded chunk c's scales
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            float P[4] = {0.f, 0.f, 0.f, 0.f};
            const uint32_t w0 = X[mt][0][c], w1 = X[mt][1][c];
            mma_bf16(P, nib_pair<0>(w0), nib_pair<0>(w1), nib_pair<1>(w0), nib_pair<1>(w1), b.x, b.y);
            mma_bf16(P, nib_pair<2>(w0), nib_pair<2>(w1), nib_pair<3>(w0), nib_pair<3>(w1), b.z, b.w);
            const uint32_t sc = __shfl_sync(kFull, w[mt].sc, src), bi = __shfl_sync(kFull, w[mt].bi, src);
            const float s0 = half_bits(uint16_t(sc & 0xffffu)), s1 = half_bits(uint16_t(sc >> 16));
            const float e0 = bias[mt] ? fmaf(-128.f, s0, half_bits(uint16_t(bi & 0xffffu))) : -136.f * s0;
            const float e1 = bias[mt] ? fmaf(-128.f, s1, half_bits(uint16_t(bi >> 16))) : -136.f * s1;
            acc[mt][0] = fmaf(s0, P[0], fmaf(e0, Sc, acc[mt][0]));
            acc[mt][2] = fmaf(s1, P[2], fmaf(e1, Sc, acc[mt][2]));
        }
    }
}

// Block (x, y) = (outputs 16·x …, slot y). H, I multiples of 32 (whole row tiles of 16). U:
// k-tiles a warp has in flight (2: 2 blocks an SM; 1: 3 blocks, more blocks resident at once).
template <int U>
__global__ void __launch_bounds__(kThreads, U == 1 ? 3 : 2)
    mma_gate_up_kernel(float* __restrict__ act, const float* __restrict__ x, int64_t ldx, int H, int I, int E,
                       const PackedMatrix* __restrict__ gates, const PackedMatrix* __restrict__ ups,
                       const int32_t* __restrict__ ids, int k, bool x_aligned) {
    extern __shared__ uint4 xs[];            // [k-tiles · 4 chunks][4]: the slot's x as B fragments
    __shared__ float S[kMaxChunks + 4];      // Σ x of each chunk (of the bf16 values); zeros past H
    __shared__ float red[kWarps][2][kRows];  // a warp's partial gate, up outputs
    const int64_t s = blockIdx.y;
    const int i0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const int e = slot_expert<kRows>(ids, s, E, act, I, i0);  // PDL wait; NaN rows for a bad id
    if (e < 0) return;  // the whole block
    const int nch = H / 32, nkt = (nch + 3) / 4;
    const int nj = warp < nkt ? (nkt - warp + kWarps - 1) / kWarps : 0;  // this warp's k-tiles
    const Rows rows[2] = {rows_of(gates[e], H, i0 + g), rows_of(ups[e], H, i0 + g)};
    const bool bias[2] = {rows[0].biases != nullptr, rows[1].biases != nullptr};
    const float* xt = x + (s / k) * ldx;

    // This warp's first batch of weights in flight, then x staged once for the block.
    Chunk w[U][2];
    auto load = [&](int j0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = (warp + kWarps * (j0 + u)) * 4 + t;
            const bool ok = j0 + u < nj && ch < nch;
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) w[u][mt] = load_chunk(rows[mt], ch, ok);
        }
    };
    load(0);
    for (int en = int(threadIdx.x); en < nkt * 16; en += kThreads) {  // whole quads: en & 3 = lane & 3
        const uint4 v = en < nch * 4 ? b_entry(xt + (en >> 2) * 32 + (en & 3) * 8, x_aligned) : make_uint4(0, 0, 0, 0);
        xs[en] = v;
        const uint32_t words[4] = {v.x, v.y, v.z, v.w};
        float part = 0.f;
#pragma unroll
        for (int i = 0; i < 4; ++i) part += __uint_as_float(words[i] << 16) + __uint_as_float(words[i] & 0xffff0000u);
        part += __shfl_xor_sync(__activemask(), part, 1);
        part += __shfl_xor_sync(__activemask(), part, 2);
        if ((en & 3) == 0) S[en >> 2] = part;
    }
    __syncthreads();

    float acc[2][4];
#pragma unroll
    for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][i] = 0.f;
    for (int j0 = 0; j0 < nj; j0 += U) {
        if (j0 > 0) load(j0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (j0 + u >= nj) break;  // uniform over the warp
            const int kt = warp + kWarps * (j0 + u);
            tile_math_x1<2>(w[u], bias, &xs[kt * 16], &S[kt * 4], acc, lane);
        }
    }
    if (t == 0)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) red[warp][mt][g] = acc[mt][0], red[warp][mt][g + 8] = acc[mt][2];
    __syncthreads();
    if (threadIdx.x < kRows) {
        const int r = int(threadIdx.x);
        float gv = red[0][0][r], uv = red[0][1][r];
#pragma unroll
        for (int q = 1; q < kWarps; ++q) gv += red[q][0][r], uv += red[q][1][r];
        act[s * I + i0 + r] = gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
    }
}

// Block (x, y) = (outputs 16·x …, token y) of NW warps (8: 2 blocks an SM at U = 4; 16: one,
// twice the warps on a T = 1 grid of H / 16 blocks). Dynamic shared memory: part [k·nkt][16].
template <int NW, int U>
__global__ void __launch_bounds__(NW * 32, NW == 8 && U <= 4 ? 2 : 1)
    mma_down_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ act, int H, int I, int E,
                    const PackedMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                    const float* __restrict__ weights, int k) {
    extern __shared__ float part[];            // item n = j·nkt + kt: slot j's partial outputs
    __shared__ uint4 xs[NW][U * 16];       // a warp's batch: entry (u, c, tq)
    __shared__ float slot_out[kMoeMaxTopK][kRows];
    const int64_t tok = blockIdx.y;
    const int h0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const int nch = I / 32, nkt = (nch + 3) / 4, items = k * nkt;
    const int mine = warp < items ? (items - warp + NW - 1) / NW : 0;  // this warp's items
    // The epilogue's thread (row r, slot j) reads its routing weight early.
    const int ej = int(threadIdx.x) / kRows;
    const float wj = ej < k ? weights[tok * k + ej] : 0.f;

    for (int m0 = 0; m0 < mine; m0 += U) {
        // Lane u < U looks up item u's expert and its down matrix (the U chains of dependent
        // loads in parallel), then every lane takes them by shuffles.
        int le = 0, lgroup = 32;  // group | tiles (bit 0: the group is a multiple of 32)
        uint64_t lcodes = 0, lscales = 0, lbiases = 0;
        if (lane < U && m0 + lane < mine) {
            le = ids[tok * k + (warp + NW * (m0 + lane)) / nkt];
            if (le >= 0 && le < E) {
                const PackedMatrix& m = downs[le];
                lcodes = reinterpret_cast<uint64_t>(m.codes);
                lscales = reinterpret_cast<uint64_t>(m.scales);
                lbiases = reinterpret_cast<uint64_t>(m.biases);
                lgroup = m.group | int(m.tiles);
            }
        }
        Chunk w[U][1];
        bool bias[U][1], bad[U];
        int slot[U], ktile[U];
        unsigned bad_mask = 0;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int n = warp + NW * (m0 + u);
            const bool live = m0 + u < mine;
            slot[u] = live ? n / nkt : 0;
            ktile[u] = n - slot[u] * nkt;
            const int e = __shfl_sync(kFull, le, u);
            bad[u] = live && (e < 0 || e >= E);
            bad_mask |= bad[u] ? 1u << u : 0u;
            const bool use = live && !bad[u];
            const int gt = __shfl_sync(kFull, lgroup, u);
            const Rows r = rows_of(__shfl_sync(kFull, lcodes, u), __shfl_sync(kFull, lscales, u),
                                   __shfl_sync(kFull, lbiases, u), gt & ~1, (gt & 1) != 0, I, h0 + g);
            bias[u][0] = r.biases != nullptr;
            const int ch = ktile[u] * 4 + t;
            w[u][0] = load_chunk(r, ch, use && ch < nch);
        }
        if (m0 == 0) {  // gate_up's act is complete and visible (pdl); the next kernel may start
            pdl::wait();
            pdl::trigger();
        }
        for (int en = lane; en < U * 16; en += 32) {  // act while the weights are in flight
            const int u = en >> 4, c = (en >> 2) & 3, tq = en & 3;
            const int n = warp + NW * (m0 + u);
            const int j = n / nkt, ch = (n - j * nkt) * 4 + c;
            const bool ok = m0 + u < mine && ch < nch && !((bad_mask >> u) & 1u);
            xs[warp][en] = ok ? b_entry(act + (tok * k + j) * I + ch * 32 + tq * 8, true) : make_uint4(0, 0, 0, 0);
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (m0 + u >= mine) break;  // uniform over the warp
            float acc[1][4] = {{0.f, 0.f, 0.f, 0.f}};
            if (!bad[u]) tile_math<1>(w[u], bias[u], &xs[warp][u * 16], acc, lane);
            if (t == 0) {
                float* p = part + (slot[u] * nkt + ktile[u]) * kRows;
                p[g] = bad[u] ? quiet_nan() : acc[0][0];
                p[g + 8] = bad[u] ? quiet_nan() : acc[0][2];
            }
        }
        __syncwarp();  // the next batch overwrites xs
    }
    pdl::wait();  // warps without items too: y is written after the previous grid ends
    sum_slots_in_order<kRows>(part, nkt, k, wj, slot_out, y + tok * ldy + h0);
}

unsigned blocks_of(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

int down_items(int64_t I, int k) { return k * int((I / 32 + 3) / 4); }

template <int NW, int U>
cudaError_t launch_down(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                        const int32_t* ids, const float* weights, int k, bool pdl, cudaStream_t stream) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(mma_down_kernel<NW, U>, cudaFuncAttributeMaxDynamicSharedMemorySize, kDownSmemMax);
    if (attr != cudaSuccess) return attr;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(blocks_of(w.H, kRows), unsigned(T), 1);
    cfg.blockDim = dim3(NW * 32, 1, 1);
    cfg.dynamicSmemBytes = moe_decode_mma_smem_bytes(w.I, k);
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, mma_down_kernel<NW, U>, y, ldy, act, int(w.H), int(w.I), w.E, w.down, ids, weights,
                              k);
}

}  // namespace

size_t moe_decode_mma_smem_bytes(int64_t I, int k) { return size_t(down_items(I, k)) * kRows * sizeof(float); }
size_t moe_decode_mma_smem_limit() { return kDownSmemMax; }

int moe_decode_mma_down_batch(int64_t I, int k) {
    const int per_warp = (down_items(I, k) + kWarps - 1) / kWarps;
    return per_warp <= 4 ? 4 : 8;
}

cudaError_t launch_moe_decode_mma_gate_up(float* act, const float* x, int64_t ldx, int64_t T,
                                          const MoePackedExperts& w, const int32_t* ids, int k, int batch,
                                          cudaStream_t stream) {
    const dim3 grid(blocks_of(w.I, kRows), unsigned(T * k));
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    if (w.H / 32 > kMaxChunks) return cudaErrorInvalidValue;  // checked on the host (fast_moe.cpp)
    const size_t smem = size_t((w.H / 32 + 3) / 4) * 16 * sizeof(uint4);
    return pdl::launch(batch == 1 ? mma_gate_up_kernel<1> : mma_gate_up_kernel<2>, grid, kThreads, smem, stream, act,
                       x, ldx, int(w.H), int(w.I), w.E, w.gate, w.up, ids, k, aligned);
}

cudaError_t launch_moe_decode_mma_down(float* y, int64_t ldy, const float* act, int64_t T,
                                       const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                       int batch, int warps, bool pdl, cudaStream_t stream) {
    if (warps == 16) return launch_down<16, 4>(y, ldy, act, T, w, ids, weights, k, pdl, stream);
    if (batch == 0) batch = moe_decode_mma_down_batch(w.I, k);
    return batch == 8 ? launch_down<8, 8>(y, ldy, act, T, w, ids, weights, k, pdl, stream)
                      : launch_down<8, 4>(y, ldy, act, T, w, ids, weights, k, pdl, stream);
}

}  // namespace tessera::cuda::fast::detail
