// The fast MoE's second-generation large tiles (prefill): per work item (≤ BM grouped rows of one
// expert) a block computes BM × BN outputs with mma.sync m16n8k16 bf16 → f32, a 4-stage cp.async
// pipeline over k-tiles of 128, and Int4 codes dequantized by the bf16 magic (0x4300 | q = 128 + q,
// exact; then one fma.bf16x2 with scale and bias). Same k pairing as fast_gemm.cu: lane t of a quad
// owns columns 32t..32t+31 of a k-tile (one 16-byte chunk of codes, one scale group), word j of
// them feeds two k-steps, and the A operand is stored with each 8 columns as (0,4,1,5,2,6,3,7), so
// one 16-byte load of an A row gives both steps' pairs. Warps split the block's columns only (each
// warp covers all BM rows): every weight is dequantized once per item. Each matrix is read in its own
// order, row-major or 16-row tiles (packed_weight.h's PackedLayout; gate and up may differ).
//   gather:  xg [rows, H] bf16 (permuted columns) = x[token of row]
//   gate_up: act [rows, I] bf16 (permuted columns) = silu(xg·gateᵀ) ⊙ (xg·upᵀ)
//   down:    out [rows, H] f32 = act·downᵀ (natural columns); combine sums the slots in order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_mma.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = 128;  // k per pipeline stage
constexpr int kStages = 4;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

// Physical 16-byte chunk of A row r's logical chunk c (16 a row): lanes (g, t) of a quad-pair read
// chunk 4t + j of rows r, r + 1, which this spreads over 8 distinct bank groups (fast_gemm.cu).
__device__ __forceinline__ int a_chunk(int r, int c) { return c ^ (((r & 1) << 1) | ((c >> 3) & 1)); }

// Where column c of a row lands in the permuted layout: each 8 as (0,4,1,5,2,6,3,7).
__device__ __forceinline__ int64_t perm_col(int64_t c) {
    const int i = int(c & 7);
    return (c & ~int64_t(7)) + (i < 4 ? 2 * i : 2 * (i - 4) + 1);
}

template <int BM, int NMAT>
struct Cfg {
    static constexpr int BN = NMAT == 2 ? 64 : 128;  // output features per block (per matrix)
    static constexpr int kWarpN = BN / kWarps;       // 16 or 32
    static constexpr int NT = kWarpN / 8, MT = BM / 16;
    static constexpr int kABytes = BM * kBK * 2, kBRowBytes = kBK / 2;
    static constexpr int kBBytes = NMAT * BN * kBRowBytes;
    static constexpr int kStageBytes = kABytes + kBBytes;
    static constexpr int kSmem = kStageBytes * kStages;
};

// out = A · Bᵀ for one item: rows r0 .. r0 + n_rows of A [rows, K] (bf16, permuted columns, row
// stride K) and BN output features from n0 of each matrix. NMAT = 2: gate, up → act (bf16,
// permuted, [rows, N]); NMAT = 1: down → out (f32, [rows, N]).
template <int BM, int NMAT>
__global__ void __launch_bounds__(kThreads)
    mma_kernel(const __nv_bfloat16* __restrict__ A, int64_t K, int64_t N, int E, const PackedMatrix* __restrict__ m0,
               const PackedMatrix* __restrict__ m1, MoeGrouping g, __nv_bfloat16* __restrict__ act,
               float* __restrict__ out) {
    using C = Cfg<BM, NMAT>;
    constexpr int MT = C::MT, NT = C::NT, BN = C::BN;
    extern __shared__ __align__(128) uint8_t smem[];
    const int item = int(blockIdx.x);
    if (item >= *g.n_items) return;
    const int e = g.item_expert[item], r0 = g.item_row0[item], n_rows = g.item_rows[item];
    if (e < 0 || e >= E) return;  // items name valid experts only
    const int64_t n0 = int64_t(blockIdx.y) * BN;
    PackedMatrix mat[NMAT];
    mat[0] = m0[e];
    if constexpr (NMAT == 2) mat[1] = m1[e];

    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int gq = lane >> 2, tq = lane & 3;
    const int KT = int((K + kBK - 1) / kBK);
    PackedLayout lay[NMAT];  // each matrix's order (packed_weight.h)
#pragma unroll
    for (int m = 0; m < NMAT; ++m) lay[m] = packed_layout(mat[m]);

    // Copies of one stage: A [BM, 16 chunks] and B [NMAT·BN, 4 chunks], 16 bytes each.
    constexpr int kAIters = BM * 16 / kThreads, kBIters = NMAT * BN * 4 / kThreads;
    static_assert(BM * 16 % kThreads == 0 && NMAT * BN * 4 % kThreads == 0, "copy split");
    constexpr int kARowStep = kThreads / 16, kBRowStep = kThreads / 4;  // 8 and 32: even
    constexpr int kBMatIters = kBIters / NMAT;  // copies of one matrix: rows b_r + j·kBRowStep
    static_assert(kBMatIters * kBRowStep == BN && kBRowStep % 16 == 0, "row steps of whole 16-row tiles");
    const int a_c = tid % 16, a_r = tid / 16, b_c = tid % 4, b_r = tid / 4;
    // B sources in either order: row n0 + b_r's chunk b_c of k-tile 0 (a k-tile's 4 chunks of a row are
    // contiguous in both: chunk(4kt + b_c) = chunk(4kt) + 16·b_c), and one row step (kBRowStep rows, whole
    // 16-row tiles: kBRowStep·K/2 bytes in both orders).
    const uint8_t* b_src[NMAT];
#pragma unroll
    for (int m = 0; m < NMAT; ++m) b_src[m] = mat[m].codes + lay[m].code_row(n0 + b_r) + 16 * b_c;
    const int64_t b_step = int64_t(kBRowStep) * (K / 2);
    auto load_stage = [&](int slot, int kt) {
        const uint32_t sA = smem_addr(smem + slot * C::kStageBytes), sB = sA + C::kABytes;
        const int64_t k0 = int64_t(kt) * kBK;
        const bool a_ok = k0 + 8 * a_c < K, b_ok = k0 + 32 * b_c < K;
#pragma unroll
        for (int i = 0; i < kAIters; ++i) {
            const int r = a_r + i * kARowStep;
            const bool ok = a_ok && r < n_rows;
            const __nv_bfloat16* src = ok ? A + int64_t(r0 + r) * K + k0 + 8 * a_c : A;
            cp_async16(sA + r * (kBK * 2) + a_chunk(r, a_c) * 16, src, ok);
        }
#pragma unroll
        for (int i = 0; i < kBIters; ++i) {
            const int m = i / kBMatIters, j = i % kBMatIters;  // matrix m's row r: stacked row m·BN + r
            const int r = b_r + j * kBRowStep, rr = m * BN + r;
            const bool ok = b_ok && n0 + r < N;
            const uint8_t* src = ok ? b_src[m] + j * b_step + lay[m].chunk(4 * int64_t(kt)) : mat[0].codes;
            cp_async16(sB + rr * C::kBRowBytes + b_c * 16, src, ok);
        }
    };

    // Scales (and biases) of this lane's B rows for k-tile kt (group of columns 32·tq..), raw f16,
    // at scale_row(row) + scale_group(group) of either order; the rows' parts hoisted.
    const int64_t s_n = n0 + warp * C::kWarpN + gq;  // the lane's rows s_n + 8·nt
    int64_t s_row_at[NMAT][NT];
    int lg_group[NMAT];  // G is a power of two
#pragma unroll
    for (int m = 0; m < NMAT; ++m) {
        lg_group[m] = __ffs(mat[m].group) - 1;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) s_row_at[m][nt] = lay[m].scale_row(s_n + nt * 8);
    }
    uint16_t sc_raw[NMAT][NT], bi_raw[NMAT][NT];
    auto load_scales = [&](int kt) {
        const int64_t col = int64_t(kt) * kBK + 32 * tq;
#pragma unroll
        for (int m = 0; m < NMAT; ++m) {
            const int64_t g_at = lay[m].scale_group(col >> lg_group[m]);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const bool ok = s_n + nt * 8 < N && col < K;
                const int64_t at = s_row_at[m][nt] + g_at;
                sc_raw[m][nt] = ok ? mat[m].scales[at] : uint16_t(0);
                bi_raw[m][nt] = ok && mat[m].biases ? mat[m].biases[at] : uint16_t(0);
            }
        }
    };
    uint32_t negc[NMAT];
#pragma unroll
    for (int m = 0; m < NMAT; ++m) negc[m] = mat[m].biases ? 0xc300c300u : 0xc308c308u;  // −128 or −136

    float acc[NMAT][MT][NT][4];
#pragma unroll
    for (int m = 0; m < NMAT; ++m)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[m][mt][nt][q] = 0.f;

#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
        if (s < KT) load_stage(s, s);
        cp_async_commit();
    }
    load_scales(0);

    for (int kt = 0; kt < KT; ++kt) {
        cp_async_wait<kStages - 2>();
        __syncthreads();  // stage kt landed for all; everyone is done with the slot refilled next
        {
            const int nk = kt + kStages - 1;
            if (nk < KT) load_stage(nk % kStages, nk);
            cp_async_commit();
        }
        uint32_t s2[NMAT][NT], b2[NMAT][NT];
#pragma unroll
        for (int m = 0; m < NMAT; ++m)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                s2[m][nt] = f16_to_bf16x2(sc_raw[m][nt]);
                b2[m][nt] = f16_to_bf16x2(bi_raw[m][nt]);
            }
        if (kt + 1 < KT) load_scales(kt + 1);  // lands while this tile computes

        const uint8_t* sA = smem + (kt % kStages) * C::kStageBytes;
        const uint8_t* sB = sA + C::kABytes;
        uint4 bq[NMAT][NT];
#pragma unroll
        for (int m = 0; m < NMAT; ++m)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int rr = m * BN + warp * C::kWarpN + nt * 8 + gq;
                bq[m][nt] = *reinterpret_cast<const uint4*>(sB + rr * C::kBRowBytes + tq * 16);
            }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint4 alo[MT], ahi[MT];  // rows gq and gq + 8 of each m-tile, columns 8j.. of the lane's 32
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const int r = mt * 16 + gq;
                const int c = a_chunk(r, 4 * tq + j);  // r + 8 has the same swizzle
                alo[mt] = *reinterpret_cast<const uint4*>(sA + r * (kBK * 2) + c * 16);
                ahi[mt] = *reinterpret_cast<const uint4*>(sA + (r + 8) * (kBK * 2) + c * 16);
            }
#pragma unroll
            for (int m = 0; m < NMAT; ++m)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const uint32_t q = j == 0 ? bq[m][nt].x : j == 1 ? bq[m][nt].y : j == 2 ? bq[m][nt].z : bq[m][nt].w;
                    uint32_t b[4];
                    dequant_int4_pairs(q, s2[m][nt], b2[m][nt], negc[m], b);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma_bf16(acc[m][mt][nt], alo[mt].x, ahi[mt].x, alo[mt].y, ahi[mt].y, b[0], b[1]);
                        mma_bf16(acc[m][mt][nt], alo[mt].z, ahi[mt].z, alo[mt].w, ahi[mt].w, b[2], b[3]);
                    }
                }
        }
    }
    cp_async_wait<0>();

    // acc[.][mt][nt]: rows mt·16 + gq (+8), features n0 + warp·kWarpN + nt·8 + 2tq (+1).
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = mt * 16 + gq + 8 * h;
            if (r >= n_rows) continue;
            const int64_t row = r0 + r;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int64_t col = n0 + warp * C::kWarpN + nt * 8 + 2 * tq;
                if (col >= N) continue;  // N is even: col + 1 < N too
                const float v0 = acc[0][mt][nt][2 * h], v1 = acc[0][mt][nt][2 * h + 1];
                if constexpr (NMAT == 2) {
                    const float u0 = acc[NMAT - 1][mt][nt][2 * h], u1 = acc[NMAT - 1][mt][nt][2 * h + 1];
                    __nv_bfloat16* dst = act + row * N;
                    dst[perm_col(col)] = __float2bfloat16_rn(v0 / (1.f + expf(-v0)) * u0);
                    dst[perm_col(col + 1)] = __float2bfloat16_rn(v1 / (1.f + expf(-v1)) * u1);
                } else {
                    *reinterpret_cast<float2*>(out + row * N + col) = make_float2(v0, v1);
                }
            }
        }
}

// xg[r] = bf16(x[perm[r] / k]) in permuted column order, for every grouped row r with a slot: one
// thread per 8 columns.
__global__ void __launch_bounds__(256)
    gather_perm_kernel(__nv_bfloat16* __restrict__ xg, const float* __restrict__ x, int64_t ldx, int64_t H,
                       const int32_t* __restrict__ perm, int k) {
    const int64_t r = blockIdx.x;
    const int s = perm[r];
    if (s < 0) return;
    const float* src = x + int64_t(s / k) * ldx;
    const bool vec = (reinterpret_cast<uintptr_t>(src) & 15) == 0;
    for (int64_t c = int64_t(threadIdx.x) * 8; c < H; c += int64_t(blockDim.x) * 8) {
        float v[8];
        if (vec) {
            const float4 a = __ldg(reinterpret_cast<const float4*>(src + c)),
                         b = __ldg(reinterpret_cast<const float4*>(src + c + 4));
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        } else {
#pragma unroll
            for (int i = 0; i < 8; ++i) v[i] = __ldg(src + c + i);
        }
        uint4 w;
        w.x = pack_bf16x2(v[0], v[4]);
        w.y = pack_bf16x2(v[1], v[5]);
        w.z = pack_bf16x2(v[2], v[6]);
        w.w = pack_bf16x2(v[3], v[7]);
        *reinterpret_cast<uint4*>(xg + r * H + c) = w;
    }
}

template <int BM, int NMAT>
cudaError_t launch_mma(const void* a, int64_t K, int64_t N, int E, const PackedMatrix* m0, const PackedMatrix* m1,
                       const MoeGrouping& g, void* act, float* out, cudaStream_t stream) {
    using C = Cfg<BM, NMAT>;
    static const cudaError_t attr =
        cudaFuncSetAttribute(mma_kernel<BM, NMAT>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (attr != cudaSuccess) return attr;
    const dim3 grid(unsigned(g.max_items), unsigned((N + C::BN - 1) / C::BN));
    mma_kernel<BM, NMAT><<<grid, kThreads, C::kSmem, stream>>>(static_cast<const __nv_bfloat16*>(a), K, N, E, m0, m1,
                                                                g, static_cast<__nv_bfloat16*>(act), out);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_moe_gather_bf16_perm(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                        const MoeGrouping& g, cudaStream_t stream) {
    gather_perm_kernel<<<unsigned(T * k), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(xg), x, ldx, H, g.perm, k);
    return cudaGetLastError();
}

cudaError_t launch_moe_mma_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                   int tile_rows, cudaStream_t stream) {
    switch (tile_rows) {
        case 16: return launch_mma<16, 2>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
        case 32: return launch_mma<32, 2>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
        default: return launch_mma<64, 2>(xg, w.H, w.I, w.E, w.gate, w.up, g, act, nullptr, stream);
    }
}

cudaError_t launch_moe_mma_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                int tile_rows, cudaStream_t stream) {
    switch (tile_rows) {
        case 16: return launch_mma<16, 1>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
        case 32: return launch_mma<32, 1>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
        default: return launch_mma<64, 1>(act, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out, stream);
    }
}

}  // namespace tessera::cuda::fast::detail
