// The fast MoE's large tiles, warp-specialised (prefill; MoePlan::wgmma_tma): their tensor maps, grids
// and launches. The kernel, its forms (MoeTmaTile) and how they work: fast_moe_tma_tile.cuh.
#include <cuda.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_tma_tile.cuh"
#include "kernels/cuda/tma_map.h"

namespace tessera::cuda::fast::detail {

namespace {

// A's maps x[0 … BT / 8): a [P, K] bf16 in the wgmma order as 3-D (64 columns, K / 64 k-blocks, P rows),
// boxes of 64 × 1 × 8(i + 1) rows in the 128-byte swizzle.
bool a_maps(CUtensorMap* x, const void* a, int64_t P, int64_t K, int BT) {
    for (int i = 0; i < BT / 8; ++i) {
        const uint64_t dims[3] = {64, uint64_t(K / 64), uint64_t(P)};
        const uint64_t strides[2] = {128, uint64_t(K) * 2};
        const uint32_t box[3] = {64, 1, uint32_t(8 * (i + 1))};
        if (!tma_map_3d_sw128(&x[i], true, a, dims, strides, box)) return false;
    }
    return true;
}

// The kernel's view of a matrix: groups a k-tile, biases or not.
MoeTmaMatrix tma_matrix(const PackedMatrix& m) { return MoeTmaMatrix{int(kBK / m.group), m.biases != nullptr}; }

// The persistent grid for `tiles` tiles: persist 1 as many blocks as are resident at once, n > 1 at
// most n; never more blocks than tiles, at least one.
template <class C>
dim3 persistent_grid(int64_t tiles, int persist) {
    const int64_t most = persist > 1 ? persist : int64_t(current_sm_count()) * C::kBlocksPerSm;
    return dim3(unsigned(std::max<int64_t>(1, std::min<int64_t>(tiles, most))), 1);
}

// a: A [P, K] (the gathered rows of x, or act) — or, GATHER, x [P = T, K] with k slots a token.
// persist (kPersist): the grid's blocks (persistent_grid).
template <class C>
cudaError_t launch(const void* a, int64_t P, int64_t K, int64_t N, int E, const PackedMatrix& m_lo,
                   const PackedMatrix* m_hi, const MoeGrouping& g, void* act, float* out, cudaStream_t stream,
                   int k = 1, int persist = 0, const MoeTileCombine& cb = {}, const MoeTmaTuning& tune = {},
                   bool out16 = false) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(moe_wgmma_tma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (attr != cudaSuccess) return attr;
    if (P < 1 || K % kBK != 0 || m_lo.k != K || m_lo.n != N || (m_hi && (m_hi->k != K || m_hi->n != N)) ||
        (C::kDyn && !g.tile_counters))
        return cudaErrorInvalidValue;
    MoeTmaMaps maps;
    if (tune.l2_first < 0 || tune.l2_first > 3 || (tune.l2_first == 2 && C::CL > 1)) return cudaErrorInvalidValue;
    maps.l2_first = tune.l2_first;
    maps.out16 = out16;
    if (!C::kGather && !a_maps(maps.x, a, P, K, C::BT)) return cudaErrorInvalidValue;
    const uint64_t row_tiles = uint64_t(E) * uint64_t(N / 16);  // the stack's: E experts of N rows
    const int box_tiles = 4 * C::MT * C::CW / 2;  // a box: the block's row tiles of gate (of up), or twice for down
    if (!packed_tiles_tma_maps(m_lo, row_tiles, (C::kGateUp ? 1 : 2) * box_tiles, &maps.codes[0], &maps.scales[0],
                               &maps.biases[0]) ||
        (m_hi && !packed_tiles_tma_maps(*m_hi, row_tiles, box_tiles, &maps.codes[1], &maps.scales[1], &maps.biases[1])))
        return cudaErrorInvalidValue;
    const MoeTmaMatrix lo = tma_matrix(m_lo), hi = m_hi ? tma_matrix(*m_hi) : lo;
    // gate+up covers every position of act's rows up to N128 (the zeros the down kernel reads); a
    // cluster's last blocks may cover nothing (they load their share of the boxes, write nothing)
    const int64_t cover = C::kGateUp ? wgmma_row_len(N) : N;
    const int64_t blocks = (cover + C::BM - 1) / C::BM;
    dim3 grid(unsigned(g.max_items), unsigned((blocks + C::CL - 1) / C::CL * C::CL));
    if constexpr (C::kPersist) {  // the tiles (at most max_items · blocks of them) in turn
        if (persist < 1) return cudaErrorInvalidValue;
        grid = persistent_grid<C>(int64_t(g.max_items) * blocks, persist);
    }
    auto* act16 = static_cast<uint16_t*>(act);
    const auto* xrows = C::kGather ? static_cast<const uint16_t*>(a) : nullptr;
    if constexpr (C::CL == 1)
        return pdl::launch(moe_wgmma_tma_kernel<C>, grid, dim3(C::kThreads), C::kSmem, stream, maps, K, N, E, lo, hi, g,
                           act16, out, xrows, k, int(blocks), cb, MoeTmaDown{});
    else
        return pdl::launch_cluster(moe_wgmma_tma_kernel<C>, grid, dim3(C::kThreads), C::kSmem, stream,
                                   dim3(1, C::CL, 1), maps, K, N, E, lo, hi, g, act16, out, xrows, k, int(blocks), cb,
                                   MoeTmaDown{});
}

// The fused launch (C::kFused): gate+up's tiles (A xg [P, H], act [P, I] out) and then down's (A act,
// out16 [P, H] bf16) in one grid of resident blocks — persist as launch's.
template <class C>
cudaError_t launch_fused(void* out16, void* act, const void* xg, int64_t P, const MoePackedExperts& w,
                         const MoeGrouping& g, cudaStream_t stream, int persist, const MoeTmaTuning& tune) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(moe_wgmma_tma_kernel<C>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::kSmem);
    if (attr != cudaSuccess) return attr;
    const int64_t H = w.H, I = w.I;
    const PackedMatrix &gate = w.tiling.gate0, &up = w.tiling.up0, &down = w.tiling.down0;
    if (P < 1 || H % kBK != 0 || I % kBK != 0 || persist < 1 || !g.tile_counters || !g.item_done || gate.k != H ||
        gate.n != I || up.k != H || up.n != I || down.k != I || down.n != H || tune.l2_first < 0 || tune.l2_first > 3)
        return cudaErrorInvalidValue;
    MoeTmaMaps maps;
    maps.l2_first = tune.l2_first;
    maps.out16 = true;
    constexpr int kTiles = 4 * C::CW / 2;  // row tiles a box: gate's, up's; down's twice
    if (!a_maps(maps.x, xg, P, H, C::BT) || !a_maps(maps.x + 8, act, P, I, C::BT) ||
        !packed_tiles_tma_maps(gate, uint64_t(w.E) * uint64_t(I / 16), kTiles, &maps.codes[0], &maps.scales[0],
                               &maps.biases[0]) ||
        !packed_tiles_tma_maps(up, uint64_t(w.E) * uint64_t(I / 16), kTiles, &maps.codes[1], &maps.scales[1],
                               &maps.biases[1]) ||
        !packed_tiles_tma_maps(down, uint64_t(w.E) * uint64_t(H / 16), 2 * kTiles, &maps.codes[2], &maps.scales[2],
                               &maps.biases[2]))
        return cudaErrorInvalidValue;
    const int64_t fbs = (I + C::BM - 1) / C::BM;  // (I a multiple of 128: act's rows have no padding to cover)
    const int64_t fbs_down = (H + C::template kBm<false> - 1) / C::template kBm<false>;
    const dim3 grid = persistent_grid<C>(g.max_items * (fbs + fbs_down), persist);
    return pdl::launch(moe_wgmma_tma_kernel<C>, grid, dim3(C::kThreads), C::kSmem, stream, maps, H, I, w.E,
                       tma_matrix(gate), tma_matrix(up), g, static_cast<uint16_t*>(act), static_cast<float*>(out16),
                       static_cast<const uint16_t*>(nullptr), 1, int(fbs), MoeTileCombine{},
                       MoeTmaDown{I, H, tma_matrix(down), int(fbs_down)});
}

// The tiles of tile_rows rows and mt m-tiles and their rings — one table for every form (CL, GATHER,
// PERSIST, FIT, tune.warpgroups); GATHER: a = x [P = T, K], k slots a token; persist: launch's.
template <bool GATE_UP, int CL, bool GATHER, bool PERSIST, bool FIT>
cudaError_t launch_tiles(int tile_rows, int mt, const void* a, int64_t P, int64_t K, int64_t N, int E,
                         const PackedMatrix& m0, const PackedMatrix* m1, const MoeGrouping& g, void* act, float* out,
                         cudaStream_t stream, int k, int persist, const MoeTileCombine& cb, const MoeTmaTuning& tune,
                         bool out16) {
    auto go = [&](auto tile) {
        return launch<decltype(tile)>(a, P, K, N, E, m0, m1, g, act, out, stream, k, persist, cb, tune, out16);
    };
    // The wide forms (moe_tiles_take_wide_forms): tiles of 32, 48, 64 rows in one m-tile,
    // unclustered, by TMA, not halved — gate+up's in four consumer warpgroups a block (one block an
    // SM: stages of 28, 32, 36 KB) or either's two, with wgmma's N the items' rows in steps of 8 or not.
    // (tune.dynamic: persistent, N in steps of 8 — the tiles drawn in turn)
    auto wide = [&](auto cw, auto fit8) -> cudaError_t {
        constexpr int CW = decltype(cw)::value, F = decltype(fit8)::value ? 2 : 0;
        if constexpr (CL == 1 && !GATHER && !FIT && (CW == 2 || GATE_UP)) {
            if (mt == 1 && !tune.dynamic) {
                switch (tile_rows) {
                    case 32: return go(MoeTmaTile<32, GATE_UP, CW == 4 ? 7 : 6, 1, 1, false, PERSIST, F, CW>{});
                    case 48: return go(MoeTmaTile<48, GATE_UP, CW == 4 ? 6 : 4, 1, 1, false, PERSIST, F, CW>{});
                    case 64: return go(MoeTmaTile<64, GATE_UP, CW == 4 ? 6 : 4, 1, 1, false, PERSIST, F, CW>{});
                    default: break;
                }
            }
            if constexpr (PERSIST && F == 2) {
                if (mt == 1 && tune.dynamic) {
                    switch (tile_rows) {
                        case 32: return go(MoeTmaTile<32, GATE_UP, CW == 4 ? 7 : 6, 1, 1, false, true, 2, CW, true>{});
                        case 48: return go(MoeTmaTile<48, GATE_UP, CW == 4 ? 6 : 4, 1, 1, false, true, 2, CW, true>{});
                        case 64: return go(MoeTmaTile<64, GATE_UP, CW == 4 ? 6 : 4, 1, 1, false, true, 2, CW, true>{});
                        default: break;
                    }
                }
            }
        }
        return cudaErrorInvalidValue;
    };
    using Four = std::integral_constant<int, 4>;
    using Two = std::integral_constant<int, 2>;
    if (tune.warpgroups != 2) {
        if (tune.warpgroups != 4) return cudaErrorInvalidValue;
        return tune.fit8 ? wide(Four{}, std::true_type{}) : wide(Four{}, std::false_type{});
    }
    if (tune.fit8 && mt == 1) return wide(Two{}, std::true_type{});
    if (tune.dynamic) return cudaErrorInvalidValue;  // (persistent tiles with N in steps of 8 only)
    if constexpr (CL == 1) {  // (two m-tiles, and tiles of 128 rows, in clusters: not built)
        if (mt == 2 && tune.fit8) {  // (N in steps of 8: two m-tiles of 32 only)
            if constexpr (!GATHER && !FIT) {
                if (tile_rows == 32) return go(MoeTmaTile<32, GATE_UP, 3, 1, 2, false, PERSIST, 2>{});
            }
            return cudaErrorInvalidValue;
        }
        if (mt == 2) {
            switch (tile_rows) {
                case 16: return go(MoeTmaTile<16, GATE_UP, 4, 1, 2, GATHER, PERSIST, FIT>{});
                case 32: return go(MoeTmaTile<32, GATE_UP, 3, 1, 2, GATHER, PERSIST, FIT>{});
                case 64: return go(MoeTmaTile<64, GATE_UP, 6, 1, 2, GATHER, PERSIST, FIT>{});  // one block an SM
                default: return cudaErrorInvalidValue;
            }
        }
        if (mt == 1 && tile_rows == 128) {  // one block an SM (not halved: N up to 64)
            if constexpr (!FIT) return go(MoeTmaTile<128, GATE_UP, 5, 1, 1, GATHER, PERSIST, 0>{});
            return cudaErrorInvalidValue;
        }
    }
    if (mt != 1) return cudaErrorInvalidValue;
    switch (tile_rows) {
        case 16: return go(MoeTmaTile<16, GATE_UP, 7, CL, 1, GATHER, PERSIST, FIT>{});
        case 32: return go(MoeTmaTile<32, GATE_UP, 6, CL, 1, GATHER, PERSIST, FIT>{});
        case 48:  // (one block a tile or persistent, not fitted: wgmma has no N = 24 here)
            if constexpr (CL == 1 && !GATHER && !FIT)
                return go(MoeTmaTile<48, GATE_UP, 4, 1, 1, false, PERSIST, false>{});
            return cudaErrorInvalidValue;
        case 64: return go(MoeTmaTile<64, GATE_UP, 4, CL, 1, GATHER, PERSIST, FIT>{});
        default: return cudaErrorInvalidValue;
    }
}

// persist: 0 a block a tile, else the persistent grid's blocks (launch); fit: wgmma's N halved for
// items of at most half a tile. Both only without clusters or the gathered A, and not together.
template <bool GATE_UP, int CL, bool GATHER = false>
cudaError_t launch_rows(int tile_rows, int mt, const void* a, int64_t P, int64_t K, int64_t N, int E,
                        const PackedMatrix& m0, const PackedMatrix* m1, const MoeGrouping& g, void* act, float* out,
                        cudaStream_t stream, int k = 1, int persist = 0, bool fit = false,
                        const MoeTileCombine& cb = {}, const MoeTmaTuning& tune = {}, bool out16 = false) {
    if (cb.y && (GATE_UP || !cb.weights || !cb.counters || cb.k < 1 || cb.T < 1)) return cudaErrorInvalidValue;
    if (out16 && (GATE_UP || cb.y || N % 2 != 0)) return cudaErrorInvalidValue;  // (the tiles' sum reads f32)
    if constexpr (CL == 1 && !GATHER) {
        if (persist && fit) return cudaErrorInvalidValue;  // (both: ptxas serializes the wgmma — C7512)
        if (persist)
            return launch_tiles<GATE_UP, 1, false, true, false>(tile_rows, mt, a, P, K, N, E, m0, m1, g, act, out,
                                                                stream, k, persist, cb, tune, out16);
        if (fit)
            return launch_tiles<GATE_UP, 1, false, false, true>(tile_rows, mt, a, P, K, N, E, m0, m1, g, act, out,
                                                                stream, k, 0, cb, tune, out16);
    }
    if (persist || fit) return cudaErrorInvalidValue;  // (clusters, the gathered A: neither)
    return launch_tiles<GATE_UP, CL, GATHER, false, false>(tile_rows, mt, a, P, K, N, E, m0, m1, g, act, out, stream,
                                                           k, 0, cb, tune, out16);
}

}  // namespace

bool moe_wgmma_tma_fits(int tile_rows) {
    return tile_rows == 16 || tile_rows == 32 || tile_rows == 48 || tile_rows == 64 || tile_rows == 128;
}

cudaError_t launch_moe_wgmma_tma_gate_up(void* act, const void* xg, int64_t P, const MoePackedExperts& w,
                                         const MoeGrouping& g, int tile_rows, int cluster, int mt, cudaStream_t stream,
                                         int persist, bool fit, const MoeTmaTuning& tune) {
    if (!w.tiling.gate_up || persist < 0) return cudaErrorInvalidValue;
    if (cluster == 2)
        return launch_rows<true, 2>(tile_rows, mt, xg, P, w.H, w.I, w.E, w.tiling.gate0, &w.tiling.up0, g, act,
                                    nullptr, stream, 1, persist, fit, {}, tune);
    if (cluster != 1) return cudaErrorInvalidValue;
    return launch_rows<true, 1>(tile_rows, mt, xg, P, w.H, w.I, w.E, w.tiling.gate0, &w.tiling.up0, g, act, nullptr,
                                stream, 1, persist, fit, {}, tune);
}

cudaError_t launch_moe_wgmma_tma_gate_up_gathered(void* act, const void* x16, int64_t T, int k,
                                                  const MoePackedExperts& w, const MoeGrouping& g, int tile_rows,
                                                  int mt, cudaStream_t stream) {
    if (!w.tiling.gate_up || k < 1) return cudaErrorInvalidValue;
    return launch_rows<true, 1, true>(tile_rows, mt, x16, T, w.H, w.I, w.E, w.tiling.gate0, &w.tiling.up0, g, act,
                                      nullptr, stream, k);
}

cudaError_t launch_moe_wgmma_tma_down(void* out_, const void* act, int64_t P, const MoePackedExperts& w,
                                      const MoeGrouping& g, int tile_rows, int cluster, int mt, cudaStream_t stream,
                                      int persist, bool fit, const MoeTileCombine& combine, const MoeTmaTuning& tune,
                                      bool out16) {
    if (!w.tiling.down || persist < 0) return cudaErrorInvalidValue;
    auto* out = static_cast<float*>(out_);  // (out16: bf16 pairs, the epilogue's own view)
    if (cluster == 2)
        return launch_rows<false, 2>(tile_rows, mt, act, P, w.I, w.H, w.E, w.tiling.down0, nullptr, g, nullptr, out,
                                     stream, 1, persist, fit, combine, tune, out16);
    if (cluster != 1) return cudaErrorInvalidValue;
    return launch_rows<false, 1>(tile_rows, mt, act, P, w.I, w.H, w.E, w.tiling.down0, nullptr, g, nullptr, out,
                                 stream, 1, persist, fit, combine, tune, out16);
}

cudaError_t launch_moe_wgmma_tma_fused(void* out16, void* act, const void* xg, int64_t P, const MoePackedExperts& w,
                                       const MoeGrouping& g, int tile_rows, cudaStream_t stream, int persist,
                                       const MoeTmaTuning& tune) {
    if (!w.tiling.gate_up || !w.tiling.down) return cudaErrorInvalidValue;
    auto go = [&](auto tile) { return launch_fused<decltype(tile)>(out16, act, xg, P, w, g, stream, persist, tune); };
    // FUSED 1: a gate+up tile counted by the consumers' barrier and their thread 0; 2 (tune.fused_warp) by a
    // producer warp
    auto form = [&](auto fused) -> cudaError_t {
        constexpr int F = decltype(fused)::value;
        switch (tile_rows) {  // (the wide forms' rings in four warpgroups)
            case 32: return go(MoeTmaTile<32, true, 7, 1, 1, false, true, 2, 4, true, F>{});
            case 48: return go(MoeTmaTile<48, true, 6, 1, 1, false, true, 2, 4, true, F>{});
            case 64: return go(MoeTmaTile<64, true, 6, 1, 1, false, true, 2, 4, true, F>{});
            default: return cudaErrorInvalidValue;
        }
    };
    return tune.fused_warp ? form(std::integral_constant<int, 2>{}) : form(std::integral_constant<int, 1>{});
}

}  // namespace tessera::cuda::fast::detail
