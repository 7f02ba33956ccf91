// The fast MoE's decode step on the integer units (MoePlan::dp4a_decode), per slot: the token's
// x (gate+up) or its k act rows (down) quantized by each block into two int8 limbs in shared
// memory, the experts' Int4 rows dotted with them by dp4a — fast_dp4a.cuh, the same math as the
// decode GEMV's Dp4a variant (|x − x̃| ≤ max|x| / 64516 per 32 columns, exact integer products,
// f32 sums). A lane keeps one weight row's 64 columns of every k-tile it takes (row l / 2 of a
// block's 16, half l % 2), so no transposes or shuffles until the end.
//   gate_up: block = (16 outputs i, slot j, token t) — grid (I/16, k, T), so the slot and token
//            need no division; its 8 warps split H by k-tiles (warp w: w, w + 8, …), each lane on
//            gate and up row i: 2 k-tiles × 2 matrices in flight (H = 2048: all of them). The
//            weights are requested as soon as the slot's expert is known, then the block
//            quantizes the token's x — or, where x was complete before the routing kernel ran
//            (x_settled), before its PDL wait (end to end at 4K, with the down kernel's items all
//            in flight: 493.0 / 492.1 → 504.8 / 499.7 tok/s). SwiGLU of the warps' partials added
//            in order → act [T·k, I] f32. At most 80 registers, so 3 blocks fit an SM: the
//            flagship's 288 blocks (32 output tiles × 9 slots) run in one wave on 132 SMs, not two
//            (H200, 4K decode: 454 → 480 tok/s end to end). With MoeRouteAhead (ROUTE) warp 0 ranks the
//            token's router logits itself and the block waits only after requesting its weights.
//   down:    block = (16 outputs h, token t) of WARPS warps; the token's k·⌈I/128⌉ (slot, k-tile)
//            items over the warps (item n on warp n % WARPS), U items of a warp in flight — 16 × 3
//            at one token (the flagship's 36 items, 9 slots × 4 k-tiles, all before the wait), 8 ×
//            4 at two (MoePlan::mma_down_warps, moe_pick). Started by programmatic dependent
//            launch while gate_up runs: it requests its weights, then waits for act and quantizes
//            the token's k act rows (two batches' loads before either is quantized).
//            Each item's partial goes to shared memory; y[t, h] = Σ_j weights[t, j]·o_j, o_j the
//            sum of slot j's k-tile partials in k-tile order, slots in order (no atomics).
// Where the experts lie in one stack of 16-row tiles (MoeTiling) a lane's k-tiles are a fixed
// step apart and expert e's pointers are computed, not loaded (LaneRow<LG ≥ 0>, ExpertStack): the
// expert id is the only load on the way to the weights, and a k-tile costs two 16-byte loads and
// one of the scales. Otherwise each matrix is read in the order its descriptor names (row-major or
// 16-row tiles: PackedLayout, LaneRow<-1>). Session 38 (docs/cuda-rounds.md, thirty-fifth round): the
// weights through shared memory by cp.async instead of registers (no spills, 64 registers) measured
// slower end to end (559 against 582 tok/s at 4K) — not kept.
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_rank.cuh"
#include "kernels/cuda/fast_moe_slots.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kRows = 16;  // outputs a block
constexpr int kGuWarps = 8, kGuU = 2;  // gate_up: k-tiles a warp in flight (H = 2048: all)
// down: WARPS warps a block, U items a warp in flight: 16 × 3 or 8 × 4 (see above).

// Row r of a packed Int4 expert matrix (chunk 0, group 0), and its matrix's PackedLayout::chunk and
// scale_group in 32-bit math (offsets within a row fit; the layout's fields, ≤ 1024, copied).
struct Row {
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;  // or null
    int cpg;                 // chunks a scale group
    PackedRowSteps st;       // chunk and scale_group of its matrix (32-bit)
};

__device__ __forceinline__ Row row_of(const PackedMatrix& m, int K, int r) {
    const PackedLayout lay = packed_layout_k32(m.group, m.tiles, K);  // K = m.k (checked on the host)
    const int64_t so = lay.scale_row(unsigned(r));
    return {m.codes + lay.code_row(unsigned(r)), m.scales + so, m.biases ? m.biases + so : nullptr, m.group / 32,
            packed_row_steps(lay)};
}

// Chunks 2h, 2h + 1 of k-tile kt of row r (nch = the row's chunks), in its matrix's order.
__device__ __forceinline__ Dp4aTile load_row(const Row& r, int kt, int h, int nch, bool ok) {
    return dp4a_load_row(r.codes, r.scales, r.biases, r.st, kt, h, nch, __ffs(r.cpg) - 1, ok);
}

// A lane's half h of row r of expert e's matrix [n, K]: what load(kt, ok) reads for each k-tile.
// LG ≥ 0: the experts' stack (MoeTiling) in 16-row tiles with G = 32·2^LG — every k-tile whole
// (K a multiple of 128) and a fixed step from the lane's first (1 KB of codes, 16·(4 >> LG) halves
// of scales): two 16-byte loads and one of the scales (G = 32: the chunks' two groups as one word;
// G ≥ 64: their one group), no index math a tile. LG < 0: any order the descriptor names
// (PackedLayout a chunk, chunks past the row's end masked). BIAS false: the matrix is known to
// have no biases (a Q4_0 stack), so no register holds their pointer or a tile's bias word — at one
// token gate+up's four tiles in flight spilled 80 bytes at its 80 registers with them, 32 without
// (ptxas -v, session 42).
template <int LG, bool BIAS = true>
struct LaneRow {
    static constexpr int kScaleStep = 16 * (4 >> LG);  // halves from one k-tile's scales to the next
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;  // or null (always, BIAS false)

    __device__ __forceinline__ static uint32_t groups(const uint16_t* p) {
        if constexpr (LG == 0) return __ldg(reinterpret_cast<const uint32_t*>(p));  // 4-byte aligned (below)
        else return __ldg(p);
    }
    __device__ __forceinline__ Dp4aTile load(int kt, bool ok) const {
        Dp4aTile tl;
        const uint8_t* p = codes + kt * 1024;
        tl.q[0] = ok ? load_stream(p) : make_uint4(0, 0, 0, 0);
        tl.q[1] = ok ? load_stream(p + 16) : make_uint4(0, 0, 0, 0);
        tl.s = ok ? groups(scales + kt * kScaleStep) : 0u;
        tl.b = BIAS && ok && biases ? groups(biases + kt * kScaleStep) : 0u;
        return tl;
    }
    __device__ __forceinline__ bool bias() const { return BIAS && biases != nullptr; }
    __device__ __forceinline__ bool halves() const { return LG == 0; }
};
template <bool BIAS>
struct LaneRow<-1, BIAS> {  // (biases checked a row: the descriptors may differ by expert)
    Row r;
    int nch, h;
    __device__ __forceinline__ Dp4aTile load(int kt, bool ok) const { return load_row(r, kt, h, nch, ok); }
    __device__ __forceinline__ bool bias() const { return r.biases != nullptr; }
    __device__ __forceinline__ bool halves() const { return r.cpg == 1; }
};

// Row tile r >> 4 of the stack's expert e is 8·K bytes of codes and 16·K / G halves of scales from
// the one before; within a k-tile, row r & 15 is 64 bytes and 4 >> LG halves in, half h 32 bytes
// and (2h) >> LG halves further. Scales are 16-byte aligned an expert (MoeTiling), so G = 32's
// pair (an even number of halves in) is a word.
template <int LG, bool BIAS = true>
__device__ __forceinline__ LaneRow<LG, BIAS> lane_row(const ExpertStack& st, int e, int K, int r, int h) {
    if constexpr (LG < 0) {
        return {row_of(expert_matrix(st, e), K, r), K / 32, h};
    } else {
        const int64_t so = e * st.scale_step + int64_t(r >> 4) * (16 * (K >> (5 + LG))) + (r & 15) * (4 >> LG) +
                           ((2 * h) >> LG);
        return {st.m0.codes + e * st.code_step + int64_t(r >> 4) * (8 * K) + (r & 15) * 64 + h * 32,
                st.m0.scales + so, BIAS && st.m0.biases ? st.m0.biases + so : nullptr};
    }
}

struct GateUp {
    Dp4aTile g, u;
};

// Block (i-tile, slot j, token t): slot s = t·k + j, so no division on the way to x. LG, BIAS:
// LaneRow's (BIAS false: neither gate nor up has biases). ROUTE (MoeRouteAhead, ra): the slot's
// expert from the token's router logits, ranked here by warp 0 as the routing kernel beside this
// one ranks them into ids (dev::logits_pick: the same picks) — they were complete before that
// kernel started, as x was (x_settled, which ROUTE implies), so this block reads them before its
// PDL wait and requests its weights without waiting for the ids; the wait (the routing kernel's
// end, so the down kernel this one lets start finds the ids and weights) comes after.
template <int LG, bool BIAS, bool ROUTE = false>
__global__ void __launch_bounds__(kGuWarps * 32, 3)
    dp4a_gate_up_kernel(float* __restrict__ act, const float* __restrict__ x, int64_t ldx, int H, int I, int E,
                        const ExpertStack gates, const ExpertStack ups, const int32_t* __restrict__ ids, int k,
                        bool x_aligned, bool x_settled, const MoeRouteAhead ra) {
    extern __shared__ uint4 smem[];  // the token's x, staged (fast_dp4a.cuh)
    __shared__ float red[kGuWarps][2][kRows];
    __shared__ int routed;  // ROUTE: the slot's expert
    const int64_t s = int64_t(blockIdx.z) * k + blockIdx.y;
    const float* const xt = x + int64_t(blockIdx.z) * ldx;
    const int i0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), h = lane & 1, rw = lane >> 1;
    // x complete before the routing kernel ran (x_settled): quantized before the wait.
    if (x_settled) dp4a_quantize_x<kGuWarps * 32>(xt, ldx, 1, H, x_aligned, smem);
    int e;
    if constexpr (ROUTE) {
        const int j = int(blockIdx.y);
        if (warp == 0) {
            const int pick = ra.shared && j == ra.k
                                 ? ra.E
                                 : logits_pick<kMoeRouteAheadMaxExperts / 32>(ra.logits + int64_t(blockIdx.z) * ra.ldl,
                                                                             ra.E, j);
            if (lane == 0) routed = pick;
        }
        __syncthreads();
        e = routed;  // in [0, E): the ranking's picks are experts, or the shared one
    } else {
        e = slot_expert<kRows>(ids, s, E, act, I, i0);  // PDL wait; NaN rows for a bad id
        if (e < 0) return;  // the whole block
    }
    const int nch = H / 32, nkt = (nch + 3) / 4;
    const int nj = warp < nkt ? (nkt - warp + kGuWarps - 1) / kGuWarps : 0;  // this warp's k-tiles
    const LaneRow<LG, BIAS> rg = lane_row<LG, BIAS>(gates, e, H, i0 + rw, h);
    const LaneRow<LG, BIAS> ru = lane_row<LG, BIAS>(ups, e, H, i0 + rw, h);
    GateUp tl[kGuU];
    auto load = [&](int j0) {
#pragma unroll
        for (int u = 0; u < kGuU; ++u) {
            const int kt = warp + kGuWarps * (j0 + u);
            tl[u].g = rg.load(kt, j0 + u < nj);
            tl[u].u = ru.load(kt, j0 + u < nj);
        }
    };
    load(0);  // the first batch in flight while x is quantized
    if constexpr (ROUTE) {
        pdl::wait();  // the routing kernel's end: its ids and weights complete for the down kernel
        pdl::trigger();
    }

    if (!x_settled) dp4a_quantize_x<kGuWarps * 32>(xt, ldx, 1, H, x_aligned, smem);
    __syncthreads();
    const Dp4aX X = dp4a_x(smem, H, 1);
    float ag = 0.f, au = 0.f;
    for (int j0 = 0; j0 < nj; j0 += kGuU) {
        if (j0 > 0) load(j0);
#pragma unroll
        for (int u = 0; u < kGuU; ++u) {
            if (j0 + u >= nj) break;  // uniform over the warp
            const int kt = warp + kGuWarps * (j0 + u);
            ag += dp4a_tile_dot(tl[u].g, X, 0, kt, h, rg.bias(), rg.halves());
            au += dp4a_tile_dot(tl[u].u, X, 0, kt, h, ru.bias(), ru.halves());
        }
    }

    ag += __shfl_xor_sync(0xffffffffu, ag, 1);
    au += __shfl_xor_sync(0xffffffffu, au, 1);
    if (h == 0) red[warp][0][rw] = ag, red[warp][1][rw] = au;
    __syncthreads();
    if (threadIdx.x < kRows) {
        const int r = int(threadIdx.x);
        float gv = red[0][0][r], uv = red[0][1][r];
#pragma unroll
        for (int q = 1; q < kGuWarps; ++q) gv += red[q][0][r], uv += red[q][1][r];
        act[s * I + i0 + r] = gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
    }
}

// Dynamic shared memory: the token's k act rows staged, then part [k·nkt][16].
// inv_nkt = 1 / ⌈I / 128⌉ in f32: item n's slot is ⌊(n + ½)·inv_nkt⌋ — (n + ½) / nkt is at least
// ½ / nkt from an integer, and the product's error (≤ 2⁻²³ of n / nkt < k) is far below it.
template <int WARPS, int U, int LG>
__global__ void __launch_bounds__(WARPS * 32)
    dp4a_down_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ act, int H, int I, int E,
                     const ExpertStack downs, const int32_t* __restrict__ ids, const float* __restrict__ weights,
                     int k, float inv_nkt) {
    extern __shared__ uint4 smem[];
    __shared__ float slot_out[kMoeMaxTopK][kRows];
    const int64_t tok = blockIdx.y;
    const int h0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), h = lane & 1, rw = lane >> 1;
    const int nch = I / 32, nkt = (nch + 3) / 4, items = k * nkt;
    const int mine = warp < items ? (items - warp + WARPS - 1) / WARPS : 0;  // this warp's items
    float* const part = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(smem) + gemv_dp4a_smem(I, k));
    // ids and weights come from before gate_up (complete: pdl.cuh). The epilogue's thread (row r,
    // slot j) reads its routing weight early.
    const int ej = int(threadIdx.x) / kRows;
    const float wj = ej < k ? weights[tok * k + ej] : 0.f;

    struct Batch {
        Dp4aTile w[U];
        int slot[U], ktile[U];
        bool bad[U], bias[U], halves[U];
    } b;
    auto load = [&](int m0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int n = warp + WARPS * (m0 + u);
            const bool live = m0 + u < mine;
            b.slot[u] = live ? int((float(n) + 0.5f) * inv_nkt) : 0;
            b.ktile[u] = n - b.slot[u] * nkt;
            const int e = live ? ids[tok * k + b.slot[u]] : 0;
            b.bad[u] = live && (e < 0 || e >= E);
            const LaneRow<LG> r = lane_row<LG>(downs, live && !b.bad[u] ? e : 0, I, h0 + rw, h);
            b.bias[u] = r.bias();
            b.halves[u] = r.halves();
            b.w[u] = r.load(b.ktile[u], live && !b.bad[u]);
        }
    };
    load(0);
    pdl::wait();  // gate_up's act is complete and visible (pdl); the next kernel may start
    pdl::trigger();
    // Two batches' act loads before either is quantized: one trip to L2 for k·I ≤ 2 · 8 · WARPS · 32
    // (the flagship's 9 slots × 512, llama.cpp's shape's 8 × 768).
    dp4a_quantize_x<WARPS * 32, 1, 2>(act + tok * k * I, I, k, I, true, smem);
    __syncthreads();
    const Dp4aX X = dp4a_x(smem, I, k);
    for (int m0 = 0; m0 < mine; m0 += U) {
        if (m0 > 0) load(m0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (m0 + u >= mine) break;  // uniform over the warp
            float v = b.bad[u] ? 0.f : dp4a_tile_dot(b.w[u], X, b.slot[u], b.ktile[u], h, b.bias[u], b.halves[u]);
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            if (h == 0) part[(b.slot[u] * nkt + b.ktile[u]) * kRows + rw] = b.bad[u] ? quiet_nan() : v;
        }
    }
    sum_slots_in_order<kRows>(part, nkt, k, wj, slot_out, y + tok * ldy + h0);
}

unsigned blocks_of(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

// One matrix of the experts: stacked (m0: expert 0's descriptor, where MoeTiling found the stack)
// or by descriptor.
ExpertStack expert_stack(const PackedMatrix* desc, const PackedMatrix* m0) {
    ExpertStack st{desc, PackedMatrix{}, 0, 0};
    if (m0) st.m0 = *m0, st.code_step = m0->n * (m0->k / 2), st.scale_step = m0->n * (m0->k / m0->group);
    return st;
}

}  // namespace

size_t moe_decode_dp4a_gate_up_smem(int64_t H) { return size_t(gemv_dp4a_smem(H, 1)); }
size_t moe_decode_dp4a_down_smem(int64_t I, int k) {
    return size_t(gemv_dp4a_smem(I, k)) + size_t(k) * size_t((I / 32 + 3) / 4) * kRows * sizeof(float);
}
size_t moe_decode_dp4a_smem_limit() { return size_t(kMoeDecodeDp4aMaxSmem); }

namespace {

// f(std::integral_constant<int, LG>) for one matrix of the experts' LaneRow LG: log2(G / 32) where
// stacked in tiles (MoeTiling; G is 32, 64 or 128 there), else -1.
template <class F>
cudaError_t with_lane_lg(bool stacked, int group, F&& f) {
    switch (stacked ? __builtin_ctz(unsigned(group)) - 5 : -1) {
        case 0: return f(std::integral_constant<int, 0>{});
        case 1: return f(std::integral_constant<int, 1>{});
        case 2: return f(std::integral_constant<int, 2>{});
        default: return f(std::integral_constant<int, -1>{});
    }
}

template <int LG, bool BIAS, bool ROUTE>
cudaError_t launch_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                           const int32_t* ids, int k, bool x_settled, const MoeRouteAhead& ra, cudaStream_t stream) {
    auto* kernel = dp4a_gate_up_kernel<LG, BIAS, ROUTE>;
    static const cudaError_t attr =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMoeDecodeDp4aMaxSmem));
    if (attr != cudaSuccess) return attr;
    const dim3 grid(blocks_of(w.I, kRows), unsigned(k), unsigned(T));
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const PackedMatrix* g0 = LG >= 0 ? &w.tiling.gate0 : nullptr;
    const PackedMatrix* u0 = LG >= 0 ? &w.tiling.up0 : nullptr;
    return pdl::launch(kernel, grid, kGuWarps * 32, moe_decode_dp4a_gate_up_smem(w.H), stream, act, x, ldx, int(w.H),
                       int(w.I), w.E, expert_stack(w.gate, g0), expert_stack(w.up, u0), ids, k, aligned, x_settled, ra);
}

template <int LG, bool BIAS>
cudaError_t launch_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                           const int32_t* ids, int k, bool x_settled, const MoeRouteAhead& ra, cudaStream_t stream) {
    if (ra.logits) return launch_gate_up<LG, BIAS, true>(act, x, ldx, T, w, ids, k, x_settled, ra, stream);
    return launch_gate_up<LG, BIAS, false>(act, x, ldx, T, w, ids, k, x_settled, ra, stream);
}

}  // namespace

cudaError_t launch_moe_decode_dp4a_gate_up(float* act, const float* x, int64_t ldx, int64_t T,
                                           const MoePackedExperts& w, const int32_t* ids, int k, bool x_settled,
                                           const MoeRouteAhead& ra, cudaStream_t stream) {
    const bool one_group = w.tiling.gate0.group == w.tiling.up0.group;
    // A stack without biases in either matrix (Q4_0): the kernel without their registers.
    const bool no_bias = !w.tiling.gate0.biases && !w.tiling.up0.biases;
    return with_lane_lg(w.tiling.gate_up && one_group, w.tiling.gate0.group, [&](auto lg) {
        constexpr int LG = decltype(lg)::value;
        if constexpr (LG >= 0)
            if (no_bias) return launch_gate_up<LG, false>(act, x, ldx, T, w, ids, k, x_settled, ra, stream);
        return launch_gate_up<LG, true>(act, x, ldx, T, w, ids, k, x_settled, ra, stream);
    });
}

namespace {

template <int WARPS, int U, int LG>
cudaError_t launch_down(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                        const int32_t* ids, const float* weights, int k, cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        dp4a_down_kernel<WARPS, U, LG>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMoeDecodeDp4aMaxSmem));
    if (attr != cudaSuccess) return attr;
    const dim3 grid(blocks_of(w.H, kRows), unsigned(T));
    const int nkt = int((w.I / 32 + 3) / 4);
    return pdl::launch(dp4a_down_kernel<WARPS, U, LG>, grid, WARPS * 32, moe_decode_dp4a_down_smem(w.I, k), stream,
                       y, ldy, act, int(w.H), int(w.I), w.E, expert_stack(w.down, LG >= 0 ? &w.tiling.down0 : nullptr),
                       ids, weights, k, 1.f / float(nkt));
}

template <int WARPS, int U>
cudaError_t launch_down(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                        const int32_t* ids, const float* weights, int k, cudaStream_t stream) {
    return with_lane_lg(w.tiling.down, w.tiling.down0.group, [&](auto lg) {
        return launch_down<WARPS, U, decltype(lg)::value>(y, ldy, act, T, w, ids, weights, k, stream);
    });
}

}  // namespace

cudaError_t launch_moe_decode_dp4a_down(float* y, int64_t ldy, const float* act, int64_t T,
                                        const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                        int warps, cudaStream_t stream) {
    if (warps == 8) return launch_down<8, 4>(y, ldy, act, T, w, ids, weights, k, stream);
    return launch_down<16, 3>(y, ldy, act, T, w, ids, weights, k, stream);
}

}  // namespace tessera::cuda::fast::detail
