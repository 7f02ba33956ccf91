// The fast Gated DeltaNet kernels: the delta rule (recurrent for decodes, the chunked WY form on
// the tensor cores for prefills) and the fused one-token decode step of a whole GDN layer core
// (conv + SiLU, gates, l2 norms, the state update, the gated RMSNorm). Raw device pointers and
// element strides; the SeqPlan arrays and state slots live in device memory and are read only
// there (launch sizes come from host numbers: CUDA-graph friendly). Queued on `stream`; bad
// host-side arguments throw Error. See ref_gdn.h for the reference kernels these replace.
#pragma once
#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/backend.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/cuda/ref_gdn.h"  // HeadsIn

// How the layer maps onto these kernels (GatedDeltaNet::forward, flagship 16/32 heads × 128):
//  - a step where every sequence has one token (decodes, CUDA graphs): after the w_qkv, w_z, w_b,
//    w_a matmuls, gdn_decode_step replaces conv1d_silu, l2_norm (q, k), gdn_gates,
//    gated_delta_rule and rms_norm_gated; its y feeds the w_out matmul. No scratch.
//  - any other step: Backend::gated_delta_rule → gated_delta_rule below (the other ops stay), with
//    GdnParams as the layer passes them (Chunked, chunk 64) and scratch of
//    gated_delta_rule_scratch_floats(T, ...) floats (42 MB at 1024 tokens × 32 heads).
namespace tessera::cuda::fast {

using ref::HeadsIn;

inline constexpr int64_t kGdnChunk = 64;         // the chunked form's tokens per WY chunk
inline constexpr int64_t kGdnChunkMaxDk = 128;   // the chunked form keeps 64 × dk tiles in shared memory

enum class GdnChunkVariant : int;

// Floats of device scratch gated_delta_rule needs for a call of T tokens, nv value heads and these
// head sizes (0 in Recurrent mode). Chunked: T·nv·(dk + dv + 64 + 4) floats — the chunk-local
// W, U, Q·Kᵀ⊙D rows and Γ of every token (≈ 1.3 KB per token and value head at 128 × 128:
// 42 MB for 1024 tokens × 32 heads); the F16x3 variant T·nv·gdn_chunk16_row_floats(dk, dv)
// (≈ 2.3 KB: 75 MB for 1024 tokens × 32 heads) and 4 more (the persistent prep's counter).
int64_t gated_delta_rule_scratch_floats(int64_t T, int64_t nv, int64_t dk, int64_t dv, const GdnParams& p,
                                        GdnChunkVariant variant = GdnChunkVariant(0));
// F16x3's scratch row per (token, value head), in floats: W, K ⊙ e^(Γlast−Γ), Q ⊙ e^Γ (dk rounded
// up to 16) and P (64) as f16 hi and lo halves, U in f32 (dv rounded up to 4), 8 floats of chunk scales.
constexpr int64_t gdn_chunk16_row_floats(int64_t dk, int64_t dv) {
    return 3 * ((dk + 15) / 16 * 16) + kGdnChunk + (dv + 3) / 4 * 4 + 8;
}

// Backend::gated_delta_rule with ref::gated_delta_rule's arguments (same meaning, same layouts)
// and its result up to f32 rounding, plus:
//  - scratch: gated_delta_rule_scratch_floats(...) floats of device memory (Chunked only; may be
//    null in Recurrent mode), not read before it is written;
//  - max_len: an upper bound on any sequence's token count in this call (0: unknown, taken as T).
//    It sizes the chunked launch; 1 (a decode-only step) skips it and, in either mode, takes the
//    one-token kernel (k, q in shared memory: ~40 registers, many blocks an SM). A sequence
//    longer than max_len gets NaN outputs and keeps its state.
// Recurrent mode: one launch, a block per (sequence, value head, 32 state columns) holding its
// [dk, 32] slice of S in registers, tokens in order (decodes and short sequences).
// Chunked mode (chunk must be 64, dk <= 128): per sequence, chunks of 64 tokens counted from its
// first token in this call take the WY form on the tensor cores (two launches: the chunk-local
// matrices of every chunk in parallel, then the state carried chunk by chunk); a sequence of one
// token, and a last chunk of one token, take the recurrent step (a third launch; for a padding
// sequence, whose state is not kept between launches, the second launch steps it), as the CPU's
// Chunked mode does. So a prefill split at multiples of 64 gives the state of one pass, and a
// decode gives the same bits alone or batched. The tensor-core products use 3×TF32 (a = hi + lo,
// hi·hi + hi·lo + lo·hi): f32-level accuracy (~1e-6 relative per product), not TF32's 1e-3.
// variant (benchmarks; the same bits either way): the chunked state pass's warps per block, and
// whether tiles land by 16-byte copies (Vec16: where every q/k/v row and the scratch are 16-byte
// aligned and dk, dv % 4 == 0; else 4-byte ones). H200, 1024 / 4096 / 16384 tokens × 32 heads:
// 16 warps 297 / 1149 / 4587 µs, 8 warps 373 / 1442 / 5758, Vec16 (16 warps) 280 / 1081 / 4324
// (session 5) — Auto is Vec16 (the pass is issue-bound: 124 registers still let 16 warps hold
// the SM's one block).
// Split, SplitWarps8, SplitVec16 (same bits again): the state pass in two launches, the serial one
// carrying S with W·S and Q·S in one pass over S (e^Γ ⊙ (Q·S) into o, Vn over U in the scratch)
// and a parallel one over all chunks adding P·Vn to o; wy_prep's W and U in 4-tile warp blocks;
// no more scratch. H200: 301 / 1134 / 4418 µs (SplitVec16 292 / 1096 / 4254) — not picked.
// F16x3 (fast_gdn_chunked16.cu; other bits, same accuracy class): the products (the prep's too,
// all but the triangular solve's) on m16n8k16 f16 with each operand split hi + 2^-11·lo (3×F16:
// hi·hi + 2^-11·(hi·lo + lo·hi), ~2^-22 relative) under one power-of-two scale per tile or per
// row (f16's range); a prep that writes W, K ⊙ e^(Γlast−Γ),
// Q ⊙ e^Γ and P already split (more scratch: gated_delta_rule_scratch_floats with the variant),
// and a state pass with S in registers, every tile fed by ldmatrix. H200 (session 15), 1024 /
// 16384 tokens: 188.8 / 2,728.5 µs against Auto's 276.1 / 4,215.0 (at 16K: prep 1,158.7, state
// pass 1,564.7); session 18, its loops trimmed: 172.4 / 2,471.2.
// F16x3Wg (fast_gdn_chunked16_wg.cu; F16x3's prep and arithmetic): the state pass on the warpgroup
// MMA, its operands read from swizzled shared memory by descriptors. H200 (session 18): 157.5 /
// 2,072.1 µs.
// F16x3Rt (fast_gdn_chunked16_rt.cu; F16x3's prep writing raw lo halves): the state pass with Sᵀ in
// the warpgroup MMA's accumulators — its rows are the value columns, independent of each other, so
// one warpgroup a 64-column block runs its chunk chain with no block barrier, its exponents per
// row from a quad's shuffles; the chunk's tiles by TMA from a producer warp. dk in (112, 128] (else
// F16x3Wg's pass). The backend's pick in sessions 20–21 (TESSERA_GDN_CHUNKED=f16x3rt).
// H200 (session 20): 145.0 / 2,026.9 µs; 4 sequences × 1024 tokens 452.6 against F16x3Wg's 595.4.
// F16x3Rt2 (fast_gdn_chunked16_rt2.cu): F16x3Rt's chain on two warpgroups a block, each holding Sᵀ's
// columns of one dk half (the Vn and Q̃·S partials exchanged through shared memory), so a chunk's S
// work halves a warp and two warps share a scheduler. Written in session 20 after its device time
// was spent; H200 (session 21): 146.9 / 2,007.9 µs, no faster (TESSERA_GDN_CHUNKED=f16x3rt2).
// F16Rt (TESSERA_GDN_CHUNKED=f16rt): F16x3Rt's prep and pass taking each product as hi·hi only —
// every operand f16 under its tile's or row's power of two (2^-12 of its max), f32 accumulators
// and an f32 state (in f32 registers across the chunk): a third of the tensor work and no lo halves
// written or read. FLA (vLLM's kernel) rounds its operands to bf16 (2^-9). The backend's pick since
// session 22 (TESSERA_GDN_CHUNKED, cuda_switches.cpp): H200, 1024 / 4096 / 16384 tokens 102.2 /
// 350.6 / 1,336.9 µs (the prep's form by gdn_prep_direct) against F16x3Rt's 142.1 / 515.2 / 2,000.6;
// o within ~3e-5, the state ~1.5e-4 of F16x3Rt's (bench_fast_gdn's own comparison).
// F16Rt and F16x3Rt overlap their two launches (session 23): the prep's blocks run in chunk-major
// order and each raises its chunk's flag; the state pass, launched behind it by programmatic
// dependent launch (it starts once every prep block has started), waits for each chunk's flag
// instead of for the whole prep — not while a graph is being captured, nor where o overlaps q, k or
// v. F16RtSeq launches the pass after the prep has completed (for A/B). H200 (session 23), µs
// overlapped / in turn: 1,024 tokens 100.45 / 100.80 (the pass starts once the last prep block has,
// ~one block's time before the prep ends), 4,096 327.8 / 342.9, 4 × 1,024 349.8 / 358.5, 16 × 256
// 364.7 / 377.0.
enum class GdnChunkVariant : int {
    Auto = 0,
    StateWarps8 = 1,
    StateWarps16 = 2,
    Vec16 = 3,
    Split = 4,
    SplitWarps8 = 5,
    SplitVec16 = 6,
    F16x3 = 7,
    F16x3Wg = 8,  // F16x3 with its state pass on the warpgroup MMA (fast_gdn_chunked16_wg.cu, sm_90a)
    F16x3Rt = 9,  // F16x3 with Sᵀ in wgmma accumulators, a warpgroup a 64-column block (…_rt.cu, sm_90a)
    F16x3Rt2 = 10,  // F16x3Rt on two warpgroups a block, split along dk (…_rt2.cu)
    F16Rt = 11,     // F16x3Rt's kernels on one f16 product each (hi·hi), FLA's accuracy class or better
    F16RtSeq = 12,  // F16Rt with its state pass launched after the prep has completed (A/B; same bits)
    // F16Rt with the lean prep (wy_prep_rt, fast_gdn_prep_rt.cuh: the same bits in fewer instructions)
    // where the value heads fit it (dv <= 128), else F16Rt's, and the state pass's LEAN form (the same
    // arithmetic, its U reads and O stores at constant offsets). Written in session 39; its bits
    // confirmed on the H200 (session 41), its time on the H100 (session 45: 98.9 against F16Rt's 105.0
    // µs at 1,024 tokens × 32 heads, 316.0 against 362.9 at 4,096): the backend's default since.
    F16RtLean = 13,
    // F16RtSched (below) with one chain a state-pass block always (F16RtLean1) or two (F16RtLean2),
    // for A/B. The same bits as F16RtLean.
    F16RtLean1 = 14,
    F16RtLean2 = 15,
    // F16RtLean scheduled (session 49; the backend's default in sessions 49–52, since in F16RtU16's
    // form): the lean prep persistent where its chunks outnumber the blocks that fit beside the state
    // pass, SMs set aside for the pass where its blocks fit half the GPU (so it starts with the prep
    // instead of as the prep drains), and two chains a pass block (a warpgroup each, a head's 128
    // value columns sharing W+Q̃, K̃ and P) but for one sequence of at most 32 chunks; since session 51
    // the first items on two blocks of each set-aside SM where the chain bounds the call (F16RtSolo2's),
    // since session 53 with the first of them staying where the prep bounds it (F16RtStay's) —
    // gdn_sched_plan. The same bits as F16RtLean.
    F16RtSched = 16,
    // F16RtSched with the lean prep on 16 warps a block, two blocks an SM (at 64 registers), not 8 and
    // three: an item's phases on twice the warps, for a shorter time to each chunk (session 50: the
    // state pass starts once the prep's first items are done, ~28 µs at three blocks an SM on the H100).
    // The same bits as F16RtLean.
    F16RtSched16 = 17,
    // F16RtSched whose set-aside SMs each run the prep's first items on one (Solo1) or two (Solo2) of
    // their blocks, the others leaving at once (session 51): the first chunks sooner — the state pass
    // starts when they end (session 50's trace) — the rest of the prep on the other SMs. The same bits.
    F16RtSolo1 = 18,
    F16RtSolo2 = 19,
    // F16RtSolo2 whose first block on each set-aside SM stays after its front item, taking items as the
    // free SMs' blocks do, beside the state pass's block (one chain a block: 137 + 70.4 KB and, since
    // session 53's producer warpgroup, the registers fit an SM; with two the pass block would wait for
    // the prep's end, so there it leaves as in Solo2): +31 % prep blocks at 1,024 tokens. F16RtSched's
    // plan where the prep, not the chain, bounds one chain a block (gdn_sched_plan). The same bits.
    F16RtStay = 20,
    // F16RtSched with U = T''·V kept in the scratch as f16 (one power of two a chunk, from the bound
    // max_i Σ_j |T''(i, j)| · 2^13, as W's from T'·K's) instead of f32: 16 of the ~88 KB a chunk and head
    // the prep writes and its pass reads back, the rounding W already has (F16Rt's operands are all
    // f16). Heads of dv <= 128 (the lean prep's), else F16RtSched. Not F16RtLean's bits: within F16Rt's
    // tolerance of the CPU (every chunked test) and of transformers (the fixtures' logits). The
    // backend's default since session 53 — H100, µs against F16RtSched: 1,024 tokens 79.4–79.5 /
    // 83.1–83.5, 2,048 144.2–144.9 / 146.6–148.5, 16,384 899.4–899.8 / 945.3–946.7, 4 × 1,024 289.1–289.9 /
    // 302.3–302.9.
    F16RtU16 = 21,
};
// The scheduled forms (gdn_sched_plan's).
inline bool gdn_chunk_sched(GdnChunkVariant v) {
    return v == GdnChunkVariant::F16RtSched || v == GdnChunkVariant::F16RtSched16 ||
           v == GdnChunkVariant::F16RtLean1 || v == GdnChunkVariant::F16RtLean2 || v == GdnChunkVariant::F16RtSolo1 ||
           v == GdnChunkVariant::F16RtSolo2 || v == GdnChunkVariant::F16RtStay || v == GdnChunkVariant::F16RtU16;
}
// F16Rt and its forms: the f16 WY form on one product each (FLA's accuracy class or better).
inline bool gdn_chunk_f16rt(GdnChunkVariant v) {
    return v == GdnChunkVariant::F16Rt || v == GdnChunkVariant::F16RtSeq || v == GdnChunkVariant::F16RtLean ||
           gdn_chunk_sched(v);
}
// F16RtSched's plan for a call of n_seqs sequences (the longest max_len tokens) on `sms` SMs that
// hold per_sm prep blocks each. H100, session 49, µs against F16RtLean's (its pass one chain a
// block, launched behind the plain prep, which finds room only as the prep drains: the prep alone
// 47.4, the pass alone 42.5 at 1,024 tokens × 32 heads — in turn 90, overlapped 95): one sequence of
// 1,024 tokens 89.7 with one chain a block and 64 SMs set aside against 99.1 (two chains 100.4),
// 4,096 tokens 287.4 with two chains against 316.6 (one 298.6), 16,384 1,025.6 against 1,218.7;
// 4 × 1,024 301.3 with two chains and no SMs set aside against 371.1 (set aside 343.3; one chain 372.7).
// H200, 2,048 tokens (the engine's prefill chunk): one chain 143.1, two 148.8, F16RtLean 153.1.
// Where the pass cannot overlap the prep (overlap false: a graph being captured, o meeting q / k / v),
// it runs alone: two chains a block only where one a block would not fit the SMs at once (alone at
// 4,096 tokens the pass took 186.1 with two chains a block against 144.5).
// The persistent prep's counters past the scratch rows (ChArgs::prep_ctr): [0] the items from the
// front on, [1] the front items, [2 + SM id] the blocks arrived on each SM (ids past
// kGdnPrepCtrWords − 2 take no front item).
constexpr int kGdnPrepCtrWords = 516;
struct GdnSchedPlan {
    bool two_chains;    // a pass block per 128 value columns, a chain a warpgroup
    int64_t reserve;    // SMs set aside for the pass (its blocks, where they fit half the SMs)
    bool persistent;    // the prep's blocks take chunks from a counter (a grid of sms · per_sm)
    int64_t front;      // persistent: the first items, taken by `solo` blocks of each set-aside SM (0: none)
    int64_t solo;       // (the others there leave at once: the first chunks sooner, the prep on fewer blocks)
    bool stay;          // F16RtStay: the first of those solo blocks stays after its front item
};
inline GdnSchedPlan gdn_sched_plan(GdnChunkVariant v, int64_t n_seqs, int64_t max_len, int64_t nv, int64_t dv,
                                   int64_t sms, int64_t per_sm, bool overlap) {
    const int64_t chunks = (max_len + kGdnChunk - 1) / kGdnChunk, items = chunks * n_seqs * nv;
    const int64_t one_chain_blocks = n_seqs * nv * ((dv + 63) / 64);
    const bool pick_two = overlap ? n_seqs > 1 || chunks > 32 : one_chain_blocks > sms;
    GdnSchedPlan plan{};
    // (every scheduled form picks its chains but F16RtLean1 / 2, which force them)
    const bool picks =
        gdn_chunk_sched(v) && v != GdnChunkVariant::F16RtLean1 && v != GdnChunkVariant::F16RtLean2;
    plan.two_chains = dv > 64 && (v == GdnChunkVariant::F16RtLean2 || (picks && pick_two));
    if (!overlap) return plan;
    const int64_t cols = plan.two_chains ? 128 : 64, pass_blocks = n_seqs * nv * ((dv + cols - 1) / cols);
    plan.reserve = pass_blocks <= sms / 2 ? pass_blocks : 0;
    plan.persistent = per_sm > 0 && items > (sms - plan.reserve) * per_sm;
    // F16RtSched: the first items on two blocks of each set-aside SM where the chain, not the prep,
    // bounds the call — the prep's items past its first wave, in waves of the free SMs' blocks, times
    // an item's time at full occupancy over a chain step (H100, session 51: ~29 over ~3.15 µs one chain
    // a block, ~4.0 two), fewer than the chunks: 1,024 tokens (~1.6 waves × 9 < 16 chunks) and from
    // 2,049 (two chains: 4,096 tokens ~6.5 × 7 < 64), not 2,048 (~4.1 × 9 > 32).
    const int64_t after_first = items - plan.reserve * per_sm, free_blocks = (sms - plan.reserve) * per_sm;
    const bool chain_bound = after_first * (plan.two_chains ? 7 : 9) < chunks * free_blocks;
    // Where the prep bounds it instead with one chain a block (21–32 chunks of one sequence), F16RtStay's
    // plan: the same front, the first block on each set-aside SM staying beside the pass's block for
    // the free SMs' items — H100, session 53, µs: 1,536 tokens 115.0–115.6 against 117.2, 1,792
    // 130.9–131.4 against 134.6–135.8, 2,048 145.7–146.1 against 154.3–154.4; where the chain bounds
    // it, the staying block slows the chain (1,024: 84.9–85.0 against Solo2's 82.5).
    // (F16RtU16 plans as F16RtSched.)
    const bool sched = v == GdnChunkVariant::F16RtSched || v == GdnChunkVariant::F16RtU16;
    const bool sched_stay = sched && !chain_bound && !plan.two_chains;
    if (v == GdnChunkVariant::F16RtSolo1)
        plan.solo = 1;
    else if (v == GdnChunkVariant::F16RtSolo2 || v == GdnChunkVariant::F16RtStay || (sched && chain_bound) ||
             sched_stay)
        plan.solo = 2;
    if (plan.persistent && plan.solo > 0) plan.front = std::min(items, plan.reserve * std::min(plan.solo, per_sm));
    plan.stay = (v == GdnChunkVariant::F16RtStay || sched_stay) && plan.front > 0 && !plan.two_chains;
    return plan;
}
// Whether SM id `sm` of [0, n_ids) is one of `reserve` ids set aside for the state pass (evenly spaced;
// ids may have holes, so fewer SMs may be set aside: that costs time, not bits).
__host__ __device__ inline bool gdn_reserved_sm(uint32_t sm, uint32_t n_ids, uint32_t reserve) {
    return reserve > 0 && (sm * reserve) / n_ids != ((sm + 1) * reserve) / n_ids;
}
// The persistent prep's next item for a block on SM `sm` (reserved: gdn_reserved_sm's; `items` or more:
// none) from its counters ctr (kGdnPrepCtrWords, zeroed before the launch; add(word, 1) returns the
// word's value before — atomicAdd on the device). From ctr[0], the items from `front` on; where front >
// 0, on a reserved SM one of the first `front` items (ctr[1]) for the SM's first `solo` blocks to ask,
// none for the others; elsewhere, once ctr[0]'s items are taken, any front item left (SM ids with holes,
// or blocks that arrive late). Each item goes to one block, and every one is taken while a block that
// is not reserved asks until it gets none.
template <typename Add>
__host__ __device__ inline uint32_t gdn_next_prep_item(uint32_t* ctr, uint32_t items, uint32_t front, uint32_t solo,
                                                       bool reserved, uint32_t sm, Add add, uint32_t* rank = nullptr) {
    uint32_t item = UINT32_MAX;
    if (reserved && front > 0) {
        const uint32_t r = sm < uint32_t(kGdnPrepCtrWords - 2) ? add(ctr + 2 + sm) : UINT32_MAX;
        if (rank) *rank = r;  // (the block's arrival on its SM: F16RtStay's first stays)
        if (r < solo) item = add(ctr + 1);
    } else {
        item = front + add(ctr);
        if (item < items || front == 0) return item;
        item = add(ctr + 1);
    }
    return item < front ? item : UINT32_MAX;
}
// F16Rt's prep in its DIRECT form (K, Q and V read into registers, not staged in f32: three blocks
// an SM) where that takes fewer waves of `blocks` (chunks × sequences × value heads) than the staged
// form's two an SM, else staged. H200 (session 22), whole calls: 1,024 tokens × 32 heads (512 blocks,
// two waves either way) 102.2 µs staged against 113.7 direct; 4,096 tokens (2,048 blocks) 359.8
// against 350.6, 16,384 1,391.6 against 1,336.9, 4 × 1,024 369.4 against 361.6.
inline bool gdn_prep_direct(int64_t blocks, int64_t sms) {
    return blocks > 0 && sms > 0 && (blocks + 3 * sms - 1) / (3 * sms) < (blocks + 2 * sms - 1) / (2 * sms);
}
inline bool gdn_chunk_f16x3(GdnChunkVariant v) {
    return v == GdnChunkVariant::F16x3 || v == GdnChunkVariant::F16x3Wg || v == GdnChunkVariant::F16x3Rt ||
           v == GdnChunkVariant::F16x3Rt2 || gdn_chunk_f16rt(v);
}
// wy_prep16's block bid of a grid in chunk-major order (value head fastest, then sequence, then
// chunk: the state pass started behind the prep needs every head's first chunks first). 32-bit
// divisions (the grid stays below 2^31 blocks, nv · n_seqs below 2^32): 64-bit ones took ~3 % of
// the prep's samples at 1,024 tokens.
struct GdnPrepBlock {
    uint32_t chunk, seq, head;
};
__host__ __device__ inline GdnPrepBlock gdn_prep_block(uint32_t bid, uint32_t nv, uint32_t n_seqs) {
    const uint32_t per_chunk = nv * n_seqs, chunk = bid / per_chunk, rest = bid - chunk * per_chunk;
    const uint32_t seq = rest / nv;
    return {chunk, seq, rest - seq * nv};
}
// The floats a [T][heads][d] view spans from its first (strides >= 0; 0 for an empty view).
inline int64_t gdn_view_span(int64_t T, int64_t heads, int64_t d, int64_t tok_stride, int64_t head_stride) {
    return T <= 0 || heads <= 0 || d <= 0 ? 0 : (T - 1) * tok_stride + (heads - 1) * head_stride + d;
}
// Whether n_a floats from a and n_b from b share none.
inline bool gdn_spans_disjoint(const float* a, int64_t n_a, const float* b, int64_t n_b) {
    const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
    return n_a <= 0 || n_b <= 0 || pa + uintptr_t(n_a) * sizeof(float) <= pb ||
           pb + uintptr_t(n_b) * sizeof(float) <= pa;
}
inline int gdn_chunk_state_warps(GdnChunkVariant v) {
    return v == GdnChunkVariant::StateWarps8 || v == GdnChunkVariant::SplitWarps8 ? 8 : 16;
}
inline bool gdn_chunk_vec_loads(GdnChunkVariant v) {
    return v == GdnChunkVariant::Auto || v == GdnChunkVariant::Vec16 || v == GdnChunkVariant::SplitVec16;
}
inline bool gdn_chunk_split(GdnChunkVariant v) {
    return v == GdnChunkVariant::Split || v == GdnChunkVariant::SplitWarps8 || v == GdnChunkVariant::SplitVec16;
}
void gated_delta_rule(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                      int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv, float* state,
                      int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const GdnParams& p, float* scratch,
                      int64_t max_len, cudaStream_t stream, GdnChunkVariant variant = GdnChunkVariant::Auto);

// The fused decode step of one GDN layer for n_seqs sequences of exactly ONE token each (token i
// is sequence i; slot[i] its state slot, -1: padding, which starts from zero states and writes
// nothing back). What GatedDeltaNet::forward runs between its input and output matmuls, in one
// launch: per channel conv1d over [conv state | x] + SiLU, updating the conv state; β = σ(b),
// g = neg_exp_a·softplus(a + dt_bias); q̂ = l2norm(q)/√dk, k̂ = l2norm(k) (eps 1e-6); the delta
// rule step on state[slot]; y = norm_w ⊙ rmsnorm(o) ⊙ silu(z) per value head (eps rms_eps).
struct GdnDecodeArgs {
    int n_seqs = 0;
    const int32_t* slot = nullptr;  // [n_seqs] device
    int64_t nk = 0, nv = 0, dk = 0, dv = 0;  // heads and head sizes: dk, dv <= 256, nv % nk == 0
    bool tiled_heads = false;       // value head h reads key head h % nk (else h / (nv / nk))
    // mixed [n_seqs, C] rows mixed_s apart, C = 2·nk·dk + nv·dv: the qkv projection before the
    // conv, channels [q heads (nk·dk) | k heads (nk·dk) | v heads (nv·dv)].
    const float* mixed = nullptr;
    int64_t mixed_s = 0;
    const float* z = nullptr;  // [n_seqs, nv·dv] rows z_s apart: the output gate projection
    int64_t z_s = 0;
    const float* b = nullptr;  // [n_seqs, nv] rows b_s apart (β before the sigmoid)
    int64_t b_s = 0;
    const float* a = nullptr;  // [n_seqs, nv] rows a_s apart (before softplus)
    int64_t a_s = 0;
    const float* conv_w = nullptr;   // [C, conv_k] f32
    int64_t conv_k = 0;              // kernel size K, in [2, 8]
    float* conv_state = nullptr;     // [n_slots, K-1, C] (rows C apart, oldest first), slot at + s·conv_slot_stride
    int64_t conv_slot_stride = 0;
    const float* neg_exp_a = nullptr;  // [nv]: −exp(A_log)
    const float* dt_bias = nullptr;    // [nv]
    float* state = nullptr;            // [n_slots, nv, dk, dv] f32, slot at + s·state_slot_stride
    int64_t state_slot_stride = 0;
    int64_t n_slots = 0;
    const float* norm_w = nullptr;  // [dv]
    float rms_eps = 1e-6f;
    float* y = nullptr;  // [n_seqs, nv·dv] rows y_s apart: the input of out_proj (overlaps no input)
    int64_t y_s = 0;
    // Optional: the out-projection fused (HeadSplit in 4 blocks a head only: gdn_decode_out_fits).
    // out_w [H, nv·dv] packed Int4; out_parts [nk][n_seqs][H] (parts out_part_s floats apart, rows
    // out_row_s) gets, per key head, out_w's columns of its value heads times their y — so
    // y · out_wᵀ = Σ over the nk parts (in key-head order: Backend::add_rms_norm's parts). y is
    // written too. out_w.codes null: not fused.
    PackedMatrix out_w{};
    float* out_parts = nullptr;
    int64_t out_part_s = 0, out_row_s = 0;
    int variant = 0;  // 0: gdn_decode_variant's choice; else that GdnDecodeVariant (benchmarks)
    // Diagnosis (bench_fast_gdn --stamps; Head256 and HeadSplit without the fused projection):
    // thread 0 of every block writes (globaltimer, clock64) at each of the kGdnDecodeStamps steps
    // of GdnDecodeStamp to stamps[((stamp_launch · blocks + block) · kGdnDecodeStamps + step) · 2],
    // blocks = gridDim.x · gridDim.y, block = blockIdx.y · gridDim.x + blockIdx.x. Null: the
    // kernels without stamps (what every other caller launches).
    unsigned long long* stamps = nullptr;
    int stamp_launch = 0;
};
// The stamped steps of the head kernels (GdnDecodeArgs::stamps), in order.
enum GdnDecodeStamp : int {
    kStampEntry = 0,    // the block's first instruction
    kStampSlot,         // the slot read (its first use)
    kStampTaps,         // the conv taps' copies asked for
    kStampPreWait,      // the state and constants asked for; about to wait for the kernel before
    kStampWaited,       // pdl::wait returned
    kStampInputs,       // the projections' values landed (the barrier after the conv taps)
    kStampConv,         // thread 0's conv + SiLU done
    kStampNorms,        // the l2 norms' block sum
    kStampStateSums,    // Sᵀk, Sᵀq summed over the row lanes (the barrier after them)
    kStampOutArrived,   // Σ o²: the block barrier or the cluster barrier's wait passed
    kStampOutSum,       // Σ o² over the head summed (read from the cluster's blocks)
    kStampStored,       // y, the state and the conv windows' stores issued
    kStampEnd,          // the last barrier passed (the block leaves)
    kGdnDecodeStamps
};

// The decode step's kernels (same results up to f32 summation order):
//  - ClusterPerKeyHead: the first version (serial phases: q/k prologue, cluster barrier, state).
//  - Cols32 / Cols16: every load issued at once after the slot, one cluster barrier; a cluster of
//    ceil(dv/32) or ceil(dv/16) blocks per (sequence, key head). Cols16 needs dv <= 128.
//  - Head256 / Head512: a block of 256 / 512 threads per (sequence, value head) holding all of its
//    state, the r blocks of a key head in a cluster (their shared q/k conv state); needs dk, dv
//    <= 128, r <= 8 and nv <= 65535, else Cols32 runs.
//  - HeadSplit: Head256 with each value head's columns over NS = 4 or 2 blocks (the largest with
//    r·NS <= 8 whose blocks all hold a column; else 1, Head256 itself), the RMSNorm's sum through
//    distributed shared memory: a block moves 64/NS KB of state.
enum class GdnDecodeVariant : int {
    Auto = 0,
    ClusterPerKeyHead = 1,
    Cols32 = 2,
    Cols16 = 3,
    Head256 = 4,
    Head512 = 5,
    HeadSplit = 6,
};
constexpr int kGdnDecodeVariants = 7;
// The choice for n_seqs sequences. H200, flagship (bench_fast_gdn --graph, µs a step at batch
// 1 / 8 / 64, session 37): Cols32 7.2 / 27.0 / 190, Cols16 8.6 / 42.5 / 339, Head256 4.4 / 8.9 / 89,
// Head512 4.8 / 13.2 / 128, HeadSplit 3.8 / 19.1 / 149 (it runs 4× Head256's blocks, each redoing
// the q/k prologue: two waves from 8 sequences; session 25: 6.4 / 11.7 / 100 for Head256, 6.1 / 24.4
// / 179 for HeadSplit). At batch 1 in a replayed decode step Head256 costs more
// than Cols32 (its 32 blocks each load 64 KB of state after they start; 4K decode 535.9 against
// 549.5 tok/s) and HeadSplit, 128 blocks of 16 KB, less (555.9; session 25), so HeadSplit at one
// sequence (Cols32 where it would not split a head: the caller's rule), Head256 from 2 (end to end
// measured at 8 and 64: 512 × 8 / 512 × 64 aggregate 1,332.7 / 3,793.7 → 1,435.8 / 4,209.1 tok/s;
// 2–7 not measured), Cols32 where the head kernels do not take the shape.
inline GdnDecodeVariant gdn_decode_variant(int64_t n_seqs, int64_t nk, int64_t dv) {
    (void)nk, (void)dv;
    return n_seqs >= 2 ? GdnDecodeVariant::Head256 : GdnDecodeVariant::HeadSplit;
}
// One launch of the variant args.variant names (0: gdn_decode_variant's choice): for Cols32 /
// Cols16 a cluster of ceil(dv/COLS) blocks per (sequence, key head), block z holding columns
// [COLS·z, COLS·z + COLS) of the state of every value head that reads the key head (the cluster
// shares the conv state of its q/k channels and the RMSNorm sums over dv through distributed
// shared memory); for Head256 / Head512 a block per (sequence, value head). A slot outside
// [-1, n_slots) gives NaN outputs and no writes.
void gdn_decode_step(const GdnDecodeArgs& args, cudaStream_t stream);
// Whether gdn_decode_step takes w as its fused out-projection (args.out_w) for these args: the
// step runs HeadSplit in 4 blocks a head (args.variant HeadSplit, or Auto where it is the choice:
// one sequence; r <= 2, dk <= 128, dv 128) and w is packed Int4 [<= kGdnOutMaxRows, nv·dv] with a
// group of 32, 64 or 128. It leaves nk parts.
constexpr int64_t kGdnOutMaxRows = 4096;
bool gdn_decode_out_fits(const GdnDecodeArgs& args, const PackedMatrix& w);

// ---- the prefill's conv1d + SiLU, and the q / k l2 norms after it (fast_gdn_conv.cu) ----

// Which heads of the conv's output conv1d_silu normalises: the first `heads` groups of `dim`
// channels (q | k: heads = 2·nk, dim = dk), each x · rsqrt(Σ x² + eps) · s where s = `scale` for
// the first `scaled` heads (q, 1/√dk) and 1 for the rest (k). heads = 0: none.
struct ConvNorm {
    int64_t heads = 0, dim = 0, scaled = 0;
    float eps = 0.f, scale = 1.f;
};
inline constexpr int kConvWarps = 4;     // conv1d_silu's channel groups a block (a warp each)
inline constexpr int kConvGroup = 128;   // channels of an un-normalised group (4 a lane)
// conv1d_silu's channel groups over C channels: the normalised heads, then groups of kConvGroup.
constexpr int64_t conv1d_silu_groups(int64_t C, const ConvNorm& norm) {
    return norm.heads + (C - norm.heads * norm.dim + kConvGroup - 1) / kConvGroup;
}
// Whether conv1d_silu takes conv kernels of K taps and this norm: K in [2, 4], dim in [1, 128]
// where heads > 0 (the rest: ref::conv1d_silu, then ref::l2_norm per part).
bool conv1d_silu_fits(int64_t K, const ConvNorm& norm);
// ref::conv1d_silu (same arguments, same checks, the same bits: each output's K products summed
// in the reference kernel's order, the same SiLU; the same conv state update) in one pass over x —
// a warp walks 32 tokens of up to 128 channels with the last K-1 inputs in registers, where the
// reference kernel's thread re-read K inputs an output — and, with norm.heads > 0, the l2 norms of
// those heads on the outputs in registers: ref::l2_norm's bits (its warp kernel's order of sums), the
// two launches of it and their pass over the q | k channels gone. A plan row the kernel cannot use
// gives NaN outputs (normalised or not), as the reference ops in turn do. Throws Error where
// conv1d_silu_fits says no or the arguments are bad.
void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w, int64_t K,
                 float* conv_state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const ConvNorm& norm,
                 cudaStream_t stream);

namespace detail {
// Entry points into the .cu files (which include no fmt). Arguments are already checked.
cudaError_t launch_conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w,
                               int64_t K, const float* conv_state, int64_t slot_stride, int64_t n_slots,
                               const SeqPlan& plan, const ConvNorm& norm, cudaStream_t stream);
cudaError_t launch_gdn_recurrent(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                 const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk,
                                 int64_t dv, float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                                 const GdnParams& p, int64_t max_len, bool tail_only, cudaStream_t stream);
cudaError_t launch_gdn_chunked(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                               int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv,
                               float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                               const GdnParams& p, float* scratch, int64_t max_len, int state_warps,
                               bool vec_loads, bool split, cudaStream_t stream);
cudaError_t launch_gdn_chunked16(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                 const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk,
                                 int64_t dv, float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                                 const GdnParams& p, float* scratch, int64_t max_len, GdnChunkVariant variant,
                                 cudaStream_t stream);  // F16x3, F16x3Wg, F16x3Rt
cudaError_t launch_gdn_decode_step(const GdnDecodeArgs& args, cudaStream_t stream);      // ClusterPerKeyHead
cudaError_t launch_gdn_decode_step_v2(const GdnDecodeArgs& args, int cols, cudaStream_t stream);  // Cols32 / Cols16
bool gdn_decode_head_fits(const GdnDecodeArgs& args);  // Head256 / Head512 / HeadSplit take these shapes
int gdn_decode_head_split(const GdnDecodeArgs& args);   // HeadSplit's NS: 4, 2 or 1
// Whether the HeadSplit kernel can fuse w as args' out-projection (split 4, dv 128, w's shape).
bool gdn_decode_out_takes(const GdnDecodeArgs& args, const PackedMatrix& w);
// threads 256 or 512; split (256 threads only) 1, 2 or 4 blocks a value head.
cudaError_t launch_gdn_decode_step_head(const GdnDecodeArgs& args, int threads, int split, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
