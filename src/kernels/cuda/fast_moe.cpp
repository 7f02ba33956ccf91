// Argument checks, scratch layout and the plan for the fast MoE (the kernels are in
// fast_moe_route.cu, fast_moe_experts.cu, fast_moe_tiles.cu, fast_moe_decode.cu, fast_moe_mma.cu,
// fast_moe_decode_mma.cu, fast_moe_mid.cu, fast_moe_fused.cu).
#include "kernels/cuda/fast_moe.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace {

// The plan's choices that leave the warp-specialised tiles' bits alone: gate+up's, and down's (two
// consumer warpgroups).
detail::MoeTmaTuning tuning(const MoePlan& plan) {
    return {plan.wgmma_l2_first, plan.wgmma_warpgroups, plan.wgmma_fit8, plan.wgmma_dynamic, plan.wgmma_fused_warp};
}
detail::MoeTmaTuning tuning_down(const MoePlan& plan) {
    return {plan.wgmma_l2_first, 2, plan.wgmma_fit8, plan.wgmma_dynamic};
}

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

void check_route_shape(const char* op, int64_t T, int E, int k) {
    TS_CHECK(T >= 0 && T <= INT32_MAX, "{}: bad token count T = {}", op, T);
    TS_CHECK(E >= 1 && E <= kMoeMaxExperts, "{}: E = {} experts, expected 1..{}", op, E, kMoeMaxExperts);
    TS_CHECK(k >= 1 && k <= std::min(E, kMoeMaxTopK), "{}: k = {} must be in [1, {}] (E = {} experts, at most {})", op,
             k, std::min(E, kMoeMaxTopK), E, kMoeMaxTopK);
    TS_CHECK(T * k <= INT32_MAX / 2, "{}: T·k = {} (token, slot) pairs is too many", op, T * k);
}

void check_tile(const char* op, int tile_rows, int max) {
    TS_CHECK(tile_rows >= 1 && tile_rows <= max, "{}: tile_rows = {} must be in [1, {}]", op, tile_rows, max);
}

// Sizes of the grouping's arrays, in order: offsets, perm, row_of_slot, n_items, item_* ×3,
// chunk_counts (none where one block groups every pair), tile_counters, item_done.
struct GroupLayout {
    size_t off[10];
    size_t bytes;
};
GroupLayout group_layout(int64_t T, int k, int E, int tile_rows) {
    const int64_t P = T * k, MI = moe_max_items(T, k, E, tile_rows), nb = moe_group_blocks(P);
    const int64_t counts[10] = {E + 1, P, P, 1, MI, MI, MI, nb > 1 ? nb * E : 0, 2, MI};
    GroupLayout l{};
    size_t at = 0;
    for (int i = 0; i < 10; ++i) {
        l.off[i] = at;
        at += align_up(size_t(counts[i]) * sizeof(int32_t));
    }
    l.bytes = at;
    return l;
}

MoeGrouping carve_grouping(void* scratch, int64_t T, int k, int E, int tile_rows) {
    const GroupLayout l = group_layout(T, k, E, tile_rows);
    auto* base = static_cast<char*>(scratch);
    auto at = [&](int i) { return reinterpret_cast<int32_t*>(base + l.off[i]); };
    MoeGrouping g;
    g.offsets = at(0);
    g.perm = at(1);
    g.row_of_slot = at(2);
    g.n_items = at(3);
    g.item_expert = at(4);
    g.item_row0 = at(5);
    g.item_rows = at(6);
    g.chunk_counts = moe_group_blocks(T * k) > 1 ? at(7) : nullptr;
    g.tile_counters = reinterpret_cast<uint32_t*>(at(8));
    g.item_done = reinterpret_cast<uint32_t*>(at(9));
    g.max_items = moe_max_items(T, k, E, tile_rows);
    return g;
}

void check_scratch(const char* op, const void* scratch) {
    TS_CHECK(scratch != nullptr, "{}: scratch is null", op);
    TS_CHECK(reinterpret_cast<uintptr_t>(scratch) % kAlign == 0, "{}: scratch must be {}-byte aligned", op, kAlign);
}

// Columns of a row in the large tiles' bf16 scratch: the wgmma order pads rows to whole k-tiles
// of 128 (fast_wgmma_int4.cuh); the other tiles use the first n of them.
int64_t row128(int64_t n) { return (n + 127) / 128 * 128; }

void check_plan(const MoePlan& p) {
    TS_CHECK(p.wgmma_tma >= 0 && p.wgmma_tma <= 2, "moe_experts_packed: wgmma_tma = {} must be 0, 1 or 2",
             p.wgmma_tma);
    TS_CHECK(!p.wgmma_tma || (p.wgmma && detail::moe_wgmma_tma_fits(p.tile_rows) &&
                              (p.tile_rows < 128 || p.wgmma_tma == 1)),
             "moe_experts_packed: wgmma_tma is a form of the wgmma tiles of 16, 32, 48, 64 or 128 rows (128: without "
             "clusters, wgmma_tma 1; got {}wgmma, {} rows, wgmma_tma {})",
             p.wgmma ? "" : "no ", p.tile_rows, p.wgmma_tma);
    TS_CHECK(p.tile_rows != 48 || !p.wgmma ||
                 (p.wgmma_tma == 1 && p.wgmma_mt < 2 && !p.wgmma_gather && !p.wgmma_fit),
             "moe_experts_packed: tiles of 48 rows are a form of the warp-specialised tiles alone (wgmma_tma 1, one "
             "m-tile, neither gathered nor fitted; got wgmma_tma {}, wgmma_mt {}{}{})",
             p.wgmma_tma, p.wgmma_mt, p.wgmma_gather ? ", wgmma_gather" : "", p.wgmma_fit ? ", wgmma_fit" : "");
    TS_CHECK(p.wgmma_mt >= 0 && p.wgmma_mt <= 2 && (p.wgmma_mt < 2 || (p.wgmma_tma == 1 && p.tile_rows <= 64)),
             "moe_experts_packed: wgmma_mt = {} must be 0, 1 or 2 (2: wgmma_tma 1 and tiles of 16, 32 or 64 rows; "
             "got wgmma_tma {}, {} rows)",
             p.wgmma_mt, p.wgmma_tma, p.tile_rows);
    TS_CHECK(!p.wgmma_gather || p.wgmma_tma == 1,
             "moe_experts_packed: wgmma_gather is a form of the warp-specialised tiles without clusters (wgmma_tma 1, "
             "got {})",
             p.wgmma_tma);
    TS_CHECK(p.wgmma_persist >= 0 && (!p.wgmma_persist || (p.wgmma_tma == 1 && !p.wgmma_gather)),
             "moe_experts_packed: wgmma_persist = {} must be 0, or > 0 with the warp-specialised tiles without "
             "clusters or the gathered A (got wgmma_tma {}{})",
             p.wgmma_persist, p.wgmma_tma, p.wgmma_gather ? ", wgmma_gather" : "");
    TS_CHECK(!p.wgmma_fit || (p.wgmma_tma == 1 && !p.wgmma_gather && !p.wgmma_persist && p.tile_rows <= 64),
             "moe_experts_packed: wgmma_fit is a form of the warp-specialised tiles of up to 64 rows without clusters, "
             "the gathered A or persistence (got wgmma_tma {}, {} rows{}{})",
             p.wgmma_tma, p.tile_rows, p.wgmma_gather ? ", wgmma_gather" : "", p.wgmma_persist ? ", wgmma_persist" : "");
    TS_CHECK(!p.wgmma_combine || p.wgmma_tma >= 1,
             "moe_experts_packed: wgmma_combine is a form of the warp-specialised tiles (got wgmma_tma {})",
             p.wgmma_tma);
    TS_CHECK(!p.wgmma_out16 || (p.wgmma_tma >= 1 && !p.wgmma_combine),
             "moe_experts_packed: wgmma_out16 is a form of the warp-specialised tiles without their own slot sum (got "
             "wgmma_tma {}{})",
             p.wgmma_tma, p.wgmma_combine ? ", wgmma_combine" : "");
    TS_CHECK(p.wgmma_l2_first >= 0 && p.wgmma_l2_first <= 3 && (p.wgmma_l2_first != 2 || p.wgmma_tma != 2),
             "moe_experts_packed: wgmma_l2_first = {} must be 0, 1, 2 or 3 (2: not in clusters; got wgmma_tma {})",
             p.wgmma_l2_first, p.wgmma_tma);
    TS_CHECK(p.wgmma_warpgroups == 2 || (p.wgmma_warpgroups == 4 && moe_tiles_take_wide_forms(p)),
             "moe_experts_packed: wgmma_warpgroups = {} must be 2, or 4 with the warp-specialised tiles of 32, 48 or "
             "64 rows in one m-tile, neither clustered, gathered nor fitted (got wgmma_tma {}, wgmma_mt {}, {} rows"
             "{}{})",
             p.wgmma_warpgroups, p.wgmma_tma, p.wgmma_mt, p.tile_rows, p.wgmma_gather ? ", wgmma_gather" : "",
             p.wgmma_fit ? ", wgmma_fit" : "");
    TS_CHECK(!p.wgmma_fit8 || moe_tiles_take_fit8(p),
             "moe_experts_packed: wgmma_fit8 is a form of the warp-specialised tiles of 32, 48 or 64 rows in one "
             "m-tile or two of 32, neither clustered, gathered nor fitted (got wgmma_tma {}, wgmma_mt {}, {} rows{}{})",
             p.wgmma_tma, p.wgmma_mt, p.tile_rows, p.wgmma_gather ? ", wgmma_gather" : "",
             p.wgmma_fit ? ", wgmma_fit" : "");
    TS_CHECK(!p.wgmma_dynamic || moe_tiles_take_dynamic(p),
             "moe_experts_packed: wgmma_dynamic is a form of the persistent warp-specialised tiles of 32, 48 or 64 "
             "rows in one m-tile, neither clustered, gathered nor fitted (got wgmma_tma {}, wgmma_mt {}, {} rows, "
             "wgmma_persist {})",
             p.wgmma_tma, p.wgmma_mt, p.tile_rows, p.wgmma_persist);
    TS_CHECK(!p.wgmma_fused || (moe_tiles_take_fused(p) && p.wgmma_warpgroups == 4),
             "moe_experts_packed: wgmma_fused is a form of the drawn warp-specialised tiles with out in bf16 and "
             "gate+up in four warpgroups (got wgmma_tma {}, {} rows, wgmma_dynamic {}, wgmma_out16 {}, "
             "wgmma_warpgroups {})",
             p.wgmma_tma, p.tile_rows, p.wgmma_dynamic, p.wgmma_out16, p.wgmma_warpgroups);
    TS_CHECK(!p.wgmma_fused_warp || p.wgmma_fused, "moe_experts_packed: wgmma_fused_warp is a form of wgmma_fused");
    TS_CHECK(p.fused_decode >= 0 && p.fused_decode <= 3, "moe_experts_packed: fused_decode = {} must be 0, 1, 2 or 3",
             p.fused_decode);
    if (p.fused_decode) {
        TS_CHECK(!p.grouped && p.down_by_token && !p.large_tiles && !p.v2 && !p.mma_decode && !p.dp4a_decode &&
                     !p.wgmma && !p.mid,
                 "moe_experts_packed: the fused decode kernel runs per slot, down by token, no other kernels");
        return;
    }
    if (p.mid) {
        TS_CHECK(p.grouped && !p.down_by_token && p.tile_rows == kMoeMidRows && !p.large_tiles && !p.v2 &&
                     !p.mma_decode && !p.dp4a_decode && !p.wgmma,
                 "moe_experts_packed: the mid kernels run grouped, by item, tile_rows {}, no other kernels (got {}{} "
                 "tile_rows {}{}{}{}{}{})",
                 kMoeMidRows, p.grouped ? "grouped" : "per slot", p.down_by_token ? ", down by token," : ",",
                 p.tile_rows, p.large_tiles ? ", large tiles" : "", p.v2 ? ", v2" : "",
                 p.mma_decode ? ", mma decode" : "", p.dp4a_decode ? ", dp4a decode" : "", p.wgmma ? ", wgmma" : "");
        TS_CHECK(p.mid_ring == 0 || p.mid_ring == 3 || p.mid_ring == 4,
                 "moe_experts_packed: mid_ring = {} must be 0, 3 or 4", p.mid_ring);
        TS_CHECK(p.mid_down_tiles == 0 || p.mid_down_tiles == 2 || p.mid_down_tiles == 4,
                 "moe_experts_packed: mid_down_tiles = {} must be 0, 2 or 4", p.mid_down_tiles);
        TS_CHECK(p.mid_gate_up_tiles >= 0 && p.mid_gate_up_tiles <= 2,
                 "moe_experts_packed: mid_gate_up_tiles = {} must be 0, 1 or 2", p.mid_gate_up_tiles);
        return;
    }
    if (p.dp4a_decode) {
        TS_CHECK(!p.grouped && p.down_by_token && !p.large_tiles && !p.v2 && !p.mma_decode,
                 "moe_experts_packed: the integer-unit decode kernels run per slot, down by token (no v2, no large "
                 "tiles, no tensor-core decode)");
        return;
    }
    if (p.mma_decode) {
        TS_CHECK(!p.grouped && p.down_by_token && !p.large_tiles && !p.v2,
                 "moe_experts_packed: the tensor-core decode kernels run per slot, down by token (no v2, no large "
                 "tiles)");
        TS_CHECK(p.mma_down_batch == 0 || p.mma_down_batch == 4 || p.mma_down_batch == 8,
                 "moe_experts_packed: mma_down_batch = {} must be 0, 4 or 8", p.mma_down_batch);
        TS_CHECK(p.mma_gate_up_batch >= 0 && p.mma_gate_up_batch <= 2,
                 "moe_experts_packed: mma_gate_up_batch = {} must be 0, 1 or 2", p.mma_gate_up_batch);
        TS_CHECK(p.mma_down_warps == 0 || p.mma_down_warps == 8 || p.mma_down_warps == 16,
                 "moe_experts_packed: mma_down_warps = {} must be 0, 8 or 16", p.mma_down_warps);
        return;
    }
    TS_CHECK(!p.wgmma || (p.large_tiles && !p.v2),
             "moe_experts_packed: the wgmma tiles are large tiles of their own (large_tiles, not v2)");
    if (p.large_tiles) {
        const bool tile_ok = p.tile_rows == 32 || p.tile_rows == 64 || ((p.v2 || p.wgmma) && p.tile_rows == 16) ||
                             (p.wgmma && (p.tile_rows == 128 || (p.tile_rows == 48 && p.wgmma_tma == 1)));
        TS_CHECK(p.grouped && !p.down_by_token && tile_ok,
                 "moe_experts_packed: large tiles need a grouped, by-item plan with tile_rows {} (got {}{} {})",
                 p.wgmma ? "16, 32, 48 (warp-specialised), 64 or 128" : p.v2 ? "16, 32 or 64" : "32 or 64",
                 p.grouped ? "grouped" : "per slot", p.down_by_token ? ", down by token," : ",", p.tile_rows);
        return;
    }
    if (p.v2) {
        TS_CHECK(!p.grouped && p.down_by_token, "moe_experts_packed: the v2 small tiles run per slot, down by token");
        return;
    }
    check_tile("moe_experts_packed", p.tile_rows, 8);
    TS_CHECK(p.grouped || p.down_by_token, "moe_experts_packed: the by-item down projection needs a grouped plan");
}

}  // namespace

void moe_route(const float* logits, int64_t ldl, int64_t T, int E, int k, bool renormalize, bool shared,
               int32_t* ids, float* weights, cudaStream_t stream, bool exact) {
    check_route_shape("moe_route", T, E, k);
    if (T == 0) return;
    ref::detail::check_rows("moe_route", "logits", logits, ldl, T, E + (shared ? 1 : 0));
    TS_CHECK(ids && weights, "moe_route: null ids or weights [{}, {}]", T, k + (shared ? 1 : 0));
    TS_CUDA_CHECK(detail::launch_moe_route(logits, ldl, T, E, k, renormalize, shared, ids, weights, exact, stream));
}

int64_t moe_max_items(int64_t T, int k, int E, int tile_rows) {
    const int64_t P = T * k;
    return std::min<int64_t>(E, P) + P / std::max(tile_rows, 1);
}

size_t moe_group_scratch_bytes(int64_t T, int k, int E, int tile_rows) {
    return group_layout(T, k, E, tile_rows).bytes;
}

MoeGrouping moe_group(const int32_t* ids, int64_t T, int k, int E, int tile_rows, void* scratch, cudaStream_t stream) {
    check_route_shape("moe_group", T, E, k);
    check_tile("moe_group", tile_rows, 128);
    check_scratch("moe_group", scratch);
    const MoeGrouping g = carve_grouping(scratch, T, k, E, tile_rows);
    if (T == 0) return g;
    TS_CHECK(ids != nullptr, "moe_group: ids [{}, {}] is null", T, k);
    TS_CUDA_CHECK(detail::launch_moe_group(ids, T, k, E, tile_rows, g, stream));
    return g;
}

MoeTiling moe_check_experts(const PackedMatrix* gate, const PackedMatrix* up, const PackedMatrix* down, int E,
                            int64_t H, int64_t I) {
    TS_CHECK(E >= 1 && E <= kMoeMaxExperts, "moe experts: E = {} experts, expected 1..{}", E, kMoeMaxExperts);
    TS_CHECK(H > 0 && I > 0 && H % 32 == 0 && I % 32 == 0,
             "moe experts: H = {} and I = {} must be positive multiples of 32 (whole Int4 chunks)", H, I);
    TS_CHECK(gate && up && down, "moe experts: null descriptor array");
    for (int e = 0; e < E; ++e) {
        const PackedMatrix* ms[3] = {&gate[e], &up[e], &down[e]};
        const char* names[3] = {"gate", "up", "down"};
        for (int i = 0; i < 3; ++i) {
            const PackedMatrix& m = *ms[i];
            const int64_t n = i == 2 ? H : I, kk = i == 2 ? I : H;
            TS_CHECK(m.kind == PackedKind::Int4, "moe experts: expert {} {} is not Int4 (the fast MoE reads Int4 only)",
                     e, names[i]);
            TS_CHECK(m.n == n && m.k == kk, "moe experts: expert {} {}: expected [{}, {}] got [{}, {}]", e, names[i], n,
                     kk, m.n, m.k);
            TS_CHECK(m.group >= 32 && (m.group & (m.group - 1)) == 0 && m.k % m.group == 0,
                     "moe experts: expert {} {}: group size {} must be 32·2^j dividing k = {}", e, names[i], m.group,
                     m.k);
            TS_CHECK(!m.tiles || packed_tiles_fit(m.kind, m.n, m.k, m.group),
                     "moe experts: expert {} {} [{}, {}] group {} is marked as 16-row tiles, which need n a "
                     "multiple of 16, k of 128 and a group of 32, 64 or 128",
                     e, names[i], m.n, m.k, m.group);
            TS_CHECK(m.codes && m.scales, "moe experts: expert {} {} has null codes or scales", e, names[i]);
            TS_CHECK(reinterpret_cast<uintptr_t>(m.codes) % 16 == 0,
                     "moe experts: expert {} {}: codes must be 16-byte aligned", e, names[i]);
        }
    }
    // The tensor maps of the warp-specialised tiles describe one stack a matrix from expert 0's
    // descriptor: 1 KB of codes and 32·(128 / G) bytes of scales (biases) a row tile and k-tile.
    auto stacked = [&](const PackedMatrix* ms) {
        const PackedMatrix& m0 = ms[0];
        if (reinterpret_cast<uintptr_t>(m0.scales) % 16 != 0 || reinterpret_cast<uintptr_t>(m0.biases) % 16 != 0)
            return false;
        const int64_t gpr = m0.k / m0.group;
        for (int e = 0; e < E; ++e) {
            const PackedMatrix& m = ms[e];
            if (!m.tiles || m.group != m0.group || m.codes != m0.codes + e * m0.n * (m0.k / 2) ||
                m.scales != m0.scales + e * m0.n * gpr || (m.biases == nullptr) != (m0.biases == nullptr) ||
                (m.biases && m.biases != m0.biases + e * m0.n * gpr))
                return false;
        }
        return true;
    };
    MoeTiling t;
    t.gate_up = stacked(gate) && stacked(up);
    t.down = stacked(down);
    t.gate0 = gate[0], t.up0 = up[0], t.down0 = down[0];
    return t;
}

MoeFusedShape moe_fused_shape(int64_t H, int64_t I, const MoeTiling& t, int form) {
    MoeFusedShape f;
    if (form < 1 || form > 3) return f;
    const int blocks_per_sm = form == 1 ? 2 : 1, warps = form == 3 ? 16 : 8;
    const int G = t.gate0.group;
    if (!t.gate_up || !t.down || (G != 32 && G != 64 && G != 128) || t.up0.group != G || t.down0.group != G ||
        (t.gate0.biases == nullptr) != (t.up0.biases == nullptr) || H <= 0 || I <= 0 || H % 128 != 0 ||
        I % 128 != 0 || H > (1 << 20) || I > (1 << 20))
        return f;
    int cl = 0;
    for (int c : {16, 8})
        if ((H / 16) % c == 0 && (I / 16) % c == 0) {
            cl = c;
            break;
        }
    if (!cl) return f;
    f.cluster = cl;
    f.warps = warps;
    f.rt_gu = int(I / 16 / cl);
    f.rt_d = int(H / 16 / cl);
    f.nkt_h = int(H / 128);
    f.nkt_i = int(I / 128);
    constexpr int kPairs = kMoeFusedStageCodes / 1024;  // (row tile, k-tile) pairs a stage
    f.nk_gu = std::min(f.nkt_h, kPairs);
    f.stages_gu = f.rt_gu * 2 * ((f.nkt_h + f.nk_gu - 1) / f.nk_gu);
    if (f.nkt_i <= kPairs) {  // whole down row tiles, as many as a stage holds
        f.nk_d = f.nkt_i;
        f.nr_d = std::min(kPairs / f.nkt_i, f.rt_d);
        f.stages_d = (f.rt_d + f.nr_d - 1) / f.nr_d;
    } else {  // a row tile's k-ranges
        f.nk_d = kPairs;
        f.nr_d = 1;
        f.stages_d = f.rt_d * ((f.nkt_i + kPairs - 1) / kPairs);
    }
    const bool biases = t.gate0.biases != nullptr || t.down0.biases != nullptr;
    f.scale_bytes = kPairs * 16 * (128 / G) * 2;  // 16 rows × 128 / G groups of halves a pair
    f.stage_bytes = kMoeFusedStageCodes + f.scale_bytes * (biases ? 2 : 1);
    auto a16 = [](int64_t v) { return int((v + 15) / 16 * 16); };
    const int fixed = a16(gemv_dp4a_smem(H, 1)) + a16(4 * I) + a16(gemv_dp4a_smem(I, 1)) +
                      a16(f.rt_gu * warps * 2 * 16 * 4) + a16(int64_t(f.rt_d) * f.nkt_i * 16 * 4);
    const int all = f.stages_gu + f.stages_d;
    auto bars = [](int ring) { return 2 * ring * 8 + 16; };  // full and empty a stage, act_bar, the last flag
    int ring = std::min(all, 8);
    const int64_t budget = blocks_per_sm == 2 ? kMoeFusedSmemBudget : 220 * 1024;
    while (ring > 2 && int64_t(ring) * f.stage_bytes + fixed + bars(ring) > budget) --ring;
    if (int64_t(ring) * f.stage_bytes + fixed + bars(ring) > 220 * 1024) return MoeFusedShape{};
    f.ring = ring;
    f.off_x = ring * f.stage_bytes;
    f.off_act = f.off_x + a16(gemv_dp4a_smem(H, 1));
    f.off_act_q = f.off_act + a16(4 * I);
    f.off_red = f.off_act_q + a16(gemv_dp4a_smem(I, 1));
    f.off_part = f.off_red + a16(f.rt_gu * warps * 2 * 16 * 4);
    f.off_bar = f.off_part + a16(int64_t(f.rt_d) * f.nkt_i * 16 * 4);
    f.smem = size_t(f.off_bar + bars(ring));
    return f;
}

size_t moe_fused_counters_bytes(int64_t T, int cluster) { return size_t(std::max<int64_t>(T, 1) * cluster) * 4; }

MoePlan moe_pick(int64_t T, int k, int E) {
    // From bench_fast_moe on the H200 (every plan at T = 1, 8, 512; retune from its table). T ≤ 2:
    // the tensor-core decode kernels per slot, down with 16 warps a block, started by
    // programmatic dependent launch (flagship T = 1: 15.3 µs hot / 16.3 cold against the v2 small
    // tiles' 23.7 / 25.5, session 5). Beyond: the v2 tensor-core tiles, sized to the rows an
    // expert gets on average (T·k / E) — at T = 8 on the flagship 84 µs against 127 for the best
    // f32 plan, whose FMAs, not the weight stream, bound it.
    // Session 10: T ≤ 2 on the integer units instead (fast_moe_decode_dp4a.cu; see bench_fast_moe
    // for both); the tensor-core plan below stays as their fallback (moe_experts_packed).
    MoePlan p;
    // Session 38: at T = 2 the dp4a down kernel in blocks of 8 warps (4 items a warp in flight):
    // 17.6 against 19.2 µs for the three matrices on the flagship's shape, 23.5 against 24.2 on
    // llama.cpp's (bench_fast_moe --graph --reps 32); at T = 1 16 warps (3 items a warp) stay ahead.
    if (T <= 2) {
        p.dp4a_decode = true;
        p.mma_pdl = true;
        p.mma_down_warps = T == 1 ? 16 : 8;
        return p;  // per slot, down by token
    }
    // Session 13: from 12 rows an expert on average, the large tiles on the warpgroup MMA
    // (fast_moe_wgmma.cu): bench_fast_moe hot, µs, wgmma against the v2 tiles' best — T = 512:
    // flagship (16 rows) 336 (/32) against 370, llama.cpp's shape (32 rows) 310 (/64) against 401;
    // T = 2048: 681 / 797 (/64) against 891 / 1,089 (/128: 811 / 869). Below (T = 128: 4 and 8
    // rows; T = 64) the v2 tiles of 16 stay: 256 / 204 against 285 / 218.
    p.grouped = true;
    p.down_by_token = false;
    p.large_tiles = true;
    const int64_t avg = T * k / std::max(E, 1);
    // Session 33: from more than 8 rows an expert (where the backend's mid kernels stop taking the
    // v2 tiles' place), the warpgroup MMA in its warp-specialised form (fast_moe_wgmma_tma.cu; the
    // plain wgmma tiles where the experts are not stacked tiles) — bench_fast_moe hot, µs, plain /
    // TMA, llama.cpp's shape: T = 128 (8 rows) v2/16 186.3, wgmma/16 186.8, TMA/16 153.1; T = 256
    // /32 209.5 / 172.7; T = 512 /64 269.8 / 228.5; T = 2048 705.0 / 658.4 — the flagship: T = 128
    // (4 rows) v2/16 235.4, TMA/16 197.3; T = 512 /32 299.3 / 251.7; T = 2048 /64 606.6 / 539.4.
    // Clusters of 2 sharing A's boxes (wgmma_tma = 2) measured slower everywhere.
    // Session 34: down to one row an expert (T·k ≥ E) the warp-specialised tiles of 16 with two
    // m-tiles beat the mid kernels the backend ran at ≤ 8 rows (bench_fast_moe hot, µs, mid /
    // TMA mt2/16 — the flagship: T = 16 (0.5 rows) 88.5 / 90.0, 32 127.3 / 117.5, 64 169.6 /
    // 152.9, 128 (4 rows) v2/16 236.7 / 173.5; llama.cpp's shape: T = 16 (1 row) 94.8 / 93.2,
    // 64 154.7 / 132.7). Below one row an expert the v2 tiles of 16, which the backend turns into
    // the mid kernels (moe_experts_packed, as it does wherever the TMA tiles cannot run).
    if (T * k < int64_t(std::max(E, 1))) {
        p.v2 = true;
        p.tile_rows = 16;
        return p;
    }
    p.wgmma = true;
    p.wgmma_tma = 1;
    // Session 48: tiles of 48 rows from 25 to 36 rows an expert (an expert's rows past 48 are then
    // rare: the items stay one an expert, and wgmma's N a quarter narrower than 64 for ~32 rows) —
    // bench_fast_moe hot, µs, H100, persistent /64 against /48: llama.cpp's shape T = 512 (32 rows)
    // 222.9 / 209.3; past it /48 loses (T = 2048, 128 rows: 557.2 / 619.2; the flagship T = 2048,
    // 64 rows: 484.1 / 544.4).
    p.tile_rows = avg < 12 ? 16 : avg <= 24 ? 32 : avg <= 36 ? 48 : 64;
    // Session 34: the tiles of 16 and 32 with two m64 tiles a warpgroup (A read by half the
    // feature blocks; the same bits) — bench_fast_moe hot, µs, one m-tile / two: llama.cpp's shape
    // T = 256 /32 175.1 / 166.0; the flagship T = 256 /16 218.0 / 190.0, T = 512 /32 254.9 / 231.8.
    // Tiles of 64 stay on one (T = 512 of llama.cpp's shape: /64 229.2 against mt2/32 240.8).
    if (p.tile_rows <= 32) p.wgmma_mt = 2;
    // Session 45: tiles of 64 taken in turn by resident blocks (wgmma_persist; the same bits) —
    // bench_fast_moe hot, µs, H100, one block a tile / persistent: llama.cpp's shape T = 512 238.0 /
    // 226.6, T = 2048 707.6 / 575.1; the flagship T = 2048 593.2 / 489.4. At tiles of 16 and 32 the
    // persistent form lost or tied (T = 512 mt2/16 299.3 / 332.5; T = 64 mt2/16 155.3 against
    // persistent mt2/32 158.5), so they stay one block a tile.
    //
    // Session 48 (H100, with the k-tile's 32-bit descriptor sums): persistent tiles of 48 (above), and
    // of 32 with two m-tiles — the flagship T = 512 (16 rows) mt2/32 249.2 one block a tile against
    // 234.2 persistent; tiles of 16 still tie or lose (mt2/16 265.1 against 268.1).
    if (p.tile_rows >= 32) p.wgmma_persist = 1;
    return p;
}

size_t moe_experts_scratch_bytes(const MoePlan& plan, int64_t T, int k, int E, int64_t H, int64_t I) {
    const int64_t P = T * k;
    size_t bytes = plan.grouped ? moe_group_scratch_bytes(T, k, E, plan.tile_rows) : 0;
    if (plan.large_tiles || plan.mid)  // the mid plan: the v2 tiles' xg, act and out
        return bytes + align_up(size_t(P * row128(H)) * 2) + align_up(size_t(P * row128(I)) * 2) +
               align_up(size_t(P * H) * 4);
    if (plan.fused_decode) return bytes + align_up(size_t(P * H) * sizeof(float));  // w_j·o_j a slot
    bytes += align_up(size_t(P * I) * sizeof(float));
    if (!plan.down_by_token) bytes += align_up(size_t(P * H) * sizeof(float));
    return bytes;
}

size_t moe_experts_scratch_bytes(int64_t T, int k, int E, int64_t H, int64_t I) {
    size_t most = 0;
    for (int tile : {1, 8})
        for (bool by_token : {false, true})
            most = std::max(most, moe_experts_scratch_bytes({true, by_token, tile, false}, T, k, E, H, I));
    most = std::max(most, moe_experts_scratch_bytes({true, false, 16, true, true}, T, k, E, H, I));
    return std::max(most, moe_experts_scratch_bytes(moe_mid_plan(), T, k, E, H, I));
}

void moe_experts_packed_plan(const MoePlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                             const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                             void* scratch, cudaStream_t stream, bool x_settled, const MoeRouteAhead& ra) {
    const char* op = "moe_experts_packed";
    check_plan(plan);
    TS_CHECK(!plan.wgmma_combine || w.combine_counters,
             "{}: wgmma_combine without MoePackedExperts::combine_counters (the tiles' tickets)", op);
    if (ra.logits) {
        TS_CHECK(x_settled, "{}: route_ahead needs x_settled (the routing kernel just before, on x's logits)", op);
        TS_CHECK(ra.E >= 1 && ra.E <= kMoeRouteAheadMaxExperts && ra.k >= 1 && ra.k <= ra.E &&
                     ra.k + (ra.shared ? 1 : 0) == k && ra.E + (ra.shared ? 1 : 0) == w.E &&
                     ra.ldl >= ra.E + (ra.shared ? 1 : 0),
                 "{}: route_ahead of {} picks from {} experts{} (row stride {}) does not fit {} slots of {} experts "
                 "(at most {} ranked)",
                 op, ra.k, ra.E, ra.shared ? " and the shared one" : "", ra.ldl, k, w.E, kMoeRouteAheadMaxExperts);
    }
    check_route_shape(op, T, w.E, k);
    TS_CHECK(w.H > 0 && w.I > 0 && w.H % 32 == 0 && w.I % 32 == 0,
             "{}: H = {} and I = {} must be positive multiples of 32 (whole Int4 chunks)", op, w.H, w.I);
    TS_CHECK(w.I <= 65535LL * 8 && w.H <= 65535LL * 8, "{}: H = {} or I = {} is too large for the grid", op, w.H,
             w.I);
    if (T == 0) return;
    TS_CHECK(w.gate && w.up && w.down, "{}: null expert descriptor array (E = {})", op, w.E);
    TS_CHECK(ids && weights, "{}: null ids or weights [{}, {}]", op, T, k);
    check_scratch(op, scratch);
    ref::detail::check_rows(op, "x", x, ldx, T, w.H);
    ref::detail::check_rows(op, "y", y, ldy, T, w.H);
    const ref::detail::Span ys = ref::detail::span_of(y, ldy, T, w.H), xs = ref::detail::span_of(x, ldx, T, w.H);
    TS_CHECK((y == x && ldy == ldx) || !ref::detail::overlaps(ys, xs), "{}: y must be x itself or not overlap it", op);

    TS_CHECK(!plan.mid || detail::moe_mid_fits(w.H, w.I),
             "{}: H = {} or I = {} too large for the mid kernels' shared memory ({} and {} of at most {} bytes)", op,
             w.H, w.I, detail::moe_mid_gate_up_smem(w.H), detail::moe_mid_down_smem(w.I), detail::kMoeMidMaxSmem);

    const int64_t P = T * k;
    char* at = static_cast<char*>(scratch);
    MoeGrouping g;
    if (plan.grouped) {
        g = carve_grouping(at, T, k, w.E, plan.tile_rows);
        at += moe_group_scratch_bytes(T, k, w.E, plan.tile_rows);
        TS_CUDA_CHECK(detail::launch_moe_group(ids, T, k, w.E, plan.tile_rows, g, stream));
    }
    if (plan.mid) {
        void* xg = at;  // [P, H] bf16, the gather's column order
        at += align_up(size_t(P * row128(w.H)) * 2);
        void* act = at;  // [P, I] bf16, likewise
        at += align_up(size_t(P * row128(w.I)) * 2);
        auto* out = reinterpret_cast<float*>(at);  // [P, H]
        TS_CUDA_CHECK(detail::launch_moe_gather_bf16_perm(xg, x, ldx, T, w.H, k, g, stream));
        const int gate_up_tiles = plan.mid_gate_up_tiles ? plan.mid_gate_up_tiles : 1;
        TS_CUDA_CHECK(detail::launch_moe_mid_gate_up(act, xg, w, g, plan.mid_ring, gate_up_tiles, stream));
        const int down_tiles = plan.mid_down_tiles ? plan.mid_down_tiles : P >= kMoeMidDown4Rows ? 4 : 2;
        TS_CUDA_CHECK(detail::launch_moe_mid_down(out, act, w, g, plan.mid_ring, down_tiles, stream));
        TS_CUDA_CHECK(detail::launch_moe_combine(y, ldy, out, T, w.H, weights, k, g, stream));
        return;
    }
    if (plan.large_tiles) {
        void* xg = at;  // [P, H] bf16 ([P, H128] for wgmma)
        at += align_up(size_t(P * row128(w.H)) * 2);
        void* act = at;  // [P, I] bf16 ([P, I128] for wgmma)
        at += align_up(size_t(P * row128(w.I)) * 2);
        auto* out = reinterpret_cast<float*>(at);  // [P, H]
        if (plan.wgmma) {
            const int tma = plan.wgmma_tma;  // check_plan: 0, or 1 / 2 with tiles of 16, 32 or 64
            const int mt = plan.wgmma_mt == 2 ? 2 : 1;
            if (tma == 1 && plan.wgmma_gather && w.tiling.gate_up) {  // x in bf16 once a token, rows gathered
                TS_CUDA_CHECK(detail::launch_moe_rows_wgmma(xg, x, ldx, T, w.H, stream));
                TS_CUDA_CHECK(
                    detail::launch_moe_wgmma_tma_gate_up_gathered(act, xg, T, k, w, g, plan.tile_rows, mt, stream));
            } else {
                TS_CUDA_CHECK(detail::launch_moe_gather_wgmma(xg, x, ldx, T, w.H, k, g, stream));
                if (plan.wgmma_fused) {  // gate+up's tiles and down's in one launch, out in bf16
                    TS_CHECK(w.tiling.gate_up && w.tiling.down, "{}: wgmma_fused needs the experts stacked in tiles",
                             op);
                    TS_CUDA_CHECK(detail::launch_moe_wgmma_tma_fused(out, act, xg, P, w, g, plan.tile_rows, stream,
                                                                     plan.wgmma_persist, tuning(plan)));
                    TS_CUDA_CHECK(detail::launch_moe_combine_bf16(y, ldy, out, T, w.H, weights, k, g, stream));
                    return;
                }
                if (tma && w.tiling.gate_up)
                    TS_CUDA_CHECK(detail::launch_moe_wgmma_tma_gate_up(act, xg, P, w, g, plan.tile_rows, tma, mt,
                                                                       stream, plan.wgmma_persist, plan.wgmma_fit,
                                                                       tuning(plan)));
                else
                    TS_CUDA_CHECK(detail::launch_moe_wgmma_gate_up(act, xg, w, g, plan.tile_rows, stream));
            }
            if (tma && w.tiling.down && plan.wgmma_combine) {  // the tiles sum the slots: no combine after
                const detail::MoeTileCombine cb{y, ldy, weights, w.combine_counters, k, int(T)};  // (T ≤ 2³¹: checked)
                TS_CUDA_CHECK(detail::launch_moe_wgmma_tma_down(out, act, P, w, g, plan.tile_rows, tma, mt, stream,
                                                                plan.wgmma_persist, plan.wgmma_fit, cb,
                                                                tuning_down(plan)));
                return;
            }
            const bool out16 = tma && w.tiling.down && plan.wgmma_out16;  // out in bf16, summed from bf16
            if (tma && w.tiling.down)
                TS_CUDA_CHECK(detail::launch_moe_wgmma_tma_down(out, act, P, w, g, plan.tile_rows, tma, mt, stream,
                                                                plan.wgmma_persist, plan.wgmma_fit, {},
                                                                tuning_down(plan), out16));
            else
                TS_CUDA_CHECK(detail::launch_moe_wgmma_down(out, act, w, g, plan.tile_rows, stream));
            if (out16)
                TS_CUDA_CHECK(detail::launch_moe_combine_bf16(y, ldy, out, T, w.H, weights, k, g, stream));
            else
                TS_CUDA_CHECK(detail::launch_moe_combine(y, ldy, out, T, w.H, weights, k, g, stream));
            return;
        }
        if (plan.v2) {
            TS_CUDA_CHECK(detail::launch_moe_gather_bf16_perm(xg, x, ldx, T, w.H, k, g, stream));
            TS_CUDA_CHECK(detail::launch_moe_mma_gate_up(act, xg, w, g, plan.tile_rows, stream));
            TS_CUDA_CHECK(detail::launch_moe_mma_down(out, act, w, g, plan.tile_rows, stream));
            TS_CUDA_CHECK(detail::launch_moe_combine(y, ldy, out, T, w.H, weights, k, g, stream));
            return;
        }
        TS_CUDA_CHECK(detail::launch_moe_gather_bf16(xg, x, ldx, T, w.H, k, g, stream));
        TS_CUDA_CHECK(detail::launch_moe_tile_gate_up(act, xg, w, g, plan.tile_rows, stream));
        TS_CUDA_CHECK(detail::launch_moe_tile_down(out, act, w, g, plan.tile_rows, stream));
        TS_CUDA_CHECK(detail::launch_moe_combine(y, ldy, out, T, w.H, weights, k, g, stream));
        return;
    }
    if (plan.fused_decode) {
        const MoeFusedShape f = moe_fused_shape(w.H, w.I, w.tiling, plan.fused_decode);
        TS_CHECK(f.cluster > 0,
                 "{}: the fused decode kernel needs the experts stacked in 16-row tiles of one group size (32, 64 or "
                 "128) and H = {}, I = {} multiples of 128 whose row tiles split over 8 or 16 blocks",
                 op, w.H, w.I);
        TS_CHECK(w.counters != nullptr, "{}: the fused decode kernel needs the experts' counters (zeroed device words)",
                 op);
        TS_CHECK(T <= 65535, "{}: T = {} tokens is too many for the fused decode kernel's grid", op, T);
        TS_CUDA_CHECK(detail::launch_moe_fused_decode(y, ldy, x, ldx, T, w, ids, weights, k, reinterpret_cast<float*>(at),
                                                      x_settled, f, stream));
        return;
    }
    auto* act = reinterpret_cast<float*>(at);  // [P, I]
    at += align_up(size_t(P * w.I) * sizeof(float));
    if (plan.dp4a_decode) {
        TS_CHECK(P <= 65535, "{}: T·k = {} slots is too many for the integer-unit decode kernels' grid", op, P);
        TS_CHECK(detail::moe_decode_dp4a_fits(w.H, w.I, k),
                 "{}: H = {} or k·I = {} too large for the integer-unit decode kernels' shared memory ({} and {} of "
                 "at most {} bytes)",
                 op, w.H, k * w.I, detail::moe_decode_dp4a_gate_up_smem(w.H), detail::moe_decode_dp4a_down_smem(w.I, k),
                 detail::moe_decode_dp4a_smem_limit());
        TS_CUDA_CHECK(detail::launch_moe_decode_dp4a_gate_up(act, x, ldx, T, w, ids, k, x_settled, ra, stream));
        TS_CUDA_CHECK(
            detail::launch_moe_decode_dp4a_down(y, ldy, act, T, w, ids, weights, k, plan.mma_down_warps, stream));
        return;
    }
    if (plan.mma_decode) {
        TS_CHECK(P <= 65535, "{}: T·k = {} slots is too many for the tensor-core decode kernels' grid", op, P);
        TS_CHECK(detail::moe_decode_mma_smem_bytes(w.I, k) <= detail::moe_decode_mma_smem_limit(),
                 "{}: k·I = {} too large for the tensor-core decode down kernel's shared memory", op, k * w.I);
        TS_CHECK(w.H <= detail::kMoeDecodeMmaMaxH, "{}: H = {} too large for the tensor-core decode gate+up kernel "
                 "(at most {})", op, w.H, detail::kMoeDecodeMmaMaxH);
        TS_CUDA_CHECK(detail::launch_moe_decode_mma_gate_up(act, x, ldx, T, w, ids, k, plan.mma_gate_up_batch, stream));
        TS_CUDA_CHECK(
            detail::launch_moe_decode_mma_down(y, ldy, act, T, w, ids, weights, k, plan.mma_down_batch,
                                               plan.mma_down_warps, plan.mma_pdl, stream));
        return;
    }
    if (plan.v2) {
        TS_CHECK(P <= 65535, "{}: T·k = {} slots is too many for the v2 small tiles' grid", op, P);
        TS_CHECK(detail::moe_decode_smem_bytes(w.H, w.I, k) <= detail::moe_decode_smem_limit(),
                 "{}: H = {}, k·I = {} too large for the v2 small tiles' shared memory", op, w.H, k * w.I);
        TS_CUDA_CHECK(detail::launch_moe_decode_gate_up(act, x, ldx, T, w, ids, k, stream));
        TS_CUDA_CHECK(detail::launch_moe_decode_down(y, ldy, act, T, w, ids, weights, k, stream));
        return;
    }
    const MoeGrouping* gp = plan.grouped ? &g : nullptr;
    TS_CUDA_CHECK(detail::launch_moe_gate_up(act, x, ldx, T, w, ids, k, gp, plan.tile_rows, stream));
    if (plan.down_by_token) {
        TS_CUDA_CHECK(detail::launch_moe_down_by_token(y, ldy, act, T, w, ids, weights, k, gp, stream));
        return;
    }
    auto* out = reinterpret_cast<float*>(at);  // [P, H]
    TS_CUDA_CHECK(detail::launch_moe_down_by_item(out, act, T, w, k, g, plan.tile_rows, stream));
    TS_CUDA_CHECK(detail::launch_moe_combine(y, ldy, out, T, w.H, weights, k, g, stream));
}

MoePlan moe_plan(int64_t T, int k, const MoePackedExperts& w, const MoeSwitches& sw) {
    const bool dp4a = sw.dp4a, wgmma = sw.wgmma, mid = sw.mid, tma = sw.tma, fused = sw.fused;
    MoePlan plan = moe_pick(T, k, w.E);
    if (fused && T <= kMoeFusedMaxTokens && w.counters && moe_fused_shape(w.H, w.I, w.tiling).cluster > 0) {
        plan = MoePlan{};
        plan.fused_decode = 1;
    }
    if (plan.wgmma_tma && !(tma && wgmma && w.tiling.gate_up && w.tiling.down)) {
        plan.wgmma_tma = 0, plan.wgmma_mt = 0;  // the plain wgmma tiles of the same rows,
        if (T * k <= int64_t(kMoeMidRows) * w.E) plan.wgmma = false, plan.v2 = true;  // or at ≤ 8 rows the v2 / mid
    }
    plan.wgmma_gather = sw.gather && plan.wgmma_tma == 1;  // gate+up gathering x's rows itself (opt-in)
    plan.wgmma_combine = sw.combine && plan.wgmma_tma >= 1 && w.combine_counters;  // the down tiles' own sum (opt-in)
    plan.wgmma_out16 = sw.out16 && plan.wgmma_tma >= 1 && !plan.wgmma_combine;  // out in bf16 (the backend's)
    // the weights evicted first (opt-in; A's rows evicted last: not in clusters)
    plan.wgmma_l2_first = plan.wgmma_tma != 1 && plan.wgmma_tma != 2 ? 0
                          : plan.wgmma_tma == 2 && sw.l2_first == 2  ? 1
                                                                     : sw.l2_first;
    // Persistent tiles: the pick's (tiles of 64), at every tile size (persist 1), or none (-1).
    if (sw.persist != 0) plan.wgmma_persist = sw.persist > 0 ? 1 : 0;
    if (plan.wgmma_tma != 1 || plan.wgmma_gather) plan.wgmma_persist = 0;
    plan.wgmma_fit = sw.fit && plan.wgmma_tma == 1 && !plan.wgmma_gather && !plan.wgmma_persist &&
                     plan.tile_rows <= 64;  // (opt-in)
    if (plan.wgmma && !wgmma) plan.wgmma = false, plan.v2 = true;  // the mma.sync tiles of the same rows
    // Tiles of 48 are the warp-specialised tiles' own (one m-tile, neither gathered nor fitted):
    // every other form takes tiles of 64 instead.
    if (plan.tile_rows == 48 && (!plan.wgmma || plan.wgmma_tma != 1 || plan.wgmma_gather || plan.wgmma_fit))
        plan.tile_rows = 64;
    // Gate+up in four consumer warpgroups a block where its tiles take them: asked for, or (auto) at
    // tiles of 48, and of 64 from 2,048 tokens — where they were measured ahead (sessions 60, 61: at
    // 64 rows level to 1,024 tokens, 1–3.5 % ahead at 2,048 and 4,096); behind at 32's token counts.
    const bool wg4 = sw.warpgroups == 4 ||
                     (sw.warpgroups == 0 && (plan.tile_rows == 48 || (plan.tile_rows == 64 && T >= 2048)));
    plan.wgmma_warpgroups = wg4 && moe_tiles_take_wide_forms(plan) ? 4 : 2;
    plan.wgmma_fit8 = sw.fit8 && moe_tiles_take_fit8(plan);
    plan.wgmma_dynamic = sw.dynamic && moe_tiles_take_dynamic(plan);
    plan.wgmma_fused = sw.fused_tiles && moe_tiles_take_fused(plan);  // (opt-in)
    if (plan.wgmma_fused) plan.wgmma_warpgroups = 4;  // (its gate+up's)
    plan.wgmma_fused_warp = plan.wgmma_fused && sw.fused_warp;
    if (mid && plan.v2 && plan.large_tiles && T * k <= int64_t(kMoeMidRows) * w.E && detail::moe_mid_fits(w.H, w.I))
        plan = moe_mid_plan();  // few rows an expert: each expert's weights once, no padding rows
    if (plan.dp4a_decode && (!dp4a || T * k > 65535 || !detail::moe_decode_dp4a_fits(w.H, w.I, k))) {
        plan.dp4a_decode = false;  // the tensor-core decode kernels, or past them the first generation
        plan.mma_decode = true;
    }
    if (plan.mma_decode &&
        (T * k > 65535 || detail::moe_decode_mma_smem_bytes(w.I, k) > detail::moe_decode_mma_smem_limit() ||
         w.H > detail::kMoeDecodeMmaMaxH))
        plan = MoePlan{};  // the first-generation per-slot tiles take any size
    if (plan.v2 && !plan.large_tiles &&
        (T * k > 65535 || detail::moe_decode_smem_bytes(w.H, w.I, k) > detail::moe_decode_smem_limit()))
        plan = MoePlan{};
    return plan;
}

void moe_experts_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                        const int32_t* ids, const float* weights, int k, void* scratch, cudaStream_t stream,
                        const MoeSwitches& sw) {
    moe_experts_packed_plan(moe_plan(T, k, w, sw), y, ldy, x, ldx, T, w, ids, weights, k, scratch, stream,
                            sw.x_settled, sw.route_ahead ? *sw.route_ahead : MoeRouteAhead{});
}

}  // namespace tessera::cuda::fast
