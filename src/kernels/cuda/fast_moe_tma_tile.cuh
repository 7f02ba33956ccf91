// The fast MoE's large tiles, warp-specialised (prefill; MoePlan::wgmma_tma): fast_moe_wgmma.cu's
// work items and arithmetic — per item (≤ BT grouped rows of one expert) a block computes 64
// features of gate and up or 128 of down, wgmma.mma_async m64nBTk16 bf16 → f32 with the expert's
// Int4 rows dequantized into the A registers and the item's activation rows as B — with the copies
// moved off the consumers' path. One producer warp fills a ring of STAGES k-tiles by TMA, a few
// boxes a k-tile (MoeTmaMaps): A's item rows (rounded up to 8) a k-block in the 128-byte swizzle,
// and per matrix the block's 4 or 8 row tiles' codes (1 KB a tile and k-tile in packed_weight.h's
// 16-row tiles) and scales (biases) — one stack a matrix (MoeTiling), so one tensor map describes
// every expert. Full / empty mbarriers instead of a block barrier a k-tile; the consumers read
// codes and scales from shared memory: no address math or global loads in their loop (~208
// instructions a k-tile, 120 of them the dequantization, against fast_moe_wgmma.cu's ~276).
// Session 33: small copies do not pay — boxes of 8 rows for A and a bulk copy a weight tile (26 a
// k-tile) ran slower than the plain kernel (182 against 142 µs for gate+up at 512 tokens of
// llama.cpp's shape); whole boxes (6 a k-tile) 120.
//
// Gate+up without an exchange: warp w of warpgroup c holds A rows g (gate) and g + 8 (up) of the
// same feature n0 + 32c + 8w + g, so one thread has both of a feature's values for its tokens and
// applies SwiGLU in registers (fast_moe_wgmma.cu passes up's accumulators through shared memory).
// The A rows of a warpgroup are any 64 weight rows: D's rows follow them, columns never mix.
//
// CL = 2: clusters of two feature blocks of one item, each loading one k-block of A into both
// (multicast), the slots freed by both blocks' consumers — measured slower (session 33), kept opt-in.
//
// GATHER (gate+up, CL = 1; MoePlan::wgmma_gather): A's rows straight from x in bf16 [T, K] (the
// wgmma order, one row a token: 2 bytes a value where the gathered copy took P = T·k rows of them)
// by cp.async — two producer warps, a lane a 16-byte chunk of an item row's k-tile, written where
// the 128-byte swizzle puts it; each lane's copies of a stage awaited one stage behind, fenced to
// the async proxy (wgmma reads B through it) and counted on the stage's full barrier. Rows past
// the item's are not copied: their columns of B hold whatever the slot held, and D's columns of
// them are dropped. The same bits (the same bf16 values in the same places).
//
// Needs the experts stacked in tiles (H and I multiples of 128: no k tail). Rows past the item's
// (up to 7 of the next item's, zeros past the grouped rows) and weight rows past the expert's
// (the next expert's, zeros past the stack) are loaded and their outputs dropped: B's columns and
// A's rows never mix (act's positions N … N128 written as zeros). Same bits as fast_moe_wgmma.cu's
// tiles of the same BT: the same wgmma in the same order on the same operands (bias −8·s folded
// into the scale's FMA is exact).
//
// This header: the kernel and its forms (MoeTmaTile); fast_moe_wgmma_tma.cu builds their tensor maps
// and grids and launches them. Included by fast_moe_wgmma_tma.cu only.
#pragma once
#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_tile_combine.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"
#include "kernels/cuda/fast_wgmma_int4.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kBK = kWgmmaK;  // columns a k-tile

template <int BT_, bool GATE_UP_, int STAGES_, int CL_, int MT_ = 1, bool GATHER_ = false, bool PERSIST_ = false,
          int FIT_ = 0, int CW_ = 2, bool DYN_ = false, int FUSED_ = 0>
struct MoeTmaTile {
    static constexpr int BT = BT_;              // item rows a block: wgmma's N
    static constexpr int CL = CL_;              // blocks a cluster (along the features) sharing the boxes of A
    static constexpr int MT = MT_;              // m64 tiles a warpgroup: the block's features × MT, A read once for them
    static constexpr bool kGateUp = GATE_UP_;   // gate and up (SwiGLU epilogue), else down
    static constexpr bool kGather = GATHER_;    // A's rows gathered from x by cp.async (warps 10, 11)
    static constexpr bool kPersist = PERSIST_;  // a grid of resident blocks taking the tiles in turn
    static constexpr bool kFit = FIT_ == 1;     // wgmma's N BT / 2 for items of at most BT / 2 rows
    // wgmma's N an item's rows rounded up to 8, at least 16 (32 at tiles of 64): one k-loop, each
    // half k-tile's wgmma issued in the branch of its N (wgmma_int4_ktile_fit; MoeTmaTuning::fit8:
    // one m-tile, unclustered, by TMA).
    static constexpr bool kFit8 = FIT_ == 2;
    // Consumer warpgroups a block: 2, or 4 (one m-tile: gate+up's 128 features or down's 256 a block
    // sharing each stage's activation rows — half the rows' bytes from L2 a weight byte — one block an
    // SM; down only in the fused launch).
    static constexpr int CW = CW_;
    // Persistent tiles drawn in turn from MoeGrouping::tile_counters by the producer, each tile's
    // index in stage_tile beside its first stage (MoeTmaTuning::dynamic).
    static constexpr bool kDyn = DYN_;
    // Gate+up's tiles and then down's in one launch (MoePlan::wgmma_fused; FUSED_ 1 or 2): the drawn tiles
    // past gate+up's are down's (in four warpgroups too: 256 features a tile, the same stage layout), each
    // down tile's activation boxes issued once its item's gate+up tiles have all raised
    // MoeGrouping::item_done — each raise, FUSED_ 1, by the consumers' thread 0 after their named barrier;
    // 2 (MoePlan::wgmma_fused_warp), by warp 1 of the producer warpgroup once every consumer warp has
    // arrived on its mbarrier.
    static constexpr bool kFused = FUSED_ > 0;
    static constexpr bool kFusedWarp = FUSED_ == 2;
    template <bool GU>
    static constexpr int kBm = (GU ? 64 : 128) * MT_ * CW_ / 2;  // output features a tile of gate+up or down
    static constexpr int kGatherThreads = 64;
    static constexpr int BM = kBm<kGateUp>;  // output features a block
    static constexpr int STAGES = STAGES_;
    static constexpr int kConsumers = 128 * CW;
    static constexpr int kThreads = kConsumers + 128;  // + the producer's warpgroup (one warp issues)
    // Up to 32 accumulators a consumer thread (MT · BT / 2): two blocks an SM, ≤ 80 registers at
    // launch; more (BT 128, or two m-tiles of 64): one block an SM, 168 at launch, 232 consumers.
    // The producers' 32 at two blocks an SM cost the consumers nothing (104 either way: setmaxnreg
    // counts in 8s); at 24 the persistent forms' tile walk spilled up to 68 bytes (session 42).
    // Four consumer warpgroups: one block an SM, 96 registers at launch, 112 a consumer — 104 in the
    // fused launch's tiles of 64, whose producer (both phases' boxes) spilled 20 bytes at 32 and none at
    // 40 (its tiles of 48 spill 44 bytes at 104 a consumer, none at 112: ptxas -v, session 65).
    static constexpr bool kWideProducer = kFused && BT_ == 64;
    static constexpr int kBlocksPerSm = CW == 2 && MT * BT / 2 <= 32 ? 2 : 1;
    static constexpr int kLaunchRegs = 65536 / (kThreads * kBlocksPerSm) / 8 * 8;  // 80, 168 (96)
    static constexpr int kProducerRegs = (kBlocksPerSm == 1 && CW == 2) || kWideProducer ? 40 : 32;
    static constexpr int kConsumerRegs = CW == 4 ? (kWideProducer ? 104 : 112) : kBlocksPerSm == 1 ? 232 : 104;
    // The k-tile's wgmma in groups of a code word an m-tile (wgmma_int4_ktile_words): for two
    // m-tiles of gate+up at 32 rows, where groups of half a k-tile left ptxas short of registers at
    // 104 a consumer and it serialized the wgmma (C7512; sass_local.sh, session 42).
    static constexpr bool kWordGroups = kGateUp && MT == 2 && BT == 32;
    static constexpr int kTiles = 8 * MT * CW / 2;  // 16-row weight tiles a stage (gate BM / 16 + up's, or down's)
    static constexpr int kXBytes = 2 * BT * 128;  // two k-blocks of BT rows × 128 bytes
    static constexpr int kWOff = kXBytes, kWBytes = kTiles * 1024;
    // Scales (biases): ≤ 128 bytes a tile (16 rows × 4 groups); gate+up: up's box 512·MT bytes on.
    static constexpr int kSOff = kWOff + kWBytes, kBOff = kSOff + kTiles * 128;
    static constexpr int kStageBytes = (kBOff + kTiles * 128 + 1023) / 1024 * 1024;
    static constexpr int kSmem = STAGES * kStageBytes + 1024;
    static_assert(BT % 8 == 0 && BT <= 128 && (CL == 1 || CL == 2), "BT, roles");
    static_assert(CW == 2 || (CW == 4 && MT == 1 && CL == 1 && !kGather && !kFit),
                  "four consumer warpgroups: one m-tile, without clusters, the gathered A or fitted N");
    static_assert(MT * BT / 2 <= 64 && (MT == 1 || MT == 2), "MT accumulators of BT / 2 a thread");
    static_assert(!kGather || (kGateUp && CL == 1), "the gathered A: gate+up, one block a cluster");
    static_assert(!kPersist || (CL == 1 && !kGather), "persistent: one block a cluster, A's rows by TMA");
    static_assert(!kFit || (BT <= 64 && !kPersist), "fitted N: up to 64; not persistent (ptxas serializes the wgmma)");
    static_assert(!kFit8 || (BT >= 32 && BT <= 64 && (MT == 1 || BT == 32) && CL == 1 && !kGather),
                  "N in steps of 8: tiles of 32 to 64 rows in one m-tile (or two of 32), unclustered, by TMA");
    static_assert(!kDyn || (kPersist && MT == 1 && !kFit), "drawn in turn: the persistent tiles of one m-tile");
    static_assert(FUSED_ >= 0 && FUSED_ <= 2, "FUSED_: 0, 1 or 2");
    static_assert(!kFused || (kGateUp && kDyn && kFit8 && CW == 4 && BT <= 64),
                  "fused: gate+up's drawn tiles in four warpgroups with N in steps of 8, up to 64 rows");
    static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumers <= kLaunchRegs * kThreads,
                  "setmaxnreg moves registers only");
    static_assert(kBlocksPerSm * (kSmem + 1024) <= 228 * 1024, "the blocks an SM");
};

// silu(g) · u as the old kernel computes it (the same bits).
__device__ __forceinline__ float swiglu(float g, float u) { return g / (1.f + expf(-g)) * u; }

// The tensor maps of a launch. x[i]: A [P rows, K128] bf16 in the wgmma order as 3-D (64 columns,
// K128 / 64 k-blocks, P rows), boxes of 64 × 1 × 8(i + 1) rows in the 128-byte swizzle (the
// item's rows, rounded up to 8). codes / scales / biases [lo, hi] (gate, up; or down): a stack's
// row tiles as rows — codes K 8-byte words a row tile (its k-tiles' 1 KB one after another), scales
// 16·K/G halves; boxes of a k-tile × the block's row tiles (4 a matrix for gate+up, 8 for down).
// l2_first (MoeTmaTuning's): 1 the codes', scales' and biases' boxes under L2's evict-first policy (each byte is
// read once a step; A's rows, read by every feature block of an item, keep the normal policy); 2 as
// 1 with A's boxes under the evict-last policy (no clusters); 3 as 1 for the tiles of an expert's
// last item only (its other items read the same weights). The fused launch (MoeTmaTile::kFused): x[0 …]
// gate+up's A (xg), x[8 …] down's (act); codes / scales / biases [2] down's.
struct MoeTmaMaps {
    CUtensorMap x[16];
    CUtensorMap codes[3], scales[3], biases[3];
    int l2_first = 0;
    bool out16 = false;  // down: out [P, N] in bf16 (MoePlan::wgmma_out16)
};

// Per matrix: groups a k-tile and row of a tile (128 / G), and whether it has biases.
struct MoeTmaMatrix {
    int gpt = 4;
    bool biases = false;
};

// The fused launch's down (MoeTmaTile::kFused): K = I, N = H, its matrix, feature blocks an item.
struct MoeTmaDown {
    int64_t K = 0, N = 0;
    MoeTmaMatrix m;
    int fbs = 0;
};
constexpr int kItemBar = 3;  // named barrier of the fused launch's consumer threads (a gate+up tile's end; FUSED 1)

// A fused launch's down tile (its producer's activation lanes): waits until item_done[item] reaches
// `want` — every gate+up tile of the item has stored its act columns and counted (flag_add_release)
// — then orders the async proxy's reads of them (the boxes) after it. Every gate+up tile is drawn
// before any down tile and waits on nothing, so the count comes within a few tiles' time; a wait of
// kItemWatchNs (a broken grouping) traps (the launch fails) rather than hang the GPU or read what is
// there. (No printf on the way: its call made ptxas keep a stack frame and spill the producer.)
constexpr uint64_t kItemWatchNs = 4'000'000'000ull;
__device__ __forceinline__ void wait_item(const uint32_t* done, int item, uint32_t want) {
    if (flag_acquire(done + item) < want) {
        const uint64_t t0 = global_ns();
        while (flag_acquire(done + item) < want) {
            if (global_ns() - t0 > kItemWatchNs) __trap();
            __nanosleep(64);
        }
    }
    fence_proxy_async_global();
}

// The fused launch's counting warp (MoeTmaTile::kFusedWarp; one lane): the n-th gate+up tile the block's
// consumers hand over — its item in slot n % 2 of `item`, full once every consumer warp has arrived on
// full[n % 2] (each warp's stores before its arrival: __syncwarp and the arrival's release) — counted on
// done[item] (the wait's acquire, a fence, the release), the slot freed on empty[n % 2] once read; item
// -1 ends it. (Its branch in the producer warpgroup's 32 registers costs the issuing lane 16 bytes of
// spills, stored once and loaded once a tile outside the k-tiles' loop — ptxas -v, nvdisasm, session 67:
// the same where and however the branch is written, inlined or called.)
__device__ __forceinline__ void count_items(uint64_t* full, uint64_t* empty, const int* item, uint32_t* done) {
    for (uint32_t n = 0;; ++n) {
        mbar_wait(&full[n % 2], (n / 2) & 1);
        const int it = item[n % 2];
        mbar_arrive(&empty[n % 2]);  // (the item read: the slot may take tile n + 2's)
        if (it < 0) return;
        __threadfence();
        flag_add_release(done + it, 1u);
    }
}

// m0 / m1: gate / up (kGateUp) or down / unused, device [E] (the epilogue's N and the experts'
// stacks: E·N / 16 row tiles).
// GATHER: xrows [T, K] bf16 in the wgmma order, k the slots a token (row r's token: perm[r] / k).
// The block's tiles — (item, feature block) pairs: one, (blockIdx.x, blockIdx.y), or, kPersist,
// tiles blockIdx.x, + gridDim.x, … of the n_items · fbs in item-major order (fbs feature blocks an
// item), the ring's stages and phases running on from tile to tile: the producer streams the next
// tile's k-tiles while the consumers finish the last one's epilogue, and a block's start (its ring
// filled from DRAM before the first wgmma) is paid once, not once a tile — at K = 768 (down on
// llama.cpp's shape) a tile is 6 k-tiles.
template <class C>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSm)
    moe_wgmma_tma_kernel(const __grid_constant__ MoeTmaMaps maps, int64_t K, int64_t N, int E, MoeTmaMatrix lo,
                         MoeTmaMatrix hi, MoeGrouping g, uint16_t* __restrict__ act, float* __restrict__ out,
                         const uint16_t* __restrict__ xrows, int k, int fbs, const MoeTileCombine cb,
                         const MoeTmaDown dn) {
    constexpr int BT = C::BT, S = C::STAGES, CL = C::CL, MT = C::MT, CW = C::CW;
    constexpr int kTilesHi = 4 * MT * CW / 2;  // row tiles a box: gate's or up's (down's: twice, one matrix)
    pdl::wait();  // launched with PDL (pdl.cuh): the grouping and A come from the kernels before
    pdl::trigger();
    const int n_items = *g.n_items;
    if constexpr (!C::kGateUp) {
        if (cb.y)  // tokens with no valid slot: NaN rows (no tile sums them), over the whole grid
            combine_orphans(cb, g.row_of_slot, N, int(blockIdx.y * gridDim.x + blockIdx.x),
                            int(gridDim.x * gridDim.y), int(threadIdx.x), C::kThreads);
    }
    if constexpr (!C::kPersist) {  // (a cluster's blocks share blockIdx.x: they leave together)
        if (int(blockIdx.x) >= n_items) return;
        const int e = g.item_expert[blockIdx.x];
        if (e < 0 || e >= E) return;  // items name valid experts only
    }
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
    __shared__ uint64_t full[S], empty[S];
    __shared__ int token[C::kGather ? BT : 1];  // GATHER: the item rows' tokens (-1 past the item)
    __shared__ int comb_list[C::kGateUp ? 1 : BT + 1];  // down with cb.y: the tokens a tile sums, then their count
    __shared__ int stage_tile[C::kDyn ? S : 1];  // kDyn: the tile whose first k-tile a stage holds (-1: none left)
    // kFusedWarp: a two-slot ring from the consumers to the counting warp — the n-th gate+up tile's item
    // (-1: the consumers are done) in slot n % 2, full once every consumer warp has arrived, empty once the
    // counting warp has read it
    constexpr int kRel = C::kFusedWarp ? 2 : 1;
    __shared__ uint64_t rel_full[kRel], rel_empty[kRel];
    __shared__ int rel_item[kRel];
    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, wg = warp / 4;
    const int KT = int(K / kBK);  // (gate+up's in the fused launch)
    const uint32_t rank = CL > 1 ? cluster_rank() : 0;  // the cluster's blocks share blockIdx.x: one item
    if (tid == 0) {
        for (int s = 0; s < S; ++s) {
            mbar_init(&full[s], 1 + (C::kGather ? C::kGatherThreads : 0));  // expect_tx (+ the gathering lanes)
            mbar_init(&empty[s], 4 * CW * CL);  // each consumer warp of the cluster, once its wgmma read the slot
        }
        if constexpr (C::kFusedWarp) {
            for (int s = 0; s < kRel; ++s) {
                mbar_init(&rel_full[s], 4 * CW);  // each consumer warp, once its act stores are fenced
                mbar_init(&rel_empty[s], 1);      // the counting warp, once it has read the item
            }
        }
    }
    if constexpr (CL > 1) cluster_barrier();  // every block's barriers ready before a box lands there
    else __syncthreads();

    // The block's tiles in turn (each thread walks the same sequence): next_tile() the next one's
    // index, or -1 past the last; tile_at(i) its expert, first grouped row, rows and first feature —
    // read again where needed rather than kept live across the k-tiles (the consumers' registers
    // hold the accumulators). Persistent: tiles of an invalid expert are skipped (items name valid
    // ones).
    struct Tile {
        int e, r0, n_rows;
        int64_t n0;
    };
    // kFused: tiles n_first … n_tiles − 1 are down's, item-major after gate+up's (drawn after every one of them)
    const int n_first = n_items * fbs, n_tiles = n_first + (C::kFused ? n_items * dn.fbs : 0);
    auto is_down = [&](int i) { return C::kFused && i >= n_first; };
    // f(phase, i) for tile i: down's (std::false_type) past gate+up's in the fused launch, else C's own
    auto by_phase = [&](auto&& f, int i) {
        if constexpr (C::kFused) {
            if (is_down(i)) return f(std::false_type{}, i);
        }
        return f(std::bool_constant<C::kGateUp>{}, i);
    };
    int walk = C::kPersist ? int(blockIdx.x) : 0;
    auto next_tile = [&]() -> int {
        if constexpr (C::kPersist) {
            for (; walk < n_items * fbs; walk += int(gridDim.x)) {
                const int e = g.item_expert[walk / fbs];
                if (e < 0 || e >= E) continue;
                const int i = walk;
                walk += int(gridDim.x);
                return i;
            }
            return -1;
        } else {
            return walk++ ? -1 : 0;
        }
    };
    auto item_of = [&](int i) {
        if (!C::kPersist) return int(blockIdx.x);
        return is_down(i) ? (i - n_first) / dn.fbs : i / fbs;
    };
    auto tile_at = [&](int i) {
        const int item = item_of(i);
        const int f = !C::kPersist ? int(blockIdx.y) : is_down(i) ? i - n_first - item * dn.fbs : i - item * fbs;
        const int64_t n0 = int64_t(f) * (is_down(i) ? C::template kBm<false> : C::BM);
        return Tile{g.item_expert[item], g.item_row0[item], g.item_rows[item], n0};
    };

    if (wg == CW) {
        // ---- producer: warp 4·CW; lane h < 2 the activations' k-block h (block h % CL of a cluster,
        // into every block), lanes 2 + m codes, 4 + m scales, 6 + m biases of matrix m (lo, hi) ----
        setmaxnreg_dec<C::kProducerRegs>();
        if constexpr (C::kGather) {
            if (warp >= 4 * CW + 2) {  // ---- A's rows: lane p a 16-byte chunk (k-block c16 / 8) of rows p / 16 + 4j
                const Tile tl = tile_at(next_tile());  // (not persistent: the block's one tile)
                const int p = tid - C::kConsumers - 64, c16 = p & 15, h = c16 >> 3, c = c16 & 7;
                for (int q = p; q < BT; q += C::kGatherThreads) token[q] = q < tl.n_rows ? g.perm[tl.r0 + q] / k : -1;
                named_barrier_sync(1, C::kGatherThreads);
                const uint32_t base = smem_addr(smem) + uint32_t(h * BT * 128);  // k-block h of a stage
                const uint16_t* src = xrows + h * 64 + c * 8;
                for (int kt = 0; kt < KT; ++kt) {
                    const int slot = kt % S;
                    mbar_wait(&empty[slot], ((uint32_t(kt / S)) & 1) ^ 1);  // k-tile kt − S's wgmma are done
                    const uint32_t to = base + uint32_t(slot * C::kStageBytes);
#pragma unroll 4
                    for (int r = p >> 4; r < BT; r += 4) {
                        const int t = token[r];  // row r's 128 bytes of k-block h: chunk c at c ^ (r mod 8)
                        if (t >= 0)
                            cp_async16(to + uint32_t(r * 128 + ((c ^ (r & 7)) << 4)), src + int64_t(t) * K + kt * kBK,
                                       true);
                    }
                    cp_async_commit();
                    if (kt > 0) {  // this lane's copies of k-tile kt − 1 landed: to the async proxy, counted
                        cp_async_wait<1>();
                        fence_proxy_async_smem();
                        mbar_arrive(&full[(kt - 1) % S]);
                    }
                }
                cp_async_wait<0>();
                fence_proxy_async_smem();
                mbar_arrive(&full[(KT - 1) % S]);
            }
        }
        if (warp != 4 * CW || lane >= 8) {
            // kFusedWarp: warp 4·CW + 1 counts the consumers' gate+up tiles on their items (count_items)
            if constexpr (C::kFusedWarp) {
                if (warp == 4 * CW + 1 && lane == 0) count_items(rel_full, rel_empty, rel_item, g.item_done);
            }
            return;
        }
        // kDyn: lane 0 draws the tiles in turn (an invalid expert's skipped) when the ring has room for
        // the next one; each block's one draw past the last counts the block out, and the grid's last
        // to count out zeroes both counters for the next launch (every draw precedes its block's count).
        auto take = [&]() -> int {
            if constexpr (C::kDyn) {
                int i = -1;
                if (lane == 0) {
                    for (int t; (t = int(atomicAdd(g.tile_counters, 1u))) < n_tiles;) {
                        const int e = g.item_expert[item_of(t)];
                        if (e >= 0 && e < E) {
                            i = t;
                            break;
                        }
                    }
                    if (i < 0) {
                        __threadfence();
                        if (atomicAdd(g.tile_counters + 1, 1u) == gridDim.x - 1) {
                            __threadfence();  // (after every block's count, so after every draw)
                            atomicExch(g.tile_counters, 0u);
                            atomicExch(g.tile_counters + 1, 0u);
                            if constexpr (C::kFused)  // (every count on them came before the draws that passed them)
                                for (int q = 0; q < n_items; ++q) g.item_done[q] = 0u;
                        }
                    }
                }
                return __shfl_sync(0xffu, i, 0);
            } else {
                return next_tile();
            }
        };
        const int m = lane & 1, what = lane >> 1;  // what: 0 x, 1 codes, 2 scales, 3 biases
        const uint32_t base = smem_addr(smem);
        uint32_t u = 0;  // k-tiles issued: the ring's slot u % S, its use u / S
        // Tile i's k-tiles as gate+up's (GU) or down's — kFused's down (kDown2): matrix 2 of the maps, A's
        // boxes from act (x[8 …]) once its item's gate+up tiles are all done, its weights at once.
        auto issue = [&](auto gu, int i) {
            constexpr bool GU = decltype(gu)::value, kDown2 = C::kFused && !GU;
            constexpr int kTilesLo = GU ? kTilesHi : 2 * kTilesHi;  // row tiles a box
            const MoeTmaMatrix mat = kDown2 ? dn.m : m ? hi : lo;
            const int tiles = m ? kTilesHi : kTilesLo;
            uint32_t bytes = 0;
            if (what == 1 && (m == 0 || GU)) bytes = uint32_t(tiles) * 1024;
            if (what == 2 && (m == 0 || GU)) bytes = uint32_t(tiles * 32 * mat.gpt);
            if (what == 3 && (m == 0 || GU) && mat.biases) bytes = uint32_t(tiles * 32 * mat.gpt);
            const bool issues = what == 0 ? !C::kGather && m % CL == int(rank) : bytes != 0;
            const uint32_t weight_bytes = __reduce_add_sync(0xffu, bytes);  // a stage's, but A's boxes
            const uint32_t dst = what == 0   ? uint32_t(m * BT * 128)
                                 : what == 1 ? uint32_t(C::kWOff + m * kTilesHi * 1024)
                                 : what == 2 ? uint32_t(C::kSOff + m * kTilesHi * 128)
                                             : uint32_t(C::kBOff + m * kTilesHi * 128);
            const int kstep = what == 1 ? 128 : 16 * mat.gpt;  // elements a k-tile along the map's rows
            const int kts = kDown2 ? int(dn.K / kBK) : KT;
            const Tile tl = tile_at(i);
            const int boxes = min((tl.n_rows + 7) / 8, BT / 8);  // A's box: the item's rows rounded up to 8
            const int item = item_of(i);  // (l2_first 3: evicted first by the expert's last item's tiles)
            const bool evict = maps.l2_first == 1 || maps.l2_first == 2 ||
                               (maps.l2_first == 3 && (item + 1 >= n_items || g.item_expert[item + 1] != tl.e));
            // the block's first row tile in the stack
            const int row_tile = int((int64_t(tl.e) * (kDown2 ? dn.N : N) + tl.n0) >> 4);
            const uint32_t stage_bytes = weight_bytes + (C::kGather ? 0u : uint32_t(2 * boxes * 1024));
            const int mi = kDown2 ? 2 : m;
            const CUtensorMap* map = what == 0   ? &maps.x[(kDown2 ? 8 : 0) + boxes - 1]
                                     : what == 1 ? &maps.codes[mi]
                                     : what == 2 ? &maps.scales[mi]
                                                 : &maps.biases[mi];
            for (int kt = 0; kt < kts; ++kt, ++u) {
                const uint32_t slot = u % S;
                mbar_wait(&empty[slot], ((u / S) & 1) ^ 1);  // k-tile u − S's wgmma are done
                if (lane == 0) {
                    if constexpr (C::kDyn) {
                        if (kt == 0) stage_tile[slot] = i;  // (published by the arrive's release)
                    }
                    mbar_arrive_expect_tx(&full[slot], stage_bytes);
                }
                __syncwarp(0xffu);
                const uint32_t to = base + slot * uint32_t(C::kStageBytes) + dst;
                if (!issues) continue;
                if (what == 0) {
                    if constexpr (kDown2) {
                        if (kt == 0) wait_item(g.item_done, item, uint32_t(fbs));
                    }
                    if constexpr (CL > 1)
                        tma_load_3d_multicast(to, map, 0, 2 * kt + m, tl.r0, &full[slot], uint16_t((1u << CL) - 1));
                    else if (maps.l2_first == 2)
                        tma_load_3d(to, map, 0, 2 * kt + m, tl.r0, &full[slot], l2_evict_last());
                    else
                        tma_load_3d(to, map, 0, 2 * kt + m, tl.r0, &full[slot]);
                } else if (evict) {
                    tma_load_2d(to, map, kt * kstep, row_tile, &full[slot], l2_evict_first());
                } else {
                    tma_load_2d(to, map, kt * kstep, row_tile, &full[slot]);
                }
            }
        };
        for (int i; (i = take()) >= 0;) by_phase(issue, i);
        if constexpr (C::kDyn) {  // the end: a stage of no bytes whose tile is -1
            const uint32_t slot = u % S;
            mbar_wait(&empty[slot], ((u / S) & 1) ^ 1);
            if (lane == 0) {
                stage_tile[slot] = -1;
                mbar_arrive(&full[slot]);
            }
        }
        return;
    }

    // ---- consumers: warpgroup wg, warp w4 of it, lane (gq, tq) ----
    setmaxnreg_inc<C::kConsumerRegs>();
    const int w4 = warp & 3, gq = lane >> 2, tq = lane & 3;
    uint32_t u = 0;  // k-tiles taken, as the producer counts them
    // kFusedWarp: this warp's part of handing the counting warp `item` (-1: the end), the n-th — the warp's
    // stores before lane 0's arrival, which waits first for the slot's last item to have been read
    uint32_t n_handed = 0;
    auto hand_over = [&](int item) {
        __syncwarp();
        if (lane == 0) {
            const uint32_t slot = n_handed % 2;
            mbar_wait(&rel_empty[slot], ((n_handed / 2) & 1) ^ 1);
            if (tid == 0) rel_item[slot] = item;
            mbar_arrive(&rel_full[slot]);
        }
        ++n_handed;
    };
    // kDyn: the tile the next stage begins (its k-loop's own wait on that stage then returns at once)
    auto take = [&]() -> int {
        if constexpr (C::kDyn) {
            mbar_wait(&full[u % S], (u / S) & 1);
            return stage_tile[u % S];
        } else {
            return next_tile();
        }
    };
    // Tile i as gate+up's (GU) or down's — kFused's down (kDown2): its own K, N and matrix.
    auto run = [&](auto gu, int i) {
        constexpr bool GU = decltype(gu)::value, kDown2 = C::kFused && !GU;
        const MoeTmaMatrix lo_ = kDown2 ? dn.m : lo, hi_ = kDown2 ? dn.m : hi;
        const int kts = kDown2 ? int(dn.K / kBK) : KT;
        const int64_t n_out = kDown2 ? dn.N : N;
        // Per m-tile j: rows of the stage's code tiles this lane dequantizes as A rows gq and gq + 8
        // (gate+up: row f of gate's tiles and of up's, which follow; down: rows of its tiles).
        auto feature = [&](int j) {  // of A row gq in m-tile j
            return GU ? wg * 32 * MT + 32 * j + w4 * 8 + gq : wg * 64 * MT + 64 * j + w4 * 16 + gq;
        };
        auto row_hi = [&](int j) { return GU ? 16 * kTilesHi + feature(j) : feature(j) + 8; };
        // This lane's scales in the stage's boxes — gate+up: hi's (up's) box 128·kTilesHi bytes on.
        auto scale_hi = [&](int j) {
            return GU ? 128 * kTilesHi + staged_scale_at(feature(j), tq, hi_.gpt)
                      : staged_scale_at(row_hi(j), tq, lo_.gpt);
        };
        const bool bias_lo = lo_.biases, bias_hi = GU ? hi_.biases : lo_.biases;

        float acc[MT][BT / 2];
#pragma unroll
        for (int j = 0; j < MT; ++j) {
#pragma unroll
            for (int i = 0; i < BT / 2; ++i) acc[j][i] = 0.f;
            wgmma_fence_operands(acc[j]);  // zeroed before the first wgmma, not between two (ptxas serializes)
        }

        // The tile's k-tiles with wgmma's N = BN: BT, or (kFit) BT / 2 where the item has no more
        // rows, or (kFit8) the item's rows rounded up to 8 — the first BN columns of B (A's box holds
        // them), acc's first BN / 2 values (the rest stay zero, and the epilogue writes no row past the
        // item's). (A k-loop for each N leaves ptxas short of registers for the wgmma pipeline — C7511
        // at tiles of 64, and from three loops on, session 61 — hence kFit8's branches in one loop.)
        // kFit8: wgmma's N, rounded up to 8 — lane 0's, so that ptxas sees a warp-uniform branch (the
        // persistent walk's tile index comes through shared memory: else C7520, the wgmma serialized)
        [[maybe_unused]] const int fit_rows = C::kFit8 ? __shfl_sync(0xffffffffu, g.item_rows[item_of(i)], 0) : BT;
        auto k_tiles = [&](auto bn) {
            [[maybe_unused]] constexpr int BN = decltype(bn)::value;
            for (int kt = 0; kt < kts; ++kt, ++u) {
                const uint32_t slot = u % S;
                mbar_wait(&full[slot], (u / S) & 1);
                const uint8_t* stage = smem + slot * C::kStageBytes;
                const uint64_t desc = wgmma_desc_sw128(smem_addr(stage));
                if constexpr (C::kWordGroups) {
                    uint4 q_lo[MT], q_hi[MT];
                    uint32_t s2[MT][2], b2[MT][2];
#pragma unroll
                    for (int j = 0; j < MT; ++j)
                        wgmma_int4_staged_operands(stage + C::kWOff, feature(j), row_hi(j), tq, stage + C::kSOff,
                                                   stage + C::kBOff, staged_scale_at(feature(j), tq, lo_.gpt),
                                                   scale_hi(j), bias_lo, bias_hi, q_lo[j], q_hi[j], s2[j], b2[j]);
                    if constexpr (C::kFit8)
                        wgmma_int4_ktile_words_fit<BT, MT, BT / 2, 16>(acc, q_lo, q_hi, s2, b2, kWgmmaInt4NegC, desc,
                                                                       BT * 128, fit_rows);
                    else
                        wgmma_int4_ktile_words<BN>(acc, q_lo, q_hi, s2, b2, kWgmmaInt4NegC, desc, BT * 128);
                } else if constexpr (C::kFit8) {  // N the item's rows in steps of 8
#pragma unroll
                    for (int j = 0; j < MT; ++j) {
                        uint4 q_lo, q_hi;
                        uint32_t s2[2], b2[2];
                        wgmma_int4_staged_operands(stage + C::kWOff, feature(j), row_hi(j), tq, stage + C::kSOff,
                                                   stage + C::kBOff, staged_scale_at(feature(j), tq, lo_.gpt),
                                                   scale_hi(j), bias_lo, bias_hi, q_lo, q_hi, s2, b2);
                        wgmma_int4_ktile_fit<BT, BT >= 64 ? 32 : 16>(acc[j], q_lo, q_hi, s2, b2, kWgmmaInt4NegC,
                                                                     desc, BT * 128, fit_rows);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < MT; ++j)
                        wgmma_int4_ktile_staged<BN>(*reinterpret_cast<float(*)[BN / 2]>(&acc[j][0]),
                                                    stage + C::kWOff, feature(j), row_hi(j), tq, stage + C::kSOff,
                                                    stage + C::kBOff, staged_scale_at(feature(j), tq, lo_.gpt),
                                                    scale_hi(j), bias_lo, bias_hi, desc, BT * 128);
                }
                // On return every wgmma of k-tile u − 1 is done (at most the last half of this one
                // runs): its slot is free, in every block of the cluster (their boxes land in it too).
                // Not past the last release a producer waits for: a block may have left by then
                // (clusters only; a persistent block's last S releases are its own barriers', never
                // awaited).
                if (kt > 0 && lane == 0 && (C::kPersist || kt - 1 + S < kts)) {
                    mbar_arrive(&empty[(u - 1) % S]);
                    if constexpr (CL > 1) mbar_arrive_cluster(&empty[(u - 1) % S], rank ^ 1u);
                }
            }
        };
        if constexpr (C::kFit) {  // (a uniform branch: every thread's tile)
            if (2 * g.item_rows[item_of(i)] <= BT) k_tiles(std::integral_constant<int, BT / 2>{});
            else k_tiles(std::integral_constant<int, BT>{});
        } else {
            k_tiles(std::integral_constant<int, BT>{});
        }
        wgmma_wait<0>();
#pragma unroll
        for (int j = 0; j < MT; ++j) wgmma_fence_operands(acc[j]);
        if (C::kPersist && lane == 0) mbar_arrive(&empty[(u - 1) % S]);  // the tile's last k-tile: the next tile's

        // acc[j][4i + c]: m-tile j's A row gq (c < 2) or gq + 8, item row 8i + 2tq + (c & 1).
        const Tile tl = tile_at(i);
        const int r0 = tl.r0, n_rows = tl.n_rows;
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            if constexpr (GU) {
                const int64_t n = tl.n0 + feature(j), N128 = wgmma_row_len(n_out);
                const int64_t pos = (n & ~int64_t(kBK - 1)) + wgmma_pos(int(n & (kBK - 1)));
                if (n >= N128) continue;
#pragma unroll
                for (int i = 0; i < BT / 8; ++i)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int r = 8 * i + 2 * tq + c;
                        if (r >= n_rows) continue;
                        const float v = n < n_out ? swiglu(acc[j][4 * i + c], acc[j][4 * i + 2 + c]) : 0.f;
                        act[(r0 + r) * N128 + pos] = uint16_t(pack_bf16x2(v, 0.f) & 0xffffu);  // bf16(v), nearest even
                    }
            } else if (maps.out16) {
                // bf16 pairs, 4-byte stores: lanes gq and gq ^ 1 (lane ^ 4) hold features f, f + 8 and
                // f + 1, f + 9 — the even one stores (f, f + 1), the odd one (f + 8, f + 9), each
                // sending the other the value it lacks (every lane shuffles; the stores are predicated)
                const bool odd = gq & 1;
                const int64_t n = tl.n0 + (odd ? row_hi(j) - 1 : feature(j));
                auto* out16 = reinterpret_cast<uint32_t*>(out);
#pragma unroll
                for (int i = 0; i < BT / 8; ++i)
#pragma unroll
                    for (int c = 0; c < 2; ++c) {
                        const int r = 8 * i + 2 * tq + c;
                        const float lo = acc[j][4 * i + c], hi = acc[j][4 * i + 2 + c];  // features f, f + 8
                        const float got = __shfl_xor_sync(0xffffffffu, odd ? lo : hi, 4);
                        const uint32_t pair = odd ? pack_bf16x2(got, hi) : pack_bf16x2(lo, got);  // nearest even
                        if (r < n_rows && n < n_out) out16[((r0 + r) * n_out + n) >> 1] = pair;
                    }
            } else {
#pragma unroll
                for (int i = 0; i < BT / 8; ++i)
#pragma unroll
                    for (int c = 0; c < 4; ++c) {
                        const int r = 8 * i + 2 * tq + (c & 1);
                        const int64_t n = tl.n0 + (c < 2 ? feature(j) : row_hi(j));
                        if (r < n_rows && n < n_out) out[(r0 + r) * n_out + n] = acc[j][4 * i + c];
                    }
            }
        }
        if constexpr (!GU && !C::kFused) {
            if (cb.y && tl.n0 < N)  // (a cluster's last block may cover no features: no tickets of its own)
                tile_combine(cb, g.row_of_slot, g.perm, out, N, r0, n_rows, tl.n0,
                             tl.n0 + C::BM < N ? tl.n0 + C::BM : N, int(tl.n0 / C::BM), fbs, tid, comb_list,
                             comb_list + BT);
        }
        // The item's act columns of this tile, then one count on its word: each thread's stores ordered
        // before the async proxy's reads (down's tiles read them by TMA), then (FUSED 1) the consumers'
        // barrier and one thread's fence and release (CUTLASS's GenericBarrier::arrive_inc: no fence a
        // thread, which would wait out its stores' round trip before the next tile's wgmma), or (FUSED 2)
        // each warp's arrival for the counting warp, which fences and releases off the consumers' path
        if constexpr (C::kFused && GU) {
            fence_proxy_async_global();
            if constexpr (C::kFusedWarp) {
                hand_over(item_of(i));
            } else {
                named_barrier_sync(kItemBar, C::kConsumers);
                if (tid == 0) {
                    __threadfence();
                    flag_add_release(g.item_done + item_of(i), 1u);
                }
            }
        }
    };
    for (int i; (i = take()) >= 0;) by_phase(run, i);
    if constexpr (C::kFusedWarp) hand_over(-1);  // the counting warp's end
}

}  // namespace

}  // namespace tessera::cuda::fast::detail
