// The fast MoE's decode step on the integer units (MoePlan::dp4a_decode), per slot: the token's
// x (gate+up) or its k act rows (down) quantized by each block into two int8 limbs in shared
// memory, the experts' Int4 rows dotted with them by dp4a — fast_dp4a.cuh, the same math as the
// decode GEMV's Dp4a variant (|x − x̃| ≤ max|x| / 64516 per 32 columns, exact integer products,
// f32 sums). A lane keeps one weight row's 64 columns of every k-tile it takes (row l / 2 of a
// block's 16, half l % 2), so no transposes or shuffles until the end.
//   gate_up: block = (16 outputs i, slot s); its 8 warps split H by k-tiles (warp w: w, w + 8,
//            …), each lane on gate and up row i: 2 k-tiles × 2 matrices in flight (H = 2048:
//            all of them). The weights are requested as soon as the slot's expert is known, then
//            the block quantizes the token's x — or, where x was complete before the routing
//            kernel ran (x_settled), before its PDL wait (end to end at 4K, with the down
//            kernel's items all in flight: 493.0 / 492.1 → 504.8 / 499.7 tok/s). SwiGLU of the
//            warps' partials added in order → act [T·k, I] f32. At most 80 registers, so 3
//            blocks fit an SM: the flagship's 288 blocks (32 output tiles × 9 slots) run in one
//            wave on 132 SMs, not two (H200, 4K decode: 454 → 480 tok/s end to end).
//   down:    block = (16 outputs h, token t) of 16 warps; the token's k·⌈I/128⌉ (slot, k-tile)
//            items over the warps (item n on warp n % 16), all of a warp's items in flight
//            (batches of kDownU = 3: the flagship's 36 items all before the wait). Started by
//            programmatic dependent launch while gate_up runs: it requests its weights, then
//            waits for act and quantizes the token's k act rows.
//            Each item's partial goes to shared memory; y[t, h] = Σ_j weights[t, j]·o_j, o_j the
//            sum of slot j's k-tile partials in k-tile order, slots in order (no atomics).
// Each matrix is read in the order its descriptor names (row-major or 16-row tiles: PackedLayout).
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_slots.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kRows = 16;  // outputs a block
constexpr int kGuWarps = 8, kGuU = 2;  // gate_up: k-tiles a warp in flight (H = 2048: all)
constexpr int kDownWarps = 16, kDownU = 3;

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

struct GateUp {
    Dp4aTile g, u;
};

__global__ void __launch_bounds__(kGuWarps * 32, 3)
    dp4a_gate_up_kernel(float* __restrict__ act, const float* __restrict__ x, int64_t ldx, int H, int I, int E,
                        const PackedMatrix* __restrict__ gates, const PackedMatrix* __restrict__ ups,
                        const int32_t* __restrict__ ids, int k, bool x_aligned, bool x_settled) {
    extern __shared__ uint4 smem[];  // the token's x, staged (fast_dp4a.cuh)
    __shared__ float red[kGuWarps][2][kRows];
    const int64_t s = blockIdx.y;
    const int i0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), h = lane & 1, rw = lane >> 1;
    // x complete before the routing kernel ran (x_settled): quantized before the wait.
    if (x_settled) dp4a_quantize_x<kGuWarps * 32>(x + (s / k) * ldx, ldx, 1, H, x_aligned, smem);
    const int e = slot_expert<kRows>(ids, s, E, act, I, i0);  // PDL wait; NaN rows for a bad id
    if (e < 0) return;  // the whole block
    const int nch = H / 32, nkt = (nch + 3) / 4;
    const int nj = warp < nkt ? (nkt - warp + kGuWarps - 1) / kGuWarps : 0;  // this warp's k-tiles
    const Row rg = row_of(gates[e], H, i0 + rw), ru = row_of(ups[e], H, i0 + rw);
    GateUp tl[kGuU];
    auto load = [&](int j0) {
#pragma unroll
        for (int u = 0; u < kGuU; ++u) {
            const int kt = warp + kGuWarps * (j0 + u);
            tl[u].g = load_row(rg, kt, h, nch, j0 + u < nj);
            tl[u].u = load_row(ru, kt, h, nch, j0 + u < nj);
        }
    };
    load(0);  // the first batch in flight while x is quantized

    if (!x_settled) dp4a_quantize_x<kGuWarps * 32>(x + (s / k) * ldx, ldx, 1, H, x_aligned, smem);
    __syncthreads();
    const Dp4aX X = dp4a_x(smem, H, 1);
    float ag = 0.f, au = 0.f;
    for (int j0 = 0; j0 < nj; j0 += kGuU) {
        if (j0 > 0) load(j0);
#pragma unroll
        for (int u = 0; u < kGuU; ++u) {
            if (j0 + u >= nj) break;  // uniform over the warp
            const int kt = warp + kGuWarps * (j0 + u);
            ag += dp4a_tile_dot(tl[u].g, X, 0, kt, h, rg.biases != nullptr);
            au += dp4a_tile_dot(tl[u].u, X, 0, kt, h, ru.biases != nullptr);
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
__global__ void __launch_bounds__(kDownWarps * 32)
    dp4a_down_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ act, int H, int I, int E,
                     const PackedMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                     const float* __restrict__ weights, int k) {
    extern __shared__ uint4 smem[];
    __shared__ float slot_out[kMoeMaxTopK][kRows];
    const int64_t tok = blockIdx.y;
    const int h0 = int(blockIdx.x) * kRows;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), h = lane & 1, rw = lane >> 1;
    const int nch = I / 32, nkt = (nch + 3) / 4, items = k * nkt;
    const int mine = warp < items ? (items - warp + kDownWarps - 1) / kDownWarps : 0;  // this warp's items
    float* const part = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(smem) + gemv_dp4a_smem(I, k));
    // ids and weights come from before gate_up (complete: pdl.cuh). The epilogue's thread (row r,
    // slot j) reads its routing weight early.
    const int ej = int(threadIdx.x) / kRows;
    const float wj = ej < k ? weights[tok * k + ej] : 0.f;

    struct Batch {
        Dp4aTile w[kDownU];
        int slot[kDownU], ktile[kDownU];
        bool bad[kDownU], bias[kDownU];
    } b;
    auto load = [&](int m0) {
#pragma unroll
        for (int u = 0; u < kDownU; ++u) {
            const int n = warp + kDownWarps * (m0 + u);
            const bool live = m0 + u < mine;
            b.slot[u] = live ? n / nkt : 0;
            b.ktile[u] = n - b.slot[u] * nkt;
            const int e = live ? ids[tok * k + b.slot[u]] : 0;
            b.bad[u] = live && (e < 0 || e >= E);
            const Row r = row_of(downs[live && !b.bad[u] ? e : 0], I, h0 + rw);
            b.bias[u] = r.biases != nullptr;
            b.w[u] = load_row(r, b.ktile[u], h, nch, live && !b.bad[u]);
        }
    };
    load(0);
    pdl::wait();  // gate_up's act is complete and visible (pdl); the next kernel may start
    pdl::trigger();
    dp4a_quantize_x<kDownWarps * 32>(act + tok * k * I, I, k, I, true, smem);
    __syncthreads();
    const Dp4aX X = dp4a_x(smem, I, k);
    for (int m0 = 0; m0 < mine; m0 += kDownU) {
        if (m0 > 0) load(m0);
#pragma unroll
        for (int u = 0; u < kDownU; ++u) {
            if (m0 + u >= mine) break;  // uniform over the warp
            float v = b.bad[u] ? 0.f : dp4a_tile_dot(b.w[u], X, b.slot[u], b.ktile[u], h, b.bias[u]);
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            if (h == 0) part[(b.slot[u] * nkt + b.ktile[u]) * kRows + rw] = b.bad[u] ? quiet_nan() : v;
        }
    }
    sum_slots_in_order<kRows>(part, nkt, k, wj, slot_out, y + tok * ldy + h0);
}

unsigned blocks_of(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

}  // namespace

size_t moe_decode_dp4a_gate_up_smem(int64_t H) { return size_t(gemv_dp4a_smem(H, 1)); }
size_t moe_decode_dp4a_down_smem(int64_t I, int k) {
    return size_t(gemv_dp4a_smem(I, k)) + size_t(k) * size_t((I / 32 + 3) / 4) * kRows * sizeof(float);
}
size_t moe_decode_dp4a_smem_limit() { return size_t(kMoeDecodeDp4aMaxSmem); }

cudaError_t launch_moe_decode_dp4a_gate_up(float* act, const float* x, int64_t ldx, int64_t T,
                                           const MoePackedExperts& w, const int32_t* ids, int k, bool x_settled,
                                           cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        dp4a_gate_up_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kMoeDecodeDp4aMaxSmem));
    if (attr != cudaSuccess) return attr;
    const dim3 grid(blocks_of(w.I, kRows), unsigned(T * k));
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    return pdl::launch(dp4a_gate_up_kernel, grid, kGuWarps * 32, moe_decode_dp4a_gate_up_smem(w.H), stream, act, x,
                       ldx, int(w.H), int(w.I), w.E, w.gate, w.up, ids, k, aligned, x_settled);
}

cudaError_t launch_moe_decode_dp4a_down(float* y, int64_t ldy, const float* act, int64_t T,
                                        const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                        cudaStream_t stream) {
    static const cudaError_t attr = cudaFuncSetAttribute(dp4a_down_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                         int(kMoeDecodeDp4aMaxSmem));
    if (attr != cudaSuccess) return attr;
    const dim3 grid(blocks_of(w.H, kRows), unsigned(T));
    return pdl::launch(dp4a_down_kernel, grid, kDownWarps * 32, moe_decode_dp4a_down_smem(w.I, k), stream, y, ldy,
                       act, int(w.H), int(w.I), w.E, w.down, ids, weights, k);
}

}  // namespace tessera::cuda::fast::detail
