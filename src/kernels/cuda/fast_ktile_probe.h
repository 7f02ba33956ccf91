// Benchmark probe of the MoE prefill tiles' consumer loop (fast_moe_tma_tile.cuh): the k-tile
// of gate+up — a warpgroup's 64 weight rows dequantized from Int4 codes into wgmma's A registers,
// m64nBNk16 bf16 against BN activation rows (its B) in shared memory — run over and over on one
// stage set in shared memory, with no producer, no barriers and no global loads; then behind the
// tiles' own ring (a producer, mbarriers, the stages copied in from L2 or streamed from DRAM, an
// epilogue a tile). What it answers: how fast the loop itself goes with the memory system out of
// the way, which part of it holds it — the dequantization alone, the wgmma alone, both as the tiles
// run them, both with deeper register pipelines — and what the ring, the stream and the epilogues
// add. Not used by the engine; bench/fast_ktile_probe.cpp times it, tests/cuda/test_fast_ktile_probe.cpp
// holds its forms to a host model and to the production loop's bits.
#pragma once
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

enum class KtileProbeForm {
    Tiles,    // the production k-tile (wgmma_int4_ktile_staged): two register sets, one group in flight
    Dequant,  // the dequantization alone (codes and scales read, A made and summed — acc[0]'s bits — no wgmma)
    Mma,      // the wgmma alone (A made once; the same fences, groups and waits)
    Sets2,    // the loop a half k-tile at a time over 2 register sets (one group in flight): Tiles' bits
    Sets3,    // ... over 3 sets, two groups in flight
    Sets4,    // ... over 4 sets, three groups in flight
    Words2,   // groups of one code word (two k-steps) over 2 register sets of 8, one group in flight
    Words4,   // ... over 4 sets (a k-tile's words: the same 32 registers as Tiles), three in flight
    // Tiles behind the tiles' ring: a producer warpgroup (one lane issuing), full / empty mbarriers,
    // each k-tile's stage copied in by the bulk-copy engine — the activation rows from one stage image
    // (L2-hot, as an item's rows are for its feature blocks), the codes and scales from it too (RingL2: the
    // ring's own cost) or from a buffer larger than L2 streamed from DRAM (RingDram, as the experts'
    // weights are: KtileProbeArgs::weights). Two blocks an SM only.
    RingL2,
    RingDram,
    // Tiles with a leaner dequantization: w = code·s in one bf16x2 FMA a pair (0x4300 | code is 128 +
    // code; + (−128·s), exact, then one rounding) where the tiles spend two on (code − 8)·s — 11
    // instructions a word of 8 codes against 15 — and the offset −8·s of each (row, group) added by
    // one more wgmma every 4 k-tiles (A: the 16 groups' −8·s of a lane's rows, B: 16 rows of k — in
    // the real tiles the groups' activation sums, here the stage's first k-step). Not the tiles'
    // bits (a weight rounded as code·s, not (code − 8)·s): what the 4 FMAs a word would save.
    // iters: a multiple of 4.
    Lean,
    LeanDequant,  // Dequant with Lean's dequantization (and its −8·s pairs): the dequantization alone
    // Which work overlaps the wgmma (A from registers) at all: Mma's loop with Dequant's work beside
    // it, independent of it (its words summed, not fed to the wgmma) — and that work's arithmetic as
    // integer operations (each pair's two bf16x2 FMA as a LOP3 and an IADD3) or as f32 FFMA, alone and
    // beside Mma's loop. acc[0]'s bits: Mma's XOR the words' sum (mod 2^32).
    MmaDequant,
    IntOps,
    MmaIntOps,
    FloatOps,
    MmaFloatOps,
};
const char* ktile_probe_form_name(KtileProbeForm f);

struct KtileProbeArgs {
    int bn = 48;             // wgmma's N: 16, 32, 48 or 64 activation rows
    int blocks_per_sm = 2;   // 2 (4 stages a block, as the tiles) or 3 (3 stages)
    KtileProbeForm form = KtileProbeForm::Tiles;
    int iters = 93;          // k-tiles a warpgroup (two warpgroups a block); Sets3: a multiple of 3, Sets4 of 2
    int blocks = 0;          // the grid; 0: blocks_per_sm a multiprocessor
    // RingDram: weight_stages stages' codes and scales (ktile_probe_weight_bytes each, valid like the
    // stage's); k-tile u of block b reads stage (b · iters + u) mod weight_stages.
    const void* weights = nullptr;
    int64_t weight_stages = 0;
    // RingDram: the activation rows from act_stages copies of the stage's (its first
    // ktile_probe_act_bytes) rather than the one image — distinct lines across L2, as an item's rows
    // are (a prefill's activations, ~16 MB at 512 tokens, stay in L2); k-tile u of block b reads copy
    // (b · iters + u) mod act_stages. Null: the image.
    const void* acts = nullptr;
    int64_t act_stages = 0;
    // The ring forms: k-tiles a tile (0: one tile of all iters). After each tile the consumers drain
    // their wgmma, store the accumulators and start again from zero — the tiles' epilogue, while the
    // producer's copies run on (a persistent block's walk); out holds the last tile's sums.
    int tile_ktiles = 0;
};

// Bytes of one stage (activations, codes, scales) as the tiles lay it out for `bn`; 0 if bn is
// not one the probe is built for.
int64_t ktile_probe_stage_bytes(int bn);
// The codes and scales of a stage (its bytes past the activation rows): what RingDram streams a k-tile.
int64_t ktile_probe_weight_bytes(int bn);
// The activation rows of a stage (its first bytes): what RingDram reads a k-tile from `acts`.
int64_t ktile_probe_act_bytes(int bn);
// One stage as the tiles stage it, made from `seed`: activations as bf16 in [-1, 1), random codes,
// f16 scales in [0.005, 0.02) (finite: the products stay finite over any number of k-tiles); empty
// for a bn ktile_probe_stage_bytes refuses.
std::vector<uint8_t> ktile_probe_make_stage(int bn, uint32_t seed);
// Accumulators a launch writes: blocks · 256 threads · bn / 2 floats, thread t's accumulator i of
// block b at (b · bn / 2 + i) · 256 + t (a warp's stores coalesced: the ring forms store each tile's).
int64_t ktile_probe_out_floats(const KtileProbeArgs& a);
// stage: ktile_probe_stage_bytes(bn) device bytes, copied into every stage of each block (its
// scales must be finite f16); out: ktile_probe_out_floats floats.
cudaError_t launch_ktile_probe(const KtileProbeArgs& a, const void* stage, float* out, cudaStream_t stream);

}  // namespace tessera::cuda::fast
