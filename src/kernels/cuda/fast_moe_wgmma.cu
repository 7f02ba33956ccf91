// The fast MoE's large tiles on Hopper's warpgroup MMA (prefill): per work item (≤ BT grouped
// rows of one expert; moe_group) a block of two warpgroups computes 64 features of gate and up
// (a warpgroup a matrix) or 128 of down for the item's rows, wgmma.mma_async m64nBTk16 bf16 → f32 with the expert's
// Int4 rows as A, dequantized straight into the A registers, and the item's activation rows as B
// from shared memory (fast_wgmma_int4.cuh: the k pairing, the activations' wgmma order, the B
// tile). The pipeline is fast_gemm_wgmma.cu's: STAGES cp.async slots of a k-tile (128 columns),
// each k-tile in two halves whose wgmma run while the warps dequantize the next.
//   gather:  xg [rows, H128] bf16 (wgmma order) = x[token of row]
//   gate_up: act [rows, I128] bf16 (wgmma order, zeros past I) = silu(xg·gateᵀ) ⊙ (xg·upᵀ)
//   down:    out [rows, H] f32 = act·downᵀ; moe_combine then sums each token's slots in order.
// bf16 operands (x, act), exact weights, f32 accumulation: the large tiles' bound (fast_moe.h).
// Each matrix is read in its own order, row-major or 16-row tiles (packed_weight.h's PackedLayout;
// gate and up may differ).
#include <cmath>
#include <cstdint>

#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;

template <int BT_, bool GATE_UP_, int STAGES_>
struct MoeWTile {
    static constexpr int BT = BT_;              // item rows (tokens) a block: wgmma's N
    static constexpr bool kGateUp = GATE_UP_;   // gate and up (SwiGLU epilogue), else down
    static constexpr int BM = kGateUp ? 64 : 128;  // output features a block
    static constexpr int STAGES = STAGES_;
    static constexpr int kThreads = 256;        // two warpgroups
    static constexpr int kXBlockBytes = BT * 128;
    static constexpr int kXBytes = 2 * kXBlockBytes;
    static constexpr int kWBytes = 128 * 64;    // the warpgroups' 64 code rows each
    static constexpr int kStageBytes = kXBytes + kWBytes;
    static constexpr int kSmem = STAGES * kStageBytes + 1024;
    static constexpr int kMinBlocks = BT <= 64 ? 2 : 1;  // ≤ 128 registers: two blocks an SM
    static_assert(BT % 8 == 0 && kStageBytes % 1024 == 0, "swizzle atoms stay 1024-byte aligned");
    static_assert(STAGES >= 3 && kSmem <= 227 * 1024, "stages");
    static_assert(BT * 64 * 4 <= STAGES * kStageBytes, "the epilogue's exchange of up values fits the slots");
};

// Gate+up: warpgroup 0 computes features n0 … n0 + 63 of gate, warpgroup 1 the same of up (each
// streams its own matrix); up's values go through shared memory to warpgroup 0, which writes
// act[row, wgmma position of feature] = bf16(silu(gate·x) · up·x). Down: the two warpgroups take
// features n0 … n0 + 127 of down and write out[row, feature]. A [rows, K128] bf16 in the wgmma
// order; features n < N of [N, K] matrices.
template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    moe_wgmma_kernel(const uint16_t* __restrict__ A, int64_t K, int64_t N, int E, const PackedMatrix* __restrict__ m0,
                     const PackedMatrix* __restrict__ m1, MoeGrouping g, uint16_t* __restrict__ act,
                     float* __restrict__ out) {
    constexpr int BT = C::BT, S = C::STAGES;
    const int item = int(blockIdx.x);
    if (item >= *g.n_items) return;
    const int e = g.item_expert[item], r0 = g.item_row0[item], n_rows = g.item_rows[item];
    if (e < 0 || e >= E) return;  // items name valid experts only
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    const int64_t n0 = int64_t(blockIdx.y) * C::BM;
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    const int gq = lane >> 2, tq = lane & 3;
    const int64_t K128 = wgmma_row_len(K);
    const int KT = int(K128 / kBK);
    // Row rr of the stacked code tile (0..127): warpgroup rr / 64's matrix, feature n0 + f(rr).
    auto feature_of = [&](int rr) { return n0 + (C::kGateUp ? rr % 64 : rr); };
    const PackedMatrix mine = C::kGateUp && wg == 1 ? m1[e] : m0[e];  // this warpgroup's matrix
    const uint8_t* codes0 = m0[e].codes;
    const uint8_t* codes1 = C::kGateUp ? m1[e].codes : codes0;
    // Each matrix's order (packed_weight.h): warpgroup 0's (stacked rows 0..63) and 1's (64..127).
    const PackedLayout lay0 = packed_layout(m0[e]);
    const PackedLayout lay1 = C::kGateUp ? packed_layout(m1[e]) : lay0;

    // Copies of a stage: the item's BT rows × 16 chunks of A, and 128 code rows × 4 chunks. Stages
    // are loaded in k-tile order, so each copy's source is a pointer advanced a k-tile at a time
    // (no per-k-tile 64-bit index math: the loop's issue slots go to the dequantization).
    constexpr int kXIters = BT * 16 / C::kThreads, kXRowStep = C::kThreads / 16;
    static_assert(BT * 16 % C::kThreads == 0 && kXRowStep % 8 == 0, "x copy split, one swizzle phase a thread");
    const int x_c = tid % 16, x_r0 = tid / 16;
    const int x_dst = wgmma_b_offset(x_r0, x_c, BT);
    const uint8_t* abytes = reinterpret_cast<const uint8_t*>(A);
    // A row past the item's rows is copied as zeros (src-size 0) from its last row: every source
    // address stays a valid row's.
    const uint8_t* x_next = abytes + int64_t(r0) * K128 * 2 + 16 * x_c;  // k-tile 0 of the item's first row
    uint32_t x_off[kXIters];  // bytes from x_next to this thread's copy k (< BT rows of K128 bf16)
#pragma unroll
    for (int k = 0; k < kXIters; ++k) {
        const int r = x_r0 + k * kXRowStep;
        x_off[k] = uint32_t((r < n_rows ? r : max(n_rows - 1, 0)) * K128 * 2);
    }
    constexpr int kWIters = 128 * 4 / C::kThreads, kWRowStep = C::kThreads / 4;  // 2, 64: one matrix a copy
    const int w_c = tid % 4, w_r0 = tid / 4;
    // Copy k's source, either order: chunk w_c of the next k-tile of its row, code_row(row) +
    // chunk(4kt) + 16·w_c = code_row(row) + kt·ktile + 16·w_c (a k-tile's 4 chunks of a row are
    // contiguous in both orders); a row past N is copied as zeros from row N − 1.
    const uint8_t* w_next[kWIters];
    uint32_t w_step[kWIters];
    bool w_row_ok[kWIters];
#pragma unroll
    for (int k = 0; k < kWIters; ++k) {
        const PackedLayout& lay = k == 1 ? lay1 : lay0;  // rows 64..127: warpgroup 1's
        const int64_t n = feature_of(w_r0 + k * kWRowStep);
        w_next[k] = (k == 1 ? codes1 : codes0) + lay.code_row(n < N ? n : N - 1) + 16 * w_c;
        w_step[k] = uint32_t(lay.ktile);
        w_row_ok[k] = n < N;
    }
    int w_col = 32 * w_c;  // the next k-tile's first column of this thread's chunk
    auto load_next_stage = [&](int slot) {
        const uint32_t base = smem_addr(smem + slot * C::kStageBytes);
#pragma unroll
        for (int k = 0; k < kXIters; ++k)
            cp_async16(base + x_dst + k * kXRowStep * 128, x_next + x_off[k], x_r0 + k * kXRowStep < n_rows);
        x_next += kBK * 2;
        const bool col_ok = w_col < K;  // past K (the last k-tile's tail): zeros, the row's start read
#pragma unroll
        for (int k = 0; k < kWIters; ++k) {
            const int rr = w_r0 + k * kWRowStep;
            cp_async16(base + C::kXBytes + rr * 64 + w_c * 16, col_ok ? w_next[k] : codes0, col_ok && w_row_ok[k]);
            w_next[k] += w_step[k];
        }
        w_col += kBK;
    };

    // This lane's rows (stacked lrow, lrow + 8) of its warpgroup's matrix and their scales (biases),
    // at scale_row(row) + scale_group(group) of either order. For G <= 128 a k-tile's groups of a
    // row sit scale_group(128 / G) halves after the last's in both orders: pointers advanced a
    // k-tile at a time (G > 128: the group of each k-tile recomputed).
    const int lrow = wg * 64 + (warp % 4) * 16 + gq;
    const PackedLayout lay_mine = C::kGateUp && wg == 1 ? lay1 : lay0;
    const int lg_group = __ffs(mine.group) - 1;  // G is a power of two
    const bool s_lin = lg_group <= 7;
    const int64_t s_step = s_lin ? lay_mine.scale_group(int64_t(kBK) >> lg_group) : 0;
    int64_t s_at[2];
    bool s_row_ok[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t n = feature_of(lrow + 8 * h);
        s_at[h] = lay_mine.scale_row(n) + (s_lin ? lay_mine.scale_group((32 * tq) >> lg_group) : 0);
        s_row_ok[h] = n < N;
    }
    uint16_t sc_raw[2], bi_raw[2];
    int s_col = 32 * tq;  // the next k-tile's column of this lane's scales
    auto load_next_scales = [&] {
        const int64_t g_at = s_lin ? 0 : lay_mine.scale_group(s_col >> lg_group);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const bool ok = s_row_ok[h] && s_col < K;
            const int64_t at = s_at[h] + g_at;
            sc_raw[h] = ok ? mine.scales[at] : uint16_t(0);
            bi_raw[h] = ok && mine.biases ? mine.biases[at] : uint16_t(0);
            s_at[h] += s_step;
        }
        s_col += kBK;
    };
    const uint32_t negc = mine.biases ? 0xc300c300u : 0xc308c308u;

    float acc[BT / 2];
#pragma unroll
    for (int i = 0; i < BT / 2; ++i) acc[i] = 0.f;

#pragma unroll
    for (int s = 0; s < S - 2; ++s) {
        if (s < KT) load_next_stage(s);
        cp_async_commit();
    }
    load_next_scales();

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<S - 3>();
        fence_proxy_async_smem();
        __syncthreads();  // k-tile kt landed everywhere; k-tile kt − 2's wgmma are done everywhere
        {
            const int nk = kt + S - 2;
            if (nk < KT) load_next_stage(nk % S);
            cp_async_commit();
        }
        uint32_t s2[2], b2[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) s2[h] = f16_to_bf16x2(sc_raw[h]), b2[h] = f16_to_bf16x2(bi_raw[h]);
        if (kt + 1 < KT) load_next_scales();

        const uint8_t* stage = smem + (kt % S) * C::kStageBytes;
        const uint4 q0 = *reinterpret_cast<const uint4*>(stage + C::kXBytes + lrow * 64 + tq * 16);
        const uint4 q1 = *reinterpret_cast<const uint4*>(stage + C::kXBytes + (lrow + 8) * 64 + tq * 16);
        wgmma_int4_ktile<BT>(acc, q0, q1, s2, b2, negc, wgmma_desc_sw128(smem_addr(stage)), C::kXBlockBytes);
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    cp_async_wait<0>();

    // acc[4i + c]: feature of stacked row lrow (+8 for c ≥ 2), item row 8i + 2tq (+1 for odd c).
    if constexpr (C::kGateUp) {
        __syncthreads();  // every wgmma has read its slots: the exchange below reuses them
        float* up = reinterpret_cast<float*>(smem);  // [BT / 2][128 threads of a warpgroup]
        const int t128 = tid % 128;
        if (wg == 1) {
#pragma unroll
            for (int i = 0; i < BT / 2; ++i) up[i * 128 + t128] = acc[i];
        }
        __syncthreads();
        if (wg == 1) return;
        const int64_t N128 = wgmma_row_len(N);  // every position up to N128 (zeros past N: no codes there)
#pragma unroll
        for (int i = 0; i < BT / 8; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int r = 8 * i + 2 * tq + (c & 1);
                const int64_t n = feature_of(lrow + 8 * (c >> 1));
                if (r >= n_rows || n >= N128) continue;
                const float gv = acc[4 * i + c], uv = up[(4 * i + c) * 128 + t128];
                const float v = gv / (1.f + expf(-gv)) * uv;
                act[(r0 + r) * N128 + (n & ~int64_t(kBK - 1)) + wgmma_pos(int(n & (kBK - 1)))] =
                    uint16_t(pack_bf16x2(v, 0.f) & 0xffffu);  // bf16(v), round to nearest even
            }
    } else {
#pragma unroll
        for (int i = 0; i < BT / 8; ++i)
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const int r = 8 * i + 2 * tq + (c & 1);
                const int64_t n = feature_of(lrow + 8 * (c >> 1));
                if (r < n_rows && n < N) out[(r0 + r) * N + n] = acc[4 * i + c];
            }
    }
}

// The slots of a block's R grouped rows r0 … r0 + R − 1: perm[r] (−1 for an unused row), or r itself
// (perm null); −1 past `rows`.
template <int R>
__device__ __forceinline__ void block_row_slots(int (&s)[R], int64_t r0, int64_t rows, const int32_t* perm) {
#pragma unroll
    for (int i = 0; i < R; ++i) s[i] = r0 + i >= rows ? -1 : perm ? perm[r0 + i] : int(r0 + i);
}

// xg[r] = x[token of grouped row r] in the wgmma order, rows [r, H128] (perm null: row r = token
// r): R rows a block, a thread a k-step of a k-tile in each (wgmma_store_kstep's words: 16-byte
// stores, a warp's 1 KB contiguous), the R rows' loads issued before their stores. (Session 34: the
// earlier form — a thread per 32 columns, 4-byte stores, 64 of 256 threads busy at H = 2048 — and a
// grid-wide one of it measured alike, 22 µs for 4,096 rows; session 55: a block a token storing its k
// rows, slower.) Launched with PDL (pdl.cuh): the grouping's perm and x come from the kernels before.
template <int R>
__global__ void __launch_bounds__(128)
    gather_wgmma_kernel(uint32_t* __restrict__ xg, const float* __restrict__ x, int64_t ldx, int64_t H, int64_t rows,
                        const int32_t* __restrict__ perm, int k) {
    pdl::wait();
    pdl::trigger();
    const int64_t r0 = int64_t(blockIdx.x) * R;
    int s[R];
    block_row_slots(s, r0, rows, perm);
    const int64_t H128 = wgmma_row_len(H), steps = H128 / 16;
    for (int64_t q = threadIdx.x; q < steps; q += blockDim.x) {
        uint4 lo[R], hi[R];
#pragma unroll
        for (int i = 0; i < R; ++i) {
            if (s[i] < 0) continue;
            const float* src = x + int64_t(s[i] / k) * ldx;
            const bool vec2 = (reinterpret_cast<uintptr_t>(src) & 7) == 0;
            wgmma_kstep_words(src, (q >> 3) * kWgmmaK, H, int(q & 7), vec2, lo[i], hi[i]);
        }
#pragma unroll
        for (int i = 0; i < R; ++i) {
            if (s[i] < 0) continue;
            uint4* o = reinterpret_cast<uint4*>(xg + (r0 + i) * (H128 / 2) + (q >> 3) * (kWgmmaK / 2) + 8 * (q & 7));
            o[0] = lo[i];
            o[1] = hi[i];
        }
    }
}

// rows_per_block: 1 or 2 (0: moe_gather_rows_per_block's for `rows`).
cudaError_t launch_gather(void* xg, const float* x, int64_t ldx, int64_t rows, int64_t H, const int32_t* perm, int k,
                          int rows_per_block, cudaStream_t stream) {
    const int R = rows_per_block ? rows_per_block : moe_gather_rows_per_block(rows);
    if (R != 1 && R != 2) return cudaErrorInvalidValue;
    if (rows == 0) return cudaSuccess;
    const dim3 grid(unsigned((rows + R - 1) / R));
    auto* out = static_cast<uint32_t*>(xg);
    if (R == 1) return pdl::launch(gather_wgmma_kernel<1>, grid, dim3(128), 0, stream, out, x, ldx, H, rows, perm, k);
    return pdl::launch(gather_wgmma_kernel<2>, grid, dim3(128), 0, stream, out, x, ldx, H, rows, perm, k);
}

template <class C>
cudaError_t launch(const void* a, int64_t K, int64_t N, int E, const PackedMatrix* m0, const PackedMatrix* m1,
                   const MoeGrouping& g, void* act, float* out, cudaStream_t stream) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(moe_wgmma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (attr != cudaSuccess) return attr;
    // gate+up covers every position of act's rows up to N128 (the zeros the down kernel reads)
    const int64_t cover = C::kGateUp ? wgmma_row_len(N) : N;
    const dim3 grid(unsigned(g.max_items), unsigned((cover + C::BM - 1) / C::BM));
    moe_wgmma_kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(static_cast<const uint16_t*>(a), K, N, E, m0, m1, g,
                                                                 static_cast<uint16_t*>(act), out);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_moe_gather_wgmma(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                    const MoeGrouping& g, cudaStream_t stream, int rows_per_block) {
    return launch_gather(xg, x, ldx, T * k, H, g.perm, k, rows_per_block, stream);
}

cudaError_t launch_moe_rows_wgmma(void* x16, const float* x, int64_t ldx, int64_t T, int64_t H, cudaStream_t stream) {
    return launch_gather(x16, x, ldx, T, H, nullptr, 1, 1, stream);  // (one row a block: as measured)
}

cudaError_t launch_moe_wgmma_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                     int tile_rows, cudaStream_t stream) {
    switch (tile_rows) {
        case 16: return launch<MoeWTile<16, true, 6>>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
        case 32: return launch<MoeWTile<32, true, 5>>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
        case 64: return launch<MoeWTile<64, true, 4>>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
        default: return launch<MoeWTile<128, true, 4>>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
    }
}

cudaError_t launch_moe_wgmma_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                  int tile_rows, cudaStream_t stream) {
    switch (tile_rows) {
        case 16: return launch<MoeWTile<16, false, 6>>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
        case 32: return launch<MoeWTile<32, false, 5>>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
        case 64: return launch<MoeWTile<64, false, 4>>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
        default: return launch<MoeWTile<128, false, 4>>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
    }
}

}  // namespace tessera::cuda::fast::detail
