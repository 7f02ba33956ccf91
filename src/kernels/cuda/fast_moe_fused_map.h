// The fused decode kernel's index maps (fast_moe_fused.cu), host and device: which tiles a block's
// stage holds and where in the experts' stacked 16-row tiles they come from, which (row tile,
// k-tile) a pair of a stage is, and where a lane reads its rows of a staged pair. One definition
// for the kernel and for the host test that checks them against PackedLayout
// (tests/cuda/test_fast_moe.cpp, FastMoe.FusedStagesReadEveryWeightOnce).
#pragma once
#include <cstdint>

#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

// Stage s of a block's stream: row tiles [r0, r0 + nr) of the block's own (block-local) × k-tiles
// [k0, k0 + nk) of matrix mat (0 gate, 1 up, 2 down); contiguous in the stacked tiles (nr = 1, or
// nk = all of the row's k-tiles). Gate+up first, row tile by row tile — gate's k-ranges in order,
// then up's, so a row tile's sums are whole after its up stage with k0 + nk = nkt_h — then down.
struct MoeFusedStage {
    int mat, r0, nr, k0, nk;
};
TS_PACKED_HD MoeFusedStage moe_fused_stage(const MoeFusedShape& f, int s) {
    auto div = [](int a, int b) { return int(unsigned(a) / unsigned(b)); };  // (both ≥ 0)
    auto lo = [](int a, int b) { return a < b ? a : b; };
    if (s < f.stages_gu) {
        const int nkr = div(f.stages_gu, 2 * f.rt_gu);  // k-ranges of a row tile of one matrix
        const int rt = div(s, 2 * nkr), rem = s - rt * 2 * nkr, mat = rem >= nkr, kr = rem - mat * nkr;
        return {mat, rt, 1, kr * f.nk_gu, lo(f.nk_gu, f.nkt_h - kr * f.nk_gu)};
    }
    s -= f.stages_gu;
    if (f.nk_d == f.nkt_i) {  // whole rows: nr_d row tiles a stage
        const int r0 = s * f.nr_d;
        return {2, r0, lo(f.nr_d, f.rt_d - r0), 0, f.nkt_i};
    }
    const int nkr = div(f.nkt_i + f.nk_d - 1, f.nk_d), rt = div(s, nkr), kr = s - rt * nkr;
    return {2, rt, 1, kr * f.nk_d, lo(f.nk_d, f.nkt_i - kr * f.nk_d)};
}

// Where stage r of block `rank` comes from: `code` bytes from its expert's first code byte and
// `scale` halves from its first scale (bias) half, code_bytes and scale_halves of them, each one
// contiguous run. lg = log2(G / 32).
struct MoeFusedSource {
    int64_t code, scale;
    uint32_t code_bytes, scale_halves;
};
TS_PACKED_HD MoeFusedSource moe_fused_source(const MoeFusedShape& f, const MoeFusedStage& r, int H, int I, int lg,
                                             int rank) {
    const int K = r.mat < 2 ? H : I, step = 16 * (4 >> lg);  // halves of scales a (row tile, k-tile)
    const int64_t R = int64_t(rank) * (r.mat < 2 ? f.rt_gu : f.rt_d) + r.r0;  // the expert's row tile
    const uint32_t pairs = uint32_t(r.nr * r.nk);
    return {R * (8 * int64_t(K)) + int64_t(r.k0) * 1024, R * (16 * int64_t(K >> (5 + lg))) + int64_t(r.k0) * step,
            pairs * 1024u, pairs * uint32_t(step)};
}

// Pair p of stage r (p = rl·nk + kk; its 1 KB of codes at p·1024, its scales at p·16·(4 >> lg)
// halves): block-local row tile r0 + rl and k-tile kt = k0 + kk.
TS_PACKED_HD void moe_fused_pair(const MoeFusedStage& r, int p, int& row_tile, int& kt) {
    const int rl = int(unsigned(p) / unsigned(r.nk));
    row_tile = r.r0 + rl;
    kt = r.k0 + p - rl * r.nk;
}

// Lane (g, t)'s offsets in a staged pair: chunk t (32 columns) of rows g and g + 8 — code bytes
// (row g + 8's 512 on), scale halves of both rows' group, and the chunk's first column in a k-tile.
// A warp's 16-byte reads of a pair are contiguous (fast_gemv_bulk.cu's lane map).
struct MoeFusedLane {
    int code, scale0, scale1, xcol;
};
TS_PACKED_HD MoeFusedLane moe_fused_lane(int lane, int lg) {
    const int g = lane >> 2, t = lane & 3, gpt = 4 >> lg;
    return {16 * lane, g * gpt + (t >> lg), (g + 8) * gpt + (t >> lg), 32 * t};
}

}  // namespace tessera::cuda::fast
