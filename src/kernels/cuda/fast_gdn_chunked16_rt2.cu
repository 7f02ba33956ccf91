// GdnChunkVariant::F16x3Rt2: F16x3Rt's state pass (fast_gdn_chunked16_rt.cu: Sᵀ in wgmma
// accumulators, a block per 64 value columns) with each block's chain on two warpgroups, split
// along dk: warpgroup kh holds Sᵀ's columns 64kh … 64kh + 63 (an m64n64 accumulator). F16x3Rt's
// chain is one warpgroup's: ~2,700 instructions a warp a chunk, one warp a scheduler, every
// dependency exposed (session 20's profile: warps "selected" 28 %, "wait" 24 %). Here the S side of
// each chunk (its rebuild, the S update, its split) halves a warp and two warps share a scheduler.
//
// Per chunk, warpgroup kh (the same arithmetic as F16x3Rt, its products over its dk half):
//   1. partial Vn and Q̃·S: S_kh·W_khᵀ and S_kh·Q̃_khᵀ (k = its 64 dk);
//   2. the Vn partials in true units exchanged through shared memory (a thread's element sits at
//      the same place for the other warpgroup's same thread), summed in warpgroup order, so both
//      hold the same Vn = U − (P0 + P1); zero past the chunk, split per row (its own exponents);
//   3. the Q̃·S partials exchanged for the other's token half (warpgroup kh stores O's tokens
//      32kh … 32kh + 31); S_kh back to f32 from its fragments, in Vn·K̃'s units;
//   4. S_kh ← e^Γlast·S_kh + Vn·K̃_kh (m64n64) and P·Vn for its 32 tokens (m64n32);
//   5. S_kh lands: split for the next chunk;  6. P·Vn lands: O stored.
// Buffers: W in two stages, Q̃, U, K̃, P in one (Q̃ is read first and freed at 3, U at 2, with most
// of a chunk to land again), two exchange tiles (208 KB); full / empty mbarriers as F16x3Rt's, the
// empty ones counting both warpgroups' 256 threads. Two named barriers a chunk (the exchanges).
//
// 384 threads: the producer is a whole warpgroup (warp 8 issues, setmaxnreg gives the rest of its
// registers to the consumers, 240 each). Session 20's 288 threads at 222 registers did not launch:
// a scheduler's register file (16 K) holds its warps' registers, and warp 8 put three on one.
#include <cuda.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_gdn_rt.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"

namespace tessera::cuda::fast::detail::f16x3 {

using namespace wy;

namespace {

constexpr int kRows = kRtRows;         // value columns of a block (Sᵀ's rows)
constexpr int kWg = 128;               // threads of a warpgroup
constexpr int kConsumers = 2 * kWg;    // warpgroups 0 and 1 (dk halves)
constexpr int kTh = kConsumers + kWg;  // + the producer warpgroup (warp 8 issues; 9–11 leave at once)
constexpr int kBox = kRtBox;
// Shared memory, bytes from a 1024-aligned base.
constexpr int kOffW = 0;                     // [2 stages][W hi d0–63, d64–127, W lo ×2]
constexpr int kOffQ = kOffW + 8 * kBox;      // [Q̃ hi d0–63, d64–127, Q̃ lo ×2]
constexpr int kOffK = kOffQ + 4 * kBox;      // [K̃ hi d0–63, d64–127, K̃ lo ×2]: [64 tokens][64 d]
constexpr int kOffP = kOffK + 4 * kBox;      // [P hi, P lo]: [64 i][64 j]
constexpr int kOffU = kOffP + 2 * kBox;      // [v 0–31, v 32–63]: f32 [64 tokens][32 v], swizzled
constexpr int kOffX = kOffU + 2 * kBox;      // f32 [2 warpgroups][32][128]: the Vn partials
constexpr int kOffY = kOffX + 2 * 32 * kWg * 4;  // f32 [2][16][128]: Q̃·S partials for the other's tokens
constexpr int kOffBar = kOffY + 2 * 16 * kWg * 4;
constexpr int kSmem = kOffBar + 12 * 8 + 1024;
static_assert(kSmem <= 227 * 1024, "F16x3Rt2's buffers fit the H200's shared memory");
static_assert(2 * 128 * kLdS * 4 <= 8 * kBox, "a padding sequence's S halves fit W's stages");

// W or Q̃ of one dk half (its hi box; lo two boxes further), K-major: 4 k-steps of 32 bytes.
struct LayHalf {
    static constexpr int off(int p, int kk) { return 2 * p * kBox + kk * 32; }
};

__global__ void __launch_bounds__(kTh, 1) wy_state16_rt2_kernel(ChArgs a, const __grid_constant__ RtMaps maps) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    RtBlock blk;
    if (!rt_block(a, kConsumers, &blk)) return;
    const Seq& sq = blk.sq;
    const int64_t h = blk.h, hk = blk.hk;
    const int v0 = blk.v0, n_chunks = blk.n_chunks, dk = a.dk, dv = a.dv;
    float* const S = blk.S;
    const Row16 ro = row16(128, dv);
    auto chunk_rows = [&](int c) { return blk.chunk_rows(c); };

    extern __shared__ uint8_t smem_raw[];
    uint32_t sb;
    uint8_t* base = rt_smem_base(smem_raw, &sb);
    uint64_t* bars = reinterpret_cast<uint64_t*>(base + kOffBar);
    uint64_t *full_w = bars, *empty_w = bars + 2, *full_q = bars + 4, *empty_q = bars + 5;
    uint64_t *full_u = bars + 6, *empty_u = bars + 7, *full_k = bars + 8, *empty_k = bars + 9;
    uint64_t *full_p = bars + 10, *empty_p = bars + 11;
    if (tid == 0) {  // full: the producer's one arrival (+ the boxes' bytes); empty: every consumer's
        for (uint64_t* b : {&full_w[0], &full_w[1], full_q, full_u, full_k, full_p}) dev::mbar_init(b, 1);
        for (uint64_t* b : {&empty_w[0], &empty_w[1], empty_q, empty_u, empty_k, empty_p})
            dev::mbar_init(b, kConsumers);
        dev::fence_proxy_async_smem();
    }
    __syncthreads();

    if (warp >= 8) {
        // ---- producer: warp 8's lane 0 issues every box, chunk by chunk, as the buffers free up ----
        dev::setmaxnreg_dec<24>();
        if (warp != 8 || lane != 0) return;
        const int hh = int(h);
        for (int c = 0; c < n_chunks; ++c) {
            const int tok = int(sq.t0 + int64_t(c) * kC), st = c & 1;
            const uint32_t free2 = ((uint32_t(c) >> 1) & 1) ^ 1, free1 = (uint32_t(c) & 1) ^ 1;
            dev::mbar_wait(&empty_w[st], free2);  // chunk c − 2's Vn partials are done
            dev::mbar_arrive_expect_tx(&full_w[st], 4 * kBox);
            for (int j = 0; j < 4; ++j)
                dev::tma_load_3d(sb + kOffW + (4 * st + j) * kBox, &maps.h16, ro.w + 64 * j, hh, tok, &full_w[st]);
            dev::mbar_wait(empty_q, free1);  // chunk c − 1's Q̃·S partials are done
            dev::mbar_arrive_expect_tx(full_q, 4 * kBox);
            for (int j = 0; j < 4; ++j)
                dev::tma_load_3d(sb + kOffQ + j * kBox, &maps.h16, ro.q + 64 * j, hh, tok, full_q);
            dev::mbar_wait(empty_u, free1);  // chunk c − 1's Vn is formed
            dev::mbar_arrive_expect_tx(full_u, 2 * kBox);
            for (int j = 0; j < 2; ++j)
                dev::tma_load_3d(sb + kOffU + j * kBox, &maps.f32, ro.u + v0 + 32 * j, hh, tok, full_u);
            dev::mbar_wait(empty_k, free1);  // chunk c − 1's S updates are done
            dev::mbar_arrive_expect_tx(full_k, 4 * kBox);
            for (int j = 0; j < 4; ++j)
                dev::tma_load_3d(sb + kOffK + j * kBox, &maps.h16, ro.k + 64 * j, hh, tok, full_k);
            dev::mbar_wait(empty_p, free1);  // chunk c − 1's P·Vn are done
            dev::mbar_arrive_expect_tx(full_p, 2 * kBox);
            for (int j = 0; j < 2; ++j)
                dev::tma_load_3d(sb + kOffP + j * kBox, &maps.h16, ro.p + 64 * j, hh, tok, full_p);
        }
        return;
    }

    // ---- warpgroup kh: rows r = wr + g + 8·hf (value column v0 + r) of Sᵀ's dk half kh; element
    // 4i + e of an m64nN accumulator is row g + 8·(e / 2), column 8i + 2t + e % 2 ----
    dev::setmaxnreg_inc<240>();
    const int kh = warp / 4, tw = tid % kWg, wr = 16 * (warp % 4);
    float sacc[32];  // Sᵀ[rows][64kh … 64kh + 63], f32 only around the S update (as F16x3Rt's)
    load_state(sacc, S, v0 + wr + g, 64 * kh, t, dv, dk);
    uint32_t sh[4][4], sl[4][4];
    int eS0, eS1;
    split_rows(sacc, eS0, eS1, sh, sl);
    float* xs = reinterpret_cast<float*>(base + kOffX);  // [kh][j][tw]
    float* ys = reinterpret_cast<float*>(base + kOffY);  // [kh][jj][tw]

    for (int c = 0; c < n_chunks; ++c) {
        const int64_t tb = sq.t0 + int64_t(c) * kC;
        const int L = chunk_rows(c), st = c & 1;
        const uint32_t par2 = (uint32_t(c) >> 1) & 1, par1 = uint32_t(c) & 1;
        const float* meta = a.scratch + (tb * a.nv + h) * a.rs + ro.meta;
        const float sW = meta[kMxW], sK = meta[kMxK], sQ = meta[kMxQ], sP = meta[kMxP], last = meta[4];

        // 1. The partial products of this dk half: S·Wᵀ and S·Q̃ᵀ.
        dev::mbar_wait(&full_w[st], par2);
        dev::mbar_wait(full_q, par1);
        float vacc[32], oacc[32];
        dev::wgmma_fence();
        mma3_rs<0, 64, LayHalf>(vacc, sh, sl, dev::wgmma_desc_sw128(sb + kOffW + (4 * st + kh) * kBox), false);
        dev::wgmma_commit();
        mma3_rs<0, 64, LayHalf>(oacc, sh, sl, dev::wgmma_desc_sw128(sb + kOffQ + kh * kBox), false);
        dev::wgmma_commit();

        // 2. Vn = U − (P0 + P1), the partials exchanged in true units.
        const int eW = exp_of(sW), eK = exp_of(sK), eQ = exp_of(sQ), eP = exp_of(sP);
        dev::wgmma_wait<1>();
        dev::wgmma_fence_operands(vacc);
        dev::mbar_arrive(&empty_w[st]);
        {
            const float f0 = pow2(-(eS0 + eW)), f1 = pow2(-(eS1 + eW));
#pragma unroll
            for (int j = 0; j < 32; ++j) xs[(kh * 32 + j) * kWg + tw] = vacc[j] * ((j & 2) ? f1 : f0);
        }
        dev::named_barrier_sync(1, kConsumers);
        dev::mbar_wait(full_u, par1);
        {
            // U's swizzled tile: element (token 8i + 2t + e1, row r = wr + g + 8·hf) at uoff[hf][e1] +
            // 1024·i — the token stays ≡ 2t + e1 mod 8, so the swizzle is fixed a thread.
            const uint8_t* ub = base + kOffU;
            int uoff[2][2];
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                for (int e1 = 0; e1 < 2; ++e1) {
                    const int r = wr + g + 8 * hf, l = 2 * t + e1;
                    uoff[hf][e1] = (r >> 5) * kBox + l * 128 + ((((r & 31) >> 2) ^ l) << 4) + (r & 3) * 4;
                }
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                const int l = 8 * (j >> 2) + 2 * t + (j & 1);
                const float u = *reinterpret_cast<const float*>(ub + uoff[(j >> 1) & 1][j & 1] + (j >> 2) * 1024);
                const float x = u - (xs[j * kWg + tw] + xs[(32 + j) * kWg + tw]);  // both warpgroups: P0 + P1
                vacc[j] = l < L ? x : 0.f;
            }
        }
        dev::mbar_arrive(empty_u);
        uint32_t mv0, mv1;
        row_maxima(vacc, mv0, mv1);
        const int eV0 = min(tile_exp(mv0), min(87 + eS0, 120) - eK);  // F16x3Rt's cap, on this half's S
        const int eV1 = min(tile_exp(mv1), min(87 + eS1, 120) - eK);
        uint32_t vh[4][4], vl[4][4];
        to_frags<4>(vacc, pow2(eV0), pow2(eV1), vh, vl);

        // 3. Q̃·S partials: this warpgroup's tokens kept, the other's passed on; S back to f32.
        dev::wgmma_wait<0>();
        dev::wgmma_fence_operands(oacc);
        fence_frags(sh);
        fence_frags(sl);
        dev::mbar_arrive(empty_q);
        float ofin[16];  // O's first part for tokens 32kh + 8i + 2t + e % 2 (element 4i + e)
        {
            const float f0 = pow2(-(eS0 + eQ)), f1 = pow2(-(eS1 + eQ));
#pragma unroll
            for (int jj = 0; jj < 16; ++jj) {  // (selects, not oacc[16·kh + jj]: a runtime index spills the array)
                const float lo = oacc[jj], hi = oacc[16 + jj], f = (jj & 2) ? f1 : f0;
                ofin[jj] = (kh == 0 ? lo : hi) * f;
                ys[(kh * 16 + jj) * kWg + tw] = (kh == 0 ? hi : lo) * f;
            }
        }
        dev::named_barrier_sync(1, kConsumers);
#pragma unroll
        for (int jj = 0; jj < 16; ++jj) {  // warpgroup 0's partial first
            const float other = ys[((1 - kh) * 16 + jj) * kWg + tw];
            ofin[jj] = kh == 0 ? ofin[jj] + other : other + ofin[jj];
        }
        from_frags(sh, sl, last * pow2(max(eV0 + eK - eS0, -126)), last * pow2(max(eV1 + eK - eS1, -126)), sacc);

        // 4. S_kh ← e^Γlast·S_kh + Vn·K̃_kh, then P·Vn for this warpgroup's 32 tokens.
        dev::mbar_wait(full_k, par1);
        if (L < kC) {  // this half's K̃ rows past the chunk: zeros (0·inf would be NaN)
            for (int i = tw; i < (kC - L) * 2 * 8; i += kWg) {
                const int r = L + i / 16, box = kh + 2 * (i / 8 % 2), ch = i % 8;
                *reinterpret_cast<uint4*>(base + kOffK + box * kBox + r * 128 + ch * 16) = make_uint4(0u, 0u, 0u, 0u);
            }
            dev::fence_proxy_async_smem();
            dev::named_barrier_sync(2 + kh, kWg);
        }
        dev::mbar_wait(full_p, par1);
        float o2[16];
        dev::wgmma_fence();
        mma3_rs<1, 64, LayK>(sacc, vh, vl, dev::wgmma_desc_sw128_mn(sb + kOffK + kh * kBox, kBox), true);
        dev::wgmma_commit();
        mma3_rs<0, 32, LayP>(o2, vh, vl, dev::wgmma_desc_sw128(sb + kOffP + kh * 32 * 128), false);
        dev::wgmma_commit();

        // 5. S_kh lands: back to true units; split for the next chunk.
        dev::wgmma_wait<1>();
        dev::wgmma_fence_operands(sacc);
        dev::mbar_arrive(empty_k);
        {
            const float q0 = pow2(-(eV0 + eK)), q1 = pow2(-(eV1 + eK));
#pragma unroll
            for (int j = 0; j < 32; ++j) sacc[j] *= (j & 2) ? q1 : q0;
        }
        if (c + 1 < n_chunks) split_rows(sacc, eS0, eS1, sh, sl);

        // 6. P·Vn lands: O for tokens 32kh … 32kh + 31.
        dev::wgmma_wait<0>();
        dev::wgmma_fence_operands(o2);
        fence_frags(vh);
        fence_frags(vl);
        dev::mbar_arrive(empty_p);
        {
            // A token's row pointer once for both of its value columns (g and g + 8: 32 bytes apart).
            const float f0 = pow2(-(eV0 + eP)), f1 = pow2(-(eV1 + eP));
            const int vr = v0 + wr + g;
            const bool in0 = vr < dv, in1 = vr + 8 < dv;
            float* orow = a.o + tb * a.o_ts + h * a.o_hs + vr;
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int e1 = 0; e1 < 2; ++e1) {
                    const int l = 32 * kh + 8 * i + 2 * t + e1, j = 4 * i + e1;
                    if (l >= L) continue;
                    float* p = orow + int64_t(l) * a.o_ts;
                    if (in0) p[0] = ofin[j] + o2[j] * f0;
                    if (in1) p[8] = ofin[j + 2] + o2[j + 2] * f1;
                }
        }
    }

    if (!S) {  // a padding sequence: its last one-token chunk from S in W's stages (all read by now)
        if (sq.n_wy < sq.n)
            step_padding_tail(a, sq, h, hk, v0, sacc, wr + g, 64 * kh, t, reinterpret_cast<float*>(base + kOffW),
                              kConsumers);
        return;
    }
    store_state(sacc, S, v0 + wr + g, 64 * kh, t, dv, dk);
}

}  // namespace

cudaError_t launch_wy_state16_rt2(const ChArgs& a, const RtMaps& maps, cudaStream_t stream) {
    if ((a.dk + 15) / 16 * 16 != 128) return cudaErrorInvalidValue;
    const cudaError_t err =
        cudaFuncSetAttribute(wy_state16_rt2_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    const dim3 grid{unsigned(a.plan.n_seqs), unsigned(a.nv), unsigned((a.dv + kRows - 1) / kRows)};
    wy_state16_rt2_kernel<<<grid, kTh, kSmem, stream>>>(a, maps);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail::f16x3
