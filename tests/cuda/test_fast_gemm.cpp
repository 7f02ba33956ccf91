// fast::gemm_packed (the prefill GEMM on the tensor cores) against a double-precision product
// built from the packed layout's formula (packed_weight.h), with x rounded to bf16 as the kernel
// rounds it. Random codes, scales and biases; Int4 G = 32/64/128 with and without biases, Int8
// G = 16/32; awkward T, N, K (tile edges, K = 32·odd), strided x and y whose padding must stay
// untouched; every tile configuration once.
//
// Two bounds:
//  * max|got − want| / max|want| ≤ 1e-3 with want from the kernel's own weights (s and b rounded
//    to bf16, w = q·s + b rounded once to bf16, exactly as the dequantization does): only the f32
//    accumulation order differs (worst case ~K·2⁻²³ = 1.7e-3 at K = 14336; the H200 shows ≤ 1e-5).
//  * vs the exact formula, the weights' roundings on top: each kernel weight is within
//    2⁻⁸·(|s·q| + |b|) of the exact one (s, b and the result each rounded once to bf16's 2⁻⁹), so
//    |got − exact| ≤ 2⁻⁸·Σ_k |x_k|·(|s·q_k| + |b|) + the accumulation error: checked as
//    max|got − exact| / max Σ_k |x_k|·(|s·q_k| + |b|) ≤ 5e-3. (A max|ref| normalisation is
//    fragile here: with a handful of outputs max|ref| can be small by chance — T=2, N=3, K=128
//    gave 1.2e-2 on the H200 while matching the bf16-weight model to 1e-7.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gemm.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/packed_repack.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;

namespace {

struct Case {
    PackedKind kind;
    int group;
    bool bias;
    int64_t T, N, K;
    int64_t x_pad = 0, y_pad = 0;  // ldx = K + x_pad, ldy = N + y_pad
    bool tiles = false;            // w stored in 16-row tiles (packed_weight.h)
};

std::string describe(const Case& c) {
    return std::string(c.kind == PackedKind::Int4 ? "Int4" : "Int8") + " G=" + std::to_string(c.group) +
           (c.bias ? " bias" : "") + " T=" + std::to_string(c.T) + " N=" + std::to_string(c.N) +
           " K=" + std::to_string(c.K) + " ldx=K+" + std::to_string(c.x_pad) + " ldy=N+" + std::to_string(c.y_pad) +
           (c.tiles ? " tiles" : "");
}

PackedHost random_packed(const Case& c, uint32_t seed) {
    std::mt19937 rng(seed);
    PackedHost h;
    h.kind = c.kind;
    h.n = c.N;
    h.k = c.K;
    h.group = c.group;
    h.codes.resize(size_t(c.N * (c.kind == PackedKind::Int4 ? c.K / 2 : c.K)));
    for (auto& b : h.codes) b = uint8_t(rng());
    const size_t ng = size_t(c.N * (c.K / c.group));
    std::uniform_real_distribution<float> us(-0.03f, 0.03f), ub(-0.25f, 0.25f);
    h.scales.resize(ng);
    for (auto& s : h.scales) s = f32_to_f16(us(rng));
    if (c.bias) {
        h.biases.resize(ng);
        for (auto& b : h.biases) b = f32_to_f16(ub(rng));
    }
    return h;
}

// Round to bf16, nearest even (d finite, normal range).
double round_bf16(double d) {
    if (d == 0) return 0;
    int e = 0;
    const double m = std::frexp(d, &e);  // |m| in [0.5, 1)
    return std::ldexp(std::nearbyint(m * 256.0), e - 8);
}

// Row r of w in double: the exact formula, the kernel's bf16 weights, and |s·q| + |b| (the scale
// of the weight's rounding error).
void weight_row(const PackedHost& h, int64_t r, std::vector<double>& exact, std::vector<double>& model,
                std::vector<double>& mag) {
    const int64_t K = h.k, ng = K / h.group;
    for (int64_t c = 0; c < K; ++c) {
        const size_t gi = size_t(r * ng + c / h.group);
        const double s = f16_to_f32(h.scales[gi]);
        const double sb = bf16_to_f32(f32_to_bf16(float(s)));
        double q, b, bb;
        if (h.kind == PackedKind::Int4) {
            const uint8_t byte = h.codes[size_t(r * (K / 2) + c / 2)];
            const int code = (c & 1) ? byte >> 4 : byte & 15;
            if (h.biases.empty()) {
                q = code - 8, b = 0, bb = 0;
            } else {
                q = code, b = f16_to_f32(h.biases[gi]);
                bb = bf16_to_f32(f32_to_bf16(float(b)));
            }
        } else {
            q = double(int8_t(h.codes[size_t(r * K + c)])), b = 0, bb = 0;
        }
        exact[size_t(c)] = s * q + b;
        model[size_t(c)] = round_bf16(q * sb + bb);
        mag[size_t(c)] = std::fabs(s * q) + std::fabs(b);
    }
}

struct Errors {
    double vs_model = 0, vs_exact = 0;  // see the file comment
};

// Runs the case through gemm_packed (or one plan) and compares; returns the errors.
Errors run_case(const Case& c, int config = -1, int splits = 1, uint32_t seed = 1) {
    const fast::GemmPlan plan = config >= 0 ? fast::GemmPlan{config, splits} : fast::gemm_pick(c.T, c.N, c.K, c.kind);
    const std::string what = describe(c) + (config >= 0 ? " plan " : " picked ") +
                             fast::detail::kGemmConfigs[plan.config].name + " splits " + std::to_string(plan.splits);
    SCOPED_TRACE(what);
    const PackedHost h = random_packed(c, seed);
    const int64_t ldx = c.K + c.x_pad, ldy = c.N + c.y_pad;
    const std::vector<float> x = reftest::random_rows(c.T, c.K, ldx, seed + 7);
    std::vector<float> y(size_t(c.T * ldy), reftest::kPad);

    PackedHost stored = h;  // the reference below reads h, row-major
    if (c.tiles) tile_packed(stored);
    DeviceBuffer dcodes = reftest::to_device(stored.codes), dscales = reftest::to_device(stored.scales);
    DeviceBuffer dbiases = c.bias ? reftest::to_device(stored.biases) : DeviceBuffer();
    DeviceBuffer dx = reftest::to_device(x), dy = reftest::to_device(y);
    DeviceBuffer scratch(std::max<size_t>(fast::gemm_packed_scratch(c.T, c.K), 16));
    PackedMatrix w;
    w.kind = c.kind;
    w.n = c.N;
    w.k = c.K;
    w.group = c.group;
    w.codes = dcodes.as<uint8_t>();
    w.scales = dscales.as<uint16_t>();
    w.biases = c.bias ? dbiases.as<uint16_t>() : nullptr;
    w.tiles = c.tiles;
    if (config < 0)
        fast::gemm_packed(dy.as<float>(), ldy, dx.as<float>(), ldx, c.T, w, scratch.data(), nullptr);
    else
        fast::gemm_packed_plan(plan, true, dy.as<float>(), ldy, dx.as<float>(), ldx, c.T, w, scratch.data(), nullptr);
    const std::vector<float> got = reftest::to_host<float>(dy);

    std::vector<double> xb(size_t(c.T * c.K));
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t k = 0; k < c.K; ++k) xb[size_t(t * c.K + k)] = bf16_to_f32(f32_to_bf16(x[size_t(t * ldx + k)]));
    std::vector<double> we(size_t(c.K)), wm(size_t(c.K)), wmag(size_t(c.K));
    double max_ref = 0, max_mag = 0, max_de = 0, max_dm = 0;
    int pad_bad = 0, nan_bad = 0;
    for (int64_t n = 0; n < c.N; ++n) {
        weight_row(h, n, we, wm, wmag);
        for (int64_t t = 0; t < c.T; ++t) {
            const double* xr = &xb[size_t(t * c.K)];
            double se = 0, sm = 0, mag = 0;
            for (int64_t k = 0; k < c.K; ++k) {
                se += xr[k] * we[size_t(k)], sm += xr[k] * wm[size_t(k)];
                mag += std::fabs(xr[k]) * wmag[size_t(k)];
            }
            const double g = got[size_t(t * ldy + n)];
            if (!std::isfinite(g)) ++nan_bad;
            max_ref = std::max(max_ref, std::fabs(sm));
            max_mag = std::max(max_mag, mag);
            max_de = std::max(max_de, std::fabs(g - se));
            max_dm = std::max(max_dm, std::fabs(g - sm));
        }
    }
    for (int64_t t = 0; t < c.T; ++t)
        for (int64_t n = c.N; n < ldy; ++n) pad_bad += got[size_t(t * ldy + n)] != reftest::kPad;
    EXPECT_EQ(nan_bad, 0) << what << ": non-finite outputs";
    EXPECT_EQ(pad_bad, 0) << what << ": row padding of y written";
    Errors e;
    e.vs_model = max_dm / std::max(max_ref, 1e-30);
    e.vs_exact = max_de / std::max(max_mag, 1e-30);
    EXPECT_LE(e.vs_model, 1e-3) << what << " (vs the kernel's bf16 weights, / max|ref|)";
    EXPECT_LE(e.vs_exact, 5e-3) << what << " (vs the exact formula, / max sum |x|(|sq| + |b|))";
    std::printf("  %-70s err %.2e (model) %.2e (exact)\n", what.c_str(), e.vs_model, e.vs_exact);
    return e;
}

}  // namespace

TEST(FastGemm, Int4Group32NoBias) {
    REQUIRE_CUDA();
    for (const Case& c : {Case{PackedKind::Int4, 32, false, 1, 1, 32},
                          Case{PackedKind::Int4, 32, false, 2, 3, 96, 3, 5},
                          Case{PackedKind::Int4, 32, false, 9, 17, 160, 4, 1},
                          Case{PackedKind::Int4, 32, false, 17, 127, 2080},
                          Case{PackedKind::Int4, 32, false, 63, 129, 96, 1, 3},
                          Case{PackedKind::Int4, 32, false, 64, 4096, 160},
                          Case{PackedKind::Int4, 32, false, 65, 129, 2080, 8, 8},
                          Case{PackedKind::Int4, 32, false, 127, 17, 14336},
                          Case{PackedKind::Int4, 32, false, 129, 127, 2080, 5, 2},
                          Case{PackedKind::Int4, 32, false, 513, 129, 2080},
                          Case{PackedKind::Int4, 32, false, 513, 4096, 96, 2, 7},
                          Case{PackedKind::Int4, 32, false, 9, 4096, 14336}})
        run_case(c);
}

TEST(FastGemm, Int4Group32Bias) {
    REQUIRE_CUDA();
    for (const Case& c : {Case{PackedKind::Int4, 32, true, 1, 3, 32},
                          Case{PackedKind::Int4, 32, true, 17, 129, 160, 3, 1},
                          Case{PackedKind::Int4, 32, true, 65, 127, 2080},
                          Case{PackedKind::Int4, 32, true, 129, 17, 14336, 4, 4}})
        run_case(c);
}

TEST(FastGemm, Int4Group64And128) {
    REQUIRE_CUDA();
    for (const Case& c : {Case{PackedKind::Int4, 64, true, 1, 1, 64},
                          Case{PackedKind::Int4, 64, true, 9, 17, 192, 1, 1},
                          Case{PackedKind::Int4, 64, true, 64, 129, 2112},
                          Case{PackedKind::Int4, 64, false, 127, 127, 2112, 4, 0},
                          Case{PackedKind::Int4, 128, true, 2, 3, 128},
                          Case{PackedKind::Int4, 128, true, 65, 129, 2176, 0, 3},
                          Case{PackedKind::Int4, 128, false, 129, 17, 14336},
                          Case{PackedKind::Int4, 128, true, 513, 4096, 128, 3, 1}})
        run_case(c);
}

TEST(FastGemm, Int8Groups16And32) {
    REQUIRE_CUDA();
    for (const Case& c : {Case{PackedKind::Int8, 32, false, 1, 1, 32},
                          Case{PackedKind::Int8, 32, false, 9, 17, 96, 3, 1},
                          Case{PackedKind::Int8, 32, false, 65, 129, 2080},
                          Case{PackedKind::Int8, 32, false, 127, 17, 14336, 0, 2},
                          Case{PackedKind::Int8, 16, false, 2, 3, 32},
                          Case{PackedKind::Int8, 16, false, 17, 127, 160, 1, 1},
                          Case{PackedKind::Int8, 16, false, 129, 129, 2080},
                          Case{PackedKind::Int8, 16, false, 513, 4096, 96, 4, 3}})
        run_case(c);
}

// Every tile configuration (the dispatch picks one per shape; the benchmark times them all) on a
// shape that is ragged in T, N and K, whole and with K split in two (an odd number of k-tiles).
TEST(FastGemm, EveryConfig) {
    REQUIRE_CUDA();
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg) {
        if (fast::detail::kGemmConfigs[cfg].tma_cluster > 0) continue;  // tiles only: WgmmaTmaAwkwardShapes
        run_case(Case{PackedKind::Int4, 32, false, 129, 257, 2080, 3, 1}, cfg);
        run_case(Case{PackedKind::Int4, 64, true, 65, 129, 448}, cfg, 2);  // K = 64·7: 3.5 k-tiles
        if (!fast::detail::kGemmConfigs[cfg].wgmma)  // wgmma: Int4 only (refused below)
            run_case(Case{PackedKind::Int8, 16, false, 129, 257, 2080, 1, 2}, cfg, cfg % 2 + 1);
    }
}

// Int4 in 16-row tiles (whole tiles: N a multiple of 16, K of 128): every configuration, G 32 / 64
// / 128, with and without biases, K split, against the same matrix's row-major formula.
TEST(FastGemm, Int4InTiles) {
    REQUIRE_CUDA();
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg) {
        run_case(Case{PackedKind::Int4, 32, false, 129, 256, 2048, 3, 1, true}, cfg);
        run_case(Case{PackedKind::Int4, 64, true, 65, 144, 640, 0, 0, true}, cfg, 2);
    }
    for (const Case& c : {Case{PackedKind::Int4, 32, false, 9, 16, 128, 0, 0, true},
                          Case{PackedKind::Int4, 32, true, 17, 4096, 1024, 2, 3, true},
                          Case{PackedKind::Int4, 128, true, 64, 48, 14336, 0, 1, true},
                          Case{PackedKind::Int4, 32, false, 513, 2048, 4096, 0, 0, true}})
        run_case(c);
}

// The wgmma configurations (fast_gemm_wgmma.cu) on their own awkward shapes: one token, T just
// past a token tile (BN 64 / 128 / 256), N odd and one past a 128-row block, K = 32·odd (a partial
// last k-tile: the x pass pads K to 128), K split in two with an odd number of k-tiles, G 32 / 64 /
// 128 with and without biases, row-major and 16-row tiles, strided x and y.
TEST(FastGemm, WgmmaAwkwardShapes) {
    REQUIRE_CUDA();
    int ran = 0;
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg) {
        if (!fast::detail::kGemmConfigs[cfg].wgmma || fast::detail::kGemmConfigs[cfg].tma_cluster > 0) continue;
        ++ran;
        for (const Case& c : {Case{PackedKind::Int4, 32, false, 1, 1, 32},
                              Case{PackedKind::Int4, 32, true, 2, 3, 96, 1, 2},
                              Case{PackedKind::Int4, 32, false, 65, 129, 160},
                              Case{PackedKind::Int4, 64, true, 129, 127, 2112, 4, 1},
                              Case{PackedKind::Int4, 128, false, 257, 257, 384},
                              Case{PackedKind::Int4, 32, false, 17, 33, 14336},
                              Case{PackedKind::Int4, 32, false, 300, 256, 2048, 0, 3, true},
                              Case{PackedKind::Int4, 128, true, 129, 272, 1152, 2, 0, true}})
            run_case(c, cfg);
        run_case(Case{PackedKind::Int4, 32, true, 200, 129, 2208, 1, 1}, cfg, 2);  // 18 k-tiles: 9 + 9
        run_case(Case{PackedKind::Int4, 64, false, 70, 144, 640, 0, 0, true}, cfg, 2);  // 5: 3 + 2
    }
    EXPECT_GT(ran, 0);
}

// The warp-specialised TMA tiles (fast_gemm_wgmma_tma.cu; matrices in 16-row tiles only): one
// token, T one past a token tile (128 / 256) and many tiles, N one row tile past a block (128 /
// 256 rows) and a single row tile, a cluster's second block past N (N = 144: one 256-row block,
// rounded up to two), K from one k-tile to 112 (the ring wrapping many times), G 32 / 64 / 128 with
// and without biases, strided x and y, K split in two with an odd number of k-tiles and with one
// (the second half empty).
TEST(FastGemm, WgmmaTmaAwkwardShapes) {
    REQUIRE_CUDA();
    int ran = 0;
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg) {
        if (fast::detail::kGemmConfigs[cfg].tma_cluster == 0) continue;
        ++ran;
        for (const Case& c : {Case{PackedKind::Int4, 32, false, 1, 16, 128, 0, 0, true},
                              Case{PackedKind::Int4, 64, true, 2, 48, 384, 1, 2, true},
                              Case{PackedKind::Int4, 128, true, 17, 272, 1152, 0, 3, true},
                              Case{PackedKind::Int4, 32, false, 129, 144, 640, 4, 0, true},
                              Case{PackedKind::Int4, 64, false, 257, 400, 256, 0, 0, true},
                              Case{PackedKind::Int4, 32, true, 300, 4096, 2048, 0, 0, true},
                              Case{PackedKind::Int4, 32, false, 65, 272, 14336, 0, 0, true}})
            run_case(c, cfg);
        run_case(Case{PackedKind::Int4, 32, true, 200, 208, 2176, 1, 1, true}, cfg, 2);  // 17 k-tiles: 9 + 8
        run_case(Case{PackedKind::Int4, 64, false, 70, 144, 640, 0, 0, true}, cfg, 2);   // 5: 3 + 2
        run_case(Case{PackedKind::Int4, 128, true, 9, 32, 128, 0, 0, true}, cfg, 2);    // 1: 1 + 0
    }
    EXPECT_GT(ran, 0);
}

// The pick: a configuration that takes the kind for every shape (wgmma: Int4 only), the wgmma
// tiles for Int4 (measured faster than the mma.sync ones on every prefill shape from 16 tokens),
// and for them K split only where it is long.
TEST(FastGemm, PickTakesTheKindAndTheWgmmaTiles) {
    REQUIRE_CUDA();
    for (const PackedKind kind : {PackedKind::Int4, PackedKind::Int8})
        for (const int64_t T : {9, 16, 17, 64, 127, 128, 512, 513, 2048})
            for (const auto& [N, K] : {std::pair<int64_t, int64_t>{4096, 14336}, {8192, 2048}, {2048, 4096}, {17, 96}})
                for (const bool tiles : {false, true}) {
                    if (tiles && !packed_tiles_fit(kind, N, K, 32)) continue;
                    const fast::GemmPlan p = fast::gemm_pick(T, N, K, kind, tiles);
                    SCOPED_TRACE(std::to_string(T) + "x" + std::to_string(N) + "x" + std::to_string(K) +
                                 (kind == PackedKind::Int4 ? " Int4 " : " Int8 ") + (tiles ? "tiles " : "") +
                                 fast::detail::kGemmConfigs[p.config].name);
                    ASSERT_GE(p.config, 0);
                    ASSERT_LT(p.config, fast::detail::kGemmConfigCount);
                    EXPECT_GT(fast::detail::gemm_blocks_per_sm(p.config, kind), 0);
                    EXPECT_EQ(fast::detail::kGemmConfigs[p.config].wgmma, kind == PackedKind::Int4);
                    EXPECT_TRUE(tiles || fast::detail::kGemmConfigs[p.config].tma_cluster == 0);  // TMA: tiles only
                    if (kind == PackedKind::Int4 && K <= 2048) {
                        EXPECT_EQ(p.splits, 1);  // 16 k-tiles: whole (measured)
                    }
                }
    // Measured picks (bench_fast_gemm, session 13): 4096×14336 at 512 tokens 256x128 split in two
    // (130.9 µs), at 2048 whole (460); 4096×2048 at 512 tokens 128x128 (25.3).
    const auto name = [](const fast::GemmPlan& p) { return std::string(fast::detail::kGemmConfigs[p.config].name); };
    EXPECT_EQ(name(fast::gemm_pick(512, 4096, 14336, PackedKind::Int4)), "wgmma 256x128 s3");
    EXPECT_EQ(fast::gemm_pick(512, 4096, 14336, PackedKind::Int4).splits, 2);
    EXPECT_EQ(name(fast::gemm_pick(2048, 4096, 14336, PackedKind::Int4)), "wgmma 256x128 s3");
    EXPECT_EQ(fast::gemm_pick(2048, 4096, 14336, PackedKind::Int4).splits, 1);
    EXPECT_EQ(name(fast::gemm_pick(512, 4096, 2048, PackedKind::Int4)), "wgmma 128x128 s4");
    // In 16-row tiles (session 35, bench_fast_gemm): the TMA tiles — 4096×14336 at 512 tokens split
    // (87.5 µs), at 2048 whole (299); 8192×2048 at 512 (28.3 against 39.3); 4096×2048 at 512
    // the TMA 128x128 (17.3 against the wgmma 128x128's 24.7).
    EXPECT_EQ(name(fast::gemm_pick(512, 4096, 14336, PackedKind::Int4, true)), "wgmma tma 256x128 s3");
    EXPECT_EQ(fast::gemm_pick(512, 4096, 14336, PackedKind::Int4, true).splits, 2);
    EXPECT_EQ(name(fast::gemm_pick(2048, 4096, 14336, PackedKind::Int4, true)), "wgmma tma 256x128 s3");
    EXPECT_EQ(fast::gemm_pick(2048, 4096, 14336, PackedKind::Int4, true).splits, 1);
    EXPECT_EQ(name(fast::gemm_pick(512, 8192, 2048, PackedKind::Int4, true)), "wgmma tma 256x128 s3");
    EXPECT_EQ(name(fast::gemm_pick(512, 4096, 2048, PackedKind::Int4, true)), "wgmma tma 128x128 s5");  // 17.3
    // Fewer tokens: 4096×14336 at 64 and 128 tokens the 64-token tile split (34.7, 36.2 µs), at 256
    // the 128-token one split (50.8); 8192×2048 at 256 tokens the 128-token tile (17.2).
    for (const int64_t T : {64, 128}) {
        EXPECT_EQ(name(fast::gemm_pick(T, 4096, 14336, PackedKind::Int4, true)), "wgmma tma 64x128 s8");
        EXPECT_EQ(fast::gemm_pick(T, 4096, 14336, PackedKind::Int4, true).splits, 2);
    }
    EXPECT_EQ(name(fast::gemm_pick(256, 4096, 14336, PackedKind::Int4, true)), "wgmma tma 128x128 s5");
    EXPECT_EQ(fast::gemm_pick(256, 4096, 14336, PackedKind::Int4, true).splits, 2);
    EXPECT_EQ(name(fast::gemm_pick(256, 8192, 2048, PackedKind::Int4, true)), "wgmma tma 128x128 s5");
}

TEST(FastGemm, EmptyAndBadArguments) {
    REQUIRE_CUDA();
    PackedMatrix w;
    w.n = 3;
    w.k = 64;
    w.group = 32;
    // T = 0: nothing to do, no pointer touched.
    EXPECT_NO_THROW(fast::gemm_packed(nullptr, 3, nullptr, 64, 0, w, nullptr, nullptr));
    w.group = 48;
    EXPECT_THROW(fast::gemm_packed(nullptr, 3, nullptr, 64, 4, w, nullptr, nullptr), Error);
    w.group = 32;
    w.k = 48;
    EXPECT_THROW(fast::gemm_packed(nullptr, 3, nullptr, 64, 4, w, nullptr, nullptr), Error);
    w.k = 64;
    EXPECT_THROW(fast::gemm_packed(nullptr, 3, nullptr, 63, 4, w, nullptr, nullptr), Error);  // ldx < K
    w.kind = PackedKind::Int8;
    w.group = 64;
    EXPECT_THROW(fast::gemm_packed(nullptr, 3, nullptr, 64, 4, w, nullptr, nullptr), Error);
    w.group = 32;
    w.kind = PackedKind::Int4;  // the TMA tiles take matrices in 16-row tiles only
    w.n = 16;
    w.k = 128;
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg)
        if (fast::detail::kGemmConfigs[cfg].tma_cluster > 0) {
            EXPECT_FALSE(fast::gemm_pick(512, 4096, 14336, PackedKind::Int4).config == cfg);
            EXPECT_THROW(fast::gemm_packed_plan(fast::GemmPlan{cfg, 1}, true, nullptr, 16, nullptr, 128, 4, w, nullptr,
                                                nullptr),
                         Error);
        }
    w.kind = PackedKind::Int8;
    w.n = 3;
    w.k = 64;
    for (int cfg = 0; cfg < fast::detail::kGemmConfigCount; ++cfg)  // wgmma tiles take Int4 only
        if (fast::detail::kGemmConfigs[cfg].wgmma) {
            EXPECT_EQ(fast::detail::gemm_blocks_per_sm(cfg, PackedKind::Int8), 0);
            EXPECT_THROW(fast::gemm_packed_plan(fast::GemmPlan{cfg, 1}, true, nullptr, 3, nullptr, 64, 4, w, nullptr,
                                                nullptr),
                         Error);
        }
}
