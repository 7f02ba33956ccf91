// The kernel pack's MoE (TESSERA_KERNELS=fast): the fused router, the grouping of (token, slot)
// pairs by expert, and the SwiGLU experts over Int4 packed weights (packed_weight.h), with the
// semantics of Backend::moe_topk / moe_experts (kernels/backend.h). Raw device pointers, queued on
// `stream`, no host synchronisation, no allocation, launch shapes fixed by (T, k, E, H, I): every
// call may be recorded in a CUDA graph. Results are deterministic (no atomics on floats: every sum
// has a fixed order). Host checks in fast_moe.cpp; kernels in fast_moe_route.cu (router, grouping),
// fast_moe_experts.cu (small tiles, f32), fast_moe_tiles.cu (large tiles, tensor cores), the
// second generation (fast_moe_decode.cu, fast_moe_mma.cu, fast_moe_decode_mma.cu) and the grouped
// kernels for few rows an expert (fast_moe_mid.cu). Throws Error on bad arguments or a failed
// launch.
//
// Decode chain per MoE layer (T tokens, k experts each):
//   moe_route(router logits) → ids, weights [T, k]
//   moe_experts_packed(y, x, experts, ids, weights)   — grouping, gate/up + SwiGLU, down, sum
// Prefill runs the large tiles (fast_moe_tiles.cu): x gathered to bf16 in grouped order, then
// per item of 32 / 64 rows mma.sync bf16 on Int4 rows dequantized in registers (gate and up in one
// block, SwiGLU in the epilogue, act in bf16), down into f32 rows, the slot sum in order.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

constexpr int kMoeMaxExperts = 512;  // router: 16 probabilities per lane; grouping: per-warp histograms
constexpr int kMoeMaxTopK = 16;

// ---- router ---------------------------------------------------------------------------------

// logits [T, E] (row stride ldl floats) → ids, weights [T, k] (contiguous): p = softmax(row) in
// f32, the k largest p in descending order, ties to the lower expert index, NaN ranked above
// everything; weights renormalised to sum 1 (a float sum in slot order) when `renormalize`. With
// `shared`, column E of logits is the shared expert's gate g and ids, weights are [T, k + 1]
// with slot k = (E, σ(g)) (Backend::moe_topk's MoeRouting).
// Matches cpu::moe_topk: exp in double rounded to f32 (the CPU's expf wherever that is correctly
// rounded, as in ref::moe_topk), the normaliser float(1.0 / Σp) taken from a warp-tree double sum
// whenever that provably equals the CPU's sequential double sum's result, else from the
// sequential sum itself (a probability ~E·2⁻²⁶ per row). One warp per token. 1 ≤ k ≤ min(E, 16),
// E ≤ 512. exact false (renormalize only): the picks ranked on the logits and the weights from the
// k picks' f32 exponentials alone (the normaliser cancels) — the same up to f32 rounding, and
// probabilities that round equal from different logits may swap places.
void moe_route(const float* logits, int64_t ldl, int64_t T, int E, int k, bool renormalize, bool shared,
               int32_t* ids, float* weights, cudaStream_t stream, bool exact = true);

// ---- grouping -------------------------------------------------------------------------------

// The step's (token, slot) pairs s = t·k + j grouped by expert e = ids[s]: expert e owns the
// grouped rows [offsets[e], offsets[e+1]), its pairs in slot order (stable by token). The rows are
// cut into work items of at most tile_rows rows of one expert, experts ascending. All device
// arrays inside the caller's scratch; built on the device (no host round trip): one block up to
// kMoeGroupOneBlock pairs, else a counting kernel over moe_group_blocks(P) chunks of the pairs
// and a placing kernel of as many blocks (each block's rows start after the earlier chunks').
// An id outside [0, E) is left out of every expert: its row_of_slot is -1.
struct MoeGrouping {
    int32_t* offsets = nullptr;      // [E + 1]
    int32_t* perm = nullptr;         // [T·k] grouped row → slot s (unused tail rows: -1)
    int32_t* row_of_slot = nullptr;  // [T·k] slot → grouped row, or -1
    int32_t* n_items = nullptr;      // [1]
    int32_t* item_expert = nullptr;  // [max_items]
    int32_t* item_row0 = nullptr;    // [max_items] first grouped row of the item
    int32_t* item_rows = nullptr;    // [max_items] 1..tile_rows
    int32_t* chunk_counts = nullptr;  // [moe_group_blocks(T·k), E] the counting kernel's (internal)
    // [2] the warp-specialised tiles' dynamic walk (MoeTmaTuning::dynamic): the next tile's index and
    // the blocks that found none — zeroed by the grouping kernel, left zero by each launch's last block
    uint32_t* tile_counters = nullptr;
    // [max_items] the fused tiles' (MoePlan::wgmma_fused) gate+up tiles done an item — zeroed by the grouping
    uint32_t* item_done = nullptr;
    int64_t max_items = 0;           // min(E, T·k) + T·k / tile_rows: the grid's fixed size
};
constexpr int64_t kMoeGroupOneBlock = 2048;  // pairs one block groups alone (session 34: 9.7 µs at 2,048)
constexpr int64_t kMoeGroupChunk = 1024;     // pairs a block of the two-kernel grouping
inline int64_t moe_group_blocks(int64_t P) {
    return P <= kMoeGroupOneBlock ? 1 : (P + kMoeGroupChunk - 1) / kMoeGroupChunk;
}
int64_t moe_max_items(int64_t T, int k, int E, int tile_rows);
size_t moe_group_scratch_bytes(int64_t T, int k, int E, int tile_rows);
// Carves the grouping out of `scratch` (moe_group_scratch_bytes, 256-byte aligned) and queues
// the kernel that fills it. 1 ≤ tile_rows ≤ 128.
MoeGrouping moe_group(const int32_t* ids, int64_t T, int k, int E, int tile_rows, void* scratch, cudaStream_t stream);

// ---- experts --------------------------------------------------------------------------------

// What a caller provides: E experts, each with its own packed Int4 matrices gate, up [I, H] and
// down [H, I] (any placement; e.g. slices of stacked tensors). gate / up / down are DEVICE
// arrays [E] of PackedMatrix descriptors (copied by value in the kernels). Every descriptor must
// be Int4 with the stated n and k, codes 16-byte aligned, a group size 32·2^j dividing k, in
// either order of packed_weight.h (row-major, or 16-row tiles where packed_tiles_fit; per matrix);
// biases may be null per matrix (bias = −8·scale, Q4_0). The kernels cannot check
// device descriptors: call moe_check_experts on the host copies once at load.
// H and I: multiples of 32 (Int4 rows are whole 16-byte chunks).
// What the host knows of the experts' order (moe_check_experts): gate_up (down) — every expert's
// gate and up (down) in 16-row tiles, one stack each (expert e's codes, scales and biases right
// after expert e − 1's), one group size, scales and biases 16-byte aligned: the layout the tensor
// maps of the warp-specialised tiles (MoePlan::wgmma_tma) describe from expert 0's descriptors.
// Where false those tiles' plans run the plain ones.
struct MoeTiling {
    bool gate_up = false, down = false;
    PackedMatrix gate0, up0, down0;  // host copies of expert 0's descriptors
};
struct MoePackedExperts {
    int E = 0;
    int64_t H = 0, I = 0;
    const PackedMatrix* gate = nullptr;  // device [E]
    const PackedMatrix* up = nullptr;    // device [E]
    const PackedMatrix* down = nullptr;  // device [E]
    MoeTiling tiling;                    // moe_check_experts' answer (default: none)
    // Device words the fused decode kernel draws its tickets on (MoePlan::fused_decode): at least
    // moe_fused_counters_bytes(T, cluster), zero before its first launch; each launch leaves them
    // zero. One launch at a time may use them (the engine's one stream). Null: no fused decode.
    unsigned* counters = nullptr;
    // Device words the warp-specialised down tiles draw their tickets on where they sum the slots
    // themselves (MoePlan::wgmma_combine): at least moe_combine_counters_bytes(T, H), zero before
    // the first launch, left zero by each. Null: the combine kernel after the tiles.
    unsigned* combine_counters = nullptr;
};

// The fused decode kernel's shape (fast_moe_fused.cu: gate+up, SwiGLU, down and the slot sum in
// one launch, a cluster of `cluster` blocks a (token, slot)), from moe_fused_shape: each block
// streams its row tiles of the slot's expert through a ring of `ring` stages (≤ 16 KB of codes,
// their scales and biases each: a gate or up row tile's k-range, or nr_d down row tiles × nk_d
// k-tiles); the byte offsets of its other shared arrays; smem in all (two blocks an SM where it fits
// kMoeFusedSmemBudget). cluster 0: the shapes or the experts' layout do not take it.
constexpr int kMoeFusedStageCodes = 16 * 1024;   // bytes of codes a stage at most (16 row tile × k-tile pairs)
constexpr int kMoeFusedSmemBudget = 110 * 1024;  // two blocks an SM
// The fused decode kernel hung on its first GPU run (session 41, H200: FusedDecodeMatchesTheReference…
// timed out in its first case; the bench's fused rows too). Session 42 removed the likely cause
// (fast_moe_fused.cu's header) without a GPU; session 45 confirmed it on an H100: its four GPU tests
// pass and the engine's tests pass under TESSERA_MOE_DECODE=fused-try. So TESSERA_MOE_DECODE=fused is
// allowed, its tests run in the suite and the bench prints its rows — but it is not picked: the
// dp4a pair is faster (H100, bench_fast_moe --graph, µs for the three matrices, one token: 12.64
// against 16.67 for its fastest form; two tokens 22.02 against 27.63; the 4-layer cut's decode at 4K
// 3,349.5 against 3,378.1 tok/s).
constexpr bool kMoeFusedDecodeWorks = true;
constexpr int64_t kMoeFusedMaxTokens = 8;        // moe_experts_packed(fused): the decode steps it takes
struct MoeFusedShape {
    int cluster = 0;            // blocks a (token, slot): 16 or 8
    int warps = 8;              // consumer warps a block (+ the producer's): 8 or 16
    int rt_gu = 0, rt_d = 0;    // gate+up / down row tiles a block
    int nkt_h = 0, nkt_i = 0;   // k-tiles of 128 in H, I
    int nk_gu = 0;              // k-tiles a gate or up stage
    int nr_d = 0, nk_d = 0;     // row tiles × k-tiles a down stage
    int stages_gu = 0, stages_d = 0, ring = 0;
    int stage_bytes = 0, scale_bytes = 0;  // a stage's bytes; its scales' (biases') room
    int off_x = 0, off_act = 0, off_act_q = 0, off_red = 0, off_part = 0, off_bar = 0;
    size_t smem = 0;
};
// Needs the experts stacked in 16-row tiles (t.gate_up and t.down) with one group size (32, 64 or
// 128) for the three matrices, gate and up both with biases or both without, H and I multiples of
// 128, H / 16 and I / 16 multiples of the cluster (16, else 8), and a ring of two stages or more in
// the shared memory.
// form (MoePlan::fused_decode): 1, two blocks an SM of 8 consumer warps, the ring within
// kMoeFusedSmemBudget (a 16-block cluster may then sit on 8 SMs); 2, one block an SM of 8, up to
// 8 stages within 220 KB (a cluster of 16 then needs 16 SMs of one GPC); 3, as 2 with 16 consumer
// warps (twice the warps to hide the dots' latency; gate and up's k-tiles dealt over 16, so not
// form 1's bits). Other forms: cluster 0.
MoeFusedShape moe_fused_shape(int64_t H, int64_t I, const MoeTiling& t, int form = 1);
size_t moe_fused_counters_bytes(int64_t T, int cluster);
// Bytes of MoePackedExperts::combine_counters for T tokens of H features: a word a token and
// 128-feature block of the down tiles.
inline size_t moe_combine_counters_bytes(int64_t T, int64_t H) { return size_t(T) * size_t((H + 127) / 128) * 4; }
// Checks host copies of the descriptors (each array [E]) against the contract above, and says
// which matrices the whole-tile copies can read (MoeTiling).
MoeTiling moe_check_experts(const PackedMatrix* gate, const PackedMatrix* up, const PackedMatrix* down, int E,
                            int64_t H, int64_t I);

// How moe_experts_packed runs a step (moe_pick chooses; tests and benches force each):
//   grouped = false: one work item per (token, slot) — no grouping kernel (decode, T ≤ 2);
//   grouped = true:  moe_group's items of ≤ tile_rows tokens sharing an expert's weight rows;
//   down_by_token:   the down projection per token, its k slots summed in slot order in the same
//                    kernel (reads an expert's down rows once per token using it);
//   else:            down per item into scratch rows [T·k, H], then a kernel summing each token's
//                    k slots in slot order (needs grouped; reads each expert's rows once per item).
//   large_tiles:     the tensor-core tiles (needs grouped, by item, tile_rows 32 or 64): bf16
//                    operands (x, dequantized weights, act rounded to bf16; f32 accumulation), so
//                    its results differ from the small tiles' f32 ones by ~2⁻⁸ relative.
//   v2:              the second-generation kernels. Small tiles (needs per slot, down by token):
//                    fast_moe_decode.cu — gate+up with 8 weight rows a warp (16 loads a lane in
//                    flight), x staged in shared memory; down per token, a warp's k slots × 2
//                    rows in flight, the token's act rows staged, weights fused, slots summed in
//                    order. f32 like the small tiles (within their bound, not their bits). Large:
//                    fast_moe_mma.cu — 4-stage cp.async, k-tiles of 128, bf16 magic dequant,
//                    tile_rows 16, 32 or 64, warps split columns only.
//   mma_decode:      the decode kernels on the tensor cores (fast_moe_decode_mma.cu; per slot,
//                    down by token, not v2, not large tiles): mma.sync with 16 weight rows as A
//                    and the slot's x (act) in bf16 as B's one column; gate+up split over H by 8
//                    warps a block of 16 outputs, down by token with the (slot, k-tile) items of
//                    a block of 16 outputs over its warps, slots summed in order. bf16 operands
//                    (x, act), exact weights, f32 sums: the large tiles' bound.
//   dp4a_decode:     the decode kernels on the integer units (fast_moe_decode_dp4a.cu; per slot,
//                    down by token, none of the other flags): the token's x (act rows) quantized
//                    by each block into two int8 limbs (|x − x̃| ≤ max|x| / 64516 per 32
//                    columns: closer than bf16), dp4a on the codes as they lie, f32 sums; gate+up
//                    split over H by 8 warps a block of 16 outputs, down by token with the (slot,
//                    k-tile) items of a block of 16 outputs over 16 warps (mma_down_warps 0 or
//                    16; 8: 8 warps, 4 items each in flight), slots summed in order; the down
//                    kernel by programmatic dependent launch.
//   fused_decode:    the decode step in one kernel (fast_moe_fused.cu; per slot, none of the other
//                    flags): a cluster of blocks a (token, slot) — gate+up, SwiGLU, act through
//                    distributed shared memory, down — and the slots summed in order by the last
//                    block to finish each row range (tickets on MoePackedExperts::counters). The
//                    integer-unit decode kernels' limbs (within their bound, not their bits). Needs
//                    moe_fused_shape(H, I, tiling, form).cluster and the counters. The form: 1,
//                    two blocks an SM; 2, one (a deeper ring); 3, one of 16 consumer warps (A/B).
//                    Opt-in (TESSERA_MOE_DECODE=fused takes 1): written in session 40 without a GPU.
//   mma_down_batch:  items a warp of that down kernel has in flight: 4, 8, or 0 (the fewest
//                    batches: moe_decode_mma_down_batch).
//   wgmma:           the large tiles on Hopper's warpgroup MMA (fast_moe_wgmma.cu; large_tiles,
//                    not v2, tile_rows 16, 32, 64 or 128): the expert's Int4 rows dequantized into
//                    wgmma's A registers (gate and up a warpgroup each), the item's rows as B from
//                    shared memory; x and act in the wgmma order (rows padded to 128 columns). The
//                    large tiles' bound.
//   wgmma_tma:       with wgmma, tile_rows 16, 32, 48, 64 or 128 (128: 1 only; 48: 1, one m-tile, neither
//                    gathered nor fitted — the plain tiles have no form of 48) and the experts in stacked tiles
//                    (MoeTiling, per kernel): the warp-specialised form
//                    (fast_moe_tma_tile.cuh) — a producer warp fills the stages by TMA and bulk
//                    copies, gate and up rows of a feature in one warp; 1, or 2: clusters of two
//                    feature blocks, each loading half of the item's activation boxes into both
//                    (TMA multicast). 0: off. The same bits as wgmma.
//   wgmma_mt:        with wgmma_tma = 1 and tile_rows 16, 32 or 64: 2 — each warpgroup two m64 tiles
//                    (the block's features doubled: 128 of gate+up, 256 of down), an item's rows
//                    read by half the feature blocks; 0 or 1: one. The same bits.
//   wgmma_gather:    with wgmma_tma = 1: gate+up gathers the item's rows of x itself (cp.async from
//                    x in bf16 once a token, [T, H128]) — no gathered copy [T·k, H128] written and
//                    read back. The same bits. Opt-in: measured slower (session 34: two warps'
//                    16-byte copies do not keep up with the consumers; gate+up 206.6 against 118.4
//                    µs at 512 tokens of llama.cpp's shape, tiles of 64).
//   wgmma_persist:   with wgmma_tma = 1 and not wgmma_gather: 1 — a grid of resident blocks taking
//                    the (item, feature block) tiles in turn, the ring running on from tile to tile
//                    (a block's start paid once; the next tile's weights stream during the last
//                    one's epilogue); n > 1 at most n blocks (tests); 0 a block a tile. The same
//                    bits. moe_pick's for tiles of 64 rows since session 45, of 32 and 48 since
//                    session 48 (MoeSwitches::persist).
//   wgmma_fit:       with wgmma_tma = 1, tile_rows ≤ 64, not wgmma_gather or wgmma_persist: wgmma's N
//                    tile_rows / 2 for items of at most that many rows — at 512 tokens of llama.cpp's
//                    shape (~32 rows an expert, Poisson-spread, in items of 64) ~27 % less tensor
//                    work. The same bits. Opt-in (TESSERA_MOE_PREFILL=tma-fit): level or slower
//                    than the pick on the H100 (session 45: 232.4 against 238.0 µs at 512 tokens of
//                    llama.cpp's shape, 708.8 against 707.6 at 2048).
//   mma_gate_up_batch: k-tiles a warp of that gate+up kernel has in flight: 2 (2 blocks an SM;
//                    also 0) or 1 (3 blocks an SM: more of a large grid resident at once).
//   mma_down_warps:  warps a block of that down kernel: 8 (also 0) or 16 (then batches of 4 and
//                    one block an SM: for T = 1, whose H / 16 blocks give an SM one block).
//   mma_pdl:         that down kernel by programmatic dependent launch: it starts while gate+up
//                    runs and streams its first weights before waiting for act.
//   mid:             the grouped kernels for few rows an expert (fast_moe_mid.cu; grouped, by item,
//                    tile_rows kMoeMidRows, none of the other flags): each item's expert weights
//                    read once as mma.sync's A (16 rows, dequantized to bf16 as the v2 tiles do),
//                    its ≤ 8 rows as B's columns; gather, gate+up (SwiGLU), down, combine as the v2
//                    tiles (the large tiles' bound). The backend takes it (moe_experts_packed's
//                    mid = true, its default; TESSERA_MOE_MID=tiles for A/B) for T ≥ 3 at ≤ 8 rows
//                    an expert on average.
//   mid_ring:        k-tiles a warp of the mid kernels has in flight: 3 (3 blocks an SM), 4 (2
//                    blocks an SM) or 0 (each kernel: 4 where that holds all of a warp's k-tiles —
//                    small shapes only — else 3).
//   mid_gate_up_tiles: row tiles a warp of the mid gate+up kernel streams in turn: 1 (also 0) or 2
//                    (half the blocks: the item's rows staged once for 128 outputs, an exchange
//                    barrier a row tile). 2 is opt-in: with ring 3 it measured no faster (session 22:
//                    the flagship's step 97.9 against 98.7 µs at 64 tokens, 76.0 / 79.7 at 32).
//   mid_down_tiles:  row tiles a warp of the mid down kernel streams in turn: 2, 4 (half the
//                    blocks, a block's start paid once for 4) or 0 (4 from kMoeMidDown4Rows grouped
//                    rows T·k, else 2: with few items, 4 leaves SMs idle).
struct MoePlan {
    bool grouped = false;
    bool down_by_token = true;
    int tile_rows = 8;  // tokens per item: 1..8 for the small tiles, 16 (v2), 32 or 64 for the large
    bool large_tiles = false;
    bool v2 = false;
    bool mma_decode = false;
    int mma_down_batch = 0;
    bool mma_pdl = false;
    int mma_gate_up_batch = 0;
    int mma_down_warps = 0;
    bool dp4a_decode = false;
    bool wgmma = false;
    bool mid = false;
    int mid_ring = 0;
    int mid_down_tiles = 0;
    int mid_gate_up_tiles = 0;
    int wgmma_tma = 0;
    int wgmma_mt = 0;
    bool wgmma_gather = false;
    int fused_decode = 0;  // 0 off; 1, 2, 3: the fused decode kernel's form (moe_fused_shape)
    int wgmma_persist = 0;
    bool wgmma_fit = false;
    // The warp-specialised down tiles sum each token's slots themselves, the last tile of a token's
    // feature block by a ticket (MoePackedExperts::combine_counters), instead of the combine kernel
    // after them: the same sums in the same order (opt-in until measured, TESSERA_MOE_COMBINE=fused).
    bool wgmma_combine = false;
    // The warp-specialised tiles' L2 policies (MoeTmaTuning::l2_first): 0 none; 1 the weights' boxes
    // evicted first, 2 and A's evicted last, 3 the weights evicted first by each expert's last item's
    // tiles. The same bits.
    int wgmma_l2_first = 0;
    // The warp-specialised down tiles write out [P, H] in bf16 (each slot's f32 sum rounded to nearest
    // even) and the combine kernel reads it so: half out's bytes, written and read back, for one
    // rounding a slot before the weighted sum (as vLLM's bf16 experts do). Not with wgmma_combine.
    bool wgmma_out16 = false;
    // The warp-specialised gate+up tiles' consumer warpgroups a block (MoeTmaTuning::warpgroups): 2,
    // or 4 — 128 features a block, each stage's activation rows read from L2 once for twice the
    // weights (session 58: the k-tile probe's rows from 16 MB in L2 cost ~20 µs of the 512-token
    // step). Tiles of 32, 48 or 64 rows, one m-tile, neither clustered, gathered nor fitted; the same
    // bits; the backend's default at tiles of 48, and of 64 from 2,048 tokens (MoeSwitches::warpgroups).
    // (Their wgmma groups in turn — ping-pong, CUTLASS's mixed-input order — ran level to 5 % slower,
    // session 60, and were removed.)
    int wgmma_warpgroups = 2;
    // The warp-specialised tiles' wgmma N an item's rows rounded up to 8 (MoeTmaTuning::fit8): the
    // tensor pipe's time on rows no item has is time the loop pays beside the dequantization (the
    // k-tile probe, session 61: the two overlap for ~10 of ~40 µs). Tiles of 32, 48 or 64 rows in one
    // m-tile, or two m-tiles of 32, neither clustered, gathered nor fitted (halved: moe_tiles_take_fit8);
    // the same bits; the backend's default (MoeSwitches::fit8, TESSERA_MOE_FIT8).
    bool wgmma_fit8 = false;
    // The persistent warp-specialised tiles drawn in turn from a counter (MoeTmaTuning::dynamic) rather
    // than each block taking every gridDim-th: a block that drew cheaper tiles (fewer item rows under
    // fit8) takes more. Persistent tiles of 32, 48 or 64 rows in one m-tile with wgmma_fit8
    // (moe_tiles_take_dynamic); the same bits.
    bool wgmma_dynamic = false;
    // Gate+up's drawn tiles and then down's in one persistent launch (launch_moe_wgmma_tma_fused): a
    // down tile (four warpgroups, 256 features) starts on an item once that item's gate+up tiles are
    // done, on the SMs gate+up's last tiles leave idle (session 64's ncu: ~10 % of each tile kernel's
    // SM time), and one launch boundary less. The drawn tiles with out16, gate+up in four warpgroups
    // (moe_tiles_take_fused); the same bits.
    bool wgmma_fused = false;
    // The fused launch's count of a gate+up tile on its item (MoeGrouping::item_done) off the consumers'
    // path (MoeTmaTuning::fused_warp): each consumer warp arrives on a shared-memory mbarrier once its act
    // stores are fenced, and an otherwise idle warp of the producer warpgroup waits on it, fences and
    // releases — where the first form (session 65) has the 512 consumers meet at a named barrier and
    // their thread 0 fence before the release, on its warpgroup's way to the next tile's wgmma.
    // With wgmma_fused only; the same bits.
    bool wgmma_fused_warp = false;
};
// The tiles MoePlan::wgmma_warpgroups = 4 is built for: warp-specialised, 32 to 64 rows in one
// m-tile, neither clustered, gathered nor fitted (halved).
inline bool moe_tiles_take_wide_forms(const MoePlan& p) {
    return p.wgmma && p.wgmma_tma == 1 && p.wgmma_mt < 2 && !p.wgmma_gather && !p.wgmma_fit && p.tile_rows >= 32 &&
           p.tile_rows <= 64;
}
// The tiles MoePlan::wgmma_fit8 is built for: those, and two m-tiles of 32 rows (neither clustered,
// gathered nor halved). (Tiles of 128 with it, an expert's ~64–128 rows one item, ran 6–12 % behind
// tiles of 64 at 1,024 to 4,096 tokens: session 61, H100.)
inline bool moe_tiles_take_fit8(const MoePlan& p) {
    return moe_tiles_take_wide_forms(p) || (p.wgmma && p.wgmma_tma == 1 && p.wgmma_mt == 2 && p.tile_rows == 32 &&
                                            !p.wgmma_gather && !p.wgmma_fit);
}
// The tiles MoePlan::wgmma_dynamic is built for: the wide forms, persistent, with N in steps of 8.
inline bool moe_tiles_take_dynamic(const MoePlan& p) {
    return moe_tiles_take_wide_forms(p) && p.wgmma_persist > 0 && p.wgmma_fit8;
}
// The tiles MoePlan::wgmma_fused is built for: those, drawn in turn, out in bf16, no own slot sum (its
// gate+up takes four warpgroups).
inline bool moe_tiles_take_fused(const MoePlan& p) {
    return moe_tiles_take_dynamic(p) && p.wgmma_dynamic && p.wgmma_out16 && !p.wgmma_combine;
}
constexpr int kMoeMidRows = 8;  // rows a work item of the mid kernels: mma's 8 columns
constexpr int64_t kMoeMidDown4Rows = 384;  // mid_down_tiles 0: 4 row tiles a warp from T·k rows (T ≥ 48, k 8)
// The mid plan: grouped, by item, tile_rows kMoeMidRows.
inline MoePlan moe_mid_plan() {
    MoePlan p;
    p.grouped = true;
    p.down_by_token = false;
    p.tile_rows = kMoeMidRows;
    p.mid = true;
    return p;
}
// Which plan a step of T tokens runs: a pure function of (T, k, E), to be retuned from the
// bench's figures (bench/fast_moe.cpp prints every plan at T = 1..2048 on both shapes).
MoePlan moe_pick(int64_t T, int k, int E);

// Bytes of scratch moe_experts_packed needs for `plan` (the grouping, act [T·k, I] f32 and, for
// the by-item down, out [T·k, H] f32; large tiles: the grouping, xg [T·k, H] bf16, act [T·k, I]
// bf16, out [T·k, H] f32 — bf16 with wgmma_out16, in the same room), and the most any plan needs (allocate this once).
size_t moe_experts_scratch_bytes(const MoePlan& plan, int64_t T, int k, int E, int64_t H, int64_t I);
size_t moe_experts_scratch_bytes(int64_t T, int k, int E, int64_t H, int64_t I);

// y[t] = Σ_{j<k} weights[t, j] · down_e(silu(gate_e · x_t) ⊙ (up_e · x_t)), e = ids[t, j], for x, y
// [T, H] f32 (row strides ldx, ldy; y may be x itself, not otherwise overlap it); ids, weights
// [T, k] contiguous device arrays (e.g. from moe_route). f32 accumulation: per 32-column chunk
// Σ code·x and Σ x, then scale·Σcode·x + bias·Σx per chunk; a lane-group tree per dot product;
// the k slots summed in slot order. An id outside [0, E) makes that token's row NaN.
// scratch: moe_experts_scratch_bytes(plan, ...) bytes, 256-byte aligned.
// sw: the backend's switches over the pick (MoeSwitches; the defaults leave the pick as it is).
// The router logits moe_route ranked into the ids just before (the caller's promise, as x_settled's),
// where it ranked them on the logits (renormalize, not exact: route_logits_kernel) over at most
// kMoeRouteAheadMaxExperts experts. The integer-unit gate+up kernel then ranks its token's logits
// itself before its PDL wait — the same picks, dev::logits_pick — and requests its weights without
// waiting for the routing kernel, which runs beside it (the down kernel still reads the ids).
struct MoeRouteAhead {
    const float* logits = nullptr;  // [T, E (+ 1 with shared)], row stride ldl; null: off
    int64_t ldl = 0;
    int E = 0;            // experts ranked (the stack's w.E less the shared expert)
    int k = 0;            // picks a token (the slots less the shared expert's)
    bool shared = false;  // slot k is the shared expert, id E
};
constexpr int kMoeRouteAheadMaxExperts = 256;

struct MoeSwitches {
    // The pick may take the integer-unit decode kernels (false: the tensor-core ones instead,
    // TESSERA_MOE_DECODE=mma — for A/B).
    bool dp4a = true;
    // The caller promises that x was written before the last kernel launched ahead of this call — as
    // when that kernel is moe_route's, routing x's own router logits (it lets its successor start
    // only after its PDL wait, so all before it has completed: pdl.cuh) — so the integer-unit gate+up
    // kernel quantizes x before its PDL wait, off the chain that waits for the ids.
    bool x_settled = false;
    // The pick's large tiles may run on the warpgroup MMA (false: the mma.sync v2 tiles, for A/B).
    bool wgmma = true;
    // Where the pick takes the v2 tiles (below one row an expert on average, or at ≤ kMoeMidRows rows
    // where its wgmma tiles cannot run warp-specialised) run the mid plan instead where its shared
    // memory fits (the backend's default; TESSERA_MOE_MID=tiles leaves it out, for A/B).
    bool mid = false;
    // The pick's wgmma tiles in their warp-specialised form (where the experts are stacked tiles;
    // false: the plain wgmma tiles, TESSERA_MOE_PREFILL=wgmma, for A/B).
    bool tma = true;
    // Gate+up of that form gathers x's rows itself (MoePlan::wgmma_gather; slower,
    // TESSERA_MOE_PREFILL=tma-gather, for A/B).
    bool gather = false;
    // That form's tiles taken in turn by a grid of resident blocks (MoePlan::wgmma_persist = 1):
    // 0 where the pick takes them (tiles of 32, 48 and 64 rows: sessions 45, 48), 1 at every tile
    // size (TESSERA_MOE_PREFILL=tma-persist), -1 nowhere (TESSERA_MOE_PREFILL=tma-tiles: one block a
    // tile, the form before), for A/B.
    int persist = 0;
    // That form's wgmma N fitted to each item's rows (MoePlan::wgmma_fit; TESSERA_MOE_PREFILL=tma-fit,
    // opt-in until measured; not with persist).
    bool fit = false;
    // Up to kMoeFusedMaxTokens tokens the fused decode kernel instead of the pick's plan, where it
    // takes the shapes and w.counters is set (MoePlan::fused_decode; TESSERA_MOE_DECODE=fused) — a
    // cluster a (token, slot), so an expert two tokens choose is read twice (the grouped plans it
    // replaces from 3 tokens read it once).
    bool fused = false;
    // Non-null: the dp4a decode's gate+up ranks the router logits itself (MoeRouteAhead; needs
    // x_settled; TESSERA_MOE_ROUTE_AHEAD=on, opt-in until measured). Ignored by every other plan.
    const MoeRouteAhead* route_ahead = nullptr;
    // Where the pick runs the warp-specialised tiles and w.combine_counters is set: the down tiles
    // sum the slots themselves (MoePlan::wgmma_combine; TESSERA_MOE_COMBINE=fused, opt-in).
    bool combine = false;
    // The warp-specialised tiles' L2 policies (MoePlan::wgmma_l2_first: TESSERA_MOE_L2=first 1,
    // first-last 2, last-item 3; opt-in until measured).
    int l2_first = 0;
    // Their gate+up's consumer warpgroups a block (MoePlan::wgmma_warpgroups): 2; 4 where the plan's
    // tiles take them; or 0, auto — 4 at tiles of 48, and of 64 from 2,048 tokens, where they take them
    // (the backend's default, TESSERA_MOE_WARPGROUPS: sessions 60, 61, H100), else 2.
    int warpgroups = 2;
    // Their wgmma N an item's rows in steps of 8 where the plan's tiles take it (MoePlan::wgmma_fit8;
    // the backend's default, TESSERA_MOE_FIT8: session 61, H100, the whole MoE 1–2 % faster at 512 to
    // 2,048 tokens). False here: moe_pick's plans as they are unless a caller asks.
    bool fit8 = false;
    // Their persistent tiles drawn in turn from a counter where the plan's tiles take it
    // (MoePlan::wgmma_dynamic; the backend's default, TESSERA_MOE_DYNAMIC: sessions 63 and 64's figures in
    // docs/cuda.md). False here: moe_pick's plans as they are unless a caller asks.
    bool dynamic = false;
    // Where the pick runs the warp-specialised tiles without their own slot sum: out in bf16
    // (MoePlan::wgmma_out16). The backend's default (TESSERA_MOE_OUT=bf16); false here, so that a
    // caller of moe_experts_packed gets moe_pick's f32 plans unless it asks.
    bool out16 = false;
    // Where the plan's tiles take it: gate+up's and down's drawn tiles in one launch (MoePlan::wgmma_fused;
    // TESSERA_MOE_FUSED_TILES=on, opt-in until measured).
    bool fused_tiles = false;
    // With fused_tiles: each gate+up tile counted on its item by a producer-warpgroup warp, not by the
    // consumers' barrier and their thread 0 (MoePlan::wgmma_fused_warp; TESSERA_MOE_FUSED_TILES=warp).
    bool fused_warp = false;
};
// The plan moe_experts_packed runs for T tokens of k slots on w under sw: moe_pick's, adjusted to the
// switches and to what w's layout and sizes take (host only: no device access).
MoePlan moe_plan(int64_t T, int k, const MoePackedExperts& w, const MoeSwitches& sw);
void moe_experts_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                        const int32_t* ids, const float* weights, int k, void* scratch, cudaStream_t stream,
                        const MoeSwitches& sw = {});
void moe_experts_packed_plan(const MoePlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                             void* scratch, cudaStream_t stream, bool x_settled = false,
                             const MoeRouteAhead& route_ahead = {});

namespace detail {
// The launches in the .cu files (no fmt there); arguments already checked. Each returns its
// launch's error. One entry per kernel, so a failing step can be run (and timed) alone.
cudaError_t launch_moe_route(const float* logits, int64_t ldl, int64_t T, int E, int k, bool renormalize,
                             bool shared, int32_t* ids, float* weights, bool exact, cudaStream_t stream);
// pdl false: the grouping's first kernel (the counting one, or the one-block form) launched the
// ordinary way — the placing kernel after the counts is launched with PDL either way (the bench's other
// side of session 56's PDL launch; the same words either way).
cudaError_t launch_moe_group(const int32_t* ids, int64_t T, int k, int E, int tile_rows, const MoeGrouping& g,
                             cudaStream_t stream, bool pdl = true);
// act [T·k, I] (row stride I): act[r] = silu(gate_e·x_t) ⊙ (up_e·x_t) for each grouped row r of
// each item (grouped), or r = s for each slot (g == nullptr: item s = slot s, one token).
cudaError_t launch_moe_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                               const int32_t* ids, int k, const MoeGrouping* g, int tile_rows, cudaStream_t stream);
// y[t] = Σ_j weights[t, j] · down_e · act[row(t·k + j)], row = g ? row_of_slot : identity.
cudaError_t launch_moe_down_by_token(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                                     const int32_t* ids, const float* weights, int k, const MoeGrouping* g,
                                     cudaStream_t stream);
// out [T·k, H]: out[r] = down_e · act[r] per item row.
cudaError_t launch_moe_down_by_item(float* out, const float* act, int64_t T, const MoePackedExperts& w, int k,
                                    const MoeGrouping& g, int tile_rows, cudaStream_t stream);
// y[t] = Σ_j weights[t, j] · out[row_of_slot[t·k + j]] (NaN for a slot without a row), in slot order
// whatever the form: cols columns a thread (4 or 8), slots loaded together in batches of `batch` (8,
// 12 or 16); 0: moe_combine_cols / moe_combine_batch — the fewest registers that take every slot in
// one batch (a thread's batch of 16 f32 columns at k = 8 held 102 registers where 8 hold 56: H100,
// session 55, llama.cpp's shape, 2,048 tokens: 55.1 against 51.1 µs; bf16 rows 65.3 against 34.6 with
// 8 columns a thread).
inline int moe_combine_cols(bool bf16) { return bf16 ? 8 : 4; }
inline int moe_combine_batch(int k) { return k <= 8 ? 8 : k <= 12 ? 12 : 16; }
cudaError_t launch_moe_combine(float* y, int64_t ldy, const float* out, int64_t T, int64_t H, const float* weights,
                               int k, const MoeGrouping& g, cudaStream_t stream, int cols = 0, int batch = 0);
// The same sum of out16 [T·k, H] in bf16 (MoePlan::wgmma_out16): each value widened, then the
// same operations in the same order.
cudaError_t launch_moe_combine_bf16(float* y, int64_t ldy, const void* out16, int64_t T, int64_t H,
                                    const float* weights, int k, const MoeGrouping& g, cudaStream_t stream,
                                    int cols = 0, int batch = 0);
// Large tiles (fast_moe_tiles.cu). xg [T·k, H] bf16 = x[token of grouped row r] (rows with a slot).
cudaError_t launch_moe_gather_bf16(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                   const MoeGrouping& g, cudaStream_t stream);
// act [T·k, I] bf16 = silu(xg·gate_eᵀ) ⊙ (xg·up_eᵀ) per item (tile_rows 32 or 64).
cudaError_t launch_moe_tile_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                    int tile_rows, cudaStream_t stream);
// out [T·k, H] f32 = act·down_eᵀ per item.
cudaError_t launch_moe_tile_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                 int tile_rows, cudaStream_t stream);
// Second generation (fast_moe_decode.cu, fast_moe_mma.cu). The decode kernels stage x (H
// floats) and a token's act rows (k·I floats) in shared memory: moe_decode_smem_bytes of at most
// moe_decode_smem_limit.
size_t moe_decode_smem_bytes(int64_t H, int64_t I, int k);
size_t moe_decode_smem_limit();
// act [T·k, I] f32: act[s] = silu(gate_e·x_t) ⊙ (up_e·x_t) per slot s = t·k + j, e = ids[s].
cudaError_t launch_moe_decode_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                                      const int32_t* ids, int k, cudaStream_t stream);
// y[t] = Σ_j weights[t, j] · down_e · act[t·k + j], slots in order.
cudaError_t launch_moe_decode_down(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                                   const int32_t* ids, const float* weights, int k, cudaStream_t stream);
// The integer-unit decode kernels (fast_moe_decode_dp4a.cu): gate+up stages the token's x (H
// columns), down the token's k act rows and a partial per (slot, k-tile), each in at most
// moe_decode_dp4a_smem_limit bytes of shared memory. T·k ≤ 65535.
constexpr int64_t kMoeDecodeDp4aMaxSmem = 100 * 1024;
size_t moe_decode_dp4a_gate_up_smem(int64_t H);
size_t moe_decode_dp4a_down_smem(int64_t I, int k);
size_t moe_decode_dp4a_smem_limit();
inline bool moe_decode_dp4a_fits(int64_t H, int64_t I, int k) {
    return moe_decode_dp4a_gate_up_smem(H) <= moe_decode_dp4a_smem_limit() &&
           moe_decode_dp4a_down_smem(I, k) <= moe_decode_dp4a_smem_limit();
}
// ra.logits set: the kernel that ranks them itself (MoeRouteAhead; checked by the caller).
cudaError_t launch_moe_decode_dp4a_gate_up(float* act, const float* x, int64_t ldx, int64_t T,
                                           const MoePackedExperts& w, const int32_t* ids, int k, bool x_settled,
                                           const MoeRouteAhead& ra, cudaStream_t stream);
// warps: the down kernel's block, 16 (default) or 8 (MoePlan::mma_down_warps).
cudaError_t launch_moe_decode_dp4a_down(float* y, int64_t ldy, const float* act, int64_t T,
                                        const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                        int warps, cudaStream_t stream);
// The fused decode kernel (fast_moe_fused.cu): y [T, H] for T tokens' k slots; part [T·k, H] f32
// scratch; w.counters zero; f = moe_fused_shape(w.H, w.I, w.tiling, form), checked by the caller
// (cudaErrorInvalidValue where its cluster is 0).
cudaError_t launch_moe_fused_decode(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                                    const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                    float* part, bool x_settled, const MoeFusedShape& f, cudaStream_t stream);
// Clusters of the fused decode kernel the device holds at once (cudaOccupancyMaxActiveClusters; 0
// where the shape does not take it or the device refuses the cluster): k·T of them run in one wave.
int moe_fused_active_clusters(int64_t H, int64_t I, const MoeTiling& t, int form);
// The tensor-core decode kernels (fast_moe_decode_mma.cu). act [T·k, I] f32 as the v2 ones';
// the down kernel keeps a partial per (slot, k-tile) in shared memory: moe_decode_mma_smem_bytes
// of at most moe_decode_mma_smem_limit. T·k ≤ 65535.
size_t moe_decode_mma_smem_bytes(int64_t I, int k);
constexpr int64_t kMoeDecodeMmaMaxH = 16384;  // gate+up stages the slot's x (64·H/32 bytes) once a block
size_t moe_decode_mma_smem_limit();
int moe_decode_mma_down_batch(int64_t I, int k);  // 4 when every warp's items fit one batch of 4, else 8
// batch: k-tiles a warp in flight, 1 or 2 (0: 2).
cudaError_t launch_moe_decode_mma_gate_up(float* act, const float* x, int64_t ldx, int64_t T,
                                          const MoePackedExperts& w, const int32_t* ids, int k, int batch,
                                          cudaStream_t stream);
// batch: items a warp in flight, 4 or 8 (0: moe_decode_mma_down_batch); warps a block: 8 or 16
// (16: batch 4). pdl: launched with
// programmatic stream serialisation (reads act only after the previous kernel in the stream ends;
// ids and weights must be complete before that kernel started).
cudaError_t launch_moe_decode_mma_down(float* y, int64_t ldy, const float* act, int64_t T,
                                       const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                       int batch, int warps, bool pdl, cudaStream_t stream);
// xg [T·k, H] bf16, each 8 columns stored as (0,4,1,5,2,6,3,7) (the k pairing of fast_gemm.cu).
cudaError_t launch_moe_gather_bf16_perm(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                        const MoeGrouping& g, cudaStream_t stream);
// act [T·k, I] bf16 (permuted columns as xg) per item; tile_rows 16, 32 or 64.
cudaError_t launch_moe_mma_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                   int tile_rows, cudaStream_t stream);
// out [T·k, H] f32 = act·down_eᵀ per item.
cudaError_t launch_moe_mma_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                int tile_rows, cudaStream_t stream);
// The wgmma large tiles (fast_moe_wgmma.cu): xg [T·k, H128] bf16 in the wgmma order
// (fast_wgmma_int4.cuh; H128 = H rounded up to 128, zeros past H); act [T·k, I128] likewise;
// out [T·k, H] f32. tile_rows 16, 32, 64 or 128.
// rows_per_block: grouped rows a block of 128 threads gathers, 1 or 2 (0: moe_gather_rows_per_block)
// — the same words.
cudaError_t launch_moe_gather_wgmma(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                    const MoeGrouping& g, cudaStream_t stream, int rows_per_block = 0);
// The gather's rows a block for P = T·k grouped rows: two from 16,384 (more loads in flight a thread;
// two H100s, session 56, bench_fast_moe, µs, one row a block / two: 2,048 tokens top-8 — llama.cpp's shape
// 40.0–43.0 / 39.1–39.5, the flagship's 40.1–42.6 / 38.9–39.8; at 512 tokens one row wins, 10.4–10.9
// against 11.9–12.4; four a block never led: 15.0–15.6 at 512, 40.6–41.2 at 2,048, and was removed).
inline int moe_gather_rows_per_block(int64_t rows) { return rows >= 16384 ? 2 : 1; }
// x16[t] = x[t] in bf16, the wgmma order, rows [T, H128] (the gathered tiles' A before grouping).
cudaError_t launch_moe_rows_wgmma(void* x16, const float* x, int64_t ldx, int64_t T, int64_t H, cudaStream_t stream);
cudaError_t launch_moe_wgmma_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                     int tile_rows, cudaStream_t stream);
cudaError_t launch_moe_wgmma_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                  int tile_rows, cudaStream_t stream);
// Choices of the warp-specialised tiles below that leave their bits alone (A/B):
//   l2_first: 1 the weights' boxes under L2's evict-first policy (each byte read once a step where an
//             expert's rows are one item), 2 and A's rows (read by every feature block of an item)
//             under the evict-last one (no clusters), 3 the weights evicted first by the tiles of
//             each expert's last item only (its earlier items' tiles read the same weights); 0 none
//             (MoePlan::wgmma_l2_first).
//   warpgroups: consumer warpgroups a block — 2, or 4 for gate+up's persistent or one-a-tile tiles of
//             32, 48 or 64 rows in one m-tile (neither clustered, gathered nor fitted): 128 features a
//             block sharing each stage's activation rows, one block an SM (MoePlan::wgmma_warpgroups).
//             Down takes 2 only.
//   fit8:     wgmma's N an item's rows rounded up to 8 (16 … 48 with tiles of 32 or 48, 32 … 64 with
//             64), each half k-tile's wgmma issued in the branch of its N: less of the tensor pipe's
//             time on rows no item has, where each wgmma's time is the loop's beside the
//             dequantization's (session 61's probe: the two overlap for ~10 of ~40 µs); tiles of 32, 48
//             or 64 rows in one m-tile or two of 32, neither clustered, gathered nor halved
//             (MoePlan::wgmma_fit8, moe_tiles_take_fit8).
//   dynamic:  persistent tiles of 32, 48 or 64 rows in one m-tile with fit8, drawn in turn by each
//             block's producer from MoeGrouping::tile_counters (item-major, as the static walk orders
//             them), the index passed to the consumers beside the tile's first stage — a block whose
//             tiles ran cheaper (fewer item rows) takes more, where the static walk gives each block
//             every gridDim-th tile (MoePlan::wgmma_dynamic).
//   fused_warp: the fused launch's count of each gate+up tile on its item by a producer-warpgroup warp
//             that waits on the consumer warps' mbarrier arrivals (MoePlan::wgmma_fused_warp).
struct MoeTmaTuning {
    int l2_first = 0;
    int warpgroups = 2;
    bool fit8 = false;
    bool dynamic = false;
    bool fused_warp = false;
};
// Their warp-specialised form (fast_moe_tma_tile.cuh, launched by fast_moe_wgmma_tma.cu; the same
// operands, P = T·k rows of xg / act, the same bits): tile_rows 16, 32, 48, 64 or 128
// (moe_wgmma_tma_fits; 128: cluster 1; 48: cluster 1, one m-tile, neither gathered nor fitted), the
// experts' gate and up (down) in stacked tiles (MoeTiling::gate_up / down); cluster 1 or 2
// (MoePlan::wgmma_tma).
bool moe_wgmma_tma_fits(int tile_rows);
// mt: m64 tiles a warpgroup, 1 or 2 (MoePlan::wgmma_mt; 2: tile_rows 16, 32 or 64, cluster 1). Tiles of
// 128 rows and two m-tiles of 64 run one block an SM (the others two).
// persist (MoePlan::wgmma_persist; cluster 1, not gathered): 0 a block an (item, feature block)
// tile; 1 as many blocks as are resident at once, taking the tiles in turn (the ring running on from
// tile to tile); n > 1 at most n such blocks (tests: many tiles a block). fit (MoePlan::wgmma_fit;
// cluster 1, not gathered or persistent, tile_rows ≤ 64): wgmma's N tile_rows / 2 for items of at
// most that many rows. The same bits (each of D's columns is its own dot products, whatever N).
// tune: what leaves the bits alone (MoeTmaTuning).
cudaError_t launch_moe_wgmma_tma_gate_up(void* act, const void* xg, int64_t P, const MoePackedExperts& w,
                                         const MoeGrouping& g, int tile_rows, int cluster, int mt, cudaStream_t stream,
                                         int persist = 0, bool fit = false, const MoeTmaTuning& tune = {});
// The gate+up tiles with A's rows gathered in the kernel (MoePlan::wgmma_gather): x16 [T, H] in
// bf16, the wgmma order (launch_moe_rows_wgmma), k slots a token; cluster 1. The same bits.
cudaError_t launch_moe_wgmma_tma_gate_up_gathered(void* act, const void* x16, int64_t T, int k,
                                                  const MoePackedExperts& w, const MoeGrouping& g, int tile_rows,
                                                  int mt, cudaStream_t stream);
// The down tiles' own slot sum (MoePlan::wgmma_combine): y [T, ldy] = Σ_j weights[t, j] · out[row of
// slot j] as launch_moe_combine sums it, each (token, feature block) by the tile that draws its last
// ticket on `counters` (zero, left zero; moe_combine_counters_bytes); tokens without a valid slot NaN.
struct MoeTileCombine {
    float* y = nullptr;  // null: off (the combine kernel after the tiles)
    int64_t ldy = 0;
    const float* weights = nullptr;  // [T, k]
    unsigned* counters = nullptr;
    int k = 0;
    int T = 0;
};
// out16 (MoePlan::wgmma_out16): out holds [P, H] bf16, each f32 sum rounded to nearest even; not with
// combine.y.
cudaError_t launch_moe_wgmma_tma_down(void* out, const void* act, int64_t P, const MoePackedExperts& w,
                                      const MoeGrouping& g, int tile_rows, int cluster, int mt, cudaStream_t stream,
                                      int persist = 0, bool fit = false, const MoeTileCombine& combine = {},
                                      const MoeTmaTuning& tune = {}, bool out16 = false);
// Both in one launch (MoePlan::wgmma_fused): act [P, I] = gate+up's tiles of xg [P, H], then out16
// [P, H] bf16 = down's tiles of act — the persistent tiles drawn in turn from g.tile_counters, gate+up's
// (four consumer warpgroups, 128 features a tile) all before down's (four, 256 features), a down tile's
// act boxes issued once its item's gate+up tiles have each counted on g.item_done (zeroed by the
// grouping). tile_rows 32, 48 or 64; persist as launch_moe_wgmma_tma_gate_up's (≥ 1); tune.l2_first
// and tune.fused_warp alone are read. The same act and out16 bits as the two launches.
cudaError_t launch_moe_wgmma_tma_fused(void* out16, void* act, const void* xg, int64_t P, const MoePackedExperts& w,
                                       const MoeGrouping& g, int tile_rows, cudaStream_t stream, int persist = 1,
                                       const MoeTmaTuning& tune = {});
// The mid kernels (fast_moe_mid.cu): g built with tile_rows kMoeMidRows (the kernels take an
// item's first 8 rows only). Each stages its item's B rows (K columns) in shared memory:
// moe_mid_*_smem of at most kMoeMidMaxSmem bytes. Both by programmatic dependent launch (the
// grouping must be complete before the kernel ahead of them started: pdl.cuh).
constexpr int64_t kMoeMidMaxSmem = 96 * 1024;
size_t moe_mid_gate_up_smem(int64_t H);
size_t moe_mid_down_smem(int64_t I);
inline bool moe_mid_fits(int64_t H, int64_t I) {
    return moe_mid_gate_up_smem(H) <= size_t(kMoeMidMaxSmem) && moe_mid_down_smem(I) <= size_t(kMoeMidMaxSmem);
}
// act [T·k, I] bf16 (the gather's column order, as launch_moe_gather_bf16_perm's xg [T·k, H]) =
// silu(xg·gate_eᵀ) ⊙ (xg·up_eᵀ) per item. ring: k-tiles a warp in flight, 3, 4 or 0 (MoePlan::mid_ring).
// row_tiles: a warp's row tiles, 1 or 2 (MoePlan::mid_gate_up_tiles, resolved).
cudaError_t launch_moe_mid_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g, int ring,
                                   int row_tiles, cudaStream_t stream);
// out [T·k, H] f32 = act·down_eᵀ per item.
// row_tiles: a warp's row tiles, 2 or 4 (MoePlan::mid_down_tiles, resolved).
cudaError_t launch_moe_mid_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g, int ring,
                                int row_tiles, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
