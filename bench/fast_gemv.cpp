// bench_fast_gemv: the decode GEMV kernels (fast::gemv_packed_plan, fast_gemv_plan.h) on device
// buffers, every variant and the dispatch's pick, at llama.cpp's 4096x14336, the flagship's
// projections and lm_head, and two small shapes. Weight bytes = codes + scales (+ biases); TB/s of
// those and % of 4.3 TB/s (H200 copy bandwidth). "cold": the weights rotate over copies that
// together exceed the 60 MB L2; "hot": one copy, L2-resident when it fits; "stream": cold, 16 calls
// back to back timed together (what a call costs a decode step, where each starts under the last);
// "mixed": as stream, each call after another kernel — the pick (Dp4a) on a 2048x4096 matrix in
// tiles, cold — whose own time alone is subtracted: a decode step's neighbours are other kernels,
// and a variant faster back to back with itself can be slower between them (Bulk, session 28).
//   bench_fast_gemv [--tokens 1,2,4,8] [--layouts q4_0,int4g64b,int8g32] [--variants all|pick]
//                   [--modes cold,hot,stream,mixed] [--runs 50] [--warmup 10] [--filter TEXT] [--diag]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "cuda_timer.h"
#include "data.h"
#include "kernel_args.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_read_floor.h"
#include "kernels/cuda/fast_gemv_q8.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/stream.h"
#include "kernels/packed_repack.h"
#include "matmul_cases.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr double kBandwidth = 4.3e12;        // H200 copy bandwidth (PERF.md)
constexpr double kColdBytes = 240.0 * 1e6;   // rotated weights per case: 4x the 60 MB L2
constexpr int kStreamCalls = 16;             // calls timed together in the "stream" mode

struct Layout {
    const char* name;
    PackedKind kind;
    int group;
    bool biases;
    const char* anchor_dtype;  // llama.cpp's figure for this layout (matmul_anchor), or ""
};

const Layout kLayouts[] = {
    {"q4_0", PackedKind::Int4, 32, false, "q4_0"},
    {"int4g64b", PackedKind::Int4, 64, true, ""},
    {"int8g32", PackedKind::Int8, 32, false, "q8_0"},
    {"int8g16", PackedKind::Int8, 16, false, ""},
};

struct Args {
    std::vector<int64_t> tokens = {1, 2, 4, 8};
    std::vector<std::string> layouts = {"q4_0", "int4g64b", "int8g32"};
    std::vector<std::string> modes = {"cold", "hot"};
    int runs = 50, warmup = 10;
    std::string filter;
    bool all_variants = true;
    bool diag = false;  // the diagnosis rows (kernels with a part left out)
};

using Rng = bench::XorShift;

// One packed matrix on the device.
struct Copy {
    DeviceBuffer codes, scales, biases;
    PackedMatrix m;
};

// The "mixed" mode's neighbour: the pick on a 2048x4096 q4_0 matrix in 16-row tiles, rotated over
// copies that exceed the L2 (made on first use).
struct Neighbour {
    static constexpr int64_t kN = 2048, kK = 4096;
    std::vector<Copy> copies;
    DeviceBuffer x{size_t(8 * kK) * 4};
    mutable DeviceBuffer y{size_t(8 * kN) * 4};  // written by every call; its values unused
    void call(size_t c, int64_t T, cudaStream_t st) const {
        const PackedMatrix& m = copies[c % copies.size()].m;
        fast::gemv_packed(y.as<float>(), kN, x.as<float>(), kK, T, m, st);
    }
};
const Neighbour& neighbour() {
    static const Neighbour nb = [] {
        Neighbour n;
        PackedHost h;
        h.kind = PackedKind::Int4, h.n = Neighbour::kN, h.k = Neighbour::kK, h.group = 32;
        h.codes.resize(size_t(h.n * h.k / 2));
        h.scales.resize(size_t(h.n * h.k / 32));
        Rng rng{0x51ed270b27d4f1a5ull};
        for (auto& b : h.codes) b = uint8_t(rng.next());
        for (auto& v : h.scales) v = f32_to_f16(rng.uniform(-0.02f, 0.02f));
        tile_packed(h);
        const double bytes = double(h.codes.size() + h.scales.size() * 2);
        n.copies.resize(size_t(kColdBytes / bytes + 1));
        for (Copy& c : n.copies) {
            c.codes = DeviceBuffer(h.codes.size());
            c.codes.upload(h.codes.data(), h.codes.size());
            c.scales = DeviceBuffer(h.scales.size() * 2);
            c.scales.upload(h.scales.data(), h.scales.size() * 2);
            c.m.kind = h.kind, c.m.n = h.n, c.m.k = h.k, c.m.group = h.group, c.m.tiles = true;
            c.m.codes = c.codes.as<uint8_t>();
            c.m.scales = c.scales.as<uint16_t>();
        }
        std::vector<float> x(size_t(8 * Neighbour::kK), 0.25f);
        n.x.upload(x.data(), x.size() * 4);
        return n;
    }();
    return nb;
}

std::string plan_name(const fast::GemvPlan& p) {
    if (p.variant == fast::GemvVariant::Simt) return "simt (f32)";
    if (p.variant == fast::GemvVariant::MmaStaged) return "mma staged";
    if (p.variant == fast::GemvVariant::MmaChunks) return "mma chunks";
    if (p.variant == fast::GemvVariant::Dp4a)
        return "dp4a (x 2 limbs) S=" + std::to_string(p.splits) +
               (p.cluster > 1 ? " cluster " + std::to_string(p.cluster) : "");
    if (p.variant == fast::GemvVariant::Imma)
        return "imma S=" + std::to_string(p.splits) + " C=" + std::to_string(p.cluster) + (p.regs ? " regs" : "");
    if (p.variant == fast::GemvVariant::MmaRows) return "mma rows mt=" + std::to_string(p.mtiles);
    if (p.variant == fast::GemvVariant::Bulk) return "bulk (copy engine, dp4a)";
    if (p.variant == fast::GemvVariant::BulkMma)
        return "bulk mma (f16) C=" + std::to_string(p.cluster) + (p.reducer ? " reducer" : "");
    if (p.variant == fast::GemvVariant::WgmmaTma)
        return "wgmma tma mt=" + std::to_string(p.mtiles) + " C=" + std::to_string(p.cluster) +
               (p.runs > 1 ? " runs=" + std::to_string(p.runs) : "");
    return "mma mt=" + std::to_string(p.mtiles) + " k/" + std::to_string(p.splits);
}

void row(const std::string& shape, const Layout& l, int64_t T, const std::string& mode, const std::string& what,
         double sec, double bytes, const std::string& note) {
    std::printf("| %-22s | %-8s | %2lld | %-4s | %-26s | %8.2f | %5.2f | %5.1f%% | %s\n", shape.c_str(), l.name,
                (long long)T, mode.c_str(), what.c_str(), sec * 1e6, bytes / sec / 1e12,
                100.0 * bytes / sec / kBandwidth, note.c_str());
    std::fflush(stdout);
}

void bench_shape(const Args& a, const std::string& name, int64_t N, int64_t K, const std::string& anchor_shape,
                 const Layout& l, Stream& stream, bench::CudaTimer& timer) {
    const int64_t rb = l.kind == PackedKind::Int4 ? K / 2 : K, gpr = K / l.group;
    const double bytes = double(N) * double(rb) + double(N * gpr) * 2.0 * (l.biases ? 2 : 1);
    const int cold_copies = int(std::min<double>(512, std::max<double>(2, kColdBytes / bytes + 1)));
    Rng rng{0x9e3779b97f4a7c15ull ^ uint64_t(N * 131 + K)};
    std::vector<uint8_t> codes(size_t(N * rb));
    std::vector<uint16_t> scales(size_t(N * gpr)), biases(l.biases ? size_t(N * gpr) : 0);
    for (auto& b : codes) b = uint8_t(rng.next());
    for (auto& v : scales) v = f32_to_f16(rng.uniform(-0.02f, 0.02f));
    for (auto& v : biases) v = f32_to_f16(rng.uniform(-0.1f, 0.1f));
    // The same matrix in 16-row tiles (packed_weight.h), where it fits: what the backend stores.
    const bool tiles_fit = packed_tiles_fit(l.kind, N, K, l.group);
    PackedHost tiled;
    if (tiles_fit) {
        tiled.kind = l.kind, tiled.n = N, tiled.k = K, tiled.group = l.group;
        tiled.codes = codes, tiled.scales = scales, tiled.biases = biases;
        tile_packed(tiled);
    }
    auto make_copies = [&](const PackedHost* t) {
        std::vector<Copy> out(static_cast<size_t>(cold_copies));
        const std::vector<uint8_t>& cd = t ? t->codes : codes;
        const std::vector<uint16_t>& sc = t ? t->scales : scales;
        const std::vector<uint16_t>& bi = t ? t->biases : biases;
        for (Copy& c : out) {  // the same contents in every copy: the bytes are read either way
            c.codes = DeviceBuffer(cd.size());
            c.codes.upload(cd.data(), cd.size());
            c.scales = DeviceBuffer(sc.size() * 2);
            c.scales.upload(sc.data(), sc.size() * 2);
            if (l.biases) {
                c.biases = DeviceBuffer(bi.size() * 2);
                c.biases.upload(bi.data(), bi.size() * 2);
            }
            c.m.kind = l.kind;
            c.m.n = N;
            c.m.k = K;
            c.m.group = l.group;
            c.m.codes = c.codes.as<uint8_t>();
            c.m.scales = c.scales.as<uint16_t>();
            c.m.biases = l.biases ? c.biases.as<uint16_t>() : nullptr;
            c.m.tiles = t != nullptr;
        }
        return out;
    };
    std::vector<Copy> copies = make_copies(nullptr);
    std::vector<Copy> tile_copies = tiles_fit ? make_copies(&tiled) : std::vector<Copy>{};
    const cudaStream_t st = stream.get();
    const int sms = fast::gemv_sm_count();
    for (int64_t T : a.tokens) {
        const std::string label = name + " " + l.name + " T=" + std::to_string(T);
        if (!a.filter.empty() && label.find(a.filter) == std::string::npos) continue;
        std::vector<float> x(size_t(T * K));
        for (auto& v : x) v = rng.uniform(-1.f, 1.f);
        DeviceBuffer dx(x.size() * 4), dy(size_t(T * N) * 4), scratch(fast::gemv_q8_scratch(T, K));
        dx.upload(x.data(), x.size() * 4);
        const fast::GemvPlan pick = fast::gemv_pick(T, N, K, l.kind, sms);
        std::vector<fast::GemvPlan> plans = {pick};
        if (a.all_variants) {
            plans.push_back(fast::GemvPlan{});
            for (int mt : {1, 2}) plans.push_back({fast::GemvVariant::MmaRows, mt, 1});
            if (fast::gemv_staged_fits(K, l.kind, l.biases, l.group)) plans.push_back({fast::GemvVariant::MmaStaged, 1, 1});
            if (fast::gemv_chunks_fits(K, T, l.kind)) plans.push_back({fast::GemvVariant::MmaChunks, 1, 1});
            if (fast::gemv_dp4a_fits(K, T, l.kind))
                for (int cl : {1, fast::kGemvDp4aCluster})
                    for (int s : {1, 2, 4, 8}) plans.push_back({fast::GemvVariant::Dp4a, 1, s, cl});
            for (int mt : {1, 2})
                for (int splits : {1, 2, 4, 8})
                    if (fast::gemv_mma_fits(K, l.kind, splits)) plans.push_back({fast::GemvVariant::Mma, mt, splits});
        }
        std::string anchor = *l.anchor_dtype ? bench::matmul_anchor({anchor_shape.c_str(), N, K, true},
                                                                     l.anchor_dtype, T)
                                             : "";
        for (const std::string& mode : a.modes) {
            // stream: kStreamCalls calls back to back on cold copies, timed together (a decode
            // step's view: each call's start overlaps the one before it by programmatic launch);
            // mixed: each call after the neighbour's, less the neighbour's calls alone.
            const bool mixed = mode == "mixed";
            const int n = mode == "hot" ? 1 : cold_copies, reps = mode == "stream" || mixed ? kStreamCalls : 1;
            const Neighbour* nb = mixed ? &neighbour() : nullptr;
            const double nb_sec = !mixed ? 0.0
                                         : timer.median(a.warmup, a.runs, [&](int c) {
                                               for (int r = 0; r < reps; ++r) nb->call(size_t(c * reps + r), T, st);
                                           }) / reps;
            auto time = [&](auto&& call) {
                return timer.median(a.warmup, a.runs, [&](int c) {
                           for (int r = 0; r < reps; ++r) {
                               if (nb) nb->call(size_t(c * reps + r), T, st);
                               call(size_t((c * reps + r) % n));
                           }
                       }) / reps -
                       nb_sec;
            };
            for (size_t i = 0; i < plans.size(); ++i) {
                const fast::GemvPlan& p = plans[i];
                const double sec = time([&](size_t c) {
                    fast::gemv_packed_plan(p, dy.as<float>(), N, dx.as<float>(), K, T, copies[c].m, st);
                });
                std::string note = i == 0 ? "picked" : "";
                if (i == 0 && !anchor.empty()) note += "; llama.cpp " + anchor;
                if (p.variant != fast::GemvVariant::Simt) {  // fewer resident than launched: several waves
                    const int res = fast::detail::gemv_resident_blocks(p, copies[0].m);
                    note += (note.empty() ? "" : "; ") + std::to_string(fast::detail::gemv_grid_blocks(p, N)) +
                            " blocks, " + std::to_string(res) + " resident";
                }
                row(name, l, T, mode, (i == 0 ? "pick: " : "") + plan_name(p), sec, bytes, note);
            }
            if (tiles_fit) {  // the pick (and MmaStaged where it fits) on the 16-row tiles
                const PackedMatrix& tm = tile_copies[0].m;
                const fast::GemvPlan tile_pick = fast::gemv_pick_packed(T, tm, sms);  // Imma where it picks it
                std::vector<fast::GemvPlan> tp = {tile_pick};
                if (tile_pick.variant != pick.variant) tp.push_back(pick);
                if (fast::gemv_staged_fits(K, l.kind, l.biases, l.group)) tp.push_back({fast::GemvVariant::MmaStaged, 1, 1});
                if (fast::gemv_chunks_fits(K, T, l.kind)) tp.push_back({fast::GemvVariant::MmaChunks, 1, 1});
                if (a.all_variants && fast::gemv_dp4a_fits(K, T, l.kind))
                    for (int cl : {1, fast::kGemvDp4aCluster})
                        for (int s : {1, 2, 4, 8}) tp.push_back({fast::GemvVariant::Dp4a, 1, s, cl});
                const fast::GemvPlan ip = fast::gemv_imma_plan(tm, T, sms);  // cluster 0: does not fit
                if (ip.cluster > 0) {
                    tp.push_back(ip);
                    // the register pipeline at the same shape, and at 8 warps on one row tile
                    for (fast::GemvPlan rp : {ip, fast::GemvPlan{fast::GemvVariant::Imma, 1, 8, 1}})
                        if (fast::gemv_imma_fits(tm, T, rp.cluster) &&
                            !(tile_pick.variant == rp.variant && tile_pick.cluster == rp.cluster &&
                              tile_pick.splits == rp.splits))
                            rp.regs = 1, tp.push_back(rp);
                    if (a.all_variants)
                        for (int regs : {0, 1})
                            for (int cl : {1, 2, 4, 8})
                                for (int s : {1, 2, 8})
                                    if ((cl != ip.cluster || s != ip.splits) &&
                                        fast::gemv_imma_fits(tm, T, cl))
                                        tp.push_back({fast::GemvVariant::Imma, 1, s, cl, regs});
                }
                if (tile_pick.variant != fast::GemvVariant::Bulk && fast::gemv_bulk_takes(tm, T))
                    tp.push_back({fast::GemvVariant::Bulk});
                // BulkMma: its own cluster, and (all variants) the others that fit, in each form
                const int bm = fast::gemv_bulk_mma_cluster(tm, T, sms);
                for (int C : {1, 2, 4, 8})
                    for (int reducer : {0, 1}) {
                        fast::GemvPlan bp{fast::GemvVariant::BulkMma, 1, 1, C};
                        bp.reducer = reducer;
                        if ((C == bm || a.all_variants) && fast::gemv_bulk_mma_fits(tm, T, C, sms) &&
                            !(tile_pick.variant == fast::GemvVariant::BulkMma && tile_pick.cluster == C &&
                              tile_pick.reducer == reducer))
                            tp.push_back(bp);
                    }
                // WgmmaTma (session 35, opt-in): its own shape and (all variants) the other clusters
                // and two m-tiles
                const fast::GemvPlan wp = fast::gemv_wgmma_plan(tm, T, sms);
                for (int mt : {1, 2})
                    for (int C : {1, 2, 4, 8})
                        for (int runs : {1, 2, 4})
                            if (((mt == 1 && C == wp.cluster) || a.all_variants) &&
                                fast::gemv_wgmma_fits(tm, T, mt, C, runs)) {
                                fast::GemvPlan p{fast::GemvVariant::WgmmaTma, mt, 1, C};
                                p.runs = runs;
                                tp.push_back(p);
                            }
                // WgmmaTma's own shape with its arithmetic left out (the stream alone) and with the
                // weights by a bulk copy a row tile instead of the maps' boxes
                if (a.diag && fast::gemv_wgmma_fits(tm, T, wp.mtiles, wp.cluster)) {
                    using namespace fast::detail;
                    const int ring = kGemvWgmmaSkipMath;
                    const std::pair<int, const char*> forms[] = {
                        {ring, "ring only"},
                        {ring | kGemvWgmmaRowTileRuns, "ring only, a row tile at a time"},
                        {ring | kGemvWgmmaSkipX, "ring only, no x"},
                        {ring | kGemvWgmmaSkipX | kGemvWgmmaOneWaiter, "ring only, no x, one waiter"},
                        {ring | kGemvWgmmaEvictFirst, "ring only, evict-first"},
                        {ring | kGemvWgmmaPrefetchMaps, "ring only, maps prefetched"},
                        {kGemvWgmmaEvictFirst | kGemvWgmmaPrefetchMaps, "evict-first, maps prefetched"},
                        {kGemvWgmmaBulkCopies, "bulk copies"},
                        {kGemvWgmmaSkipMath | kGemvWgmmaBulkCopies, "bulk copies, ring only"}};
                    for (const int runs : {1, 4})
                        for (const auto& [form, what] : forms) {
                            fast::GemvPlan dp = wp;
                            dp.runs = runs;
                            if (runs > 1 && !(form & ring)) continue;  // (the whole kernel: a row above)
                            bool ok = true;
                            const double sec = time([&](size_t c) {
                                ok = ok && fast::detail::launch_gemv_wgmma_diag(dp, form, dy.as<float>(), N,
                                                                                dx.as<float>(), K, T, tile_copies[c].m,
                                                                                st) == cudaSuccess;
                            });
                            (void)cudaGetLastError();
                            if (ok)
                                row(name, l, T, mode, std::string("diag: wgmma tma ") + what, sec, bytes,
                                    plan_name(dp) + " in another form");
                        }
                }
                // BulkMma with parts left out (no biases; y garbage): where its time goes
                if (a.diag && bm > 0 && !l.biases) {
                    using fast::detail::kGemvBulkMmaSkipX, fast::detail::kGemvBulkMmaSkipMath,
                        fast::detail::kGemvBulkMmaSkipSums;
                    const std::pair<int, const char*> skips[] = {
                        {kGemvBulkMmaSkipX, "no x staging"},
                        {kGemvBulkMmaSkipMath, "no arithmetic"},
                        {kGemvBulkMmaSkipSums, "no row-tile sums"},
                        {kGemvBulkMmaSkipMath | kGemvBulkMmaSkipSums, "x staged, ring only"},
                        {kGemvBulkMmaSkipX | kGemvBulkMmaSkipMath | kGemvBulkMmaSkipSums, "ring only"}};
                    const fast::GemvPlan bp{fast::GemvVariant::BulkMma, 1, 1, bm};
                    for (const auto& [skip, what] : skips) {
                        const double sec = time([&](size_t c) {
                            TS_CUDA_CHECK(fast::detail::launch_gemv_bulk_mma_diag(bp, skip, 0, dy.as<float>(),
                                                                                  dx.as<float>(), T,
                                                                                  tile_copies[c].m, st));
                        });
                        row(name, l, T, mode, std::string("diag: bulk mma ") + what, sec, bytes,
                            "BulkMma C=" + std::to_string(bm) + " with a part left out (y garbage)");
                    }
                    // the pick's plan at each ring depth (the launch's: kGemvBulkStages)
                    fast::GemvPlan rp = bp;
                    rp.reducer = fast::gemv_bulk_mma_reducer(tm, bm, sms);
                    for (int stages : {4, 6, 8}) {
                        bool ok = true;
                        const double sec = time([&](size_t c) {
                            ok = ok && fast::detail::launch_gemv_bulk_mma_diag(rp, 0, stages, dy.as<float>(),
                                                                               dx.as<float>(), T, tile_copies[c].m,
                                                                               st) == cudaSuccess;
                        });
                        (void)cudaGetLastError();
                        if (ok)
                            row(name, l, T, mode, "diag: bulk mma " + std::to_string(stages) + " stages", sec, bytes,
                                plan_name(rp) + " with this ring");
                    }
                }
                // Bulk in other shapes (one token, no biases): ring stages, its copies without the
                // arithmetic (the floor of its stream), one block an SM kept so by shared memory, grids
                // of one row tile a block and of two blocks an SM, a warp's k-tiles of two stages a step,
                // x's staging or the arithmetic left out, x staged by each warp for its own k-tiles.
                if (a.diag && T == 1 && !l.biases && fast::gemv_bulk_takes(tm, 1)) {
                    using D = fast::detail::GemvBulkDiag;
                    const std::pair<D, std::string> diags[] = {
                        {D{2, true, 0, false}, "2 stages"},
                        {D{4, false, 0, false}, "copies only"},       {D{8, false, 0, false}, "copies only, 8 stages"},
                        {D{4, true, 0, true}, "4 stages, one an SM"},
                        {D{8, true, 0, false}, "8 stages"},
                        {D{8, true, 0, false, false, 0, true}, "8 stages, x by each warp"},
                        {D{8, true, 0, false, false, 1}, "8 stages, no x staging"},
                        {D{8, true, 0, false, false, 2}, "8 stages, x staged, no arithmetic"},
                        {D{8, true, 0, false, true}, "8 stages, 2 k-tiles a step"},
                        {D{4, true, 0, false, true}, "4 stages, 2 k-tiles a step"},
                        {D{4, true, int(N / 16), false}, "a block a row tile"},
                        {D{4, true, 2 * sms, false}, "2 blocks an SM"}};
                    for (const auto& [d, what] : diags) {
                        if (fast::gemv_bulk_smem(K, 1, l.group, false, d.stages) > fast::kGemvBulkMaxSmem) continue;
                        const double sec = time([&](size_t c) {
                            TS_CUDA_CHECK(fast::detail::launch_gemv_bulk_diag(d, dy.as<float>(), dx.as<float>(),
                                                                              tile_copies[c].m, st));
                        });
                        row(name, l, T, mode, "diag: bulk " + what, sec, bytes, "Bulk in another shape");
                    }
                }
                // What Imma's parts cost (one token, no biases): the kernel with its math, its x
                // staging, its cluster sum or all three left out (y garbage) — at the pick's shape,
                // 8 warps on one row tile, and 2 × 2.
                if (a.diag && a.all_variants && T == 1 && !l.biases && ip.cluster > 0) {
                    const std::pair<int, const char*> diags[] = {
                        {fast::detail::kGemvImmaDiagNoMath, "no math"},
                        {fast::detail::kGemvImmaDiagNoStage, "no x staging"},
                        {fast::detail::kGemvImmaDiagNoReduce, "no cluster sum"},
                        {7, "ring + ldmatrix only"}};
                    for (const fast::GemvPlan& dp : {ip, fast::GemvPlan{fast::GemvVariant::Imma, 1, 8, 1},
                                                     fast::GemvPlan{fast::GemvVariant::Imma, 1, 2, 2}}) {
                        if (dp.cluster == 4 || !fast::gemv_imma_fits(tm, 1, dp.cluster)) continue;
                        for (const auto& [mask, what] : diags) {
                            const double sec = time([&](size_t c) {
                                TS_CUDA_CHECK(fast::detail::launch_gemv_imma_diag(dp, mask, dy.as<float>(), N,
                                                                                  dx.as<float>(), K,
                                                                                  tile_copies[c].m, st));
                            });
                            row(name, l, T, mode, "diag: " + plan_name(dp) + " " + what, sec, bytes,
                                "Imma with a part left out (y garbage)");
                        }
                    }
                }
                for (size_t i = 0; i < tp.size(); ++i) {
                    const fast::GemvPlan& p = tp[i];
                    const double sec = time([&](size_t c) {
                        fast::gemv_packed_plan(p, dy.as<float>(), N, dx.as<float>(), K, T, tile_copies[c].m, st);
                    });
                    std::string note = "16-row tiles (the backend's order)";
                    if (p.variant == fast::GemvVariant::BulkMma)
                        note += "; " + std::to_string(fast::detail::gemv_bulk_mma_grid(p, tm, T)) + " blocks, " +
                                std::to_string(fast::kGemvBulkStages) + " stages";
                    else if (p.variant == fast::GemvVariant::Imma || p.variant == fast::GemvVariant::Bulk)
                        note += "; " + std::to_string(fast::detail::gemv_grid_blocks(p, N)) + " blocks" +
                                (p.cluster == ip.cluster && p.splits == ip.splits && p.regs == ip.regs ? ", imma's shape"
                                                                                                      : "");
                    row(name, l, T, mode, (i == 0 ? "tiles pick: " : "tiles: ") + plan_name(p), sec, bytes, note);
                }
            }
            if (a.all_variants) {
                const double sec = time([&](size_t c) {
                    fast::gemv_q8(dy.as<float>(), N, dx.as<float>(), K, T, copies[c].m, scratch.data(), st);
                });
                row(name, l, T, mode, "q8 (x int8, dp4a)", sec, bytes, "x rounded to int8; not the default");
            }
            if (T == a.tokens.front()) {  // what a pure read of the codes costs under this timer
                const double code_bytes = double(codes.size());
                const double sec = time([&](size_t c) {
                    fast::read_floor(copies[c].codes.data(), codes.size(), dy.as<float>(), st);
                });
                row(name, l, T, mode, "read floor (codes only)", sec, code_bytes,
                    "fast::read_floor: 16-byte streamed loads, nothing computed");
                const PackedMatrix& m0 = copies[0].m;
                if (m0.kind == PackedKind::Int4 && m0.group == 32 && !m0.biases && N % 16 == 0 && K % 128 == 0) {
                    for (const bool tiled : {false, true}) {
                        const double ps = time([&](size_t c) {
                            fast::read_pattern(copies[c].m, tiled, dy.as<float>(), st);
                        });
                        row(name, l, T, mode, tiled ? "loads only, 16-row tiles" : "loads only, as mma rows", ps, bytes,
                            tiled ? "fast::read_pattern: mma rows' grid, each (16-row, k-tile) contiguous"
                                  : "fast::read_pattern: mma rows' loads (codes + scales), no math");
                    }
                }
            }
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a;
        const char* usage =
            "bench_fast_gemv: the decode GEMV (fast::gemv_packed) per variant, weight-read bandwidth\n"
            "  --tokens LIST    token counts (default 1,2,4,8)\n"
            "  --layouts LIST   q4_0, int4g64b (G64 with biases), int8g32, int8g16 (default the first 3)\n"
            "  --variants all|pick  every variant or only the dispatch's pick (default all)\n"
            "  --modes LIST     cold, hot, stream (cold, 16 calls back to back timed together), mixed (stream, each\n"
            "                   call after a 2048x4096 GEMV whose own time is subtracted; default cold,hot)\n"
            "  --runs N         timed calls, median (default 50); --warmup N (default 10)\n"
            "  --filter TEXT    only cases whose label \"<shape> <layout> T=<n>\" contains TEXT\n"
            "  --diag           also the diagnosis rows: Bulk, BulkMma (and with --variants all Imma) with a part\n"
            "                   left out (y garbage) — off by default, so that the first launch of a kernel\n"
            "                   (what scripts/gpu/ncu_source.sh profiles) is the picked one\n";
        bench::KernelArgs args(usage);
        args.ints("--tokens", a.tokens).words("--layouts", a.layouts).words("--modes", a.modes);
        args.choice("--variants", a.all_variants, "all").count("--runs", a.runs, 1).count("--warmup", a.warmup, 0);
        if (!args.text("--filter", a.filter).flag("--diag", a.diag).parse(argc, argv)) return 0;
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        std::printf("bench_fast_gemv on %s (%d SMs); runs %d, warm-up %d, median; %% of %.1f TB/s; cold = weights "
                    "rotated over copies of >= %.0f MB\n\n",
                    p.name, p.multiProcessorCount, a.runs, a.warmup, kBandwidth / 1e12, kColdBytes / 1e6);
        std::printf("| %-22s | %-8s | %2s | %-4s | %-26s | %8s | %5s | %6s | %s\n", "shape N x K", "layout", "T", "mode",
                    "kernel", "median us", "TB/s", "% bw", "note");
        Stream stream;
        bench::CudaTimer timer(stream.get());
        struct Shape {
            std::string name, anchor;
            int64_t N, K;
        };
        std::vector<Shape> shapes;
        for (const bench::MatmulShape& s : bench::matmul_shapes()) shapes.push_back({s.name, s.name, s.N, s.K});
        shapes.push_back({"gdn in 12352x2048", "", 12352, 2048});  // flagship GDN qkv | z | b | a, stacked
        shapes.push_back({"512x2048", "", 512, 2048});
        shapes.push_back({"2048x512", "", 2048, 512});
        for (const std::string& ln : a.layouts) {
            const Layout* l = nullptr;
            for (const Layout& c : kLayouts)
                if (ln == c.name) l = &c;
            TS_CHECK(l, "--layouts: unknown layout {} (q4_0, int4g64b, int8g32, int8g16)", ln);
            for (const Shape& s : shapes) bench_shape(a, s.name, s.N, s.K, s.anchor, *l, stream, timer);
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_gemv: error: %s\n", e.what());
        return 1;
    }
}
