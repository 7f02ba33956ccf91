// Prefill GEMM on the tensor cores: y[T, N] = x[T, K] · w[N, K]ᵀ with w packed Int4 / Int8
// (packed_weight.h), mma.sync m16n8k16 bf16 → f32. Activations A = x (bf16 scratch), B = codes
// dequantized in registers; both staged through shared memory by a cp.async pipeline.
//
// The k pairing (why no shuffles are needed): in each k-tile of 128, lane t of a quad owns the
// 32 columns 32t..32t+31 of its B row (one 16-byte load of Int4 codes, one scale group when
// G ≥ 32). Word j of them (columns 8j..8j+7) feeds two mma k-steps: step s takes columns
// (2s, 2s+4) as B's k rows (2t, 2t+1) and (2s+1, 2s+5) as rows (2t+8, 2t+9) — exactly the pairs
// that (word >> 4i) & 0x000f000f puts into the two halves of a bf16x2. The x → bf16 pass stores
// each 8 columns as (0,4,1,5,2,6,3,7), so one 16-byte load of an A row gives both steps' A pairs.
//
// "Paired" configurations store x with rows g and g+8 of each 16-row tile interleaved word by
// word (pair-rows), so that one 16-byte load is exactly the A fragment {a0, a1, a2, a3} of a
// k-step: mma.sync wants its A in 4 consecutive registers, and the plain layout costs ~3 register
// moves per mma to assemble them (SASS of the 128x128 kernel: 419 IMAD.MOV per 128 HMMA).
#include "kernels/cuda/fast_gemm.h"
#include "kernels/cuda/fast_mma.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = 128;  // k per pipeline stage
constexpr int kARowBytes = kBK * 2;

// Physical 16-byte chunk of A row r's logical chunk c (16 per row): lanes (g, t) of a quad-pair
// read chunk 4t + j of rows r, r+1, which this spreads over 8 distinct bank groups.
__device__ __forceinline__ int a_chunk(int r, int c) { return c ^ (((r & 1) << 1) | ((c >> 3) & 1)); }

// The same for pair-rows (32 chunks per k-tile: chunk 2(4t + j) + s is lane t's step (j, s)):
// lanes (g, t) of a quad-pair read chunks 8t + 2j + s of pair-rows p, p+1 → 8 bank groups.
__device__ __forceinline__ int a_pair_chunk(int p, int c) { return c ^ (((c >> 3) & 3) | ((p & 1) << 2)); }

// Int8 words wa (columns 0..3), wb (4..7) → the B registers of two k-steps, as dequant_int4_pairs
// (fast_mma.cuh) gives them for Int4: w = code·s.
__device__ __forceinline__ void dequant_int8(uint32_t wa, uint32_t wb, uint32_t s2, uint32_t (&b)[4]) {
    const uint32_t xa = wa ^ 0x80808080u, xb = wb ^ 0x80808080u;  // code + 128, unsigned
    constexpr float kMagic = 8388736.f;                           // 2^23 + 128
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float lo = __uint_as_float(__byte_perm(xa, 0x4b000000u, 0x7440 + i)) - kMagic;
        const float hi = __uint_as_float(__byte_perm(xb, 0x4b000000u, 0x7440 + i)) - kMagic;
        b[i] = fma_bf16x2(pack_bf16x2(lo, hi), s2, 0u);
    }
}

template <int BM_, int BN_, int WM_, int WN_, int STAGES_, bool INT8_, bool PROBE_ = false, bool PAIRED_ = false>
struct Tile {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_;
    static constexpr bool kInt8 = INT8_;
    static constexpr bool kProbe = PROBE_;    // benchmark probe: raw code bits as B, no dequantization
    static constexpr bool kPaired = PAIRED_;  // x in pair-rows (see the top of the file)
    static constexpr int kThreads = WM * WN * 32;
    static constexpr int kWarpM = BM / WM, kWarpN = BN / WN;
    static constexpr int MT = kWarpM / 16, NT = kWarpN / 8;
    static constexpr int kBRowBytes = kInt8 ? kBK : kBK / 2;
    static constexpr int kABytes = BM * kARowBytes, kBBytes = BN * kBRowBytes;
    static constexpr int kStageBytes = kABytes + kBBytes;
    // Int8's twice larger B tile can leave room for one stage less (227 KiB of shared memory a block).
    static constexpr int STAGES = STAGES_ * kStageBytes <= 227 * 1024 ? STAGES_ : 227 * 1024 / kStageBytes;
    static_assert(STAGES >= 2, "shared memory");
    static constexpr int kSmem = kStageBytes * STAGES;
    static constexpr int kGroupsPerLane = kInt8 ? 2 : 1;  // column halves of a lane's 32 (G = 16)
    static constexpr bool kHoldB = MT >= 8;               // loop order of a k-step (see the kernel)
    static_assert(kWarpM % 16 == 0 && kWarpN % 8 == 0, "warp tile");
};

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) gemm_kernel(GemmArgs p) {
    extern __shared__ __align__(128) uint8_t smem[];
    constexpr int MT = C::MT, NT = C::NT, GPL = C::kGroupsPerLane;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int warp_m = warp / C::WN, warp_n = warp % C::WN;
    const int64_t m0 = int64_t(blockIdx.x) * C::BM, n0 = int64_t(blockIdx.y) * C::BN;
    const int64_t T = p.T, N = p.w.n, K = p.w.k;
    const int G = p.w.group;
    // This block's k-tiles [kt0, kt0 + nkt): split-K over blockIdx.z (the partial sums are added into y).
    const int KT = int((K + kBK - 1) / kBK);
    const int per_split = (KT + int(gridDim.z) - 1) / int(gridDim.z);
    const int kt0 = int(blockIdx.z) * per_split;
    const int nkt = KT - kt0 < per_split ? KT - kt0 : per_split;

    // One stage: A [BM, 128] bf16 (16 chunks a row, swizzled), B [BN, 128] codes. Each thread
    // copies the same chunk column of rows r0, r0 + step, ...: addresses and row checks hoisted.
    constexpr int kBChunks = C::kBRowBytes / 16;  // 4 (Int4: 32 columns each) or 8 (Int8: 16)
    constexpr int kAChunks = C::kPaired ? 32 : 16;  // 16-byte chunks of a (pair-)row per k-tile
    constexpr int kAIters = C::BM * 16 / C::kThreads, kARowStep = C::kThreads / kAChunks;
    constexpr int kBIters = C::BN * kBChunks / C::kThreads, kBRowStep = C::kThreads / kBChunks;
    static_assert(C::BM * 16 % C::kThreads == 0 && C::BN * kBChunks % C::kThreads == 0, "copy split");
    static_assert(kARowStep % 2 == 0 && kBRowStep % 2 == 0, "swizzle constant along a thread's rows");
    const int a_c = tid % kAChunks, a_r0 = tid / kAChunks;
    const int b_c = tid % kBChunks, b_r0 = tid / kBChunks;
    // A source in bytes: row a_r0 of the block (plain: [T, K]; paired: pair-row m0/2 + a_r0 of
    // [ceil(T/16)·8, 2K], whose rows past T the x pass zeroed).
    const uint8_t* xbytes = reinterpret_cast<const uint8_t*>(p.xb);
    const int64_t a_row_bytes = C::kPaired ? 4 * K : 2 * K;
    const uint8_t* a_src = xbytes + (C::kPaired ? m0 / 2 : m0) * a_row_bytes + a_row_bytes * a_r0 + 16 * a_c;
    // B rows in either order (packed_weight.h): a thread's rows are kBRowStep apart, a multiple
    // of the 16-row tiles', so one step is the same number of bytes from each row to the next.
    const PackedLayout lay = packed_layout(p.w);
    static_assert(C::kInt8 || kBRowStep % 16 == 0, "row steps of whole 16-row tiles");
    const uint8_t* b_src = p.w.codes + lay.code_row(n0 + b_r0) + 16 * b_c;
    constexpr int kASmemRow = C::kPaired ? 2 * kARowBytes : kARowBytes;
    const int a_dst = a_r0 * kASmemRow + (C::kPaired ? a_pair_chunk(a_r0, a_c) : a_chunk(a_r0, a_c)) * 16;
    const int b_dst = b_r0 * C::kBRowBytes + (C::kInt8 ? (b_c ^ (b_r0 & 1)) : b_c) * 16;
    const int a_col = C::kPaired ? 8 * (a_c / 2) : 8 * a_c, b_col = b_c * (C::kInt8 ? 16 : 32);
    const int64_t a_rows = C::kPaired ? (T + 15) / 16 * 8 : T;  // (pair-)rows present in the scratch
    const int64_t a_row0 = C::kPaired ? m0 / 2 : m0;
    uint32_t a_rows_ok = 0, b_rows_ok = 0;
#pragma unroll
    for (int k = 0; k < kAIters; ++k) a_rows_ok |= uint32_t(a_row0 + a_r0 + k * kARowStep < a_rows) << k;
#pragma unroll
    for (int k = 0; k < kBIters; ++k) b_rows_ok |= uint32_t(n0 + b_r0 + k * kBRowStep < N) << k;
    const int64_t a_step = int64_t(kARowStep) * a_row_bytes;
    const int64_t b_step = lay.code_row(n0 + b_r0 + kBRowStep) - lay.code_row(n0 + b_r0);
    auto load_stage = [&](int slot, int kt) {
        const uint32_t sA = smem_addr(smem + slot * C::kStageBytes);
        const uint32_t sB = sA + C::kABytes;
        const int64_t k0 = int64_t(kt) * kBK;
        const bool a_col_ok = k0 + a_col < K, b_col_ok = k0 + b_col < K;
#pragma unroll
        for (int k = 0; k < kAIters; ++k) {
            const bool ok = a_col_ok && ((a_rows_ok >> k) & 1);
            cp_async16(sA + a_dst + k * kARowStep * kASmemRow,
                       ok ? a_src + k0 * (C::kPaired ? 4 : 2) + k * a_step : xbytes, ok);
        }
#pragma unroll
        for (int k = 0; k < kBIters; ++k) {
            const bool ok = b_col_ok && ((b_rows_ok >> k) & 1);
            cp_async16(sB + b_dst + k * kBRowStep * C::kBRowBytes,
                       ok ? b_src + lay.chunk(int64_t(kt) * kBChunks) + k * b_step : p.w.codes, ok);
        }
    };

    // Scales (and biases) of this lane's B rows for k-tile kt, raw f16; 0 past N or K.
    const int lg_group = __ffs(G) - 1;  // G is a power of two
    const int64_t s_row0 = n0 + warp_n * C::kWarpN + g;
    const uint16_t* s_base = p.w.scales;
    const uint16_t* b_base = p.w.biases;
    uint32_t s_rows_ok = 0;
    int64_t s_row_at[NT];  // rows s_row0 + 8·nt in either order
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
        s_rows_ok |= uint32_t(s_row0 + nt * 8 < N) << nt;
        s_row_at[nt] = lay.scale_row(s_row0 + nt * 8);
    }
    auto load_scales = [&](int kt, uint16_t (&s)[NT][GPL], uint16_t (&b)[NT][GPL]) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int h = 0; h < GPL; ++h) {
                const int64_t col = int64_t(kt) * kBK + 32 * t + 16 * h;
                const bool ok = ((s_rows_ok >> nt) & 1) && col < K;
                const int64_t at = s_row_at[nt] + lay.scale_group(col >> lg_group);
                s[nt][h] = ok ? s_base[at] : uint16_t(0);
                b[nt][h] = ok && b_base ? b_base[at] : uint16_t(0);
            }
        }
    };

    // Int4: w = (q − 8)·s without biases, q·s + b with them.
    const uint32_t negc = p.w.biases ? 0xc300c300u : 0xc308c308u;  // −128 or −136 as bf16x2

    float acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.f;

#pragma unroll
    for (int s = 0; s < C::STAGES - 1; ++s) {
        if (s < nkt) load_stage(s, kt0 + s);
        cp_async_commit();
    }
    uint16_t sc_raw[NT][GPL], bi_raw[NT][GPL];
    if (nkt > 0) load_scales(kt0, sc_raw, bi_raw);

    for (int i = 0; i < nkt; ++i) {
        const int kt = kt0 + i;
        cp_async_wait<C::STAGES - 2>();
        __syncthreads();  // stage kt landed for all; everyone is done with the slot refilled next
        {
            const int nk = i + C::STAGES - 1;
            if (nk < nkt) load_stage(nk % C::STAGES, kt0 + nk);
            cp_async_commit();
        }
        uint32_t s2[NT][GPL], b2[NT][GPL];
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < GPL; ++h) {
                s2[nt][h] = f16_to_bf16x2(sc_raw[nt][h]);
                b2[nt][h] = f16_to_bf16x2(bi_raw[nt][h]);
            }
        if (i + 1 < nkt) load_scales(kt + 1, sc_raw, bi_raw);  // lands while this tile computes

        const uint8_t* sA = smem + (i % C::STAGES) * C::kStageBytes;
        const uint8_t* sB = sA + C::kABytes;
        uint4 bq[NT];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (!C::kInt8 && j == 0) {
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const int r = warp_n * C::kWarpN + nt * 8 + g;
                    bq[nt] = *reinterpret_cast<const uint4*>(sB + r * C::kBRowBytes + t * 16);
                }
            }
            if (C::kInt8 && (j & 1) == 0) {  // 16 columns: words 0..3 = columns 16(j/2) .. +15
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    const int r = warp_n * C::kWarpN + nt * 8 + g;
                    bq[nt] = *reinterpret_cast<const uint4*>(sB + r * C::kBRowBytes + ((2 * t + j / 2) ^ (r & 1)) * 16);
                }
            }
            auto dequant = [&](int nt, uint32_t (&b)[4]) {
                if constexpr (C::kProbe) {
                    const uint32_t q = j == 0 ? bq[nt].x : j == 1 ? bq[nt].y : j == 2 ? bq[nt].z : bq[nt].w;
                    b[0] = q, b[1] = q >> 4, b[2] = q >> 8, b[3] = q >> 12;
                } else if constexpr (C::kInt8) {
                    const bool upper = (j & 1) != 0;
                    dequant_int8(upper ? bq[nt].z : bq[nt].x, upper ? bq[nt].w : bq[nt].y, s2[nt][j / 2], b);
                } else {
                    const uint32_t q = j == 0 ? bq[nt].x : j == 1 ? bq[nt].y : j == 2 ? bq[nt].z : bq[nt].w;
                    dequant_int4_pairs(q, s2[nt][0], b2[nt][0], negc, b);
                }
            };
            // Plain: lo, hi = rows g and g+8 (columns 8j..8j+7 of the lane's 32). Paired: lo, hi =
            // the A fragments of steps s = 0 and 1.
            auto load_a = [&](int mt, uint4& lo, uint4& hi) {
                if constexpr (C::kPaired) {
                    const int pr = (warp_m * C::kWarpM + mt * 16) / 2 + g;
                    const int c = 2 * (4 * t + j);
                    lo = *reinterpret_cast<const uint4*>(sA + pr * kASmemRow + a_pair_chunk(pr, c) * 16);
                    hi = *reinterpret_cast<const uint4*>(sA + pr * kASmemRow + a_pair_chunk(pr, c + 1) * 16);
                } else {
                    const int r = warp_m * C::kWarpM + mt * 16 + g;
                    const int c = a_chunk(r, 4 * t + j);  // r + 8 has the same swizzle
                    lo = *reinterpret_cast<const uint4*>(sA + r * kARowBytes + c * 16);
                    hi = *reinterpret_cast<const uint4*>(sA + (r + 8) * kARowBytes + c * 16);
                }
            };
            auto mma2 = [&](float (&d)[4], const uint4& lo, const uint4& hi, const uint32_t (&b)[4]) {
                if constexpr (C::kPaired) {
                    mma_bf16(d, lo.x, lo.y, lo.z, lo.w, b[0], b[1]);
                    mma_bf16(d, hi.x, hi.y, hi.z, hi.w, b[2], b[3]);
                } else {
                    mma_bf16(d, lo.x, hi.x, lo.y, hi.y, b[0], b[1]);  // k-step s = 0
                    mma_bf16(d, lo.z, hi.z, lo.w, hi.w, b[2], b[3]);  // s = 1
                }
            };
            if constexpr (C::kHoldB) {  // many m-tiles: dequantize the warp's B once, stream A
                uint32_t b[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) dequant(nt, b[nt]);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    uint4 lo, hi;
                    load_a(mt, lo, hi);
#pragma unroll
                    for (int nt = 0; nt < NT; ++nt) mma2(acc[mt][nt], lo, hi, b[nt]);
                }
            } else {  // hold the warp's A, stream B
                uint4 alo[MT], ahi[MT];
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) load_a(mt, alo[mt], ahi[mt]);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    uint32_t b[4];
                    dequant(nt, b);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) mma2(acc[mt][nt], alo[mt], ahi[mt], b);
                }
            }
        }
    }
    cp_async_wait<0>();  // nothing real is pending (only empty groups), but leave clean

    // Accumulator (row g | g + 8, columns 2t, 2t+1) of each m16n8 tile → y.
    const bool split = gridDim.z > 1;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const int64_t row = m0 + warp_m * C::kWarpM + mt * 16 + g;
            const int64_t col = n0 + warp_n * C::kWarpN + nt * 8 + 2 * t;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int64_t r = row + 8 * h;
                if (r >= T) continue;
                float* out = p.y + r * p.ldy + col;
                if (split) {  // y was zeroed; with 2 splits 0 + a + b = 0 + b + a: still deterministic
                    if (col < N) atomicAdd(out, acc[mt][nt][2 * h]);
                    if (col + 1 < N) atomicAdd(out + 1, acc[mt][nt][2 * h + 1]);
                } else {
                    if (col < N) out[0] = acc[mt][nt][2 * h];
                    if (col + 1 < N) out[1] = acc[mt][nt][2 * h + 1];
                }
            }
        }
}

// Row r's 8 columns c..c+7 of x → 4 bf16x2 words, pairs (0,4), (1,5), (2,6), (3,7); zeros when !ok.
__device__ __forceinline__ void x_words(const float* x, int64_t ldx, int64_t r, int64_t c, bool ok, bool vec,
                                        uint32_t (&w)[4]) {
    float v[8] = {};
    if (ok) {
        const float* src = x + r * ldx + c;
        if (vec) {
            const float4 a = *reinterpret_cast<const float4*>(src), b = *reinterpret_cast<const float4*>(src + 4);
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
        } else {
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = src[e];
        }
    }
#pragma unroll
    for (int q = 0; q < 4; ++q) w[q] = pack_bf16x2(v[q], v[q + 4]);
}

// x [T, K] f32 → xb [T, K] bf16, columns of each 8 stored as (0,4,1,5,2,6,3,7).
__global__ void convert_x_kernel(uint16_t* __restrict__ xb, const float* __restrict__ x, int64_t ldx, int64_t T,
                                 int64_t K, bool vec) {
    const int64_t per_row = K / 8, n = T * per_row;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t r = i / per_row, c = (i - r * per_row) * 8;
        uint32_t w[4];
        x_words(x, ldx, r, c, true, vec, w);
        *reinterpret_cast<uint4*>(xb + r * K + c) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

// x [T, K] f32 → pair-rows [ceil(T/16)·8, 2K] bf16: pair-row p holds rows r = 16(p/8) + p%8 and
// r + 8, word by word (r's word q, then r+8's); rows past T are zeros.
__global__ void convert_x_paired_kernel(uint16_t* __restrict__ xb, const float* __restrict__ x, int64_t ldx,
                                        int64_t T, int64_t K, bool vec) {
    const int64_t per_row = K / 8, n = (T + 15) / 16 * 8 * per_row;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        const int64_t pr = i / per_row, c = (i - pr * per_row) * 8;
        const int64_t r0 = pr / 8 * 16 + pr % 8, r1 = r0 + 8;
        uint32_t w0[4], w1[4];
        x_words(x, ldx, r0, c, r0 < T, vec, w0);
        x_words(x, ldx, r1, c, r1 < T, vec, w1);
        uint4* out = reinterpret_cast<uint4*>(xb + pr * 2 * K + 2 * c);
        out[0] = make_uint4(w0[0], w1[0], w0[1], w1[1]);  // the A fragment of step s = 0
        out[1] = make_uint4(w0[2], w1[2], w0[3], w1[3]);  // s = 1
    }
}

template <class C>
cudaError_t prepare() {
    static const cudaError_t err =
        cudaFuncSetAttribute(gemm_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    return err;
}

template <class C>
cudaError_t launch(const GemmArgs& a, cudaStream_t stream) {
    if (const cudaError_t e = prepare<C>(); e != cudaSuccess) return e;
    const dim3 grid(unsigned((a.T + C::BM - 1) / C::BM), unsigned((a.w.n + C::BN - 1) / C::BN), unsigned(a.splits));
    gemm_kernel<C><<<grid, C::kThreads, C::kSmem, stream>>>(a);
    return cudaGetLastError();
}

template <class C>
int blocks_per_sm() {
    static const int n = occupancy_blocks(prepare<C>(), gemm_kernel<C>, C::kThreads, C::kSmem);
    return n;
}

// kGemmConfigs[i] as a Tile (the table and these must agree: checked below).
template <int I, bool INT8>
struct ConfigTile;
#define TS_FAST_GEMM_CONFIG(I, BM, BN, WM, WN, S, PAIRED)                                                       \
    template <bool INT8>                                                                                        \
    struct ConfigTile<I, INT8> {                                                                                \
        using type = Tile<BM, BN, WM, WN, S, INT8, false, PAIRED>;                                              \
        static_assert(kGemmConfigs[I].bm == BM && kGemmConfigs[I].bn == BN &&                                   \
                          kGemmConfigs[I].threads == WM * WN * 32 && kGemmConfigs[I].stages == S &&             \
                          kGemmConfigs[I].paired == PAIRED,                                                     \
                      "kGemmConfigs and fast_gemm.cu disagree");                                                \
    };
TS_FAST_GEMM_CONFIG(0, 128, 128, 2, 4, 4, false)
TS_FAST_GEMM_CONFIG(1, 64, 256, 1, 8, 4, false)
TS_FAST_GEMM_CONFIG(2, 128, 256, 2, 4, 3, false)
TS_FAST_GEMM_CONFIG(3, 256, 128, 4, 2, 3, false)
TS_FAST_GEMM_CONFIG(4, 64, 128, 1, 4, 4, false)
TS_FAST_GEMM_CONFIG(5, 128, 128, 4, 2, 4, false)
TS_FAST_GEMM_CONFIG(6, 32, 128, 1, 4, 4, false)
TS_FAST_GEMM_CONFIG(7, 256, 128, 2, 4, 3, false)
TS_FAST_GEMM_CONFIG(8, 128, 256, 1, 8, 3, false)
TS_FAST_GEMM_CONFIG(9, 128, 128, 1, 4, 4, false)
TS_FAST_GEMM_CONFIG(10, 128, 128, 2, 4, 4, true)
TS_FAST_GEMM_CONFIG(11, 256, 128, 2, 4, 3, true)
TS_FAST_GEMM_CONFIG(12, 128, 256, 1, 8, 3, true)
TS_FAST_GEMM_CONFIG(13, 64, 128, 1, 4, 4, true)
#undef TS_FAST_GEMM_CONFIG
static_assert(kGemmMmaConfigCount == 14, "a config without a Tile");

template <bool INT8, int I = 0>
cudaError_t launch_config(int config, const GemmArgs& a, cudaStream_t stream) {
    if constexpr (I < kGemmMmaConfigCount) {
        if (config == I) return launch<typename ConfigTile<I, INT8>::type>(a, stream);
        return launch_config<INT8, I + 1>(config, a, stream);
    } else {
        return cudaErrorInvalidValue;
    }
}

template <bool INT8, int I = 0>
int blocks_config(int config) {
    if constexpr (I < kGemmMmaConfigCount) {
        if (config == I) return blocks_per_sm<typename ConfigTile<I, INT8>::type>();
        return blocks_config<INT8, I + 1>(config);
    } else {
        return 0;
    }
}

}  // namespace

cudaError_t launch_convert_x(uint16_t* xb, const float* x, int64_t ldx, int64_t T, int64_t K, XOrder order,
                             cudaStream_t stream) {
    if (order == XOrder::wgmma || order == XOrder::wgmma_kblocks)
        return launch_convert_x_wgmma(xb, x, ldx, T, K, stream, order == XOrder::wgmma_kblocks);
    const bool paired = order == XOrder::paired;
    constexpr int threads = 256;
    const int64_t n = (paired ? (T + 15) / 16 * 8 : T) * (K / 8);
    int64_t blocks = (n + threads - 1) / threads;
    if (blocks > 8192) blocks = 8192;
    const bool vec = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    if (paired)
        convert_x_paired_kernel<<<unsigned(blocks), threads, 0, stream>>>(xb, x, ldx, T, K, vec);
    else
        convert_x_kernel<<<unsigned(blocks), threads, 0, stream>>>(xb, x, ldx, T, K, vec);
    return cudaGetLastError();
}

cudaError_t launch_gemm(int config, const GemmArgs& a, cudaStream_t stream) {
    if (config < 0 || config >= kGemmConfigCount) return cudaErrorInvalidValue;
    if (kGemmConfigs[config].tma_cluster > 0) return launch_gemm_wgmma_tma(config, a, stream);
    if (kGemmConfigs[config].wgmma) return launch_gemm_wgmma(config, a, stream);
    return a.w.kind == PackedKind::Int8 ? launch_config<true>(config, a, stream)
                                        : launch_config<false>(config, a, stream);
}

cudaError_t launch_gemm_probe(int config, const GemmArgs& a, cudaStream_t stream) {
    switch (config) {
        case 0: return launch<Tile<128, 128, 2, 4, 4, false, true>>(a, stream);
        case 1: return launch<Tile<64, 256, 1, 8, 4, false, true>>(a, stream);
        case 7: return launch<Tile<256, 128, 2, 4, 3, false, true>>(a, stream);
        default: return cudaErrorInvalidValue;
    }
}

int gemm_blocks_per_sm(int config, PackedKind kind) {
    if (config < 0 || config >= kGemmConfigCount) return 0;
    if (kGemmConfigs[config].tma_cluster > 0) return gemm_wgmma_tma_blocks_per_sm(config, kind);
    if (kGemmConfigs[config].wgmma) return gemm_wgmma_blocks_per_sm(config, kind);
    return kind == PackedKind::Int8 ? blocks_config<true>(config) : blocks_config<false>(config);
}

}  // namespace tessera::cuda::fast::detail
