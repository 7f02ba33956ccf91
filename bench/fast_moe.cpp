// bench_fast_moe: the fast MoE kernels (kernels/cuda/fast_moe.h) on device buffers at llama.cpp's
// Qwen3-30B-A3B shape (128 experts top-8, 768×2048 each) and the flagship's (256 top-8, 512×2048),
// Int4 G=32 (Q4_0-like), at 1 to 2048 tokens: the router alone, the grouping alone, each expert
// step alone and the whole moe_experts_packed per plan. CUDA events on one stream, median of --runs
// after warm-up. Routings: "hot" = one routing every call (its experts stay in the 50 MB L2, as in
// llama.cpp's test-backend-ops), "cold" = 16 random routings in turn. TB/s = bytes of the selected
// experts' weights (codes + scales) / time; % of 4.3 TB/s (the measured copy bandwidth, PERF.md).
// llama.cpp's anchor (7.63 µs at 1 token, 320 µs at 512) is ONE of the three matrices (mul_mat_id).
// The second-generation plans (v2: fast_moe_decode.cu, fast_moe_mma.cu) first, then the
// tensor-core decode kernels (mma decode: fast_moe_decode_mma.cu, T ≤ 64), then the first; the mid
// kernels (fast_moe_mid.cu: grouped, ≤ 8 rows an item; rings auto, 3 and 4) up to 16 rows an
// expert on average, with their steps alone (hot) — for the mid batches: --tokens 3,8,16,32,64,96,128.
// --reps N times N back-to-back calls a sample (µs a call printed), --graph N of them in one CUDA
// graph (launch gaps hidden: the engine's decode graphs; llama.cpp's test-backend-ops times the same way).
//   bench_fast_moe [--tokens 1,2,4,8,64,512,2048] [--runs 50] [--warmup 10] [--reps 1] [--graph] [--filter TEXT] [--fused]
//                  [--all] [--rows]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "cuda_timer.h"
#include "data.h"
#include "kernel_args.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/stream.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr double kCopyBw = 4.3e12;  // measured device-to-device copy bandwidth on the H200 (PERF.md)

struct Args {
    std::vector<int64_t> tokens = {1, 2, 4, 8, 64, 512, 2048};
    int runs = 50, warmup = 10, reps = 1;
    bool graph = false;  // the --reps calls of a sample in one CUDA graph
    std::string filter;
    bool all = false;   // also the f32 small tiles beyond 64 tokens
    bool rows = false;  // experts row-major (else in 16-row tiles where they fit, as the backend places them)
    bool fused = false;  // the fused decode rows even where fast::kMoeFusedDecodeWorks is false
};

struct Shape {
    const char* name;
    int E;
    int64_t I, H;
    int k;
    const char* anchor1;    // llama.cpp at 1 token (one matrix)
    const char* anchor512;  // llama.cpp at 512 tokens (one matrix)
};

using Rng = bench::XorShift;

using Timer = bench::CudaTimer;

// Median seconds a call of fn(i): --reps calls back to back a sample, in one CUDA graph with --graph.
template <typename F>
double time_of(const Args& a, Timer& timer, F&& fn) {
    return timer.per_call(a.warmup, a.runs, a.reps, a.graph, fn);
}

// One stacked packed matrix [E·n, K] (no biases: Q4_0's form) and its per-expert descriptors,
// marked as 16-row tiles where they fit unless `rows` (random codes: either order reads as well).
struct Stack {
    DeviceBuffer codes, scales;
    std::vector<PackedMatrix> desc;
};

Stack make_stack(int E, int64_t n, int64_t K, Rng& rng, bool rows) {
    Stack s;
    std::vector<uint8_t> codes(size_t(E) * size_t(n * K / 2));
    for (auto& b : codes) b = uint8_t(rng.next());
    std::vector<uint16_t> scales(size_t(E) * size_t(n * K / 32));
    for (auto& v : scales) v = f32_to_f16(rng.uniform(0.001f, 0.02f));
    s.codes = DeviceBuffer(codes.size());
    s.scales = DeviceBuffer(scales.size() * 2);
    s.codes.upload(codes.data(), codes.size());
    s.scales.upload(scales.data(), scales.size() * 2);
    for (int e = 0; e < E; ++e) {
        PackedMatrix m;
        m.n = n;
        m.k = K;
        m.group = 32;
        m.codes = s.codes.as<uint8_t>() + size_t(e) * size_t(n * K / 2);
        m.scales = s.scales.as<uint16_t>() + size_t(e) * size_t(n * K / 32);
        m.tiles = !rows && packed_tiles_fit(m.kind, n, K, m.group);
        s.desc.push_back(m);
    }
    return s;
}

template <typename T>
DeviceBuffer upload(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    return b;
}

struct Routing {
    DeviceBuffer ids, weights;
    int distinct = 0;
};

Routing random_routing(int64_t T, int k, int E, Rng& rng) {
    std::vector<int32_t> ids;
    std::vector<float> w;
    std::vector<char> used(size_t(E), 0);
    std::vector<int32_t> pool(static_cast<size_t>(E));
    for (int64_t t = 0; t < T; ++t) {
        std::iota(pool.begin(), pool.end(), 0);
        for (int j = 0; j < k; ++j) {
            std::swap(pool[size_t(j)], pool[size_t(j) + rng.next() % uint32_t(E - j)]);
            ids.push_back(pool[size_t(j)]);
            w.push_back(1.f / float(k));
            used[size_t(pool[size_t(j)])] = 1;
        }
    }
    Routing r{upload(ids), upload(w), int(std::count(used.begin(), used.end(), 1))};
    return r;
}

std::string plan_name(const fast::MoePlan& p) {
    if (p.mid)
        return "mid grouped/8 ring " + (p.mid_ring ? std::to_string(p.mid_ring) : std::string("auto")) + " (mma bf16)";
    if (p.fused_decode)
        return std::string("fused decode, one kernel (x 2 limbs), form ") + std::to_string(p.fused_decode) +
               (p.fused_decode == 1 ? " (2 blocks an SM)" : p.fused_decode == 2 ? " (1 block an SM)" : " (16 warps)");
    if (p.dp4a_decode) return std::string("dp4a decode per slot (x 2 limbs)") + (p.mma_down_warps == 8 ? " down 8 warps" : "");
    if (p.mma_decode)
        return "mma decode per slot, down batch " +
               (p.mma_down_batch ? std::to_string(p.mma_down_batch) : std::string("auto")) +
               (p.mma_down_warps == 16 ? " 16 warps" : "") + (p.mma_gate_up_batch == 1 ? " gu 1" : "") +
               (p.mma_pdl ? " pdl" : "");
    if (p.wgmma)
        return "wgmma " + (p.wgmma_tma ? "tma/" + std::to_string(p.wgmma_tma) + " " : std::string()) +
               (p.wgmma_mt == 2 ? "mt2 " : "") + (p.wgmma_gather ? "gather " : "") +
               (p.wgmma_persist ? "persist " : "") + (p.wgmma_fit ? "fit " : "") +
               (p.wgmma_combine ? "own-combine " : "") + (p.wgmma_out16 ? "out16 " : "") +
               (p.wgmma_warpgroups == 4 ? "wg4 " : "") + (p.wgmma_fit8 ? "fit8 " : "") +
               (p.wgmma_dynamic ? "dyn " : "") + (p.wgmma_fused ? p.wgmma_fused_warp ? "fused-warp " : "fused " : "") +
               (p.wgmma_l2_first == 1   ? "l2-first "
                : p.wgmma_l2_first == 2 ? "l2-first-last "
                : p.wgmma_l2_first == 3 ? "l2-last-item "
                                        : "") +
               "large/" +
               std::to_string(p.tile_rows) + " (bf16)";
    if (p.v2) return p.large_tiles ? "v2 large/" + std::to_string(p.tile_rows) + " (mma bf16)" : "v2 decode per slot";
    if (p.large_tiles) return "large tiles/" + std::to_string(p.tile_rows) + " (mma bf16)";
    return std::string(p.grouped ? "grouped/" + std::to_string(p.tile_rows) : "per slot") +
           (p.down_by_token ? " down/token" : " down/item+combine");
}

size_t align256(size_t v) { return (v + 255) / 256 * 256; }

fast::MoePlan wgmma_plan(int tile_rows, int tma = 0, int mt = 0, bool gather = false, int persist = 0,
                         bool fit = false) {
    fast::MoePlan p{true, false, tile_rows, true};
    p.wgmma = true;
    p.wgmma_tma = tma;
    p.wgmma_mt = mt;
    p.wgmma_gather = gather;
    p.wgmma_persist = persist;
    p.wgmma_fit = fit;
    return p;
}

fast::MoePlan mid_plan(int ring) {
    fast::MoePlan p = fast::moe_mid_plan();
    p.mid_ring = ring;
    return p;
}

void row(const Shape& s, int64_t T, const std::string& what, double sec, double bytes, const std::string& note) {
    std::printf("| %-20s | %4lld | %-44s | %9.2f | %6.2f | %5.1f%% | %s\n", s.name, (long long)T, what.c_str(), sec * 1e6,
                bytes > 0 ? bytes / sec / 1e12 : 0.0, bytes > 0 ? 100.0 * bytes / sec / kCopyBw : 0.0, note.c_str());
    std::fflush(stdout);
}

void bench_shape(const Args& a, const Shape& s, Stream& stream, Timer& timer) {
    Rng rng{0x9e3779b97f4a7c15ull ^ uint64_t(s.E * 131 + s.I)};
    const Stack gate = make_stack(s.E, s.I, s.H, rng, a.rows), up = make_stack(s.E, s.I, s.H, rng, a.rows),
                down = make_stack(s.E, s.H, s.I, rng, a.rows);
    const fast::MoeTiling tiling =
        fast::moe_check_experts(gate.desc.data(), up.desc.data(), down.desc.data(), s.E, s.H, s.I);
    const DeviceBuffer dg = upload(gate.desc), du = upload(up.desc), dd = upload(down.desc);
    fast::MoePackedExperts w{s.E, s.H, s.I, dg.as<PackedMatrix>(), du.as<PackedMatrix>(), dd.as<PackedMatrix>(),
                             tiling};
    // The fused decode kernel's tickets (zero; each launch leaves them zero).
    const int64_t max_t = *std::max_element(a.tokens.begin(), a.tokens.end());
    DeviceBuffer counters(fast::moe_fused_counters_bytes(std::min<int64_t>(max_t, 8), 16));
    TS_CUDA_CHECK(cudaMemset(counters.data(), 0, counters.size()));
    w.counters = counters.as<unsigned>();
    // The down tiles' own slot sum's tickets (MoePlan::wgmma_combine; zero, left zero).
    DeviceBuffer combine_counters(fast::moe_combine_counters_bytes(max_t, s.H));
    TS_CUDA_CHECK(cudaMemset(combine_counters.data(), 0, combine_counters.size()));
    w.combine_counters = combine_counters.as<unsigned>();
    for (int form : {1, 2, 3}) {  // how many of the fused decode kernel's clusters run at once (k·T a step)
        const fast::MoeFusedShape f = fast::moe_fused_shape(s.H, s.I, tiling, form);
        if (f.cluster)
            std::printf("%s: fused decode form %d (%d consumer warps): clusters of %d, a ring of %d stages (%zu bytes), "
                        "%d clusters resident\n",
                        s.name, form, f.warps, f.cluster, f.ring, f.smem,
                        fast::detail::moe_fused_active_clusters(s.H, s.I, tiling, form));
    }
    // Bytes of one expert's matrix (codes + f16 scales per 32).
    const double matrix_bytes = double(s.I * s.H) / 2 + double(s.I * s.H) / 32 * 2;
    const cudaStream_t st = stream.get();

    for (int64_t T : a.tokens) {
        const std::string label = std::string(s.name) + " T=" + std::to_string(T);
        if (!a.filter.empty() && label.find(a.filter) == std::string::npos) continue;
        std::vector<Routing> routings;
        double distinct = 0;
        for (int i = 0; i < 16; ++i) {
            routings.push_back(random_routing(T, s.k, s.E, rng));
            distinct += routings.back().distinct / 16.0;
        }
        std::vector<float> xh(size_t(T * s.H));
        for (auto& v : xh) v = rng.uniform(-1.f, 1.f);
        std::vector<float> lh(size_t(T * s.E));
        for (auto& v : lh) v = rng.uniform(-4.f, 4.f);
        const DeviceBuffer x = upload(xh), logits = upload(lh);
        DeviceBuffer y(size_t(T * s.H) * 4), ids(size_t(T * s.k) * 4), wts(size_t(T * s.k) * 4);
        DeviceBuffer scratch(fast::moe_experts_scratch_bytes(T, s.k, s.E, s.H, s.I));
        const double hot_bytes = 3 * matrix_bytes * routings[0].distinct, cold_bytes = 3 * matrix_bytes * distinct;
        const char* anchor = T == 1 ? s.anchor1 : T == 512 ? s.anchor512 : "";
        char note[160];

        const double route = time_of(a, timer, [&](int) {
            fast::moe_route(logits.as<float>(), s.E, T, s.E, s.k, true, false, ids.as<int32_t>(), wts.as<float>(), st);
        });
        row(s, T, "moe_route (softmax, top-k, renormalise)", route, 0, "");
        if (T > 2) {  // the routing, then the grouping as the backend chains them: PDL, and the ordinary launch
            const fast::MoeGrouping rg = fast::moe_group(ids.as<int32_t>(), T, s.k, s.E, 64, scratch.data(), st);
            for (bool pdl : {true, false}) {
                const double chain = time_of(a, timer, [&](int) {
                    fast::moe_route(logits.as<float>(), s.E, T, s.E, s.k, true, false, ids.as<int32_t>(),
                                    wts.as<float>(), st);
                    TS_CUDA_CHECK(fast::detail::launch_moe_group(ids.as<int32_t>(), T, s.k, s.E, 64, rg, st, pdl));
                });
                row(s, T, pdl ? "moe_route + moe_group (tile 64), PDL" : "moe_route + moe_group (tile 64), plain",
                    chain, 0, "");
            }
        }

        const fast::MoePlan pick = fast::moe_pick(T, s.k, s.E);
        fast::MoePlan pick_combine = pick;  // the pick with the down tiles summing the slots themselves
        pick_combine.wgmma_combine = pick.wgmma_tma >= 1;
        if (pick.dp4a_decode) {  // the routing kernel and the pick as the backend chains them: the ids
            // awaited, or the logits ranked ahead by gate+up (MoeRouteAhead, TESSERA_MOE_ROUTE_AHEAD)
            const fast::MoeRouteAhead ra{logits.as<float>(), s.E, s.E, s.k, false};
            for (bool ahead : {false, true}) {
                const double chain = time_of(a, timer, [&](int) {
                    fast::moe_route(logits.as<float>(), s.E, T, s.E, s.k, true, false, ids.as<int32_t>(),
                                    wts.as<float>(), st);
                    fast::moe_experts_packed(y.as<float>(), s.H, x.as<float>(), s.H, T, w, ids.as<int32_t>(),
                                             wts.as<float>(), s.k, scratch.data(), st,
                                             {.x_settled = true, .route_ahead = ahead ? &ra : nullptr});
                });
                row(s, T, ahead ? "moe_route + experts (pick), route ahead" : "moe_route + experts (pick)", chain, 0,
                    "");
            }
        }
        std::vector<fast::MoePlan> plans = {pick};
        if (pick_combine.wgmma_combine) plans.push_back(pick_combine);
        for (int l2 = 1; l2 <= 3 && pick.wgmma_tma == 1; ++l2) {  // the pick under L2 policies
            fast::MoePlan first = pick;  // (TESSERA_MOE_L2=first, first-last, last-item)
            first.wgmma_l2_first = l2;
            plans.push_back(first);
        }
        for (int l2 : {0, 1}) {  // the pick with out in bf16 (TESSERA_MOE_OUT=bf16), under L2's policies 0 and 1
            if (pick.wgmma_tma < 1) break;
            fast::MoePlan o = pick;
            o.wgmma_out16 = true;
            o.wgmma_l2_first = l2;
            plans.push_back(o);
        }
        if (fast::moe_tiles_take_fit8(pick) && !fast::moe_tiles_take_wide_forms(pick)) {
            fast::MoePlan o = pick;  // two m-tiles of 32 with wgmma's N in steps of 8 (TESSERA_MOE_FIT8=on)
            o.wgmma_out16 = true;
            o.wgmma_fit8 = true;
            plans.push_back(o);
        }
        if (pick.wgmma && pick.wgmma_tma == 1) {
            // the pick's alternatives, persistent, one m-tile of 32 to 64 rows, with gate+up in four
            // warpgroups and fit8 (the pick's own tile size in the rows below)
            for (int rows : {32, 48, 64}) {
                if (rows == pick.tile_rows && pick.wgmma_mt < 2) continue;
                fast::MoePlan o = pick;
                o.tile_rows = rows, o.wgmma_mt = 0, o.wgmma_persist = 1, o.wgmma_fit = false, o.wgmma_gather = false;
                o.wgmma_out16 = true, o.wgmma_warpgroups = 4, o.wgmma_fit8 = true;
                plans.push_back(o);
                if (fast::moe_tiles_take_dynamic(o)) {  // drawn in turn, and in one launch with down's
                    o.wgmma_dynamic = true;
                    plans.push_back(o);
                    o.wgmma_fused = true;
                    plans.push_back(o);
                    o.wgmma_fused_warp = true;  // (TESSERA_MOE_FUSED_TILES=warp)
                    plans.push_back(o);
                }
            }
        }
        if (fast::moe_tiles_take_wide_forms(pick)) {
            fast::MoePlan o = pick;  // and gate+up in four consumer warpgroups (TESSERA_MOE_WARPGROUPS=4)
            o.wgmma_out16 = true;
            o.wgmma_warpgroups = 4;
            plans.push_back(o);
            o.wgmma_fit8 = true;  // and wgmma's N the items' rows in steps of 8 (TESSERA_MOE_FIT8=on)
            plans.push_back(o);
            o.wgmma_warpgroups = 2;
            plans.push_back(o);
            if (fast::moe_tiles_take_dynamic(o)) {  // and the tiles drawn in turn (TESSERA_MOE_DYNAMIC=on)
                o.wgmma_dynamic = true;
                plans.push_back(o);
                o.wgmma_warpgroups = 4;
                plans.push_back(o);
                o.wgmma_fused = true;  // and gate+up's and down's in one launch (TESSERA_MOE_FUSED_TILES=on)
                plans.push_back(o);
                o.wgmma_fused_warp = true;  // each gate+up tile counted by a producer warp (=warp)
                plans.push_back(o);
            }
        }
        for (const fast::MoePlan& p :
             {fast::MoePlan{false, true, 8, false, true}, fast::MoePlan{false, true, 8, false, false, true, 0},
              fast::MoePlan{false, true, 8, false, false, true, 4},
              fast::MoePlan{false, true, 8, false, false, true, 8},
              fast::MoePlan{false, true, 8, false, false, true, 0, true},
              fast::MoePlan{false, true, 8, false, false, true, 0, false, 1},
              fast::MoePlan{false, true, 8, false, false, true, 0, true, 1},
              fast::MoePlan{false, true, 8, false, false, true, 0, false, 0, 16},
              fast::MoePlan{false, true, 8, false, false, true, 0, true, 0, 16},
              fast::MoePlan{false, true, 8, false, false, false, 0, true, 0, 16, true},
              fast::MoePlan{false, true, 8, false, false, false, 0, true, 0, 8, true},
              fast::MoePlan{true, false, 16, true, true},
              fast::MoePlan{true, false, 32, true, true}, fast::MoePlan{true, false, 64, true, true},
              fast::MoePlan{false, true, 8}, fast::MoePlan{true, true, 8}, fast::MoePlan{true, false, 8},
              fast::MoePlan{true, false, 1}, fast::MoePlan{true, false, 32, true}, fast::MoePlan{true, false, 64, true},
              wgmma_plan(16), wgmma_plan(32), wgmma_plan(64), wgmma_plan(128), wgmma_plan(16, 1), wgmma_plan(32, 1),
              wgmma_plan(64, 1), wgmma_plan(128, 1), wgmma_plan(16, 2), wgmma_plan(32, 2), wgmma_plan(64, 2), wgmma_plan(16, 1, 2),
              wgmma_plan(32, 1, 2), wgmma_plan(64, 1, 2), wgmma_plan(16, 1, 2, true), wgmma_plan(32, 1, 2, true), wgmma_plan(64, 1, 0, true),
              wgmma_plan(16, 1, 2, false, 1), wgmma_plan(32, 1, 2, false, 1), wgmma_plan(64, 1, 0, false, 1),
              wgmma_plan(48, 1), wgmma_plan(48, 1, 0, false, 1),
              wgmma_plan(32, 1, 2, false, 0, true), wgmma_plan(64, 1, 0, false, 0, true),
              mid_plan(0), mid_plan(3), mid_plan(4)}) {
            if (p.grouped == pick.grouped && p.down_by_token == pick.down_by_token && p.tile_rows == pick.tile_rows &&
                p.large_tiles == pick.large_tiles && p.v2 == pick.v2 && p.mma_decode == pick.mma_decode &&
                p.mma_down_batch == pick.mma_down_batch && p.mma_pdl == pick.mma_pdl &&
                p.mma_gate_up_batch == pick.mma_gate_up_batch && p.mma_down_warps == pick.mma_down_warps &&
                p.dp4a_decode == pick.dp4a_decode && p.wgmma == pick.wgmma && p.wgmma_tma == pick.wgmma_tma && p.wgmma_mt == pick.wgmma_mt &&
                p.wgmma_gather == pick.wgmma_gather && p.wgmma_persist == pick.wgmma_persist && p.wgmma_fit == pick.wgmma_fit &&
                p.mid == pick.mid &&
                p.mid_ring == pick.mid_ring)
                continue;
            if (p.mid && T * s.k > 16 * s.E && !a.all) continue;  // items of 8 re-read each expert T·k / 8E times
            if ((p.mma_decode || p.dp4a_decode) && (T * s.k > 65535 || (T > 64 && !a.all))) continue;  // decode only
            if (!p.large_tiles && !p.v2 && T > 64 && !a.all) continue;  // the f32 tiles at prefill: minutes
            plans.push_back(p);
        }
        // The decode step in one kernel (were fast::kMoeFusedDecodeWorks false: --fused only).
        if ((fast::kMoeFusedDecodeWorks || a.fused) && T <= 8 && fast::moe_fused_shape(s.H, s.I, w.tiling).cluster) {
            for (int form : {1, 2, 3}) {  // two blocks an SM of 8 warps; one of 8; one of 16
                fast::MoePlan f;
                f.fused_decode = form;
                plans.push_back(f);
            }
        }
        const double flops = 2.0 * double(T * s.k) * 3.0 * double(s.I * s.H);
        for (size_t pi = 0; pi < plans.size(); ++pi) {
            const fast::MoePlan& p = plans[pi];
            const double hot = time_of(a, timer, [&](int) {
                fast::moe_experts_packed_plan(p, y.as<float>(), s.H, x.as<float>(), s.H, T, w,
                                              routings[0].ids.as<int32_t>(), routings[0].weights.as<float>(), s.k,
                                              scratch.data(), st);
            });
            std::snprintf(note, sizeof note, "hot, %d experts, %.2f µs a matrix, %.0f TFLOP/s; llama.cpp %s (one matrix)",
                          routings[0].distinct, hot * 1e6 / 3, flops / hot / 1e12, anchor);
            row(s, T, "experts " + plan_name(p) + (pi == 0 ? " (pick)" : ""), hot, hot_bytes, note);
            const double cold = time_of(a, timer, [&](int i) {
                const Routing& r = routings[size_t(i % 16)];
                fast::moe_experts_packed_plan(p, y.as<float>(), s.H, x.as<float>(), s.H, T, w, r.ids.as<int32_t>(),
                                              r.weights.as<float>(), s.k, scratch.data(), st);
            });
            std::snprintf(note, sizeof note, "cold, %.1f experts", distinct);
            row(s, T, "experts " + plan_name(p), cold, cold_bytes, note);
        }

        // The steps alone (hot routing), for the grouped plan with tiles of 8 (f32 tiles: T ≤ 64).
        const bool small_steps = T <= 64 || a.all;
        const int32_t* rid = routings[0].ids.as<int32_t>();
        const float* rw = routings[0].weights.as<float>();
        const fast::MoePlan gp{true, false, 8};
        const fast::MoeGrouping g = fast::moe_group(rid, T, s.k, s.E, gp.tile_rows, scratch.data(), st);
        auto* act = reinterpret_cast<float*>(static_cast<char*>(scratch.data()) +
                                             fast::moe_group_scratch_bytes(T, s.k, s.E, gp.tile_rows));
        float* out = act + (size_t(T * s.k * s.I) + 63) / 64 * 64;
        TS_CUDA_CHECK(cudaStreamSynchronize(st));
        const double tg = time_of(a, timer, [&](int) {
            TS_CUDA_CHECK(fast::detail::launch_moe_group(rid, T, s.k, s.E, gp.tile_rows, g, st));
        });
        row(s, T, "  step: moe_group (tile 8)", tg, 0, "");
        if (small_steps) {
            const double tgu_slot = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_gate_up(act, x.as<float>(), s.H, T, w, rid, s.k, nullptr, 1, st));
            });
            row(s, T, "  step: gate+up+SwiGLU per slot", tgu_slot, hot_bytes * 2 / 3, "2 of 3 matrices");
            const double tgu = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_gate_up(act, x.as<float>(), s.H, T, w, rid, s.k, &g, 8, st));
            });
            row(s, T, "  step: gate+up+SwiGLU grouped/8", tgu, hot_bytes * 2 / 3, "2 of 3 matrices");
            const double tdt = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_down_by_token(y.as<float>(), s.H, act, T, w, rid, rw, s.k, &g, st));
            });
            std::snprintf(note, sizeof note, "1 of 3 matrices: llama.cpp %s", anchor);
            row(s, T, "  step: down by token (+ slot sum)", tdt, hot_bytes / 3, note);
            const double tdi = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_down_by_item(out, act, T, w, s.k, g, 8, st));
            });
            row(s, T, "  step: down by item/8", tdi, hot_bytes / 3, note);
            const double tc = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_combine(y.as<float>(), s.H, out, T, s.H, rw, s.k, g, st));
            });
            row(s, T, "  step: combine", tc, 0, "");
        }
        // The v2 decode steps alone (hot routing, per slot).
        if (small_steps && T * s.k <= 65535) {
            const double tg2 = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_decode_gate_up(act, x.as<float>(), s.H, T, w, rid, s.k, st));
            });
            row(s, T, "  step: v2 decode gate+up+SwiGLU", tg2, hot_bytes * 2 / 3, "2 of 3 matrices");
            const double td2 = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_decode_down(y.as<float>(), s.H, act, T, w, rid, rw, s.k, st));
            });
            std::snprintf(note, sizeof note, "1 of 3 matrices: llama.cpp %s", anchor);
            row(s, T, "  step: v2 decode down (+ slot sum)", td2, hot_bytes / 3, note);
        }
        // The integer-unit decode steps alone (hot routing, per slot; gate+up with x settled, as the
        // engine launches it after the routing kernel).
        if (small_steps && T * s.k <= 65535) {
            const double tgu = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_decode_dp4a_gate_up(act, x.as<float>(), s.H, T, w, rid, s.k,
                                                                           true, {}, st));
            });
            row(s, T, "  step: dp4a decode gate+up+SwiGLU", tgu, hot_bytes * 2 / 3, "2 of 3 matrices");
            const double tdn = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(
                    fast::detail::launch_moe_decode_dp4a_down(y.as<float>(), s.H, act, T, w, rid, rw, s.k, 16, st));
            });
            std::snprintf(note, sizeof note, "1 of 3 matrices: llama.cpp %s", anchor);
            row(s, T, "  step: dp4a decode down (+ slot sum)", tdn, hot_bytes / 3, note);
            const double td8 = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(
                    fast::detail::launch_moe_decode_dp4a_down(y.as<float>(), s.H, act, T, w, rid, rw, s.k, 8, st));
            });
            row(s, T, "  step: dp4a decode down, 8 warps", td8, hot_bytes / 3, note);
        }
        // The tensor-core decode steps alone, hot and cold routings (per slot).
        if (small_steps && T * s.k <= 65535) {
            auto hot_cold = [&](const std::string& what, double part, const char* extra,
                                const std::function<void(const Routing&)>& step) {
                const double hot = time_of(a, timer, [&](int) { step(routings[0]); });
                std::snprintf(note, sizeof note, "hot, %s", extra);
                row(s, T, what, hot, hot_bytes * part, note);
                const double cold = time_of(a, timer, [&](int i) { step(routings[size_t(i % 16)]); });
                std::snprintf(note, sizeof note, "cold, %s", extra);
                row(s, T, what, cold, cold_bytes * part, note);
            };
            for (int batch : {2, 1}) {
                hot_cold("  step: mma decode gate+up+SwiGLU/" + std::to_string(batch), 2.0 / 3, "2 of 3 matrices",
                         [&](const Routing& r) {
                             TS_CUDA_CHECK(fast::detail::launch_moe_decode_mma_gate_up(
                                 act, x.as<float>(), s.H, T, w, r.ids.as<int32_t>(), s.k, batch, st));
                         });
            }
            std::string anchor_note = std::string("1 of 3 matrices: llama.cpp ") + anchor;
            for (int batch : {4, 8, 16}) {  // 16: blocks of 16 warps, batches of 4
                const std::string lab =
                    batch == 16 ? std::string("  step: mma decode down/4, 16 warps")
                                : "  step: mma decode down/" + std::to_string(batch) +
                                      (batch == fast::detail::moe_decode_mma_down_batch(s.I, s.k) ? " (auto)" : "");
                hot_cold(lab, 1.0 / 3, anchor_note.c_str(), [&](const Routing& r) {
                    TS_CUDA_CHECK(fast::detail::launch_moe_decode_mma_down(
                        y.as<float>(), s.H, act, T, w, r.ids.as<int32_t>(), r.weights.as<float>(), s.k,
                        batch == 16 ? 4 : batch, batch == 16 ? 16 : 8, false, st));
                });
            }
        }
        // The mid kernels' steps alone (hot routing; grouping by items of 8, xg gathered once).
        if (T * s.k <= 16 * s.E || a.all) {
            const int tile = fast::kMoeMidRows;
            const fast::MoeGrouping mg = fast::moe_group(rid, T, s.k, s.E, tile, scratch.data(), st);
            char* at = static_cast<char*>(scratch.data()) + fast::moe_group_scratch_bytes(T, s.k, s.E, tile);
            void* xg = at;
            void* mact = at + align256(size_t(T * s.k * ((s.H + 127) / 128 * 128)) * 2);
            auto* mout = reinterpret_cast<float*>(static_cast<char*>(mact) +
                                                  align256(size_t(T * s.k * ((s.I + 127) / 128 * 128)) * 2));
            TS_CUDA_CHECK(fast::detail::launch_moe_gather_bf16_perm(xg, x.as<float>(), s.H, T, s.H, s.k, mg, st));
            TS_CUDA_CHECK(cudaStreamSynchronize(st));
            for (int ring : {3, 4}) {
                for (int tiles : {1, 2}) {
                    const double tgu = time_of(a, timer, [&](int) {
                        TS_CUDA_CHECK(fast::detail::launch_moe_mid_gate_up(mact, xg, w, mg, ring, tiles, st));
                    });
                    std::snprintf(note, sizeof note, "hot, 2 of 3 matrices, %d experts", routings[0].distinct);
                    row(s, T, "  step: mid gate+up+SwiGLU ring " + std::to_string(ring) + ", " + std::to_string(tiles) +
                                  " row tiles a warp", tgu, hot_bytes * 2 / 3, note);
                }
                for (int tiles : {2, 4}) {
                    const double tdn = time_of(a, timer, [&](int) {
                        TS_CUDA_CHECK(fast::detail::launch_moe_mid_down(mout, mact, w, mg, ring, tiles, st));
                    });
                    std::snprintf(note, sizeof note, "hot, 1 of 3 matrices, %d experts", routings[0].distinct);
                    row(s, T, "  step: mid down ring " + std::to_string(ring) + ", " + std::to_string(tiles) +
                                  " row tiles a warp", tdn, hot_bytes / 3, note);
                }
            }
            const double tcm = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_combine(y.as<float>(), s.H, mout, T, s.H, rw, s.k, mg, st));
            });
            row(s, T, "  step: mid combine", tcm, 0, "");
        }
        // The v2 large tiles' steps alone (hot routing).
        for (int tile : {16, 32, 48, 64, 128}) {
            const fast::MoeGrouping lg = fast::moe_group(rid, T, s.k, s.E, tile, scratch.data(), st);
            char* at = static_cast<char*>(scratch.data()) + fast::moe_group_scratch_bytes(T, s.k, s.E, tile);
            void* xg = at;
            void* lact = at + align256(size_t(T * s.k * s.H) * 2);
            auto* lout = reinterpret_cast<float*>(static_cast<char*>(lact) + align256(size_t(T * s.k * s.I) * 2));
            TS_CUDA_CHECK(cudaStreamSynchronize(st));
            char lab[3][48];
            std::snprintf(lab[0], sizeof lab[0], "  step: v2 gather x -> bf16/%d", tile);
            std::snprintf(lab[1], sizeof lab[1], "  step: v2 large gate+up+SwiGLU/%d", tile);
            std::snprintf(lab[2], sizeof lab[2], "  step: v2 large down/%d", tile);
            const double tx = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_gather_bf16_perm(xg, x.as<float>(), s.H, T, s.H, s.k, lg, st));
            });
            row(s, T, lab[0], tx, 0, "");
            const double tgl = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_mma_gate_up(lact, xg, w, lg, tile, st));
            });
            std::snprintf(note, sizeof note, "2 of 3 matrices, %.0f TFLOP/s", flops * 2 / 3 / tgl / 1e12);
            row(s, T, lab[1], tgl, hot_bytes * 2 / 3, note);
            const double tdl = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_mma_down(lout, lact, w, lg, tile, st));
            });
            std::snprintf(note, sizeof note, "1 of 3 matrices, %.0f TFLOP/s; llama.cpp %s", flops / 3 / tdl / 1e12,
                          anchor);
            row(s, T, lab[2], tdl, hot_bytes / 3, note);
        }
        // The wgmma large tiles' steps alone (hot routing), plain and warp-specialised (where tiled).
        for (int tile : {16, 32, 48, 64, 128}) {
            const fast::MoeGrouping lg = fast::moe_group(rid, T, s.k, s.E, tile, scratch.data(), st);
            char* at = static_cast<char*>(scratch.data()) + fast::moe_group_scratch_bytes(T, s.k, s.E, tile);
            const int64_t P = T * s.k, H128 = (s.H + 127) / 128 * 128, I128 = (s.I + 127) / 128 * 128;
            void* xg = at;
            void* lact = at + align256(size_t(P * H128) * 2);
            auto* lout = reinterpret_cast<float*>(static_cast<char*>(lact) + align256(size_t(P * I128) * 2));
            TS_CUDA_CHECK(fast::detail::launch_moe_gather_wgmma(xg, x.as<float>(), s.H, T, s.H, s.k, lg, st));
            TS_CUDA_CHECK(cudaStreamSynchronize(st));
            // plain, warp-specialised, in clusters of 2, two m-tiles; persistent (4 one m-tile, 5
            // two); N halved for the smaller items (6 one m-tile, 7 two); 8: 4 with the weights
            // evicted first from L2, 9: and A's rows last, 10: by each expert's last item's tiles;
            // 11: 4's gate+up in four consumer warpgroups a block (down as 4's); 12: 4 with wgmma's N the
            // items' rows in steps of 8; 13: 11 with it (down as 12's); 14: 13 with the tiles drawn in turn,
            // its down 12's so drawn; 15: 12's gate+up so drawn
            for (int tma = 0; tma <= 15; ++tma) {
                if (tma && !(w.tiling.gate_up && w.tiling.down)) continue;
                const int cl = tma == 2 ? 2 : 1, mt = tma == 3 || (tma >= 5 && tma <= 7 && tma % 2) ? 2 : 1;
                const int persist = tma == 4 || tma == 5 || tma >= 8 ? 1 : 0;
                const bool fit = tma == 6 || tma == 7;
                const int first = tma >= 8 && tma <= 10 ? tma - 7 : 0;
                const bool wg4 = tma == 11 || tma == 13 || tma == 14;
                const fast::detail::MoeTmaTuning tune{first, wg4 ? 4 : 2, tma >= 12, tma >= 14};
                if ((mt == 2 || cl == 2 || fit) && tile > 64) continue;  // (mt2, clusters, fitted N to 64)
                if (tma >= 11 && (tile < 32 || tile > 64)) continue;  // (four warpgroups, fit8: 32 to 64 rows)
                if (tile == 48 && (!tma || mt == 2 || cl == 2 || fit)) continue;  // (48: warp-specialised, one m-tile)
                auto form_of = [&](bool four) {  // (gate+up's warpgroups; down's tiles take two)
                    return !tma ? std::string("wgmma")
                                : "wgmma tma/" + std::to_string(cl) + (mt == 2 ? " mt2" : "") +
                                      (persist ? " persist" : "") + (fit ? " fit" : "") + (four ? " wg4" : "") +
                                      (tma >= 12 ? " fit8" : "") + (tma >= 14 ? " dyn" : "") +
                                      (first == 1   ? " l2-first"
                                       : first == 2 ? " l2-first-last"
                                       : first == 3 ? " l2-last-item"
                                                    : "");
                };
                const std::string form = form_of(wg4);
                const double tgl = time_of(a, timer, [&](int) {
                    using namespace fast::detail;
                    TS_CUDA_CHECK(tma ? launch_moe_wgmma_tma_gate_up(lact, xg, P, w, lg, tile, cl, mt, st, persist, fit,
                                                                     tune)
                                      : launch_moe_wgmma_gate_up(lact, xg, w, lg, tile, st));
                });
                std::snprintf(note, sizeof note, "2 of 3 matrices, %.0f TFLOP/s", flops * 2 / 3 / tgl / 1e12);
                row(s, T, "  step: " + form + " gate+up+SwiGLU/" + std::to_string(tile), tgl, hot_bytes * 2 / 3, note);
                if (tma == 11 || tma == 13 || tma == 15) continue;  // (their down: 4's, 12's, 14's)
                const fast::detail::MoeTmaTuning tune_down{first, 2, tune.fit8, tune.dynamic};
                const double tdl = time_of(a, timer, [&](int) {
                    using namespace fast::detail;
                    TS_CUDA_CHECK(tma ? launch_moe_wgmma_tma_down(lout, lact, P, w, lg, tile, cl, mt, st, persist, fit,
                                                                  {}, tune_down)
                                      : launch_moe_wgmma_down(lout, lact, w, lg, tile, st));
                });
                std::snprintf(note, sizeof note, "1 of 3 matrices, %.0f TFLOP/s; llama.cpp %s", flops / 3 / tdl / 1e12,
                              anchor);
                row(s, T, "  step: " + form_of(false) + " down/" + std::to_string(tile), tdl, hot_bytes / 3, note);
                if (tma != 4) continue;
                // the persistent form's down with out in bf16 (MoePlan::wgmma_out16), and the combine
                // kernel after each (f32 then bf16 rows of out)
                const double tdo = time_of(a, timer, [&](int) {
                    TS_CUDA_CHECK(fast::detail::launch_moe_wgmma_tma_down(lout, lact, P, w, lg, tile, cl, mt, st,
                                                                          persist, fit, {}, tune, true));
                });
                row(s, T, "  step: " + form + " out16 down/" + std::to_string(tile), tdo, hot_bytes / 3, note);
                for (bool o16 : {false, true})  // the combine's forms: columns a thread, slots a batch
                    for (const auto& [cols, batch] : {std::pair{4, 16}, std::pair{4, 8}, std::pair{8, 8},
                                                     std::pair{8, 12}}) {
                        const double tcb = time_of(a, timer, [&](int) {
                            using namespace fast::detail;
                            float* yy = y.as<float>();
                            TS_CUDA_CHECK(o16 ? launch_moe_combine_bf16(yy, s.H, lout, T, s.H, rw, s.k, lg, st, cols,
                                                                        batch)
                                              : launch_moe_combine(yy, s.H, lout, T, s.H, rw, s.k, lg, st, cols,
                                                                   batch));
                        });
                        row(s, T, std::string("  step: combine (out ") + (o16 ? "bf16" : "f32") + ", " +
                                      std::to_string(cols) + " cols, " + std::to_string(batch) + " slots)/" +
                                      std::to_string(tile), tcb, 0, "");
                    }
            }
            if (!w.tiling.gate_up) continue;
            // A's rows gathered in gate+up: x in bf16 once a token (its own step), against the
            // gathered copy's step; gate+up with one and (≤ 32 rows) two m-tiles.
            for (int rpb : {1, 2}) {  // the same rows, rpb a block (moe_gather_rows_per_block: the pick's)
                const double tgr = time_of(a, timer, [&](int) {
                    TS_CUDA_CHECK(
                        fast::detail::launch_moe_gather_wgmma(xg, x.as<float>(), s.H, T, s.H, s.k, lg, st, rpb));
                });
                const bool picked = rpb == fast::detail::moe_gather_rows_per_block(T * s.k);
                row(s, T,
                    "  step: gather x -> bf16 rows [T*k, H], " + std::to_string(rpb) + " a block" +
                        (picked ? " (pick)" : "") + "/" + std::to_string(tile),
                    tgr, 0, "");
            }
            void* x16 = xg;  // [T, H128] in xg's room (the next tile gathers xg again)
            const double tcx = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_rows_wgmma(x16, x.as<float>(), s.H, T, s.H, st));
            });
            row(s, T, "  step: x -> bf16 rows [T, H]", tcx, 0, "");
            for (int mt : {1, 2}) {
                if ((mt == 2 && tile > 64) || tile == 48) continue;  // (48: not gathered)
                const double tgg = time_of(a, timer, [&](int) {
                    TS_CUDA_CHECK(
                        fast::detail::launch_moe_wgmma_tma_gate_up_gathered(lact, x16, T, s.k, w, lg, tile, mt, st));
                });
                std::snprintf(note, sizeof note, "2 of 3 matrices, %.0f TFLOP/s", flops * 2 / 3 / tgg / 1e12);
                row(s, T, std::string("  step: wgmma tma/1 ") + (mt == 2 ? "mt2 " : "") + "gather gate+up+SwiGLU/" +
                              std::to_string(tile), tgg, hot_bytes * 2 / 3, note);
            }
        }
        // The first-generation large tiles' steps alone (hot routing).
        for (int tile : {32, 64}) {
            const fast::MoeGrouping lg = fast::moe_group(rid, T, s.k, s.E, tile, scratch.data(), st);
            char* at = static_cast<char*>(scratch.data()) + fast::moe_group_scratch_bytes(T, s.k, s.E, tile);
            void* xg = at;
            void* lact = at + align256(size_t(T * s.k * s.H) * 2);
            auto* lout = reinterpret_cast<float*>(static_cast<char*>(lact) + align256(size_t(T * s.k * s.I) * 2));
            TS_CUDA_CHECK(cudaStreamSynchronize(st));
            char lab[3][48];
            std::snprintf(lab[0], sizeof lab[0], "  step: gather x -> bf16/%d", tile);
            std::snprintf(lab[1], sizeof lab[1], "  step: large gate+up+SwiGLU/%d", tile);
            std::snprintf(lab[2], sizeof lab[2], "  step: large down/%d", tile);
            const double tx = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_gather_bf16(xg, x.as<float>(), s.H, T, s.H, s.k, lg, st));
            });
            row(s, T, lab[0], tx, 0, "");
            const double tgl = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_tile_gate_up(lact, xg, w, lg, tile, st));
            });
            std::snprintf(note, sizeof note, "2 of 3 matrices, %.0f TFLOP/s", flops * 2 / 3 / tgl / 1e12);
            row(s, T, lab[1], tgl, hot_bytes * 2 / 3, note);
            const double tdl = time_of(a, timer, [&](int) {
                TS_CUDA_CHECK(fast::detail::launch_moe_tile_down(lout, lact, w, lg, tile, st));
            });
            std::snprintf(note, sizeof note, "1 of 3 matrices, %.0f TFLOP/s; llama.cpp %s", flops / 3 / tdl / 1e12,
                          anchor);
            row(s, T, lab[2], tdl, hot_bytes / 3, note);
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a;
        const char* usage =
            "bench_fast_moe: fast MoE router, grouping and Int4 experts (kernels/cuda/fast_moe.h)\n"
            "  --tokens LIST   token counts (default 1,2,4,8,64,512,2048)\n"
            "  --all           also the first-generation f32 tiles beyond 64 tokens (slow)\n"
            "  --rows          experts row-major (default: 16-row tiles where they fit, as the backend)\n"
            "  --runs N        timed calls, median (default 50); --warmup N (default 10)\n"
            "  --reps N        back-to-back calls a timed sample (default 1)\n"
            "  --graph         the --reps calls captured in one CUDA graph (as llama.cpp's test-backend-ops)\n"
            "  --filter TEXT   only cases whose label \"<shape> T=<n>\" contains TEXT\n"
            "  --fused         the fused decode kernel's rows, not yet confirmed on a GPU (fast_moe.h)\n";
        bench::KernelArgs args(usage);
        args.ints("--tokens", a.tokens).flag("--all", a.all).flag("--rows", a.rows).flag("--fused", a.fused);
        args.count("--runs", a.runs, 1).count("--warmup", a.warmup, 0).count("--reps", a.reps, 1);
        args.flag("--graph", a.graph);
        if (!args.text("--filter", a.filter).parse(argc, argv)) return 0;
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        std::printf("bench_fast_moe on %s (%d SMs); runs %d, warm-up %d, median; TB/s of the selected experts' "
                    "Int4 weights (3 matrices unless noted), %% of %.1f TB/s; experts %s\n\n",
                    p.name, p.multiProcessorCount, a.runs, a.warmup, kCopyBw / 1e12,
                    a.rows ? "row-major (--rows)" : "in 16-row tiles where they fit");
        std::printf("| %-20s | %4s | %-44s | %9s | %6s | %6s | %s\n", "shape E x I x H", "T", "kernel", "median us",
                    "TB/s", "% bw", "note");
        Stream stream;
        Timer timer(stream.get());
        const Shape shapes[] = {
            {"128x768x2048 top-8", 128, 768, 2048, 8, "7.63 us per matrix (x3 = 22.9)", "320 us per matrix"},
            {"256x512x2048 top-8", 256, 512, 2048, 8, "n/a", "n/a"},
        };
        for (const Shape& s : shapes) bench_shape(a, s, stream, timer);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_moe: error: %s\n", e.what());
        return 1;
    }
}
