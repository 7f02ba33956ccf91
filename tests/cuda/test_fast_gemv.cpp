// The kernel pack's decode GEMV (fast::gemv_packed) and packed-row dequantization
// (fast::dequant_rows) on GGUF weights repacked by kernels/packed_repack.h, against the CPU:
// a double-precision product of the CPU codec's dequantization of the ORIGINAL GGUF weight (tight:
// exact types 1e-5 of Σ|w·x|, K-quants add the f16 rounding of their group scales), and the CPU
// backend's matmul on the same GGUF weight (within its q8 activation rounding). Awkward shapes:
// K = 32·odd, off the 256-grid, several x slices; N = 1, 3, 17, 33, 257 and sizes that pick 2 or 4
// rows per warp; T = 1..8; strided (and 16-byte-misaligned) x and y rows. Then CudaBackend in fast
// mode against the reference mode and the CPU for matmul (GEMV and many-token paths) and embed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/memlog.h"
#include "core/status.h"
#include "core/tensor.h"
#include "formats/quants.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_embed.h"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/matmul_dispatch.h"
#include "kernels/cuda/stream.h"
#include "kernels/packed_repack.h"

#include "gemv_test_util.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::random_rows;
using reftest::to_device;
using reftest::to_host;

namespace {

using namespace gemvtest;

void run_gemv_case(DType type, const Case& c, uint32_t seed) {
    const std::string what = std::string(dtype_name(type)) + " T=" + std::to_string(c.T) + " N=" +
                             std::to_string(c.N) + " K=" + std::to_string(c.K) + (c.pad ? " strided" : "");
    SCOPED_TRACE(what);
    Gguf g = make_gguf(type, c.N, c.K, seed);
    const PackedHost ph = repack(g.host());
    DevicePacked dp = upload(ph);
    const int64_t ldx = c.K + (c.pad ? 3 : 0), ldy = c.N + (c.pad ? 5 : 0);
    const std::vector<float> x = random_rows(c.T, c.K, ldx, seed + 1);
    std::vector<float> y0(size_t(c.T * ldy), reftest::kPad);
    DeviceBuffer xd = to_device(x);
    // The CPU backend's matmul on the GGUF bytes (q8-rounded activations: a loose bound).
    std::vector<float> yc(size_t(c.T * ldy), reftest::kPad);
    std::vector<float> xc = x;
    make_cpu_backend()->matmul(reftest::rows_view(yc.data(), c.T, c.N, ldy),
                               reftest::rows_view(xc.data(), c.T, c.K, ldx), g.host());
    const fast::GemvPlan pick = fast::gemv_pick(c.T, c.N, c.K, ph.kind, fast::gemv_sm_count());
    const fast::GemvPlan plans[2] = {fast::GemvPlan{}, pick};  // Simt, then the entry point's pick
    for (int i = 0; i < 2; ++i) {
        const bool mma = plans[i].variant != fast::GemvVariant::Simt;  // the tensor cores round x to bf16
        SCOPED_TRACE(i == 0 ? "simt" : mma ? "gemv_packed (tensor cores)" : "gemv_packed (simt)");
        DeviceBuffer yd = to_device(y0);
        Stream s;
        if (i == 1) fast::gemv_packed(yd.as<float>(), ldy, xd.as<float>(), ldx, c.T, dp.m, s.get());
        else fast::gemv_packed_plan(plans[i], yd.as<float>(), ldy, xd.as<float>(), ldx, c.T, dp.m, s.get());
        s.synchronize();
        const std::vector<float> y = to_host<float>(yd);
        // Against the ORIGINAL GGUF weight as the CPU decodes it (Mma rounds x to bf16).
        double rel = is_kquant(type) ? std::ldexp(1.0, -11) * 1.05 + 1e-5 : 1e-5;
        double norm = is_kquant(type) ? 1e-2 : 1e-5;
        if (mma) {
            rel += std::ldexp(1.0, -8);
            norm = 1e-2;
        }
        check_product(y, ldy, g.deq, x, ldx, c.T, c.N, c.K, rel, norm, what + " vs double");
        if (c.T * c.N >= 16) {
            EXPECT_LE(norm_err(y, ldy, yc, ldy, c.T, c.N), 3e-2) << what << " vs the CPU backend";
        }
    }
}

}  // namespace

class FastGemv : public ::testing::TestWithParam<DType> {};

TEST_P(FastGemv, MatchesCpuOnAwkwardShapes) {
    REQUIRE_CUDA();
    uint32_t seed = 100;
    for (const Case& c : cases(GetParam())) run_gemv_case(GetParam(), c, seed += 7);
}

INSTANTIATE_TEST_SUITE_P(Types, FastGemv, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(FastGemv, RejectsBadArguments) {
    REQUIRE_CUDA();
    Gguf g = make_gguf(DType::Q4_0, 4, 64, 3);
    DevicePacked dp = upload(repack(g.host()));
    DeviceBuffer xd(9 * 64 * 4), yd(9 * 4 * 4);
    Stream s;
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, xd.as<float>(), 64, 9, dp.m, s.get()), Error);  // T > 8
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, nullptr, 64, 1, dp.m, s.get()), Error);
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, xd.as<float>(), 32, 2, dp.m, s.get()), Error);  // ldx < K
    PackedMatrix bad = dp.m;
    bad.group = 48;
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, xd.as<float>(), 64, 1, bad, s.get()), Error);
    bad = dp.m;
    bad.codes += 8;  // rows must start 16-byte aligned
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, xd.as<float>(), 64, 1, bad, s.get()), Error);
    bad = dp.m;
    bad.tiles = true;  // 4 rows, 64 columns: not whole 16-row tiles
    EXPECT_THROW(fast::gemv_packed(yd.as<float>(), 4, xd.as<float>(), 64, 1, bad, s.get()), Error);
    const fast::GemvPlan chunks{fast::GemvVariant::MmaChunks, 1, 1};  // 1..2 tokens, Int4 only
    EXPECT_THROW(fast::gemv_packed_plan(chunks, yd.as<float>(), 4, xd.as<float>(), 64, 3, dp.m, s.get()), Error);
    Gguf g8 = make_gguf(DType::Q8_0, 4, 64, 4);
    DevicePacked dp8 = upload(repack(g8.host()));
    EXPECT_THROW(fast::gemv_packed_plan(chunks, yd.as<float>(), 4, xd.as<float>(), 64, 1, dp8.m, s.get()), Error);
    const fast::GemvPlan dp4a{fast::GemvVariant::Dp4a, 1, 8};  // Int4 only, 1, 2, 4 or 8 warps a row tile
    EXPECT_THROW(fast::gemv_packed_plan(dp4a, yd.as<float>(), 4, xd.as<float>(), 64, 1, dp8.m, s.get()), Error);
    const fast::GemvPlan dp4a3{fast::GemvVariant::Dp4a, 1, 3};
    EXPECT_THROW(fast::gemv_packed_plan(dp4a3, yd.as<float>(), 4, xd.as<float>(), 64, 1, dp.m, s.get()), Error);
    const fast::GemvPlan dp4a_cl4{fast::GemvVariant::Dp4a, 1, 8, 4};  // clusters of 1 or 8
    EXPECT_THROW(fast::gemv_packed_plan(dp4a_cl4, yd.as<float>(), 4, xd.as<float>(), 64, 1, dp.m, s.get()), Error);
    const fast::GemvPlan rows_cl{fast::GemvVariant::MmaRows, 1, 1, fast::kGemvDp4aCluster};  // Dp4a's own
    EXPECT_THROW(fast::gemv_packed_plan(rows_cl, yd.as<float>(), 4, xd.as<float>(), 64, 1, dp.m, s.get()), Error);
    EXPECT_FALSE(fast::gemv_dp4a_fits(14336, 4, PackedKind::Int4));  // x's limbs past its shared memory
    EXPECT_TRUE(fast::gemv_dp4a_fits(14336, 3, PackedKind::Int4));
}

// ---- every variant of the GEMV (fast::gemv_packed_plan) on synthetic packed matrices

namespace {

// x as BulkMma stages it: 11 significant bits (f16's, after a power-of-two scale a token, so no
// range limit short of subnormals ~2^-27 below the token's largest value — far below the tolerance).
std::vector<float> round_f16_bits(std::vector<float> v) {
    for (float& f : v) {
        int e = 0;
        const double m = std::frexp(double(f), &e);  // f = m · 2^e, 0.5 ≤ |m| < 1
        if (f != 0.f && std::isfinite(f)) f = float(std::ldexp(std::nearbyint(std::ldexp(m, 11)), e - 11));
    }
    return v;
}

std::vector<float> round_bf16(std::vector<float> v) {
    for (float& f : v) f = bf16_to_f32(f32_to_bf16(f));
    return v;
}

std::string plan_name(const fast::GemvPlan& p) {
    if (p.variant == fast::GemvVariant::Simt) return "simt";
    if (p.variant == fast::GemvVariant::MmaStaged) return "mma staged";
    if (p.variant == fast::GemvVariant::MmaChunks) return "mma chunks";
    if (p.variant == fast::GemvVariant::Dp4a)
        return "dp4a S=" + std::to_string(p.splits) + (p.cluster > 1 ? " cluster " + std::to_string(p.cluster) : "");
    if (p.variant == fast::GemvVariant::Imma)
        return "imma S=" + std::to_string(p.splits) + " C=" + std::to_string(p.cluster) + (p.regs ? " regs" : "");
    if (p.variant == fast::GemvVariant::MmaRows) return "mma rows mt=" + std::to_string(p.mtiles);
    if (p.variant == fast::GemvVariant::Bulk) return p.xwarp ? "bulk, x by each warp" : "bulk";
    if (p.variant == fast::GemvVariant::BulkMma)
        return "bulk mma C=" + std::to_string(p.cluster) + (p.reducer ? " reducer" : "");
    if (p.variant == fast::GemvVariant::WgmmaTma)
        return "wgmma tma mt=" + std::to_string(p.mtiles) + " C=" + std::to_string(p.cluster);
    return "mma mt=" + std::to_string(p.mtiles) + " splits=" + std::to_string(p.splits);
}

}  // namespace

// Each variant against the packed formula in double: tight (x rounded to bf16 where the kernel
// rounds it; the kernel's own cancellation of its code offsets bounded by `off`), and loose
// against exact x. K = G·odd (+2048), K = 14336 (several splits needed), N past tile and block
// edges, T = 1..8, strided x and y with untouched padding, zero rows, empty split ranges. Int4
// shapes that fit 16-row tiles run in both orders (the tiles from tile_packed of the same matrix).
TEST(FastGemv, EveryVariantMatchesThePackedFormula) {
    REQUIRE_CUDA();
    const int sms = fast::gemv_sm_count();
    uint32_t seed = 900;
    for (const Layout& l : kLayouts) {
        const int64_t G = l.group;
        const int64_t ks[4] = {G, 3 * G, 2048 + G, 14336};
        struct Shape {
            int64_t T, N, K;
        };
        std::vector<Shape> shapes;
        const int64_t ns[4] = {1, 7, 17, 33};
        for (int64_t T = 1; T <= 8; ++T) shapes.push_back({T, ns[T % 4], ks[T % 3]});
        shapes.push_back({1, 4099, ks[2]});
        shapes.push_back({8, 4099, ks[1]});
        shapes.push_back({3, 300, 14336});
        shapes.push_back({8, 65, 14336});
        shapes.push_back({2, 40, 24576 + G});  // past Mma's shared-memory limit: Simt and MmaRows
        shapes.push_back({5, 50, 1024 + G});   // k-tiles for only some of MmaRows' warps
        shapes.push_back({1, 21, 4096 + G});   // MmaStaged's slab fits (Int4) where Mma unsplit does not
        // Shapes of whole 16-row tiles (n % 16, K % 128): each Int4 one also runs in tiles.
        for (const Shape& t : {Shape{1, 4096, 2048}, Shape{8, 4112, 1024}, Shape{3, 320, 14336},
                               Shape{2, 48, 24576 + 128}, Shape{5, 64, 1152}, Shape{1, 16, 4096 + 128},
                               Shape{1, 48, 14336},   // (one token, K >= 8192: Bulk's deep ring)
                               Shape{8, 80, 14336},   // (BulkMma: 8 blocks a cluster, fewer row tiles than clusters)
                               Shape{6, 2064, 4096 + 128}})  // (BulkMma: two slices of 17 and 16 k-tiles, several
                                                             // row tiles a cluster)
            shapes.push_back(t);
        // BulkMma's reducer warp two row tiles and more behind its consumers (this GPU's SM count):
        // 17–18 row tiles a block, one stage each; 10–11 over clusters of 2 (slices of 9 and 8 k-tiles).
        for (const Shape& t : {Shape{5, 16 * (17 * sms + 3), 256}, Shape{8, 16 * (5 * sms + 7), 2048 + 128}})
            shapes.push_back(t);
        for (const Shape& sh : shapes)
        for (const bool tiles : {false, true}) {
            if (tiles && !packed_tiles_fit(l.kind, sh.N, sh.K, int(G))) continue;
            const std::string what = std::string(l.name) + " T=" + std::to_string(sh.T) + " N=" +
                                     std::to_string(sh.N) + " K=" + std::to_string(sh.K) + (tiles ? " tiles" : "");
            SCOPED_TRACE(what);
            seed += 13;
            const PackedHost ph = random_packed(l, sh.N, sh.K, seed);
            PackedHost stored = ph;
            if (tiles) tile_packed(stored);
            DevicePacked dp = upload(stored);
            const bool strided = sh.T % 2 == 1;
            const int64_t ldx = sh.K + (strided ? 3 : 0), ldy = sh.N + (strided ? 5 : 0);
            const std::vector<float> x = random_rows(sh.T, sh.K, ldx, seed + 1);
            std::vector<double> want, mag, off, want_b, mag_b, off_b, want_h, mag_h, off_h;
            packed_reference(ph, x, ldx, sh.T, &want, &mag, &off);
            packed_reference(ph, round_bf16(x), ldx, sh.T, &want_b, &mag_b, &off_b);
            DeviceBuffer xd = to_device(x);
            std::vector<fast::GemvPlan> plans = {fast::GemvPlan{}, fast::gemv_pick(sh.T, sh.N, sh.K, l.kind, sms)};
            if (fast::gemv_staged_fits(sh.K, l.kind, l.biases, l.group))
                plans.push_back({fast::GemvVariant::MmaStaged, 1, 1});
            if (fast::gemv_chunks_fits(sh.K, sh.T, l.kind)) plans.push_back({fast::GemvVariant::MmaChunks, 1, 1});
            std::vector<double> qbound;  // Dp4a: x in two int8 limbs
            if (fast::gemv_dp4a_fits(sh.K, sh.T, l.kind)) {
                for (int splits : {1, 2, 8}) plans.push_back({fast::GemvVariant::Dp4a, 1, splits});
                // Clusters of 8 quantizing x together (N = 1..4099: a cluster with rows in one
                // block only; the last cluster's blocks past N hold no rows).
                for (int splits : {1, 8}) plans.push_back({fast::GemvVariant::Dp4a, 1, splits, fast::kGemvDp4aCluster});
                qbound = dp4a_bound(ph, x, ldx, sh.T);
            }
            for (int mt : {1, 2}) {
                plans.push_back({fast::GemvVariant::MmaRows, mt, 1});
                for (int splits : {1, 3, 8, 6})
                    if (fast::gemv_mma_fits(sh.K, l.kind, splits))
                        plans.push_back({fast::GemvVariant::Mma, mt, splits});
            }
            // Imma (16-row tiles, the same limbs as Dp4a): its own shape, and K over 1, 2, 4 and 8
            // blocks (slices of one k-tile or none past K = 384), 1, 2 or 8 warps a row tile.
            const fast::GemvPlan ip = fast::gemv_imma_plan(dp.m, sh.T, sms);
            if (ip.cluster > 0) {
                plans.push_back(ip);
                for (const auto& [S, C] : std::vector<std::pair<int, int>>{{1, 1}, {2, 2}, {1, 4}, {8, 8}, {1, 8}})
                    if (fast::gemv_imma_fits(dp.m, sh.T, C)) {
                        plans.push_back({fast::GemvVariant::Imma, 1, S, C});
                        plans.push_back({fast::GemvVariant::Imma, 1, S, C, 1});  // the register pipeline
                    }
                if (qbound.empty()) qbound = dp4a_bound(ph, x, ldx, sh.T);
            }
            if (fast::gemv_bulk_takes(dp.m, sh.T)) {  // Bulk: the same limbs and sums as Dp4a
                plans.push_back({fast::GemvVariant::Bulk});
                fast::GemvPlan xw{fast::GemvVariant::Bulk};
                xw.xwarp = 1;  // x staged by each consumer warp for its own k-tiles (the same bytes;
                if (sh.T <= 2) plans.push_back(xw);  // more tokens stage it whole either way)
                if (qbound.empty()) qbound = dp4a_bound(ph, x, ldx, sh.T);
            }
            // BulkMma (f16 weights and x): every cluster that fits (its own, the smallest, among them),
            // in each form (the row tile's fragments summed after a barrier, or by a warp of their own:
            // the same sums in the same order, so the same bits — checked below).
            for (int C : {1, 2, 4, 8})
                for (int reducer : {0, 1})
                    if (fast::gemv_bulk_mma_fits(dp.m, sh.T, C, sms)) {
                        fast::GemvPlan bp{fast::GemvVariant::BulkMma, 1, 1, C};
                        bp.reducer = reducer;
                        plans.push_back(bp);
                    }
            if (fast::gemv_bulk_mma_cluster(dp.m, sh.T, sms) > 0)
                packed_reference(ph, round_f16_bits(x), ldx, sh.T, &want_h, &mag_h, &off_h, true);
            // WgmmaTma (x and the folded weights in bf16): one and two m-tiles, every cluster that
            // fits (slices of one k-tile, of none past K / 128 blocks: not taken).
            // Runs of 2 and 4 k-tiles a bulk copy (a slice's last stage shorter where its k-tiles are
            // not a multiple), in one and two m-tiles, on the clusters of 1 and 4.
            bool wgmma_any = false;
            for (int mt : {1, 2})
                for (int C : {1, 2, 4, 8})
                    for (int runs : {1, 2, 4})
                        if ((runs == 1 || C == 1 || C == 4) && fast::gemv_wgmma_fits(dp.m, sh.T, mt, C, runs)) {
                            fast::GemvPlan p{fast::GemvVariant::WgmmaTma, mt, 1, C};
                            p.runs = runs;
                            plans.push_back(p);
                            wgmma_any = true;
                        }
            std::vector<double> want_w, mag_w, off_w;
            if (wgmma_any) packed_reference(ph, round_bf16(x), ldx, sh.T, &want_w, &mag_w, &off_w, false, true);
            std::map<int, std::vector<float>> bulk_mma_y;  // the barrier form's y by cluster
            for (const fast::GemvPlan& plan : plans) {
                SCOPED_TRACE(plan_name(plan));
                const bool dp4a = plan.variant == fast::GemvVariant::Dp4a ||  // x in two int8 limbs
                                  plan.variant == fast::GemvVariant::Imma || plan.variant == fast::GemvVariant::Bulk;
                const bool f16 = plan.variant == fast::GemvVariant::BulkMma;                // x and w in f16
                const bool wg = plan.variant == fast::GemvVariant::WgmmaTma;               // x and w in bf16
                const bool mma = plan.variant != fast::GemvVariant::Simt && !dp4a && !f16 && !wg;  // x in bf16
                DeviceBuffer yd = to_device(std::vector<float>(size_t(sh.T * ldy), reftest::kPad));
                Stream s;
                fast::gemv_packed_plan(plan, yd.as<float>(), ldy, xd.as<float>(), ldx, sh.T, dp.m, s.get());
                s.synchronize();
                const std::vector<float> y = to_host<float>(yd);
                const std::vector<double>& tight = wg ? want_w : f16 ? want_h : mma ? want_b : want;
                int bad = 0;
                for (int64_t t = 0; t < sh.T; ++t)
                    for (int64_t n = 0; n < ldy; ++n) {
                        const float got = y[size_t(t * ldy + n)];
                        if (n >= sh.N) {
                            if (got != reftest::kPad && ++bad <= 3)
                                ADD_FAILURE() << "padding [" << t << ", " << n << "] written";
                            continue;
                        }
                        const size_t i = size_t(t * sh.N + n);
                        const double d = std::fabs(double(got) - tight[i]);
                        const double tol = 1e-5 * mag[i] + 2e-6 * off[i] + (dp4a ? qbound[i] : 0.0) + 1e-30;
                        const double loose = std::ldexp(1.0, -8) * mag[i] + 2e-6 * off[i] + 1e-30;
                        if (!(d <= tol) && ++bad <= 5)
                            ADD_FAILURE() << "[" << t << ", " << n << "] got " << got << " want " << tight[i]
                                          << " (|diff| " << d << " > " << tol << ")";
                        else if (!(std::fabs(double(got) - want[i]) <= loose) && ++bad <= 5)
                            ADD_FAILURE() << "[" << t << ", " << n << "] got " << got << " want (exact x) " << want[i];
                    }
                EXPECT_EQ(bad, 0);
                // WgmmaTma's diagnosis forms that keep the arithmetic (bench_fast_gemv --diag): the
                // weights by a bulk copy a row tile (of its runs), or by the boxes with an L2 hint and
                // the maps prefetched — the same stages, so the same bits
                for (const int form : {fast::detail::kGemvWgmmaBulkCopies,
                                       fast::detail::kGemvWgmmaEvictFirst | fast::detail::kGemvWgmmaPrefetchMaps}) {
                    if (!wg) break;
                    DeviceBuffer y2 = to_device(std::vector<float>(size_t(sh.T * ldy), reftest::kPad));
                    ASSERT_EQ(fast::detail::launch_gemv_wgmma_diag(plan, form, y2.as<float>(), ldy, xd.as<float>(),
                                                                   ldx, sh.T, dp.m, s.get()),
                              cudaSuccess);
                    s.synchronize();
                    EXPECT_TRUE(to_host<float>(y2) == y) << "diagnosis form " << form << ": y differs from the boxes'";
                }
                if (f16 && plan.reducer == 0) bulk_mma_y[plan.cluster] = y;
                if (f16 && plan.reducer == 1 && bulk_mma_y.count(plan.cluster)) {
                    EXPECT_TRUE(y == bulk_mma_y[plan.cluster]) << "the reducer warp's sums differ from the barrier's";
                }
            }
        }
    }
}

// What the variants' plan checks run on: a 16 × 14336 Int4 matrix row-major and in tiles, an Int8
// one, and x and y for 8 tokens.
struct RejectMatrices {
    DevicePacked rows, tiles, i8;
    DeviceBuffer x{size_t(8 * 14336 * 4)}, y{size_t(8 * 16 * 4)};
    explicit RejectMatrices(uint32_t seed) {
        const PackedHost r = random_packed(kLayouts[0], 16, 14336, seed);
        PackedHost t = r;
        tile_packed(t);
        rows = upload(r), tiles = upload(t), i8 = upload(random_packed(kLayouts[5], 16, 14336, seed + 1));
    }
};

// Bulk takes Int4 in 16-row tiles whose scales (biases) are 16-byte aligned for its copies, and as
// many tokens as its x leaves room for beside the ring.
TEST(FastGemv, BulkRejectsBadPlans) {
    REQUIRE_CUDA();
    Stream s;
    const fast::GemvPlan bulk{fast::GemvVariant::Bulk};
    RejectMatrices rm(41);
    const DevicePacked &dr = rm.rows, &dt = rm.tiles, &d8 = rm.i8;
    DeviceBuffer &xt = rm.x, &yt = rm.y;
    auto run = [&](const PackedMatrix& m, int64_t T) {
        fast::gemv_packed_plan(bulk, yt.as<float>(), 16, xt.as<float>(), 14336, T, m, s.get());
    };
    EXPECT_THROW(run(dr.m, 1), Error);  // row-major
    EXPECT_THROW(run(d8.m, 1), Error);  // Int8
    EXPECT_THROW(run(dt.m, 8), Error);  // 8 tokens of 14336 columns: 252 KiB of x
    EXPECT_NO_THROW(run(dt.m, 4));      // 126 KiB of x beside the 72 KiB ring
    fast::GemvPlan xw = bulk;
    xw.xwarp = 2;  // 0 (x staged whole) or 1 (by each warp) only
    EXPECT_THROW(fast::gemv_packed_plan(xw, yt.as<float>(), 16, xt.as<float>(), 14336, 1, dt.m, s.get()), Error);
    fast::GemvPlan cl = bulk;
    cl.cluster = 2;  // no clusters (session 54's x quantized once a cluster ran slower and was removed)
    EXPECT_THROW(fast::gemv_packed_plan(cl, yt.as<float>(), 16, xt.as<float>(), 14336, 1, dt.m, s.get()), Error);
    PackedMatrix odd = dt.m;
    odd.scales = reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(odd.scales) + 8);
    EXPECT_FALSE(fast::gemv_bulk_takes(odd, 1));
    EXPECT_THROW(run(odd, 1), Error);
    s.synchronize();
}

// BulkMma takes Bulk's layouts, clusters of 1, 2, 4 or 8 blocks (at most one a k-tile) whose slices
// of x a block stages fit (T · K / cluster ≤ kGemvBulkMmaMaxXCols), and its pick is the smallest.
TEST(FastGemv, BulkMmaRejectsBadPlans) {
    const int sms = 132;
    auto packed = [](int64_t N, int64_t K, bool tiles, int group) {
        PackedMatrix m;
        m.kind = PackedKind::Int4, m.n = N, m.k = K, m.tiles = tiles, m.group = group;
        return m;
    };
    const PackedMatrix big = packed(4096, 14336, true, 32);
    const int want[9] = {0, 1, 2, 4, 4, 8, 8, 8, 8};  // T · 14336 / S ≤ 16384
    for (int T = 1; T <= 8; ++T) EXPECT_EQ(fast::gemv_bulk_mma_cluster(big, T, sms), want[T]) << T;
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(big, 8, 4, sms));  // 28 k-tiles of 8 tokens a block
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(big, 1, 3, sms));  // not a power of two
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(big, 1, 16, sms));
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(packed(4096, 512, true, 32), 1, 8, sms));  // 4 k-tiles over 8 blocks
    EXPECT_TRUE(fast::gemv_bulk_mma_fits(packed(4096, 512, true, 32), 8, 4, sms));
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(packed(4096, 14336, false, 32), 1, 1, sms));  // row-major
    EXPECT_FALSE(fast::gemv_bulk_mma_fits(big, 9, 8, sms));
    EXPECT_EQ(fast::gemv_bulk_mma_cluster(packed(4096, 8 * 16384 + 128, true, 32), 8, sms), 0);  // no slice fits
    REQUIRE_CUDA();
    Stream s;
    RejectMatrices rm(43);
    auto run = [&](const PackedMatrix& m, int64_t T, int C) {
        fast::gemv_packed_plan({fast::GemvVariant::BulkMma, 1, 1, C}, rm.y.as<float>(), 16, rm.x.as<float>(), 14336, T,
                               m, s.get());
    };
    EXPECT_THROW(run(rm.rows.m, 1, 1), Error);   // row-major
    EXPECT_THROW(run(rm.i8.m, 1, 1), Error);     // Int8
    EXPECT_THROW(run(rm.tiles.m, 8, 4), Error);  // x's slice too long
    EXPECT_THROW(run(rm.tiles.m, 1, 0), Error);
    EXPECT_NO_THROW(run(rm.tiles.m, 8, 8));
    EXPECT_NO_THROW(run(rm.tiles.m, 1, 1));
    for (int reducer : {-1, 2}) {  // the row tile's sums: after a barrier (0) or by a warp of their own (1)
        fast::GemvPlan p{fast::GemvVariant::BulkMma, 1, 1, 1};
        p.reducer = reducer;
        EXPECT_THROW(fast::gemv_packed_plan(p, rm.y.as<float>(), 16, rm.x.as<float>(), 14336, 1, rm.tiles.m, s.get()),
                     Error)
            << reducer;
    }
    s.synchronize();
}

// WgmmaTma takes Int4 in 16-row tiles only, 1 or 2 m-tiles, 1, 2, 4 or 8 blocks a cluster (at most
// K / 128) whose x slice leaves room for a ring of 4 stages; its shape is the fewest blocks a
// cluster that launch 90 % of a block an SM; its grid whole clusters of 64·mt-row blocks.
TEST(FastGemv, WgmmaTmaRejectsBadPlans) {
    const int sms = 132;
    auto packed = [](int64_t N, int64_t K, bool tiles, int group) {
        PackedMatrix m;
        m.kind = PackedKind::Int4, m.n = N, m.k = K, m.tiles = tiles, m.group = group;
        return m;
    };
    using V = fast::GemvVariant;
    const PackedMatrix big = packed(4096, 14336, true, 32);
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 1, 1, 1));  // 112 k-tiles of x: 224 KiB, no room for a ring
    EXPECT_TRUE(fast::gemv_wgmma_fits(big, 8, 1, 2));
    EXPECT_EQ(fast::gemv_wgmma_stages(14336, 1, 2), 21);  // (226 − 1 − 112 − 4) KiB in stages of 5
    EXPECT_EQ(fast::gemv_wgmma_stages(14336, 2, 2), 10);  // (226 − 1 − 112 − 8) KiB in stages of 10
    EXPECT_EQ(fast::gemv_wgmma_stages(2048, 1, 1), 32);   // at most 32
    EXPECT_EQ(fast::gemv_wgmma_smem(14336, 1, 2), (1 + 112 + 4 + 21 * 5) * 1024);
    EXPECT_EQ(fast::gemv_wgmma_stages(14336, 1, 2, 4), 5);  // runs of 4: stages of 20 KiB
    EXPECT_EQ(fast::gemv_wgmma_stages(14336, 2, 2, 4), 2);  // of 40 KiB: too few
    EXPECT_TRUE(fast::gemv_wgmma_fits(big, 8, 1, 2, 4));
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 8, 2, 2, 4));
    EXPECT_TRUE(fast::gemv_wgmma_fits(big, 8, 2, 4, 4));    // x's slice of 28 k-tiles: 4 stages
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 8, 1, 2, 3));   // runs of 1, 2 or 4
    EXPECT_TRUE(fast::gemv_wgmma_fits(big, 8, 2, 8));
    EXPECT_FALSE(fast::gemv_wgmma_fits(packed(4096, 202 * 128, true, 32), 1, 1, 2));  // 101 k-tiles: 3 stages
    EXPECT_TRUE(fast::gemv_wgmma_fits(packed(4096, 200 * 128, true, 32), 1, 1, 2));   // 100: 4 stages
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 1, 3, 4));   // m-tiles
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 1, 1, 3));   // not a power of two
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 9, 1, 4));   // tokens
    EXPECT_FALSE(fast::gemv_wgmma_fits(big, 0, 1, 4));
    EXPECT_FALSE(fast::gemv_wgmma_fits(packed(4096, 14336, false, 32), 1, 1, 4));  // row-major
    EXPECT_FALSE(fast::gemv_wgmma_fits(packed(4096, 512, true, 32), 1, 1, 8));    // 4 k-tiles over 8 blocks
    EXPECT_TRUE(fast::gemv_wgmma_fits(packed(4096, 512, true, 32), 1, 1, 4));
    EXPECT_EQ(fast::gemv_wgmma_plan(big, 8, sms).cluster, 2);                       // 64 × 2 = 128 blocks
    EXPECT_EQ(fast::gemv_wgmma_plan(packed(8192, 2048, true, 32), 1, sms).cluster, 1);
    EXPECT_EQ(fast::gemv_wgmma_plan(packed(2048, 4096, true, 32), 1, sms).cluster, 4);
    EXPECT_EQ(fast::gemv_wgmma_plan(packed(512, 2048, true, 32), 1, sms).cluster, 8);  // 8 × 8: the most
    EXPECT_EQ(fast::gemv_wgmma_plan(packed(248320, 2048, true, 32), 1, sms).cluster, 1);
    EXPECT_EQ(fast::gemv_wgmma_plan(packed(4096, 14336, false, 32), 1, sms).cluster, 0);
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::WgmmaTma, 1, 1, 2}, 4096), 128);
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::WgmmaTma, 2, 1, 4}, 4112), 132);  // 33 blocks of 128 rows
    REQUIRE_CUDA();
    Stream s;
    RejectMatrices rm(44);
    auto run = [&](const PackedMatrix& m, int64_t T, int mt, int C) {
        fast::gemv_packed_plan({V::WgmmaTma, mt, 1, C}, rm.y.as<float>(), 16, rm.x.as<float>(), 14336, T, m, s.get());
    };
    EXPECT_THROW(run(rm.rows.m, 1, 1, 4), Error);   // row-major
    EXPECT_THROW(run(rm.i8.m, 1, 1, 4), Error);     // Int8
    EXPECT_THROW(run(rm.tiles.m, 1, 1, 1), Error);  // x's slice too long
    EXPECT_THROW(run(rm.tiles.m, 1, 3, 4), Error);
    EXPECT_THROW(run(rm.tiles.m, 1, 1, 0), Error);
    fast::GemvPlan runs3{V::WgmmaTma, 1, 1, 4};
    runs3.runs = 3;
    EXPECT_THROW(fast::gemv_packed_plan(runs3, rm.y.as<float>(), 16, rm.x.as<float>(), 14336, 1, rm.tiles.m, s.get()),
                 Error);
    s.synchronize();
}

// Imma takes Int4 in 16-row tiles only, 1, 2, 4 or 8 warps a row tile and blocks a cluster, and
// its x slice within its shared memory; its own shape is the smallest cluster that fits first.
TEST(FastGemv, ImmaRejectsBadPlans) {
    REQUIRE_CUDA();
    Stream s;
    const fast::GemvPlan imma{fast::GemvVariant::Imma, 1, 1, 1};
    RejectMatrices rm(31);
    const DevicePacked &dr = rm.rows, &dt = rm.tiles, &d8 = rm.i8;
    DeviceBuffer &xt = rm.x, &yt = rm.y;
    EXPECT_THROW(fast::gemv_packed_plan(imma, yt.as<float>(), 16, xt.as<float>(), 14336, 1, dr.m, s.get()), Error);
    EXPECT_THROW(fast::gemv_packed_plan(imma, yt.as<float>(), 16, xt.as<float>(), 14336, 1, d8.m, s.get()), Error);
    for (const fast::GemvPlan& p : {fast::GemvPlan{fast::GemvVariant::Imma, 1, 3, 1},
                                    fast::GemvPlan{fast::GemvVariant::Imma, 1, 1, 3},
                                    fast::GemvPlan{fast::GemvVariant::Imma, 1, 1, 0},
                                    fast::GemvPlan{fast::GemvVariant::Imma, 1, 1, 1}})  // T = 8, K = 14336 unsplit
        EXPECT_THROW(fast::gemv_packed_plan(p, yt.as<float>(), 16, xt.as<float>(), 14336, 8, dt.m, s.get()), Error)
            << p.splits << " " << p.cluster;
    // regs: 0 (the ring) or 1 (registers).
    EXPECT_THROW(fast::gemv_packed_plan({fast::GemvVariant::Imma, 1, 1, 8, 2}, yt.as<float>(), 16, xt.as<float>(),
                                        14336, 1, dt.m, s.get()),
                 Error);
    EXPECT_FALSE(fast::gemv_imma_fits(dt.m, 8, 2));  // 8 tokens of 7168 columns: 162 KiB
    EXPECT_TRUE(fast::gemv_imma_fits(dt.m, 8, 4));
    EXPECT_EQ(fast::gemv_imma_plan(dt.m, 8, 132).cluster, 8);  // 4 fits; then more blocks for one row tile
    EXPECT_EQ(fast::gemv_imma_plan(dt.m, 8, 132).splits, 8);
    EXPECT_EQ(fast::gemv_imma_plan(dr.m, 1, 132).cluster, 0);  // rows: not taken
    // The flagship's shapes and the anchor (132 SMs): K over the fewest blocks that launch 198
    // (512 rows: as many as leave each warp a k-tile).
    for (const auto& [N, K, S, C] : std::vector<std::array<int64_t, 4>>{
             {4096, 14336, 1, 8}, {12352, 2048, 1, 4}, {8192, 2048, 1, 4}, {2048, 4096, 2, 8}, {512, 2048, 2, 8},
             {248320, 2048, 1, 1}}) {
        PackedMatrix m;
        m.n = N, m.k = K, m.group = 32, m.tiles = true;
        const fast::GemvPlan p = fast::gemv_imma_plan(m, 1, 132);
        EXPECT_EQ(p.splits, S) << N << "x" << K;
        EXPECT_EQ(p.cluster, C) << N << "x" << K;
    }
}

TEST(FastGemv, PickIsValid) {
    for (PackedKind kind : {PackedKind::Int4, PackedKind::Int8})
        for (int64_t T = 1; T <= 8; ++T)
            for (int64_t N : {1, 512, 2048, 4096, 8192, 248320})
                for (int64_t K : {32, 512, 2048, 4096, 14336, 20480, 24576, 65536}) {
                    const fast::GemvPlan p = fast::gemv_pick(T, N, K, kind, 132);
                    if (p.variant == fast::GemvVariant::Simt) {
                        EXPECT_TRUE(!fast::gemv_mma_fits(K, kind, fast::kGemvMaxSplits) ||
                                    (kind == PackedKind::Int8 && T <= 3))
                            << T << " " << K;
                        continue;
                    }
                    if (p.variant == fast::GemvVariant::MmaRows) {  // any K, one row tile a block
                        EXPECT_LE(N, fast::kGemvRowsMaxN);
                        EXPECT_EQ(p.mtiles, 1);
                        continue;
                    }
                    if (p.variant == fast::GemvVariant::Dp4a) {  // one Int4 token whose x fits
                        EXPECT_TRUE(T == 1 && fast::gemv_dp4a_fits(K, T, kind)) << N << " " << K;
                        EXPECT_TRUE(p.splits == 1 || p.splits == 2 || p.splits == 4 || p.splits == 8);
                        continue;
                    }
                    if (p.variant == fast::GemvVariant::MmaStaged) {  // its slab fits, with biases too
                        EXPECT_TRUE(T == 1 && kind == PackedKind::Int4 && N <= fast::kGemvRowsMaxN);
                        EXPECT_TRUE(fast::gemv_staged_fits(K, kind, true, 32)) << K;
                        continue;
                    }
                    EXPECT_GT(N, fast::kGemvRowsMaxN);
                    EXPECT_TRUE(fast::gemv_mma_fits(K, kind, p.splits)) << T << " " << N << " " << K;
                    EXPECT_TRUE(p.mtiles == 1 || p.mtiles == 2);
                }
    // One Int4 token: Dp4a, the fewest warps a row tile that launch 1.5 blocks an SM (132 SMs).
    using V = fast::GemvVariant;
    for (const auto& [N, S] : std::vector<std::pair<int64_t, int>>{
             {248320, 1}, {12352, 4}, {8192, 4}, {8191, 4}, {6305, 4}, {6304, 8}, {4096, 8}, {16, 8}}) {
        const fast::GemvPlan p = fast::gemv_pick(1, N, 2048, PackedKind::Int4, 132);
        EXPECT_EQ(p.variant, V::Dp4a) << N;
        EXPECT_EQ(p.splits, S) << N;
    }
    // Dp4a's grid: whole clusters when it runs in them (the last cluster's spare blocks hold no rows).
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::Dp4a, 1, 8}, 4099), 257);
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::Dp4a, 1, 8, fast::kGemvDp4aCluster}, 4099), 264);
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::Dp4a, 1, 1, fast::kGemvDp4aCluster}, 4096), 32);
    EXPECT_EQ(fast::detail::gemv_grid_blocks({V::Dp4a, 1, 1, fast::kGemvDp4aCluster}, 16), 8);
    EXPECT_EQ(fast::gemv_pick(1, 4096, 14336, PackedKind::Int4, 132).cluster, 1);  // Dp4a's own: 1
    EXPECT_EQ(fast::gemv_pick(1, 4096, 14336, PackedKind::Int4, 132).variant, V::Dp4a);
    EXPECT_EQ(fast::gemv_pick(1, 4096, 14336, PackedKind::Int4, 132).splits, 8);
    EXPECT_EQ(fast::gemv_pick(1, 4096, 65536, PackedKind::Int4, 132).variant, V::MmaRows);  // x does not fit
    EXPECT_EQ(fast::gemv_pick(2, 4096, 2048, PackedKind::Int4, 132).variant, V::MmaRows);
    EXPECT_EQ(fast::gemv_pick(1, 4096, 2048, PackedKind::Int8, 132).variant, V::Simt);
    // A packed matrix's pick: Bulk at one or two tokens for Int4 in 16-row tiles from K =
    // kGemvBulkMinK; Imma through registers at one token from K = kGemvImmaMinK where Bulk's x does
    // not fit (its shape gemv_imma_plan's); gemv_pick's everywhere else.
    {
        auto packed = [](int64_t N, int64_t K, PackedKind kind, bool tiles, int group) {
            PackedMatrix m;
            m.kind = kind, m.n = N, m.k = K, m.tiles = tiles, m.group = group;
            return m;
        };
        static_assert(fast::kGemvBulkMinK == fast::kGemvImmaMinK);
        const int64_t K0 = fast::kGemvBulkMinK;
        const PackedMatrix big = packed(4096, 14336, PackedKind::Int4, true, 32);
        EXPECT_EQ(fast::gemv_pick_packed(1, big, 132).variant, V::Bulk);
        EXPECT_EQ(fast::gemv_pick_packed(2, big, 132).variant, V::BulkMma);
        EXPECT_EQ(fast::gemv_pick_packed(2, big, 132).cluster, 2);
        EXPECT_EQ(fast::gemv_pick_packed(1, big, 132).xwarp, 0);  // x staged whole at one token
        // Bulk at two tokens where BulkMma does not take the matrix (fewer than 16 Mi weights), x
        // by each warp there
        const PackedMatrix narrow = packed(1024, 14336, PackedKind::Int4, true, 32);
        EXPECT_EQ(fast::gemv_pick_packed(2, narrow, 132).variant, V::Bulk);
        EXPECT_EQ(fast::gemv_pick_packed(2, narrow, 132).xwarp, 1);
        EXPECT_EQ(fast::gemv_pick_packed(2, big, 132, true, false).variant, V::Bulk);  // no_bulk_mma
        // From 2 tokens on 16 Mi weights or more: BulkMma, its smallest cluster that fits; fewer
        // weights, rows, or a layout its copies cannot take: as before.
        for (int64_t T = 3; T <= 8; ++T) {
            const fast::GemvPlan p = fast::gemv_pick_packed(T, big, 132);
            EXPECT_EQ(p.variant, V::BulkMma) << T;
            EXPECT_EQ(p.cluster, fast::gemv_bulk_mma_cluster(big, T, 132)) << T;
            // its reducer warp where a block walks 8 row tiles or more: 256 over 33 clusters of 4
            // blocks (3–4 tokens: ⌈256 / 33⌉ = 8) or 16 of 8 (5–8 tokens: 16)
            EXPECT_EQ(p.reducer, 1) << T;
        }
        static_assert(fast::kGemvBulkMmaReducerRowTiles == 8);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(16 * (7 * 132 + 1), 2048, PackedKind::Int4, true, 32), 132).reducer,
                  1);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(16 * 7 * 132, 2048, PackedKind::Int4, true, 32), 132).reducer, 0);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(248320, 2048, PackedKind::Int4, true, 64), 132).reducer, 1);
        EXPECT_EQ(fast::gemv_pick_packed(8, packed(12352, 2048, PackedKind::Int4, true, 32), 132).reducer, 0);
        static_assert(fast::kGemvBulkMmaMinTokens == 2 && fast::kGemvBulkMmaMinWeights == 8192 * 2048);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(8192, 2048, PackedKind::Int4, true, 32), 132).variant, V::BulkMma);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(8192, 2048, PackedKind::Int4, true, 32), 132).cluster, 1);
        EXPECT_EQ(fast::gemv_pick_packed(8, packed(248320, 2048, PackedKind::Int4, true, 64), 132).variant, V::BulkMma);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(8176, 2048, PackedKind::Int4, true, 32), 132).variant, V::MmaRows);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(8192, 2048, PackedKind::Int4, true, 32), 132).variant, V::BulkMma);
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(8192, 2048, PackedKind::Int4, true, 32), 132).variant, V::Dp4a);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(8192, 2048, PackedKind::Int4, true, 32), 132, true, false).variant,
                  V::MmaRows);  // TESSERA_GEMV=no_bulk_mma
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(8192, 2048, PackedKind::Int4, false, 32), 132).variant, V::MmaRows);
        EXPECT_EQ(fast::gemv_pick_packed(4, packed(8192, 2048, PackedKind::Int8, true, 32), 132).variant, V::MmaRows);
        EXPECT_EQ(fast::gemv_pick_packed(8, packed(4096, 8 * 16384 + 128, PackedKind::Int4, true, 32), 132).variant,
                  V::MmaRows);  // no slice of x fits
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(4096, K0, PackedKind::Int4, true, 64), 132).variant, V::Bulk);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(4096, K0, PackedKind::Int4, true, 128), 132).variant, V::BulkMma);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(1024, K0, PackedKind::Int4, true, 128), 132).variant, V::Bulk);
        // Bulk's x does not fit (K = 65536: 144 KiB beside the ring) or its copies cannot take the
        // scales (not 16-byte aligned): Imma through registers at one token.
        const PackedMatrix wide = packed(4096, 65536, PackedKind::Int4, true, 32);
        PackedMatrix odd = big;
        odd.scales = reinterpret_cast<const uint16_t*>(uintptr_t(8));
        for (const PackedMatrix& m : {wide, odd}) {
            EXPECT_FALSE(fast::gemv_bulk_takes(m, 1));
            const fast::GemvPlan p = fast::gemv_pick_packed(1, m, 132);
            EXPECT_EQ(p.variant, V::Imma) << m.k;
            EXPECT_EQ(p.regs, 1);
            EXPECT_EQ(p.cluster, fast::gemv_imma_plan(m, 1, 132).cluster);
            EXPECT_EQ(p.splits, fast::gemv_imma_plan(m, 1, 132).splits);
        }
        EXPECT_EQ(fast::gemv_pick_packed(1, odd, 132).cluster, 8);  // 256 row tiles: K over 8 for 1.5 blocks an SM
        // each edge: K one k-tile short, row-major, Int8, a group neither takes, no Dp4a
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(4096, K0 - 128, PackedKind::Int4, true, 32), 132).variant, V::Dp4a);
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(4096, K0 - 128, PackedKind::Int4, true, 32), 132).variant,
                  V::BulkMma);  // (33 Mi weights: BulkMma where Bulk stops)
        EXPECT_EQ(fast::gemv_pick_packed(2, packed(1024, K0 - 128, PackedKind::Int4, true, 32), 132).variant,
                  V::MmaRows);
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(4096, 14336, PackedKind::Int4, false, 32), 132).variant, V::Dp4a);
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(4096, 14336, PackedKind::Int8, true, 32), 132).variant, V::Simt);
        EXPECT_EQ(fast::gemv_pick_packed(1, packed(4096, 14336, PackedKind::Int4, true, 256), 132).variant, V::Dp4a);
        EXPECT_EQ(fast::gemv_pick_packed(1, big, 132, false).variant, V::MmaRows);
    }
    // Without Dp4a (TESSERA_GEMV=mma): the anchor shape takes MmaRows; lm_head Mma unsplit.
    auto pick = [](int64_t T, int64_t N, int64_t K, PackedKind kind, int sms) {
        return fast::gemv_pick(T, N, K, kind, sms, false);
    };
    EXPECT_EQ(pick(1, 4096, 14336, PackedKind::Int4, 132).variant, fast::GemvVariant::MmaRows);
    EXPECT_EQ(pick(8, 4096, 14336, PackedKind::Int8, 132).variant, fast::GemvVariant::MmaRows);
    EXPECT_EQ(pick(1, 4096, 14336, PackedKind::Int8, 132).variant, fast::GemvVariant::Simt);
    EXPECT_EQ(pick(1, 248320, 2048, PackedKind::Int4, 132).variant, fast::GemvVariant::Mma);
    EXPECT_EQ(pick(1, 248320, 2048, PackedKind::Int4, 132).splits, 1);
    // MmaStaged's corner, each edge: one token, Int4, 8192..16384 rows, K ≤ 2048.
    EXPECT_EQ(pick(1, 8192, 2048, PackedKind::Int4, 132).variant, V::MmaStaged);
    EXPECT_EQ(pick(1, 16384, 32, PackedKind::Int4, 132).variant, V::MmaStaged);
    EXPECT_EQ(pick(1, 8191, 2048, PackedKind::Int4, 132).variant, V::MmaRows);
    EXPECT_EQ(pick(1, 16385, 2048, PackedKind::Int4, 132).variant, V::Mma);
    EXPECT_EQ(pick(1, 8192, 2049, PackedKind::Int4, 132).variant, V::MmaRows);
    EXPECT_EQ(pick(2, 8192, 2048, PackedKind::Int4, 132).variant, V::MmaRows);
    EXPECT_EQ(pick(4, 8192, 2048, PackedKind::Int8, 132).variant, V::MmaRows);
}

// dequant_rows gives unpack_row_f32's values (the same scale · code + bias), for gathered ids,
// and NaN rows for ids out of range.
TEST(FastDequantRows, MatchesHostUnpack) {
    REQUIRE_CUDA();
    for (DType t : kTypes)
    for (const bool tiles : {false, true}) {
        if (tiles && packed_kind_of(t) != PackedKind::Int4) continue;
        SCOPED_TRACE(std::string(dtype_name(t)) + (tiles ? " tiles" : ""));
        const int64_t N = tiles ? 48 : 37, K = tiles ? 512 : is_kquant(t) ? 512 : 96, ld = K + 3;
        Gguf g = make_gguf(t, N, K, 11);
        const PackedHost ph = repack(g.host());
        PackedHost stored = ph;
        if (tiles) tile_packed(stored);
        DevicePacked dp = upload(stored);
        const std::vector<int32_t> ids = {0, int32_t(N - 1), 5, 5, 17, -1, int32_t(N)};
        DeviceBuffer idd = to_device(ids), yd = to_device(std::vector<float>(ids.size() * size_t(ld), reftest::kPad));
        TS_CUDA_CHECK(cudaDeviceSynchronize());
        Stream s;
        fast::dequant_rows(yd.as<float>(), ld, dp.m, idd.as<int32_t>(), int64_t(ids.size()), s.get());
        s.synchronize();
        const std::vector<float> y = to_host<float>(yd);
        std::vector<float> want(static_cast<size_t>(K));
        for (size_t i = 0; i < ids.size(); ++i) {
            const float* row = y.data() + i * size_t(ld);
            if (ids[i] < 0 || ids[i] >= N) {
                for (int64_t c = 0; c < K; ++c) ASSERT_TRUE(std::isnan(row[c])) << "id " << ids[i];
                continue;
            }
            unpack_row_f32(ph, ids[i], want.data());
            for (int64_t c = 0; c < K; ++c)
                ASSERT_NEAR(row[c], want[size_t(c)], 1e-6 * std::fabs(want[size_t(c)])) << "id " << ids[i] << " col " << c;
            for (int64_t c = K; c < ld; ++c) ASSERT_EQ(row[c], reftest::kPad);
        }
    }
}

// CudaBackend: fast mode places the GGUF matrix packed and multiplies through the GEMV (T ≤ 8)
// or the many-token path (T > 8); both against the double product of the CPU dequantization,
// and against the reference mode (bf16 weights) within bf16's rounding. embed on the packed
// table equals the packed rows (unpack_row_f32). N = 64, K = 1024: Int4 matrices placed in 16-row
// tiles; T = 200 takes the bf16 copy made from them.
TEST(CudaFastBackend, MatmulAndEmbedMatchReference) {
    REQUIRE_CUDA();
    auto fast = make_cuda_backend(0, CudaKernels::Fast), ref = make_cuda_backend(0, CudaKernels::Reference);
    EXPECT_EQ(fast->name(), "cuda-fast");
    EXPECT_EQ(ref->name(), "cuda-reference");
    for (DType t : kTypes)
    for (const bool whole_tiles : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(t)) + (whole_tiles ? " N=64 K=1024" : ""));
        const int64_t N = whole_tiles ? 64 : 67, K = whole_tiles ? 1024 : is_kquant(t) ? 768 : 352;
        Gguf g = make_gguf(t, N, K, 21);
        const Tensor wf = fast->place_weight(g.host(), WeightUse::Matrix);
        const Tensor wr = ref->place_weight(g.host(), WeightUse::Matrix);
        EXPECT_EQ(wf.dtype, t);
        EXPECT_EQ(wf.device, Device::CUDA);
        EXPECT_EQ(wf.shape_str(), g.host().shape_str());
        // Expert slices: packed where the fast MoE reads them (Int4), bf16 for the reference MoE otherwise.
        // (Int4 with rows and columns multiples of 32; N = 67 here is not).
        EXPECT_EQ(fast->place_weight(g.host(), WeightUse::Expert).dtype,
                  packed_kind_of(t) == PackedKind::Int4 && N % 32 == 0 ? t : DType::BF16);
        for (int64_t T : {1, 5, 8, 9, 40, 200}) {
            const std::vector<float> x = random_rows(T, K, K, uint32_t(T));
            auto run = [&](Backend& be, const Tensor& w) {
                void* xd = be.memory().allocate(size_t(T * K) * 4);
                void* yd = be.memory().allocate(size_t(T * N) * 4);
                be.copy_in(xd, x.data(), size_t(T * K) * 4);
                be.matmul(Tensor(yd, DType::F32, {T, N}, Device::CUDA), Tensor(xd, DType::F32, {T, K}, Device::CUDA), w);
                std::vector<float> y(size_t(T * N));
                be.copy_out(y.data(), yd, y.size() * 4);
                be.memory().deallocate(xd);
                be.memory().deallocate(yd);
                return y;
            };
            const std::vector<float> yf = run(*fast, wf), yr = run(*ref, wr);
            double rel = is_kquant(t) ? std::ldexp(1.0, -11) * 1.05 + 1e-5 : 1e-5;
            double norm = is_kquant(t) ? 1e-2 : 1e-5;
            const MatmulKernel kernel = choose_matmul(T, N, K, packed_kind_of(t));
            if (kernel == MatmulKernel::Gemm) {  // x rounded to bf16
                rel += std::ldexp(1.0, -8);
                norm = 1e-2;
            } else if (kernel == MatmulKernel::Gemv && getenv_is("TESSERA_GEMV", "int8")) {
                rel += 1.0 / 127;  // x rounded to int8 per 32 columns (fast_gemv_q8.h)
                norm = 2e-2;
            } else if (kernel == MatmulKernel::Gemv &&
                       fast::gemv_pick(T, N, K, packed_kind_of(t), fast::gemv_sm_count()).variant !=
                           fast::GemvVariant::Simt) {  // x rounded to bf16
                rel += std::ldexp(1.0, -8);
                norm = 1e-2;
            }
            check_product(yf, N, g.deq, x, K, T, N, K, rel, norm, "fast T=" + std::to_string(T));
            EXPECT_LE(norm_err(yf, N, yr, N, T, N), 2e-2) << "fast vs reference T=" << T;
        }
        // embed: the packed table's rows.
        const std::vector<int32_t> ids = {3, 0, int32_t(N - 1), 3};
        const int64_t T = int64_t(ids.size());
        void* idd = fast->memory().allocate(ids.size() * 4);
        void* yd = fast->memory().allocate(size_t(T * K) * 4);
        fast->copy_in(idd, ids.data(), ids.size() * 4);
        fast->embed(Tensor(yd, DType::F32, {T, K}, Device::CUDA), wf, static_cast<const int32_t*>(idd));
        std::vector<float> y(size_t(T * K));
        fast->copy_out(y.data(), yd, y.size() * 4);
        const PackedHost ph = repack(g.host());
        std::vector<float> want(static_cast<size_t>(K));
        for (int64_t i = 0; i < T; ++i) {
            unpack_row_f32(ph, ids[size_t(i)], want.data());
            for (int64_t c = 0; c < K; ++c)
                ASSERT_NEAR(y[size_t(i * K + c)], want[size_t(c)], 1e-6 * std::fabs(want[size_t(c)]))
                    << "embed row " << i << " col " << c;
        }
        fast->memory().deallocate(idd);
        fast->memory().deallocate(yd);
    }
}

// TESSERA_PREFILL_BF16_WEIGHTS=1 (and auto, the default, within its budget): the cuBLAS prefill
// path reads a bf16 copy made at load instead of dequantising into scratch each call — the same
// bits (the same dequantisation, the same GEMM), 2 bytes a weight more device memory; 0 makes
// none; an expert slice and a vocabulary-sized table get no copy; a bad value is refused.
TEST(CudaFastBackend, Bf16WeightCopiesGiveTheSameProducts) {
    REQUIRE_CUDA();
    const int64_t N = 96, K = 352, T = 200;  // T past kPrefillCublasTokens: the cuBLAS path
    Gguf g = make_gguf(DType::Q4_0, N, K, 31);
    const std::vector<float> x = random_rows(T, K, K, 32);
    auto run = [&](const char* env, int64_t* weight_growth, int64_t* expert_bytes) {
        if (env) setenv("TESSERA_PREFILL_BF16_WEIGHTS", env, 1);
        else unsetenv("TESSERA_PREFILL_BF16_WEIGHTS");  // auto
        auto be = make_cuda_backend(0, CudaKernels::Fast);
        unsetenv("TESSERA_PREFILL_BF16_WEIGHTS");
        // "weights_device" is the latest backend's total once it places a weight: place one first
        // (the earlier backends' totals are not this one's).
        float v4[4] = {1, 2, 3, 4};
        (void)be->place_weight(Tensor(v4, DType::F32, {4}), WeightUse::Vector);
        const int64_t before = MemLog::global().get("weights_device");
        const Tensor w = be->place_weight(g.host(), WeightUse::Matrix);
        *weight_growth = MemLog::global().get("weights_device") - before;
        const int64_t after_matrix = MemLog::global().get("weights_device");
        (void)be->place_weight(make_gguf(DType::Q4_0, 64, 64, 33).host(), WeightUse::Expert);
        *expert_bytes = MemLog::global().get("weights_device") - after_matrix;
        const int64_t before_table = MemLog::global().get("weights_device");
        (void)be->place_weight(make_gguf(DType::Q4_0, 65600, 32, 34).host(), WeightUse::Matrix);
        *expert_bytes += MemLog::global().get("weights_device") - before_table;  // same in both runs
        void* xd = be->memory().allocate(size_t(T * K) * 4);
        void* yd = be->memory().allocate(size_t(T * N) * 4);
        be->copy_in(xd, x.data(), size_t(T * K) * 4);
        be->matmul(Tensor(yd, DType::F32, {T, N}, Device::CUDA), Tensor(xd, DType::F32, {T, K}, Device::CUDA), w);
        std::vector<float> y(size_t(T * N));
        be->copy_out(y.data(), yd, y.size() * 4);
        be->memory().deallocate(xd);
        be->memory().deallocate(yd);
        return y;
    };
    int64_t grow_plain = 0, grow_copy = 0, grow_auto = 0, expert_plain = 0, expert_copy = 0, expert_auto = 0;
    const std::vector<float> plain = run("0", &grow_plain, &expert_plain);
    const std::vector<float> copied = run("1", &grow_copy, &expert_copy);
    const std::vector<float> autos = run(nullptr, &grow_auto, &expert_auto);
    EXPECT_EQ(std::memcmp(plain.data(), copied.data(), plain.size() * 4), 0);
    EXPECT_EQ(std::memcmp(plain.data(), autos.data(), plain.size() * 4), 0);
    EXPECT_EQ(grow_copy - grow_plain, N * K * 2);
    EXPECT_EQ(grow_auto, grow_copy);       // 66 KB: far within 1/16 of any device
    EXPECT_EQ(expert_copy, expert_plain);  // no copy of an expert slice or a vocabulary table
    EXPECT_EQ(expert_auto, expert_plain);
    check_product(copied, N, g.deq, x, K, T, N, K, std::ldexp(1.0, -8) + 1e-5, 1e-2, "bf16 copies");
    setenv("TESSERA_PREFILL_BF16_WEIGHTS", "yes", 1);
    EXPECT_THROW(make_cuda_backend(0, CudaKernels::Fast), Error);
    unsetenv("TESSERA_PREFILL_BF16_WEIGHTS");
}

// Without a bf16 copy (TESSERA_PREFILL_BF16_WEIGHTS=0, or past its budget) a matrix the
// warp-specialised packed tiles take (Int4 in 16-row tiles: N a multiple of 16, K of 128) runs
// gemm_packed at 128+ tokens — not a dequantisation a call and cuBLAS (session 35: the tiles are
// level with cuBLAS on a copy): the backend's product is gemm_packed's bit for bit on the same
// repacked, tiled matrix, and holds to the dequantized weights. A matrix they do not take (K not a
// multiple of 128: Bf16WeightCopiesGiveTheSameProducts) keeps the cuBLAS path.
TEST(CudaFastBackend, WithoutABf16CopyTheTiledPrefillRunsPacked) {
    REQUIRE_CUDA();
    const int64_t N = 96, K = 384, T = 200;  // tiles; T past kPrefillCublasTokens
    Gguf g = make_gguf(DType::Q4_0, N, K, 41);
    const std::vector<float> x = random_rows(T, K, K, 42);
    setenv("TESSERA_PREFILL_BF16_WEIGHTS", "0", 1);
    auto be = make_cuda_backend(0, CudaKernels::Fast);
    unsetenv("TESSERA_PREFILL_BF16_WEIGHTS");
    const Tensor w = be->place_weight(g.host(), WeightUse::Matrix);
    void* xd = be->memory().allocate(size_t(T * K) * 4);
    void* yd = be->memory().allocate(size_t(T * N) * 4);
    be->copy_in(xd, x.data(), size_t(T * K) * 4);
    be->matmul(Tensor(yd, DType::F32, {T, N}, Device::CUDA), Tensor(xd, DType::F32, {T, K}, Device::CUDA), w);
    std::vector<float> got(size_t(T * N));
    be->copy_out(got.data(), yd, got.size() * 4);
    be->memory().deallocate(xd);
    be->memory().deallocate(yd);
    check_product(got, N, g.deq, x, K, T, N, K, std::ldexp(1.0, -8) + 1e-5, 1e-2, "no copy, packed tiles");

    PackedHost h = repack(g.host());
    tile_packed(h);
    DeviceBuffer dc = to_device(h.codes), ds = to_device(h.scales), dx = to_device(x);
    DeviceBuffer dy(size_t(T * N) * 4), scratch(fast::gemm_packed_scratch(T, K));
    PackedMatrix m;
    m.kind = h.kind;
    m.n = h.n;
    m.k = h.k;
    m.group = h.group;
    m.codes = dc.as<uint8_t>();
    m.scales = ds.as<uint16_t>();
    m.tiles = true;
    ASSERT_TRUE(fast::gemm_takes_tma(m));
    fast::gemm_packed(dy.as<float>(), N, dx.as<float>(), K, T, m, scratch.data(), nullptr);
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> want = reftest::to_host<float>(dy);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "not gemm_packed's product";
}

TEST(CudaFastBackend, KernelsFromTheEnvironment) {
    EXPECT_EQ(parse_cuda_kernels(nullptr), CudaKernels::Fast);
    EXPECT_EQ(parse_cuda_kernels(""), CudaKernels::Fast);
    EXPECT_EQ(parse_cuda_kernels("fast"), CudaKernels::Fast);
    EXPECT_EQ(parse_cuda_kernels("reference"), CudaKernels::Reference);
    try {
        (void)parse_cuda_kernels("turbo");
        FAIL() << "accepted turbo";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("expected fast (the default) or reference"), std::string::npos) << e.what();
    }
}
