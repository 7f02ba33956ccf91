// The environment switches of CudaBackend's ops (cuda_switches.h): A/B overrides of the fast
// path's kernel choices, each switch read once and cached for the process.
#include "kernels/cuda/cuda_switches.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/status.h"
#include "kernels/cuda/fast_gemm_f32.h"

namespace tessera::cuda::detail {

// The decode GEMV keeps x in f32 (fast_gemv.cu) unless TESSERA_GEMV=int8, which rounds x to int8
// per 32 columns for the integer dot-product units (fast_gemv_q8.cu): 20 % faster at the anchor
// shape on the H200, but its ~1 % error per matmul compounds through a model's layers past the
// fast-vs-reference tolerance, so it stays opt-in until it is both faster and closer.
// TESSERA_GEMV: f32 (the default: x exact or rounded to bf16 by the pick), int8 (x rounded to
// int8, dp4a), staged (MmaStaged where the pick is MmaRows with one row tile and the slab fits:
// an A/B override — session 6, H200: 12.3 against 12.8 us at 8192x2048, 9.1 against 8.3 at
// 4096x2048; since session 7 the pick itself takes it for one token on the wide in-projections),
// chunks (MmaChunks where the pick is MmaRows and it takes the shape: Int4, 1–2 tokens — session
// 7, H200, T = 1, 16-row tiles: 24.5 against 27.1 us at 4096x14336, 8.5 against 10.0 at
// 2048x4096; slower than MmaStaged on the wide in-projections, not yet measured end to end where
// it replaces only MmaRows), mma (the pick without Dp4a: the tensor-core variants at one token,
// as before session 10 — for A/B), dp4a_cluster (the pick, with Dp4a in clusters of 8 blocks
// quantizing x together: fast_gemv_dp4a.cu; session 17, H200: 17.5 against 20.7 us back to back
// at 4096x14336, 19.9 against 19.3 cold), imma (Imma wherever it takes the matrix — Int4 in
// 16-row tiles, 1..8 tokens: fast_gemv_imma.cu — else the pick; session 17, H200: 467 against
// 539 tok/s at 4K), imma_regs (the same through its register pipeline: 490 there), bulk (Bulk
// wherever it takes the matrix — Int4 in 16-row tiles, 1..8 tokens: fast_gemv_bulk.cu), bulk_wide
// (Bulk also at one or two tokens on matrices of 16 Mi weights or more — where it is faster alone:
// the flagship's 8192x2048 and 12352x2048 in-projections and its lm_head; session 28, with x
// staged whole: 525 against 550 tok/s at 4K — else the pick), bulk_mma (BulkMma — Bulk's stream,
// tensor-core arithmetic: fast_gemv_bulk_mma.cu — from 3 tokens wherever it takes the matrix,
// else the pick), no_bulk_mma (the pick without BulkMma: MmaRows / Mma from 3 tokens, as before
// session 30), wgmma_tma (WgmmaTma — the warp-specialised wgmma tiles at 8 tokens:
// fast_gemv_wgmma.cu, session 35; correct and slower than the pick, session 36 — wherever it takes
// the matrix, else the pick). The default
// picks Dp4a for one token (fast_gemv_plan.h: x in two int8 limbs, |x − x̃| ≤ max|x| / 64516 per
// 32 columns — closer than bf16), and from K = 8192 Bulk for one or two tokens (Imma's register
// pipeline at one token where Bulk's x does not fit), and from 3 tokens on matrices of 16 Mi
// weights or more BulkMma (gemv_pick_packed).
GemvMode gemv_mode() {
    // The names in GemvMode's order.
    static const GemvMode m = GemvMode(env_choice(
        "TESSERA_GEMV",
        {"f32", "int8", "staged", "chunks", "mma", "dp4a_cluster", "imma", "imma_regs", "bulk", "bulk_wide",
         "bulk_mma", "no_bulk_mma", "wgmma_tma"}));
    return m;
}
// TESSERA_BULK_X: how every Bulk launch (the pick's and the overrides') stages x — auto (the
// default: fast::gemv_bulk_xwarp, by each warp at two tokens, whole at one), first (Bulk's
// consumers stage the whole of x, then meet at a barrier) or warp (each consumer warp stages x's
// columns of its own k-tiles as it goes; at one or two tokens). Session 29, H200: warp is slower
// alone at one token (4096x14336: 14.3 against 11.5 µs back to back), faster at two (15.9 against
// 17.1), and lost less in the decode step with Bulk at every shape (TESSERA_GEMV=bulk, warp at one
// token too: 539 against 509–512 tok/s at 4K; the default 550–552).
int bulk_x_env() {
    static const int x = env_choice("TESSERA_BULK_X", {"auto", "first", "warp"}) - 1;
    return x;
}
// TESSERA_BULK_MMA: how every BulkMma launch (the pick's and TESSERA_GEMV=bulk_mma's) sums a row
// tile's 16 fragments — auto (the pick's own), barrier (16·T consumer threads after a barrier of
// the consumer warps) or reducer (a warp of their own, the consumers going on). fast_gemv_bulk_mma.cu,
// docs/cuda-rounds.md's twenty-eighth round.
int bulk_mma_reducer_env() {
    static const int r = env_choice("TESSERA_BULK_MMA", {"auto", "barrier", "reducer"}) - 1;
    return r;
}
int env_choice(const char* var, std::initializer_list<const char*> names) {
    const char* v = std::getenv(var);
    const std::string s = v ? v : "";
    if (s.empty()) return 0;
    int i = 0;
    for (const char* n : names) {
        if (s == n) return i;
        ++i;
    }
    std::string expected;  // "a (the default), b, c or d"
    i = 0;
    for (const char* n : names) {
        expected += i == 0 ? "" : i + 1 == int(names.size()) ? " or " : ", ";
        expected += n;
        if (i++ == 0) expected += " (the default)";
    }
    ::tessera::fail(ErrorKind::Invalid, "{}={}: expected {}", var, s, expected);
}
// An A/B switch: whether environment variable `var` selects `alt` over the default `dflt` (unset
// or empty: the default; anything else: an error naming both).
bool env_switch(const char* var, const char* dflt, const char* alt) { return env_choice(var, {dflt, alt}) == 1; }
// TESSERA_DECODE_ATTENTION: mma (the default: the tensor-core flash-decoding kernel wherever it
// takes the shapes) or simt (the f32 kernel of sessions 3–7 wherever it takes them, for A/B).
bool decode_attention_simt() {
    static const bool simt = env_switch("TESSERA_DECODE_ATTENTION", "mma", "simt");
    return simt;
}
// TESSERA_MOE_DECODE: dp4a (the default: the MoE's decode steps on the integer units,
// fast_moe_decode_dp4a.cu), mma (the tensor-core decode kernels of sessions 5–9, for A/B) or fused
// (the integer units' arithmetic in one kernel a step, fast_moe_fused.cu, where it takes the shapes:
// written in session 40, confirmed in session 45 and slower than dp4a, fast_moe.h's
// kMoeFusedDecodeWorks) — fused-try is the same (the name the device scripts used while it was
// unconfirmed), for A/B.
static int moe_decode_form() {
    static const int form = env_choice("TESSERA_MOE_DECODE", {"dp4a", "mma", "fused", "fused-try"});
    return form;
}
bool moe_decode_mma() { return moe_decode_form() == 1; }
bool moe_decode_fused() { return moe_decode_form() >= 2; }
bool moe_decode_fused_try() { return moe_decode_form() == 3; }
// TESSERA_MOE_PREFILL: tma (the default: the MoE's large tiles on the warpgroup MMA, warp-
// specialised where the experts are stacked tiles, fast_moe_wgmma_tma.cu; tiles of 64 rows taken in
// turn by resident blocks since session 45, of 32 and 48 since session 48, moe_pick), tma-gather
// (the same tiles with gate+up gathering its rows of x itself by cp.async — session 34, slower:
// 206.6 against 118.4 µs for gate+up at 512 tokens of llama.cpp's shape), wgmma (the plain wgmma
// tiles of sessions 13–32, fast_moe_wgmma.cu), mma (the mma.sync tiles of sessions 5–12,
// fast_moe_mma.cu), tma-persist (the warp-specialised tiles taken in turn by resident blocks at
// every tile size), tma-fit (their
// wgmma's N halved for items of at most half a tile's rows, one block a tile: level or slower,
// session 45) or tma-tiles (one block a tile at every size: the default before session 45) — for A/B.
int moe_prefill_form() {
    static const int form = env_choice("TESSERA_MOE_PREFILL",
                                       {"tma", "wgmma", "mma", "tma-gather", "tma-persist", "tma-fit", "tma-tiles"});
    return form;
}
bool moe_prefill_mma() { return moe_prefill_form() == 2; }
bool moe_prefill_plain() { return moe_prefill_form() == 1; }
bool moe_prefill_gather() { return moe_prefill_form() == 3; }
int moe_prefill_persist() {
    const int f = moe_prefill_form();
    return f == 4 ? 1 : f == 5 || f == 6 ? -1 : 0;  // (the halved tiles are one block a tile)
}
bool moe_prefill_fit() { return moe_prefill_form() == 5; }
// TESSERA_MOE_MID: grouped (the default: the mid kernels, fast_moe_mid.cu, where an expert gets
// less than one row on average, or ≤ 8 where the warp-specialised tiles cannot run — each selected
// expert's weights read once a step; H200, session 18, the flagship at 512 tokens of context:
// 1,613 against 1,490 tok/s at batch 8, 5,197 against 4,764 at 64) or tiles (the pick's v2
// tensor-core tiles of 16 rows there), for A/B.
bool moe_mid_grouped() {
    static const bool tiles = env_switch("TESSERA_MOE_MID", "grouped", "tiles");
    return !tiles;
}
// TESSERA_MOE_ROUTE: logits (the default: a renormalised top-k ranked on the router's logits, the
// weights from the k picks' exponentials alone) or exact (the CPU's bits: E double exponentials and
// the normaliser; the only form where the weights are not renormalised), for A/B.
bool moe_route_exact() {
    static const bool exact = env_switch("TESSERA_MOE_ROUTE", "logits", "exact");
    return exact;
}
// TESSERA_MOE_ROUTE_AHEAD: off (the default) or on — the decode's integer-unit gate+up ranks the
// router logits itself before its PDL wait instead of waiting for the routing kernel's ids
// (fast::MoeRouteAhead, session 43; the same picks; opt-in until measured).
bool moe_route_ahead() {
    static const bool on = env_switch("TESSERA_MOE_ROUTE_AHEAD", "off", "on");
    return on;
}
// TESSERA_MOE_COMBINE: kernel (the default: the combine kernel sums each token's slots after the
// down tiles) or fused (the warp-specialised down tiles sum them, the last tile of a token's feature
// block by a ticket: MoePlan::wgmma_combine, session 43; the same bits; opt-in until measured).
bool moe_combine_fused() {
    static const bool fused = env_switch("TESSERA_MOE_COMBINE", "kernel", "fused");
    return fused;
}
// TESSERA_MOE_L2: normal (the default), first — the warp-specialised tiles load the experts'
// weights under L2's evict-first policy — first-last (and the activation rows' boxes under the
// evict-last one) or last-item (the weights evicted first by each expert's last item's tiles alone):
// MoePlan::wgmma_l2_first, session 54; the same bits; opt-in until measured.
int moe_l2_first() {
    static const int form = env_choice("TESSERA_MOE_L2", {"normal", "first", "first-last", "last-item"});
    return form;
}
// TESSERA_MOE_WARPGROUPS: auto (the default since session 60), 2 or 4 — the warp-specialised gate+up
// tiles of 32 to 64 rows in four consumer warpgroups a block, one block an SM, 128 features sharing
// each stage's activation rows (MoePlan::wgmma_warpgroups, session 58; the same bits). auto: four at
// tiles of 48 (H100, 512 tokens of llama.cpp's shape: gate+up 113.5 against 117.4 µs, the whole MoE
// 202.1 against 208.0; the flagship's shape at 48 rows 142.3 against 147.7) and at tiles of 64 from
// 2,048 tokens (session 61: the whole MoE 1–3.5 % ahead at 2,048 and 4,096, level at 1,024), two
// elsewhere (behind at the token counts that pick 32-row tiles, session 61).
int moe_warpgroups() {
    static const int n = std::array{0, 2, 4}[env_choice("TESSERA_MOE_WARPGROUPS", {"auto", "2", "4"})];
    return n;
}
// TESSERA_MOE_FIT8: on (the default since session 61) or off — the warp-specialised tiles' wgmma N
// each item's rows rounded up to 8 rather than the tile's (MoePlan::wgmma_fit8; the same bits; H100,
// llama.cpp's shape: the whole MoE 200.5 against 204.4 µs at 512 tokens, 324.7 / 331.1 at 1,024,
// 536.4 / 543.1 at 2,048; the flagship's 4-layer cut prefills 8K ~1 % faster).
bool moe_fit8() {
    static const bool on = !env_switch("TESSERA_MOE_FIT8", "on", "off");
    return on;
}
// TESSERA_MOE_DYNAMIC: on (the default since session 64) or off — the persistent warp-specialised
// tiles (with fit8) drawn in turn from a counter by each block's producer rather than every
// gridDim-th tile a block (MoePlan::wgmma_dynamic; the same bits, tested on the device in sessions 63
// and 64; H100: the whole MoE level at 512 tokens, 0–9 % faster at 1,024 and 2,048 in both sessions,
// the 4-layer cut's prefill +1.0 / +0.9 % in two rounds, +1.2 / +1.3 % in three at 8K / 32K).
bool moe_dynamic() {
    static const bool off = env_switch("TESSERA_MOE_DYNAMIC", "on", "off");
    return !off;
}
// TESSERA_MOE_FUSED_TILES: off (the default), on or warp — the drawn MoE tiles of gate+up and of down in
// one persistent launch, each down tile waiting on its item's gate+up tiles alone rather than the whole
// grid (MoePlan::wgmma_fused; the same bits); warp: each gate+up tile counted by a producer warp off the
// consumers' path (MoePlan::wgmma_fused_warp). Opt-in until measured ahead of the two launches.
static int moe_fused_form() {
    static const int form = env_choice("TESSERA_MOE_FUSED_TILES", {"off", "on", "warp"});
    return form;
}
bool moe_fused_tiles() { return moe_fused_form() >= 1; }
bool moe_fused_warp() { return moe_fused_form() == 2; }
// TESSERA_MOE_OUT: bf16 (the default since session 55) — the warp-specialised down tiles write each
// slot's sum in bf16 and the combine kernel reads it so (MoePlan::wgmma_out16: half the bytes of out
// [T·k, H], one rounding a slot, as vLLM's bf16 experts; not with TESSERA_MOE_COMBINE=fused, which
// keeps f32) — or f32. H100: the whole MoE 1.3–4.1 % faster at 512 and 2,048 tokens on both model
// shapes, the 4-layer cut's prefill 2–4 % at 8K and 32K.
bool moe_out_bf16() {
    static const bool f32 = env_switch("TESSERA_MOE_OUT", "bf16", "f32");
    return !f32;
}
// TESSERA_FLASH: wgmma (the default: the prefill attention on the warpgroup MMA,
// fast_flash_attention_wgmma.cu) or mma (the mma.sync kernels of sessions 6–13, for A/B).
bool flash_mma() {
    static const bool mma = env_switch("TESSERA_FLASH", "wgmma", "mma");
    return mma;
}
// TESSERA_FLASH_LOADS: tma (the default: the wgmma kernel's K / V tiles by TMA boxes, where the
// cache's blocks fit them) or cp.async (its producer warpgroup's copies of sessions 13–14, for A/B).
bool flash_cp_async() {
    static const bool cp = env_switch("TESSERA_FLASH_LOADS", "tma", "cp.async");
    return cp;
}
// TESSERA_FLASH_SCHEDULE: serial (the default: the wgmma kernel's tiles one after another) or kv
// (the overlapped schedule where the plan's keys reach fast::kFlashOverlapMinKv: measured faster
// alone on a 32K prompt, slower on an 8K one; session 35 added the switch for the end-to-end A/B).
bool flash_overlap_by_kv() {
    static const bool kv = env_switch("TESSERA_FLASH_SCHEDULE", "serial", "kv");
    return kv;
}
// TESSERA_F32_GEMM: tf32x3 (the default: f32 matrices of up to fast::kGemmF32MaxWeights from
// fast::kGemmF32MinTokens tokens — the MoE router in a prefill or a decode step of 128+ sequences —
// on fast::gemm_f32_tf32x3,
// fast_gemm_f32.cu: 3×TF32 on the warpgroup MMA, f32's accuracy class; 26.4 against cuBLAS's 70.7 µs
// a 2,048-token router chunk on the H100, session 47), tf32x3-all (the same wherever the dense GEMV
// does not run: below the threshold its K split takes the SMs; session 48's A/B) or cublas (cuBLAS's
// f32 GEMM, SIMT, everywhere: the reference's, for A/B).
int64_t f32_gemm_tf32x3_min_tokens() {
    static const int64_t m = std::array<int64_t, 3>{fast::kGemmF32MinTokens, 1, INT64_MAX}[size_t(
        env_choice("TESSERA_F32_GEMM", {"tf32x3", "tf32x3-all", "cublas"}))];
    return m;
}
// TESSERA_SAMPLE_PLAN: candidates (the default: device sampling's top-k / top-p cuts from a candidate
// set where it holds them, fast_sample.cu, session 43) or row (every cut walks the whole row, as
// before; the same tokens either way).
bool sample_whole_row() {
    static const bool row = env_switch("TESSERA_SAMPLE_PLAN", "candidates", "row");
    return row;
}
// TESSERA_GDN_CHUNKED: f16rtu16 (the default since session 53: f16rtsched with U in the scratch as f16
// — H100, bench_fast_gdn hot, µs against f16rtsched: 1,024 tokens × 32 heads 79.4–79.5 / 83.1–83.5,
// 4,096 251.7–253.3 / 263.3–263.5, 16,384 899.4–899.8 / 945.3–946.7; within F16Rt's tolerance of the
// CPU in every chunked test and the fixtures' logits of transformers), f16rtsched (the default of
// sessions 49–52: F16RtLean scheduled — its prep persistent, SMs set aside for the state pass, two
// chains a pass block by gdn_sched_plan, whose comment gives the figures), f16rtlean (the default of
// sessions 45–48: F16Rt with the lean prep, fast_gdn_prep_rt.cuh, and the lean state pass — the same
// bits as f16rt; H100, bench_fast_gdn hot,
// µs, f16rt / f16rtlean: 1,024 tokens × 32 heads 105.0 / 98.9, 4,096 362.9 / 316.0, 16,384 1,372.6 /
// 1,209.2, 4 × 1,024 423.0 / 372.1), f16rt (the chunked delta rule on f16, one product each, its
// state pass with Sᵀ in the warpgroup MMA's accumulators, fast_gdn_chunked16_rt.cu, for heads of dk
// 113–128; F16x3Wg's pass otherwise; session 22: 102.2 against F16x3Rt's 142.1 µs at 1,024 tokens ×
// 32 heads, o within ~3e-5 of it), f16x3rt (the same kernels on three products a term: f32-class
// operands), f16x3wg (the state pass on the warpgroup MMA through shared memory,
// fast_gdn_chunked16_wg.cu), f16x3 (on mma.sync, fast_gdn_chunked16.cu), tf32 (the 3×TF32 kernels of
// sessions 4–14), f16x3rt2 (F16x3Rt's chain on two warpgroups, fast_gdn_chunked16_rt2.cu) or f16rtseq
// (F16Rt with its state pass launched after the prep, not overlapping it), f16rtlean1 / f16rtlean2
// (f16rtsched with one / two chains a state-pass block always), f16rtsched16 (f16rtsched with its prep
// on 16 warps a block, two blocks an SM), f16rtsolo1 / f16rtsolo2 (f16rtsched with the first items on
// one / two blocks of each SM set aside for the pass, the others leaving at once), f16rtstay
// (f16rtsolo2 whose first block there stays beside the pass's), for A/B.
fast::GdnChunkVariant gdn_chunk_variant() {
    using V = fast::GdnChunkVariant;
    static constexpr V kByName[] = {V::F16RtU16,   V::F16RtSched, V::F16RtLean,   V::F16Rt,      V::F16x3Rt,
                                    V::F16x3Wg,    V::F16x3,      V::Auto,        V::F16x3Rt2,   V::F16RtSeq,
                                    V::F16RtLean1, V::F16RtLean2, V::F16RtSched16, V::F16RtSolo1, V::F16RtSolo2,
                                    V::F16RtStay};
    static const V v =
        kByName[env_choice("TESSERA_GDN_CHUNKED", {"f16rtu16", "f16rtsched", "f16rtlean", "f16rt", "f16x3rt",
                                                   "f16x3wg", "f16x3", "tf32", "f16x3rt2", "f16rtseq", "f16rtlean1",
                                                   "f16rtlean2", "f16rtsched16", "f16rtsolo1", "f16rtsolo2",
                                                   "f16rtstay"})];
    return v;
}
// TESSERA_GDN_DECODE: the fused GDN decode step's kernel — auto (the default:
// fast::gdn_decode_variant's choice), cols32, cols16, head256, head512 or split (HeadSplit,
// fast_gdn.h), for A/B.
int gdn_decode_variant_env() {
    using V = fast::GdnDecodeVariant;
    static constexpr V kByName[] = {V::Auto, V::Cols32, V::Cols16, V::Head256, V::Head512, V::HeadSplit};
    static const int variant = int(
        kByName[env_choice("TESSERA_GDN_DECODE", {"auto", "cols32", "cols16", "head256", "head512", "split"})]);
    return variant;
}
// TESSERA_GDN_DECODE_OUT: separate (the default: the out-projection's GEMV after the GDN decode
// step) or fused (the step applies it itself where fast::gdn_decode_out_fits; measured slower end
// to end, docs/cuda-rounds.md, twenty-second round), for A/B.
bool gdn_decode_out_fused() {
    static const bool fused = env_switch("TESSERA_GDN_DECODE_OUT", "separate", "fused");
    return fused;
}
// TESSERA_DECODE_MERGE: auto (the default: fused from 8 tokens a step, the merge kernel below —
// H200, D 256, 16 / 2 heads, µs a layer in graphs: 1 × 4K 14.8 kernel against 20.3 fused, 1 × 32K
// 42.7 / 49.1, 8 × 4K 47.8 / 44.5, 8 × 32K 450.5 / 259.2, 64 × 4K 319.3 / 265.5), kernel (the Mma
// decode attention's splits merged by the combine kernel after it) or fused (merged in the
// attention kernel: clusters along the splits and a ticket, fast::AttnMerge; the cluster size the
// largest of 8, 4, 2 whose clusters are all resident at once), fused2 / fused4 / fused8 / fused16
// (that cluster size), for A/B. Returns -2 for auto, -1 for kernel, else AttnMerge::cluster.
int decode_merge_env() {
    static constexpr int kByName[] = {-2, -1, 0, 2, 4, 8, 16};
    static const int cluster = kByName[env_choice(
        "TESSERA_DECODE_MERGE", {"auto", "kernel", "fused", "fused2", "fused4", "fused8", "fused16"})];
    return cluster;
}
// TESSERA_REFERENCE_OPS: fast-mode ops kept on the reference kernels, for bisecting a
// difference between the two paths: a comma list of matmul (packed weights unpacked to f32 and
// multiplied with cuBLAS f32), attention, moe_route, qk_norm_rope_store (the six reference ops),
// conv1d_silu (the reference conv kernel, and the q / k l2 norms in their own launches).
bool reference_op(std::string_view op) {
    static const std::string ops = [] {
        const char* v = std::getenv("TESSERA_REFERENCE_OPS");
        return std::string(v ? v : "");
    }();
    for (size_t start = 0; start <= ops.size();) {
        const size_t end = std::min(ops.find(',', start), ops.size());
        if (std::string_view(ops).substr(start, end - start) == op) return true;
        start = end + 1;
    }
    return false;
}

// TESSERA_PREFILL_GEMM: how a packed matmul of more than 8 tokens runs — "packed" (fast_gemm.cu,
// dequantizing in registers), "cublas" (the matrix dequantized to bf16 in scratch, then cuBLAS),
// or "auto" (the default: cuBLAS from kPrefillCublasTokens tokens, where its bf16 tensor-core
// GEMM outruns the packed kernel by more than the dequantization costs — the backend takes it
// only on a bf16 copy made at load where the warp-specialised packed tiles can run, which since
// session 35 are level with cuBLAS on the copy and far ahead of a dequantisation a call).
constexpr int64_t kPrefillCublasTokens = 128;
int prefill_gemm_mode() {
    static const int mode = env_choice("TESSERA_PREFILL_GEMM", {"auto", "packed", "cublas"});  // 0, 1, 2
    return mode;
}
bool prefill_via_cublas(int64_t T) {
    return prefill_gemm_mode() == 2 || (prefill_gemm_mode() == 0 && T >= kPrefillCublasTokens);
}
bool prefill_cublas_forced() { return prefill_gemm_mode() == 2; }

}  // namespace tessera::cuda::detail
