// The fast MoE's grouped kernels for few rows an expert (MoePlan::mid: decode steps of T ≥ 3 with
// ≤ 8 rows an expert on average): each work item of moe_group (one expert, ≤ 8 grouped rows)
// streams its expert's weights ONCE and computes all of its rows, on mma.sync m16n8k16 bf16 → f32
// with the WEIGHTS as A (16 rows; Int4 dequantized in registers by fast_mma.cuh's
// dequant_int4_pairs: (code − c)·scale + bias rounded once to bf16, the v2 tiles' bound) and the
// item's rows as B's 8 columns, staged once a block in shared memory.
//   Why not dp4a (fast_moe_decode_dp4a.cu): its x in two int8 limbs costs 2 dp4a a row per 4
// weights (half-rate integer pipe), so at 4–8 rows a weight costs 4–8 issue slots, past the ~3.5
// an SM can spend while streaming 37 weights a clock; here a weight costs ~2 instructions whatever
// the rows (the mma's 8 columns are free). Why not the v2 tiles (fast_moe_mma.cu): tokens as A
// pad every item to 16 rows, and its 4-stage pipeline over a block's short K (4 k-tiles of down)
// never reaches a steady state.
//
// Lane (g, t) holds, per k-tile of 128 columns, chunk t (32 columns, 16 bytes) of rows g and g + 8
// of its warp's row tile: word j of the chunk gives A's pairs (i, i + 4) of two k-steps, and B (each
// 8 columns stored (0,4,1,5,2,6,3,7): the gather's bf16 order) gives the same columns of column
// g's row in one 16-byte read: no transposes or shuffles. A k-step mixes 4 chunks (scale groups),
// so the scales are applied in the dequant, before the mma.
//   gate_up: block = (item, 64 or 128 outputs); warps 0–3 stream gate's 4 row tiles, 4–7 up's (or
//            8 of each, two a warp in turn: MoePlan::mid_gate_up_tiles), each over all of H; up's
//            sums pass to gate's warps through shared memory, SwiGLU → act [T·k, I] bf16 in the
//            gather's order.
//   down:    block = (item, 256 or 512 outputs); a warp two or four row tiles (128 rows apart) over
//            all of I, one after the other through one ring (I = 512 is only 4 k-tiles: a block's
//            start is paid once for 72 or 144 KB; MoePlan::mid_down_tiles) → out [T·k, H] f32;
//            combine (fast_moe_experts.cu) sums each token's k slots in slot order.
// A warp keeps U k-tiles in flight (a ring: each slot refilled as soon as it is consumed): 3 (3
// blocks an SM, 24 warps × 3 KB) — or 4 (2 blocks an SM, 16 warps × 4 KB) where that holds all of
// a warp's k-tiles (small shapes only); MoePlan::mid_ring forces either, for A/B. Both kernels launch
// by programmatic dependent launch: they read the grouping (complete: two or more launches back,
// pdl.cuh) and request their first weights before griddepcontrol.wait, then stage B — rows
// [kt][word j][chunk t] of 16 bytes, 2·K128 + 64 bytes apart, so each quarter-warp's 8 lanes read 8
// distinct bank groups. Lanes of a column past the item's rows read row n − 1 (finite; never
// stored). Deterministic: each output is one warp's mma chain over k in order.
//
// Weights in either order of packed_weight.h (row-major, or 16-row tiles: a warp's k-tile is then
// two 512-byte runs instead of 16 runs of 64 bytes — session 19's loads-only floor of gate+up at
// T = 64 on the flagship: 75.6 against 90.3 µs, a pure stream of the same bytes 71.6).
// ptxas (nvcc 13, sm_90a, -O3), registers / spills: ring 3 — gate_up 80 / 0, down 80 / 8 bytes
// (3 blocks of 256 threads an SM); ring 4 — gate_up 100 / 0, down 101 / 0 (2 blocks). Shared
// memory a block: 8·(2·K128 + 64) bytes (+ 4 KB gate_up's exchange, two buffers): H = 2048 37,376, I = 512 8,704.
//
// Expected before it ran: at T = 64 on the flagship ~222 of 256 experts, 384 MB, a stream of ~80
// µs at 4.8 TB/s. In flight an SM ~64–72 KB against the ~50 KB Little's law asks at ~1.5 µs under
// load; ~2.1 instructions a weight, 60–65 % of an SM's issue at the stream's rate; guessed ~100–120
// µs a layer with the gather and combine (PERF.md: ≥ 6,000 tok/s at 64 requests wants the MoE step
// near ~120 µs a layer). Measured (H200, bench_fast_moe, flagship T = 64, µs a layer): session 18
// 189.1 (gate+up 112.2, down 61.7, combine 4.5) against the v2 tiles' 228; session 19, the dequant's
// AND + OR in one LOP3 and a leaner load path (~20 % fewer instructions in the k-loop), 179.3
// (107.1 + 55.7), then the experts in 16-row tiles 170.5 (98.1 + 55.5: 2.74 and 2.42 TB/s). Ncu
// (session 19, row-major): gate+up issue-active 67 %, stalls long-scoreboard then math-pipe
// throttle, a third of the warps' samples in the block's start (B staged, first tiles awaited).
// Down with 4 row tiles a warp (512 outputs a block; session 21, ring 3, µs): T = 8 24.2 against
// 20.5 with 2, 16 33.4 / 30.8, 32 44.9 / 43.7, 48 45.5 / 48.3, 64 52.8 / 55.2, 96 58.1 / 59.2 — so 4
// from 384 grouped rows (kMoeMidDown4Rows), 2 below (few items leave SMs idle with 4).
// Gate+up with 2 row tiles a warp (MoePlan::mid_gate_up_tiles = 2; session 21, after its device
// time was spent): compile-checked only (ring 3: 80 registers, 8 bytes of spills; ring 4: 100, none),
// NOT YET RUN ON A GPU — its tests are the mid plans' (mid_plans(), check_mid); the pick keeps 1.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kRows = kMoeMidRows;  // rows an item: B's 8 columns
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kKt = 128;            // columns a k-tile: 4 chunks of 32, a lane's one chunk

// NMAT matrices (gate and up: 2, down: 1) × kRT row tiles = 8 warps, each streaming one matrix's
// row tile over all of K — kRPW row tiles in turn (kRT apart), through one ring: down's K = I is
// short (4 k-tiles at 512), so a warp takes two row tiles and a block's start is paid once for both.
// RPW: row tiles a warp — gate+up 1 or 2 (MoePlan::mid_gate_up_tiles: 2 stages B once for twice
// the rows; an exchange barrier a row tile), down 2 or 4 (MoePlan::mid_down_tiles: 4 halves the
// blocks and pays a block's start once for 4 row tiles).
template <int NMAT, int RPW = NMAT == 1 ? 2 : 1>
struct Cfg {
    static_assert(NMAT == 1 || RPW <= 2, "gate+up: one or two row tiles a warp");
    static constexpr int kRT = kWarps / NMAT;
    static constexpr int kRPW = RPW;
};
// Gate+up's floats of up's sums handed to gate's warps: two buffers (a row tile's, the next one's).
template <int NMAT>
constexpr int kXchgFloats = (NMAT - 1) * 2 * (kWarps / NMAT) * 4 * 32;
// U: k-tiles a warp has in flight (a ring: a slot is refilled as soon as it is consumed). 3: ≤ 80
// registers, 3 blocks an SM (24 warps × 3 KB); 4: ~100 registers, 2 blocks (16 warps × 4 KB).
template <int U>
constexpr int kMinBlocks = U == 3 ? 3 : 2;

// Bytes between staged B rows (K columns rounded up to k-tiles, 64 bytes apart in banks).
__host__ __device__ constexpr int stage_row_bytes(int K) { return 2 * ((K + kKt - 1) / kKt * kKt) + 64; }

// Where column c of a row lands in the gather's bf16 order: each 8 as (0,4,1,5,2,6,3,7).
__device__ __forceinline__ int perm_col(int c) {
    const int i = c & 7;
    return (c & ~7) + (i < 4 ? 2 * i : 2 * (i - 4) + 1);
}

// Rows g and g + 8 of a warp's row tiles of one packed Int4 matrix of K columns, in either order
// (packed_weight.h: row-major, or 16-row tiles). Lane (g, t)'s chunk t of k-tile kt of its r-th
// row tile sits at codes + r·rtile + kt·ktile (+ code8 for row g + 8): 16·t is folded in, 64 or
// 1024 bytes a k-tile. Its scale group at scales + r·s_rtile + (kt << s_sl >> s_sr): G is 32·2^j
// (moe_check_experts), so a k-tile of 128 columns holds 128/G whole groups (G ≤ 128: t's group
// t/(G/32) folded in; a k-tile steps 128/G halves row-major, 16·128/G in tiles) or is part of one
// (G > 128, row-major only: group kt/(G/128)).
struct Rows {
    const uint8_t* codes;    // row g, chunk t of k-tile 0
    const uint16_t* scales;  // row g, k-tile 0's group of chunk t
    const uint16_t* biases;  // likewise, or null (bias = −8·scale)
    int code8, scale8;       // row g + 8: codes + code8, scales + scale8
    int ktile;               // a k-tile's step in code bytes
    int s_sl, s_sr;          // k-tile kt's scale group: kt << s_sl >> s_sr
    int s_rtile;             // RT row tiles' step (a warp's next row tile) in scale halves; in code
};                           // bytes RT·16·K/2 in either order (a row tile's codes are contiguous)
__device__ __forceinline__ Rows rows_of(const PackedMatrix* __restrict__ m, int e, int r, int tq, int rt_step) {
    const PackedMatrix pm = m[e];
    const PackedLayout lay = packed_layout(pm);
    const int lg = __ffs(pm.group / 32) - 1;  // log2 of the chunks a scale group
    const bool whole = lg <= 2;                 // G ≤ 128: whole groups a k-tile (always so in tiles)
    const int s0 = int(lay.scale_row(r)) + (whole ? tq >> lg : 0);
    Rows o;
    o.codes = pm.codes + lay.code_row(r) + 16 * tq;
    o.scales = pm.scales + s0;
    o.biases = pm.biases ? pm.biases + s0 : nullptr;
    o.code8 = int(lay.code_row(r + 8) - lay.code_row(r));
    o.scale8 = int(lay.scale_row(r + 8) - lay.scale_row(r));
    o.ktile = int(lay.ktile);
    o.s_sl = !whole ? 0 : pm.tiles ? 4 + (2 - lg) : 2 - lg;  // s_ktile = 16·(128/G) in tiles
    o.s_sr = whole ? 0 : lg - 2;
    o.s_rtile = int(lay.s_row_tile) * rt_step;
    return o;
}

// A lane's share of a k-tile of one matrix: chunk t of rows g, g + 8 and their f16 scales
// (biases), row g in the low half. Zeros where masked (ok false: nothing is read). lr: the warp's
// row tile (0 … RPW − 1), rtile bytes apart; kt: the k-tile.
struct Tile {
    uint4 q[2];
    uint32_t s, b;
};
__device__ __forceinline__ Tile load_tile(const Rows& r, int lr, int rtile, int kt, bool ok) {
    Tile tl;
    tl.q[0] = tl.q[1] = make_uint4(0, 0, 0, 0);
    tl.s = tl.b = 0;
    if (ok) {
        const uint8_t* c = r.codes + lr * rtile + kt * r.ktile;
        const int so = lr * r.s_rtile + (kt << r.s_sl >> r.s_sr);
        tl.q[0] = load_stream(c);
        tl.q[1] = load_stream(c + r.code8);
        tl.s = uint32_t(__ldg(r.scales + so)) | uint32_t(__ldg(r.scales + so + r.scale8)) << 16;
        if (r.biases) tl.b = uint32_t(__ldg(r.biases + so)) | uint32_t(__ldg(r.biases + so + r.scale8)) << 16;
    }
    return tl;
}

__device__ __forceinline__ uint32_t word(const uint4& v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// acc += A (the lane's tile of k-tile kt) · B (staged: b points at the lane's column row, chunk t
// of k-tile 0). negc: −(128 + c) as bf16x2 (−128 with biases, −136 without: bias −8·scale).
// Accumulators of m16n8: [0] (row g, column 2t), [1] (g, 2t + 1), [2] (g + 8, 2t), [3] (g + 8, 2t + 1).
__device__ __forceinline__ void tile_mma(const Tile& tl, uint32_t negc, const uint8_t* b, int kt, float (&acc)[4]) {
    const uint32_t sa = f16_to_bf16x2(uint16_t(tl.s)), sb = f16_to_bf16x2(uint16_t(tl.s >> 16));
    const uint32_t ba = tl.b ? f16_to_bf16x2(uint16_t(tl.b)) : 0u, bb = tl.b ? f16_to_bf16x2(uint16_t(tl.b >> 16)) : 0u;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const uint4 bv = *reinterpret_cast<const uint4*>(b + kt * 256 + 64 * j);  // pairs (0,4) (1,5) (2,6) (3,7)
        uint32_t pa[4], pb[4];  // rows g and g + 8: pairs (i, i + 4) of word j
        dequant_int4_pairs(word(tl.q[0], j), sa, ba, negc, pa);
        dequant_int4_pairs(word(tl.q[1], j), sb, bb, negc, pb);
        mma_bf16(acc, pa[0], pb[0], pa[1], pb[1], bv.x, bv.y);
        mma_bf16(acc, pa[2], pb[2], pa[3], pb[3], bv.z, bv.w);
    }
}

// One block: item blockIdx.x of g, row tiles kRT·kRPW·blockIdx.y … of N output rows a matrix. B
// [rows, K] bf16 (the gather's order, row stride K): the item's rows as B's columns. NMAT 2: gate
// m0, up m1 → act [rows, N] bf16 (the gather's order); NMAT 1: m0 → out [rows, N] f32.
template <int NMAT, int U, int RPW_>
__global__ void __launch_bounds__(kThreads, kMinBlocks<U>)
    mid_kernel(const __nv_bfloat16* __restrict__ B, int K, int N, int E, const PackedMatrix* __restrict__ m0,
               const PackedMatrix* __restrict__ m1, MoeGrouping g, __nv_bfloat16* __restrict__ act,
               float* __restrict__ out) {
    constexpr int RT = Cfg<NMAT, RPW_>::kRT, RPW = Cfg<NMAT, RPW_>::kRPW;
    extern __shared__ __align__(16) uint8_t smem[];  // B staged [kRows][row bytes], then up's sums
    // item < max_items: the reads are in bounds (stale past n_items, and then unused); issued together.
    const int item = int(blockIdx.x);
    const int n_items = *g.n_items, e = g.item_expert[item], r0 = g.item_row0[item];
    const int n = min(g.item_rows[item], kRows);     // ≤ 8 by the plan; never past the staging area
    if (item >= n_items || e < 0 || e >= E) return;  // the whole block; items name valid experts only

    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), gq = lane >> 2, tq = lane & 3;
    const int rt = warp % RT, m = warp / RT;          // row tile, matrix (gate 0, up 1)
    const int tile0 = int(blockIdx.y) * RT * RPW + rt;  // the warp's row tiles: tile0 + RT·r, r < RPW
    const int nch = K / 32, nkt = (nch + 3) / 4, tiles = N / 16;  // N is a multiple of 32: whole tiles
    const int nr = tile0 < tiles ? min(RPW, (tiles - tile0 + RT - 1) / RT) : 0;  // live row tiles
    const int nv = nr * nkt;  // the warp's k-tiles, row tile after row tile

    const Rows rows = rows_of(m == 0 ? m0 : m1, e, nr > 0 ? 16 * tile0 + gq : 0, tq, RT);
    Tile tl[U];
    int lr = 0, lkt = 0;  // the next load's row tile and k-tile
    auto load = [&](Tile& slot, int v) {
        slot = load_tile(rows, RPW > 1 ? lr : 0, RT * 8 * K, lkt, v < nv && 4 * lkt + tq < nch);
        if (++lkt == nkt) lkt = 0, ++lr;
    };
#pragma unroll
    for (int u = 0; u < U; ++u) load(tl[u], u);  // in flight while the kernel before ends and B is staged

    pdl::wait();  // B (the gather's xg, or gate_up's act) complete and visible
    pdl::trigger();
    const int row_bytes = stage_row_bytes(K), units = (nkt * kKt) / 8;  // 16-byte units a staged row
    const __nv_bfloat16* src = B + int64_t(r0) * K;
    for (int u = int(threadIdx.x); u < n * units; u += kThreads) {
        const int r = u / units, uu = u - r * units;
        const int kt = uu >> 4, t = (uu >> 2) & 3, j = uu & 3;  // unit uu = chunk 4kt + t, word j
        const bool ok = 8 * uu < K;                             // zeros past K: A is zero there too
        cp_async16(smem_addr(smem + r * row_bytes + kt * 256 + 64 * j + 16 * t),
                   ok ? src + int64_t(r) * K + 8 * uu : src, ok);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    const uint8_t* b = smem + (gq < n ? gq : n - 1) * row_bytes + 16 * tq;
    const uint32_t negc = rows.biases ? 0xc300c300u : 0xc308c308u;
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    // Lane (g, t)'s outputs: acc[2h + c2] = (row g + 8h, item row 2t + c2).
    auto store = [&](int tile) {  // down: the row tile's outputs, then a fresh sum
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int c2 = 0; c2 < 2; ++c2) {
                const int c = 2 * tq + c2, i = 16 * tile + gq + 8 * h;
                if (c < n) out[int64_t(r0 + c) * N + i] = acc[2 * h + c2];
                acc[2 * h + c2] = 0.f;
            }
    };
    // Gate+up, at the end of the warps' r-th row tile: up's warps hand their sums to gate's (buffer
    // r % 2, so the next row tile's hand-over does not wait for these reads), which apply SwiGLU
    // (gate's warps with row tile r: act) — then fresh sums. With RPW 2 every warp passes 2 such
    // barriers, one in its loop at each row tile's end (a warp with fewer live row tiles passes
    // the rest after its loop); with RPW 1 the one barrier follows the loop.
    auto swiglu = [&](int r) {
        float* xchg = reinterpret_cast<float*>(smem + kRows * row_bytes) + ((r & 1) * RT + rt) * 128 + lane;
        if (m == 1)
#pragma unroll
            for (int q = 0; q < 4; ++q) xchg[32 * q] = acc[q];
        __syncthreads();
        if (m == 0 && r < nr) {
            const int tile = tile0 + RT * r;
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int c2 = 0; c2 < 2; ++c2) {
                    const int c = 2 * tq + c2, i = 16 * tile + gq + 8 * h;  // item row c (a token's slot), output i
                    if (c >= n) continue;
                    const float gv = acc[2 * h + c2], uv = xchg[32 * (2 * h + c2)];
                    const float a = gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
                    act[int64_t(r0 + c) * N + perm_col(i)] = __float2bfloat16_rn(a);
                }
        }
        if constexpr (RPW > 1)
#pragma unroll
            for (int q = 0; q < 4; ++q) acc[q] = 0.f;
    };
    int cr = 0, ckt = 0;  // the row tile and k-tile computed next
    for (int v0 = 0; v0 < nv; v0 += U) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (v0 + u >= nv) break;  // uniform over the warp
            tile_mma(tl[u], negc, b, ckt, acc);
            load(tl[u], v0 + u + U);  // refill the slot just consumed
            if (++ckt == nkt) {
                ckt = 0;
                if constexpr (NMAT == 1) store(tile0 + RT * cr);
                else if constexpr (RPW > 1) swiglu(cr);
                ++cr;
            }
        }
    }
    if constexpr (NMAT == 2) {
        if constexpr (RPW == 1) swiglu(0);
        else
            for (; cr < RPW; ++cr) swiglu(cr);  // the barriers of row tiles this warp does not have
    }
}

template <int NMAT>
size_t smem_bytes(int64_t K) {
    return size_t(kRows) * size_t(stage_row_bytes(int(K))) + size_t(kXchgFloats<NMAT>) * 4;
}

template <int NMAT, int U, int RPW>
cudaError_t launch_ring(const void* B, int64_t K, int64_t N, int E, const PackedMatrix* m0, const PackedMatrix* m1,
                        const MoeGrouping& g, void* act, float* out, cudaStream_t stream) {
    auto* kernel = mid_kernel<NMAT, U, RPW>;
    static const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMoeMidMaxSmem));
    if (attr != cudaSuccess) return attr;
    constexpr int per_block = Cfg<NMAT, RPW>::kRT * RPW;  // row tiles a block
    const dim3 grid(unsigned(g.max_items), unsigned((N / 16 + per_block - 1) / per_block));
    return pdl::launch(kernel, grid, kThreads, smem_bytes<NMAT>(K), stream, static_cast<const __nv_bfloat16*>(B),
                       int(K), int(N), E, m0, m1, g, static_cast<__nv_bfloat16*>(act), out);
}

// ring 0: all of a warp's k-tiles in flight at once where they fit the ring of 4, else the ring of 3
// at 3 blocks an SM (gate+up: 16 k-tiles at H = 2048; down: 2 × 4 at I = 512).
template <int NMAT, int RPW = Cfg<NMAT>::kRPW>
cudaError_t launch(int ring, const void* B, int64_t K, int64_t N, int E, const PackedMatrix* m0,
                   const PackedMatrix* m1, const MoeGrouping& g, void* act, float* out, cudaStream_t stream) {
    if (ring == 0) ring = RPW * ((K + kKt - 1) / kKt) <= 4 ? 4 : 3;
    return ring == 4 ? launch_ring<NMAT, 4, RPW>(B, K, N, E, m0, m1, g, act, out, stream)
                     : launch_ring<NMAT, 3, RPW>(B, K, N, E, m0, m1, g, act, out, stream);
}

}  // namespace

size_t moe_mid_gate_up_smem(int64_t H) { return smem_bytes<2>(H); }
size_t moe_mid_down_smem(int64_t I) { return smem_bytes<1>(I); }

cudaError_t launch_moe_mid_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g, int ring,
                                   int row_tiles, cudaStream_t stream) {
    if (row_tiles != 1 && row_tiles != 2) return cudaErrorInvalidValue;
    return row_tiles == 2 ? launch<2, 2>(ring, xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream)
                          : launch<2, 1>(ring, xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
}

cudaError_t launch_moe_mid_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g, int ring,
                                int row_tiles, cudaStream_t stream) {
    if (row_tiles != 2 && row_tiles != 4) return cudaErrorInvalidValue;
    return row_tiles == 4 ? launch<1, 4>(ring, act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream)
                          : launch<1, 2>(ring, act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
}

}  // namespace tessera::cuda::fast::detail
