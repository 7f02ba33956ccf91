// GdnChunkVariant::F16x3Rt: F16x3's chunked state pass with the state transposed into the warpgroup
// MMA's accumulators. Sᵀ's rows are the value columns, and each evolves alone:
//   Vnᵀ = Uᵀ − Sᵀ·Wᵀ,   Oᵀ = Sᵀ·Q̃ᵀ + Vnᵀ·Pᵀ,   Sᵀ ← e^Γlast·Sᵀ + Vnᵀ·K̃
// — every product has Sᵀ or Vnᵀ as its A, row for row, so one warpgroup holding 64 rows of Sᵀ
// (m64n128 f32 accumulators) runs a block's whole chunk chain from registers: an accumulator is
// already laid out as the next wgmma's A fragments (FA3's P·V trick), its exponents are per row
// (a quad's two shuffles, no block maximum), and nothing waits at a block barrier. F16x3Wg's pass
// (fast_gdn_chunked16_wg.cu) spends ~9,000 cycles a chunk on four barriers and the maxima behind
// them against ~1,800 of tensor work (session 19's profile).
//
// TERMS (the kernel's template argument): 3 for F16x3Rt as below; 1 for F16Rt (the backend's pick
// since session 22) — every product hi·B_hi alone, the producer fetching the hi boxes only, and Sᵀ
// kept in its f32 accumulators across the chunk (scaled by e^Γlast·2^(eV + eK) in place for the
// update) instead of being rebuilt from its split fragments (its hi fragments are the products' A).
//
// Arithmetic (F16x3's accuracy class): every operand is 2^-e·(hi + lo), hi and lo f16, lo RAW
// (split16<true>: unscaled, so hi·hi, hi·lo and lo·hi add into one accumulator); W, Q̃, K̃ and P come
// so from wy_prep16<·, true> with one exponent a chunk tile; Sᵀ and Vnᵀ are split here under one
// exponent a row (its max in [2^12, 2^13)). Between chunks Sᵀ is kept as those split fragments
// (2^-eS·(hi + lo), within 2^-23 of its row's max); for the S update it is rebuilt in f32 times
// e^Γlast·2^(eV + eK) (the units of Vn's and K̃'s split values, so the product accumulates onto it),
// then scaled by 2^-(eV + eK) (exact); the last chunk's S goes back to the slot from f32. eV is
// capped so that scaling stays below 2^100 (Vn rows ~2^-87 of S's contribute nothing at f32's
// precision anyway).
//
// A block per (sequence, value head, 64 value columns): warpgroup 0 computes, warp 4 issues the TMA
// boxes (3-D maps over the scratch rows: halves or floats × value head × token; 64 rows × 128
// bytes a box, the 128-byte swizzle wgmma reads). Per chunk, in the order the tensor pipe runs it:
//   1. Vn = U − S·W and Q̃·S (both A = S's split fragments; B = W, Q̃ K-major, two stages);
//   2. Vn's epilogue: U read from its swizzled tile, columns past the chunk zeroed, split per row;
//   3. Q̃·S lands: scaled and kept in shared memory (a thread's own); S back to f32 from its split
//      fragments (the state lives as them between chunks: 64 registers fewer across 1–2);
//   4. S ← e^Γlast·S + Vn·K̃ (B = K̃ N-major: the tokens are the k dimension), rows of K̃ past the
//      chunk zeroed first (the scratch there may hold anything); then P·Vn (B = P K-major);
//   5. S lands: its row maxima and split fragments for the next chunk;  6. P·Vn lands: O stored.
// Buffers: W+Q̃ two stages, U two, K̃ and P one each (224 KB; TERMS 1, hi boxes only: 137 KB; two chains
// a block, K̃ and P two each since session 51: 208 KB); each has
// a full mbarrier (TMA bytes) and an empty one (128 consumer arrivals, after the wgmma wait that ends
// its reads). The chunk's scales come with W+Q̃'s stage: the producer copies them into shared memory.
#include <cuda.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_gdn_phases.cuh"
#include "kernels/cuda/fast_gdn_rt.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail::f16x3 {

using namespace wy;

namespace {

constexpr int kRows = kRtRows;           // value columns of a warpgroup (Sᵀ's rows)
constexpr int kConsumers = 128;          // threads of a consumer warpgroup
// Threads of a block of NW consumer warpgroups: + the producer warp (F16Rt's and F16x3Rt's plain pass),
// or (LEAN) + a producer warpgroup whose warp 4·NW issues and whose other warps leave at once:
// setmaxnreg moves its registers to the consumers, which a lone warp could not do, and the block
// launches at 168 registers a thread. An SM's register file is four partitions of 16,384 registers,
// each warp's in one (warp w's in w mod 4, as far as session 53's stamps tell): a producer warp beside
// the consumers at 256 registers fills partition 0 (warps 0 and 4), and no prep block (8 warps at 80)
// found room beside the one-chain pass block — F16RtStay's staying block held it off its SM until the
// block left (H100: the pass's blocks began at 44.8 µs, against 31.3 without it). The one-chain block's
// 8 warps at 168 leave each partition 5,632 — a prep block's two warps there take 5,120 (its 137 KB
// of shared memory and the prep's 70 KB fit too).
template <int NW, bool WGP>
constexpr int kThRt = WGP ? (NW + 1) * kConsumers : kConsumers + 32;
constexpr int kThRtBound = 3 * kConsumers;  // LEAN's launch bound: 65,536 / 384 → 168 registers
constexpr int kBox = kRtBox;             // bytes: one TMA box, 64 rows of a 128-byte swizzled row
// Shared memory, bytes from a 1024-aligned base; TERMS 1 holds the hi boxes only (137 KB: room for a
// DIRECT prep block beside it on the SM, 70 KB, while the prep still runs).
template <int TERMS, int NW = 1>
struct RtSmem {
    static constexpr int kHalves = TERMS == 3 ? 4 : 2;  // boxes of a split [64][128] tile: hi (and lo)
    static constexpr int kStageWQ = 2 * kHalves * kBox;  // [W hi d0–63, d64–127, (W lo ×2), Q̃ hi ×2, (Q̃ lo ×2)]
    static constexpr int kQ = kHalves * kBox;            // Q̃'s offset in a stage
    static constexpr int kOffWQ = 0;                     // two stages
    // K̃ and P: two stages for two chains a block (the producer a chunk ahead of their reads, as it is of
    // W+Q̃'s and U's: 208 KB), else one. H100, session 51, µs hot (one stage / two): one sequence of 4,096
    // tokens 275.3 / 261.6, 16,384 973.5 / 937.9 (two chains); one chain a block 84.1 / 85.4 at 1,024
    // (F16RtSched), 98.7 / 102.2 (F16RtLean), level at 2,048 — the pass alone 8 % faster, but beside the
    // prep one chain a block gains nothing.
    static constexpr int kStagesKP = TERMS == 1 && NW == 2 ? 2 : 1;
    static constexpr int kOffK = kOffWQ + 2 * kStageWQ;  // [stages][K̃ hi d0–63, d64–127, (K̃ lo ×2)]: [64 tok][64 d]
    static constexpr int kOffP = kOffK + kStagesKP * kHalves * kBox;  // [stages][P hi, (P lo)]: [64 i][64 j]
    // [2 stages][NW warpgroups][v 0–31, v 32–63]: f32 [64 tokens][32 v]
    static constexpr int kOffU = kOffP + kStagesKP * kHalves / 2 * kBox;
    static constexpr int kOffO = kOffU + 4 * NW * kBox;  // f32 [NW][32][128]: a thread's Q̃·S part of O
    static constexpr int kOffBar = kOffO + 32 * kConsumers * 4 * NW;
    static constexpr int kOffMeta = kOffBar + 16 * 8;  // [2 stages][8] floats: the chunk's scales (W+Q̃'s stage)
    static constexpr int kBytes = kOffMeta + 2 * 8 * 4 + 1024;  // + room to align the base to 1024
    static_assert(kBytes <= 227 * 1024, "F16x3Rt's buffers fit the H200's shared memory");
    static_assert(2 * 128 * kLdS * 4 <= 2 * kStageWQ, "a padding sequence's S halves fit W+Q̃'s two stages");
    static_assert(NW == 1 || 2 * 128 * kLdS * 4 <= 4 * NW * kBox, "… and warpgroup 1's fit U's");
};

// LEAN (F16RtLean's pass and F16RtSched's, written in session 39; the default since 45): the same arithmetic with
// the Vn epilogue's U reads at per-lane bases and constant offsets, the lane's coordinates by masks
// (so the compiler knows t < 4), and chunk c's O summed into the thread's ost slots when P·Vn lands
// but stored to global memory under chunk c + 1's first products (off the chain; from registers
// instead, ptxas serialized the wgmma: C7518). F16Rt keeps the plain form.
//
// NW 2 (F16RtSched's pick, F16RtLean2; LEAN only): a block per 128 value columns, warpgroup w running the chain of
// columns 64w … 64w + 63 — two chains an SM sharing W+Q̃, K̃ and P (each its own U and O tiles;
// 184 KB), so the pass holds half as many SMs while the prep runs beside it.
//
// U16 (F16RtU16; LEAN only): U's tile comes as f16 (one 64-column box a chain, from the halves at
// 2·ro.u) under the chunk's power of two (kMetaU, copied with the scales), not as f32.
template <int TERMS, bool LEAN = false, int NW = 1, bool U16 = false>
__global__ void __launch_bounds__(LEAN ? kThRtBound : kThRt<NW, false>, 1)
    wy_state16_rt_kernel(ChArgs a, const __grid_constant__ RtMaps maps) {
    static_assert(NW == 1 || (NW == 2 && LEAN && TERMS == 1), "two warpgroups a block: the lean F16Rt pass");
    static_assert(!U16 || (LEAN && TERMS == 1), "U as f16: the lean F16Rt pass");
    constexpr int kMetaN = U16 ? kMetaU + 1 : 5;  // the chunk's scales and e^Γlast (U16: and U's scale)
    constexpr int kCons = NW * kConsumers;  // every consumer thread (the empty barriers' count)
    const int tid = int(threadIdx.x);
    const int warp = LEAN ? tid >> 5 : tid / 32, lane = LEAN ? tid & 31 : tid % 32;
    const int g = LEAN ? lane >> 2 : lane / 4, t = LEAN ? lane & 3 : lane % 4;
    RtBlock blk;
    if (!rt_block(a, kCons, &blk, NW * kRows)) return;
    const Seq& sq = blk.sq;
    const int64_t h = blk.h, hk = blk.hk;
    const int n_chunks = blk.n_chunks, dk = a.dk, dv = a.dv;
    float* const S = blk.S;
    using M = RtSmem<TERMS, NW>;
    constexpr int kHalves = M::kHalves, kStageWQ = M::kStageWQ, kOffWQ = M::kOffWQ, kOffK = M::kOffK;
    constexpr int kOffP = M::kOffP, kOffU = M::kOffU, kOffO = M::kOffO, kOffBar = M::kOffBar, kOffMeta = M::kOffMeta;
    const Row16 ro = row16(128, dv);
    auto chunk_rows = [&](int c) { return blk.chunk_rows(c); };

    extern __shared__ uint8_t smem_raw[];
    uint32_t sb;
    uint8_t* base = rt_smem_base(smem_raw, &sb);
    uint64_t* bars = reinterpret_cast<uint64_t*>(base + kOffBar);
    uint64_t *full_wq = bars, *empty_wq = bars + 2, *full_u = bars + 4, *empty_u = bars + 6;
    uint64_t *full_k = bars + 8, *empty_k = bars + 10, *full_p = bars + 12, *empty_p = bars + 14;
    // K̃'s and P's stage of chunk c, and the parity of its n-th use (n = c / stages).
    constexpr int kKP = M::kStagesKP;
    auto kp_stage = [](int c) { return kKP == 2 ? c & 1 : 0; };
    auto kp_parity = [](int c) { return uint32_t(kKP == 2 ? c >> 1 : c) & 1u; };
    if (tid == 0) {  // full: the producer's one arrival (+ the boxes' bytes); empty: every consumer's
        for (int i = 0; i < 2; ++i) {
            for (uint64_t* b : {&full_wq[i], &full_u[i], &full_k[i], &full_p[i]}) dev::mbar_init(b, 1);
            for (uint64_t* b : {&empty_wq[i], &empty_u[i], &empty_k[i], &empty_p[i]}) dev::mbar_init(b, kCons);
        }
        dev::fence_proxy_async_smem();
    }
    __syncthreads();

    float* meta_s = reinterpret_cast<float*>(base + kOffMeta);
    if (warp >= 4 * NW) {
        // ---- producer: lane 0 of warp 4·NW issues every box, chunk by chunk, as the buffers free up ----
        if constexpr (LEAN) dev::setmaxnreg_dec<24>();
        if (warp != 4 * NW || lane != 0) return;
        const int v0 = blk.v0;
        const int hh = int(h);
        const PassStamps stamps(a, h, true);  // (a profiling build's: fast_gdn_phases.h)
        for (int c = 0; c < n_chunks; ++c) {
            const int tok = int(sq.t0 + int64_t(c) * kC), st = c & 1;
            const uint32_t free2 = ((uint32_t(c) >> 1) & 1) ^ 1;
            const float* meta = a.scratch + (int64_t(tok) * a.nv + h) * a.rs + ro.meta;
            if (a.epoch) wait_chunk(meta, a.epoch);  // the prep may still be writing later chunks
            stamps.at(c, 0);
            float mv[kMetaN];  // the chunk's scales and e^Γlast, into W+Q̃'s stage (published by its arrival)
            for (int j = 0; j < kMetaN; ++j) mv[j] = meta[j];
            // (TERMS 1: the hi boxes only — j < 2 of W, Q̃ and K̃'s four, P's first.)
            dev::mbar_wait(&empty_wq[st], free2);  // Q̃·S of chunk c − 2 is done (so is its W·S)
            for (int j = 0; j < kMetaN; ++j) meta_s[8 * st + j] = mv[j];
            dev::mbar_arrive_expect_tx(&full_wq[st], 2 * kHalves * kBox);
            const uint32_t wq = sb + kOffWQ + st * kStageWQ;
            for (int j = 0; j < kHalves; ++j) {  // hi d0–63, hi d64–127, lo d0–63, lo d64–127
                dev::tma_load_3d(wq + j * kBox, &maps.h16, ro.w + 64 * j, hh, tok, &full_wq[st]);
                dev::tma_load_3d(wq + M::kQ + j * kBox, &maps.h16, ro.q + 64 * j, hh, tok, &full_wq[st]);
            }
            dev::mbar_wait(&empty_u[st], free2);  // Vn of chunk c − 2 is done
            if constexpr (U16) {
                dev::mbar_arrive_expect_tx(&full_u[st], NW * kBox);
                for (int j = 0; j < NW; ++j)  // warpgroup j's 64 columns, f16
                    dev::tma_load_3d(sb + kOffU + (2 * NW * st + j) * kBox, &maps.h16, 2 * ro.u + v0 + 64 * j, hh,
                                     tok, &full_u[st]);
            } else {
                dev::mbar_arrive_expect_tx(&full_u[st], 2 * NW * kBox);
                for (int j = 0; j < 2 * NW; ++j)  // warpgroup j / 2's columns 32·(j % 2) …
                    dev::tma_load_3d(sb + kOffU + (2 * NW * st + j) * kBox, &maps.f32, ro.u + v0 + 32 * j, hh, tok,
                                     &full_u[st]);
            }
            // K̃ and P: their stage's last chunk's S update / P·Vn is done (c − 2; c − 1 on one stage)
            const int sk = kp_stage(c);
            const uint32_t kfree = kp_parity(c) ^ 1u;
            dev::mbar_wait(&empty_k[sk], kfree);
            dev::mbar_arrive_expect_tx(&full_k[sk], kHalves * kBox);
            for (int j = 0; j < kHalves; ++j)
                dev::tma_load_3d(sb + kOffK + (sk * kHalves + j) * kBox, &maps.h16, ro.k + 64 * j, hh, tok,
                                 &full_k[sk]);
            dev::mbar_wait(&empty_p[sk], kfree);
            dev::mbar_arrive_expect_tx(&full_p[sk], kHalves / 2 * kBox);
            for (int j = 0; j < kHalves / 2; ++j)
                dev::tma_load_3d(sb + kOffP + (sk * kHalves / 2 + j) * kBox, &maps.h16, ro.p + 64 * j, hh, tok,
                                 &full_p[sk]);
        }
        return;
    }

    // ---- warpgroup wg: rows r = wr + g + 8·hf of its 64 columns (value column v0 + r); accumulator
    // element 4i + e of an m64nN tile is row g + 8·(e / 2), column 8i + 2t + e % 2 ----
    // (the pool: (NW + 1) · 4 warps at 168 → NW · 4 consumer warps at 240 (NW 2) or 256 (NW 1) + 4 at 24)
    if constexpr (LEAN) dev::setmaxnreg_inc<NW == 1 ? 256 : 240>();
    const int wg = NW == 1 ? 0 : warp >> 2, wr = 16 * (warp & 3);
    const int v0 = blk.v0 + kRows * wg;
    // Sᵀ ([64 rows][128 d]) lives between chunks as its split A fragments sh + sl under a power of
    // two a row (2^-eS: exact to 2^-23 of the row's max, f32's precision class) and in f32 only
    // through the S update: 64 accumulators fewer across the chunk's products.
    const PassStamps stamps(a, h, tid == 0);
    stamps.at(0, 3);
    float sacc[64];
    load_state(sacc, S, v0 + wr + g, 0, t, dv, dk);
    uint32_t sh[8][4], sl[8][4];
    int eS0, eS1;
    split_rows(sacc, eS0, eS1, sh, sl);
    float* ost = reinterpret_cast<float*>(base + kOffO) +
                 (NW == 1 ? tid : 32 * kConsumers * wg + (tid & (kConsumers - 1)));
    // ([32][128] a warpgroup: element j at ost[128 j])
    // LEAN: chunk c's O = Q̃·S + P·Vn, summed into this thread's ost slots when P·Vn lands, goes to
    // global memory while chunk c + 1's first products run (off the chain); its rows in pend_*.
    const bool col_ok[2] = {v0 + wr + g < dv, v0 + wr + g + 8 < dv};
    auto store_o = [&](int64_t tb_, int L_) {
        // tokens 2t + jb + 8q of the chunk at tb_: two row pointers stepped 8 tokens at a time
        float* orow = a.o + tb_ * a.o_ts + h * a.o_hs + v0 + wr + g;
        const int64_t ts8 = 8 * a.o_ts;
        float* p[2] = {orow + 2 * t * a.o_ts, orow + (2 * t + 1) * a.o_ts};
#pragma unroll
        for (int q = 0; q < 8; ++q, p[0] += ts8, p[1] += ts8)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                for (int jb = 0; jb < 2; ++jb) {
                    const int j = 4 * q + 2 * hf + jb;
                    if (8 * q + 2 * t + jb < L_ && col_ok[hf]) p[jb][8 * hf] = ost[kConsumers * j];
                }
    };
    int64_t pend_tb = sq.t0;
    int pend_L = 0;

    for (int c = 0; c < n_chunks; ++c) {
        const int64_t tb = sq.t0 + int64_t(c) * kC;
        const int L = chunk_rows(c), st = c & 1;
        const uint32_t par2 = (uint32_t(c) >> 1) & 1;
        const int sk = kp_stage(c);
        const uint32_t pkp = kp_parity(c);
        const uint32_t koff = kOffK + sk * kHalves * kBox, poff = kOffP + sk * (kHalves / 2) * kBox;

        // 1. Vn's product and Q̃·S, one group each.
        dev::mbar_wait(&full_wq[st], par2);
        stamps.at(c, 1);
        const float* meta = meta_s + 8 * st;
        const float sW = meta[kMxW], sK = meta[kMxK], sQ = meta[kMxQ], sP = meta[kMxP], last = meta[4];
        const uint32_t wq = sb + kOffWQ + st * kStageWQ;
        float vacc[32], oacc[32];
        dev::wgmma_fence();
        mma3_rs<0, 64, LayWQ, TERMS>(vacc, sh, sl, dev::wgmma_desc_sw128(wq), false);
        dev::wgmma_commit();
        mma3_rs<0, 64, LayWQ, TERMS>(oacc, sh, sl, dev::wgmma_desc_sw128(wq + M::kQ), false);
        dev::wgmma_commit();
        // The last chunk's O, under these products (before ost is rewritten, step 3); at c = 0 pend_L
        // is 0 and nothing is stored (no branch: a divergent path here would serialize the wgmma).
        if constexpr (LEAN) store_o(pend_tb, pend_L);

        // 2. Vn = U − (S·W)·2^-(eS + eW), zero past the chunk, split per row.
        const int eW = exp_of(sW), eK = exp_of(sK), eQ = exp_of(sQ), eP = exp_of(sP);
        dev::mbar_wait(&full_u[st], par2);
        dev::wgmma_wait<1>();
        dev::wgmma_fence_operands(vacc);
        if constexpr (LEAN) {
            // U(l, r) at rows r = wr + g + 8·hf and tokens l = 8q + 2t + jb (element j = 4q + 2hf + jb):
            // l & 7 = 2t + jb, so each (hf, jb) has one swizzled address and q steps 1,024 bytes — in
            // f32 boxes of 32 columns, or (U16) one f16 box of 64, U·2^eu (128-byte rows either way).
            const float f0 = pow2(-(eS0 + eW)), f1 = pow2(-(eS1 + eW));
            const uint8_t* ub = base + kOffU + (U16 ? 2 * NW * st + wg : 2 * (NW * st + wg)) * kBox;
            const uint8_t* bu[2][2];
#pragma unroll
            for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                for (int jb = 0; jb < 2; ++jb) {
                    const int r = wr + g + 8 * hf, lc = 2 * t + jb;
                    bu[hf][jb] = U16 ? ub + lc * 128 + (((r >> 3) ^ lc) << 4) + (r & 7) * 2
                                     : ub + (r >> 5) * kBox + lc * 128 + ((((r & 31) >> 2) ^ lc) << 4) + (r & 3) * 4;
                }
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                const int q = j >> 2, hf = (j >> 1) & 1, jb = j & 1, l = 8 * q + 2 * t + jb;
                float u;
                if constexpr (U16)
                    u = __half2float(*reinterpret_cast<const __half*>(bu[hf][jb] + q * 1024)) * meta[kMetaU];
                else
                    u = *reinterpret_cast<const float*>(bu[hf][jb] + q * 1024);
                const float x = u - vacc[j] * ((j & 2) ? f1 : f0);
                vacc[j] = l < L ? x : 0.f;
            }
        } else {
            const float f0 = pow2(-(eS0 + eW)), f1 = pow2(-(eS1 + eW));
            const uint8_t* ub = base + kOffU + 2 * st * kBox;
#pragma unroll
            for (int j = 0; j < 32; ++j) {
                const int l = 8 * (j >> 2) + 2 * t + (j & 1), r = wr + g + 8 * ((j >> 1) & 1);
                const float u = *reinterpret_cast<const float*>(ub + (r >> 5) * kBox + l * 128 +
                                                                ((((r & 31) >> 2) ^ (l & 7)) << 4) + (r & 3) * 4);
                const float x = u - vacc[j] * ((j & 2) ? f1 : f0);  // (every row of U's tile is there)
                vacc[j] = l < L ? x : 0.f;
            }
        }
        dev::mbar_arrive(&empty_u[st]);
        uint32_t mv0, mv1;
        row_maxima(vacc, mv0, mv1);
        // eV capped so that S·e^Γlast·2^(eV + eK) < 2^100 (|S| < 2^(13 − eS)) and eV + eK <= 120.
        const int eV0 = min(tile_exp(mv0), min(87 + eS0, 120) - eK);
        const int eV1 = min(tile_exp(mv1), min(87 + eS1, 120) - eK);
        uint32_t vh[4][4], vl[4][4];
        to_frags<4>(vacc, pow2(eV0), pow2(eV1), vh, vl);

        // 3. Q̃·S lands (its 768 tensor cycles ran under Vn's epilogue): O's first part, kept. Then S
        // back from its fragments, in Vn·K̃'s units with e^Γlast: (hi + lo)·e^Γlast·2^(eV + eK − eS).
        dev::wgmma_wait<0>();
        dev::wgmma_fence_operands(oacc);
        fence_frags(sh);
        if constexpr (TERMS == 3) fence_frags(sl);  // (TERMS 1: no product reads lo)
        dev::mbar_arrive(&empty_wq[st]);
        {
            const float f0 = pow2(-(eS0 + eQ)), f1 = pow2(-(eS1 + eQ));
#pragma unroll
            for (int j = 0; j < 32; ++j) ost[kConsumers * j] = oacc[j] * ((j & 2) ? f1 : f0);
        }
        if constexpr (TERMS == 3) {
            from_frags(sh, sl, last * pow2(max(eV0 + eK - eS0, -126)), last * pow2(max(eV1 + eK - eS1, -126)), sacc);
        } else {  // S kept in f32 across the chunk (its lo halves are not products' operands here)
            const float f0 = last * pow2(eV0 + eK), f1 = last * pow2(eV1 + eK);
#pragma unroll
            for (int j = 0; j < 64; ++j) sacc[j] *= (j & 2) ? f1 : f0;
        }

        // 4. S ← e^Γlast·S + Vn·K̃, then P·Vn.
        dev::mbar_wait(&full_k[sk], pkp);
        if (L < kC) {  // K̃'s rows past the chunk: zeros (Vn's zero columns meet them; 0·inf would be NaN)
            for (int i = tid; i < (kC - L) * kHalves * 8; i += kCons) {
                const int r = L + i / (8 * kHalves), box = i / 8 % kHalves, ch = i % 8;
                *reinterpret_cast<uint4*>(base + koff + box * kBox + r * 128 + ch * 16) = make_uint4(0u, 0u, 0u, 0u);
            }
            dev::fence_proxy_async_smem();
            dev::named_barrier_sync(1, kCons);
        }
        const uint32_t kb = sb + koff, pb = sb + poff;
        float o2[32];
        dev::mbar_wait(&full_p[sk], pkp);  // (before the fence: a wait loop between the two groups serializes them)
        dev::wgmma_fence();
        mma3_rs<1, 128, LayK, TERMS>(sacc, vh, vl, dev::wgmma_desc_sw128_mn(kb, kBox), true);
        dev::wgmma_commit();
        mma3_rs<0, 64, LayP, TERMS>(o2, vh, vl, dev::wgmma_desc_sw128(pb), false);
        dev::wgmma_commit();

        // 5. S lands: back to true units; split for the next chunk (in place: sacc dies into sh, sl).
        dev::wgmma_wait<1>();
        dev::wgmma_fence_operands(sacc);
        dev::mbar_arrive(&empty_k[sk]);
        {
            const float q0 = pow2(-(eV0 + eK)), q1 = pow2(-(eV1 + eK));
#pragma unroll
            for (int j = 0; j < 64; ++j) sacc[j] *= (j & 2) ? q1 : q0;
        }
        if (c + 1 < n_chunks) split_rows(sacc, eS0, eS1, sh, sl);

        // 6. P·Vn lands: O = Q̃·S + P·Vn for the chunk's tokens.
        dev::wgmma_wait<0>();
        dev::wgmma_fence_operands(o2);
        fence_frags(vh);
        if constexpr (TERMS == 3) fence_frags(vl);
        dev::mbar_arrive(&empty_p[sk]);
        {
            const float f0 = pow2(-(eV0 + eP)), f1 = pow2(-(eV1 + eP));
            if constexpr (LEAN) {  // stored under the next chunk's first products, or after the loop
#pragma unroll
                for (int j = 0; j < 32; ++j) ost[kConsumers * j] += o2[j] * ((j & 2) ? f1 : f0);
                pend_tb = tb;
                pend_L = L;
            } else {
                float* orow = a.o + tb * a.o_ts + h * a.o_hs + v0 + wr + g;
#pragma unroll
                for (int j = 0; j < 32; ++j) {
                    const int l = 8 * (j >> 2) + 2 * t + (j & 1), r = 8 * ((j >> 1) & 1);
                    if (l < L && v0 + wr + g + r < dv)
                        orow[l * a.o_ts + r] = ost[kConsumers * j] + o2[j] * ((j & 2) ? f1 : f0);
                }
            }
        }
        stamps.at(c, 2);
    }

    if constexpr (LEAN)
        store_o(pend_tb, pend_L);
    if (!S) {  // a padding sequence: its last one-token chunk from S in W+Q̃'s stages (all read by now; NW 2:
        // warpgroup 1's in U's, once both chains are past their last chunk)
        if (sq.n_wy < sq.n) {
            if constexpr (NW == 2) dev::named_barrier_sync(2, kCons);
            step_padding_tail(a, sq, h, hk, v0, sacc, wr + g, 0, t,
                              reinterpret_cast<float*>(base + (wg == 0 ? kOffWQ : kOffU)), kConsumers, 1 + 2 * wg);
        }
        return;
    }
    store_state(sacc, S, v0 + wr + g, 0, t, dv, dk);
}

}  // namespace

cudaError_t launch_wy_state16_rt(const ChArgs& a, const RtMaps& maps, int terms, cudaStream_t stream, bool lean,
                                 bool two_chains, bool u16) {
    if ((a.dk + 15) / 16 * 16 != 128 || (terms != 1 && terms != 3) || (lean && terms != 1) ||
        (two_chains && !lean) || (u16 && !lean))
        return cudaErrorInvalidValue;
    auto* kernel = terms == 3   ? wy_state16_rt_kernel<3>
                   : two_chains ? (u16 ? wy_state16_rt_kernel<1, true, 2, true> : wy_state16_rt_kernel<1, true, 2>)
                   : lean       ? (u16 ? wy_state16_rt_kernel<1, true, 1, true> : wy_state16_rt_kernel<1, true>)
                                : wy_state16_rt_kernel<1>;
    const int smem = terms == 3 ? RtSmem<3>::kBytes : two_chains ? RtSmem<1, 2>::kBytes : RtSmem<1>::kBytes;
    const int threads = two_chains ? kThRt<2, true> : lean ? kThRt<1, true> : kThRt<1, false>;
    const int cols = two_chains ? 2 * kRows : kRows;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    // The SM's whole carveout as shared memory, as the prep's: a prep block can sit beside this one.
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
    if (err != cudaSuccess) return err;
    const dim3 grid{unsigned(a.plan.n_seqs), unsigned(a.nv), unsigned((a.dv + cols - 1) / cols)};
    // With a.epoch the pass may start while the prep runs (programmatic dependent launch: once every
    // prep block has started); it never calls pdl::wait, its producer waits on each chunk's flag.
    if (a.epoch) return pdl::launch(kernel, grid, dim3(threads), size_t(smem), stream, a, maps);
    kernel<<<grid, threads, smem, stream>>>(a, maps);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail::f16x3
