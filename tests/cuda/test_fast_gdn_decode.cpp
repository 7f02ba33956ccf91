// The fused Gated DeltaNet decode step (fast::gdn_decode_step, every GdnDecodeVariant) against the
// CPU's separate ops (conv1d_silu, l2_norm, gdn_gates, gated_delta_rule, rms_norm_gated), chained
// over several steps, shuffled and padding slots, grouped and tiled head orders, other shapes; a
// bad slot gives NaN. Split from test_fast_gdn.cpp (the delta rule's tests). Without a GPU they skip.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/stream.h"
#include "gdn_test_util.h"
#include "gemv_test_util.h"  // packed matrices: random_packed, upload, packed_reference, dp4a_bound
#include "ref_test_util.h"   // REQUIRE_CUDA, to_device, to_host

using namespace tessera;
using namespace tessera::cuda;
using namespace gdntest;
using reftest::to_device;
using reftest::to_host;

namespace {

// The decode step vs the CPU's op sequence: f32 sums of squares where the CPU sums in double, and
// the RMSNorm divides by an O(0.1..1) rms: 5e-5. The conv state holds copies: exact.
constexpr double kTolDecode = 5e-5;


// ---- the fused decode step ----

struct DecodeShape {
    int64_t nk, nv, dk, dv, K;
    bool tiled;
};

// The fused out-projection (GdnDecodeArgs::out_w): a random packed Int4 matrix [H, nv·dv].
struct OutCase {
    gemvtest::Layout layout;
    bool tiles;
    int64_t H;
};

// The nk parts of the fused out-projection against the packed formula in double on the GPU's own
// y: within what Dp4a's two int8 limbs may move it (gemvtest::dp4a_bound) plus f32 rounding of the
// sums, 2e-6 of Σ|w·y|. Part rows past H (padding) stay untouched.
void check_out_parts(const PackedHost& w, const std::vector<float>& parts, int64_t nk, int B, int64_t row_s,
                     const std::vector<float>& y, int64_t y_s) {
    const int64_t H = w.n, K = w.k;
    std::vector<float> yc(size_t(B * K));
    for (int s = 0; s < B; ++s) std::copy_n(y.begin() + s * y_s, K, yc.begin() + s * K);
    std::vector<double> want, mag, off;
    gemvtest::packed_reference(w, yc, K, B, &want, &mag, &off);
    const std::vector<double> bound = gemvtest::dp4a_bound(w, yc, K, B);
    int bad = 0;
    for (int s = 0; s < B; ++s)
        for (int64_t n = 0; n < row_s; ++n) {
            if (n >= H) {
                for (int64_t p = 0; p < nk; ++p)
                    if (parts[size_t((p * B + s) * row_s + n)] != reftest::kPad && ++bad <= 3)
                        ADD_FAILURE() << "part " << p << " row padding of sequence " << s << " written";
                continue;
            }
            float got = 0.f;  // the parts in order, as add_rms_norm sums them
            for (int64_t p = 0; p < nk; ++p) got += parts[size_t((p * B + s) * row_s + n)];
            const size_t i = size_t(s * H + n);
            const double tol = bound[i] + 2e-6 * mag[i] + 1e-30;
            if (!(std::fabs(double(got) - want[i]) <= tol) && ++bad <= 5)
                ADD_FAILURE() << "out row " << n << " of sequence " << s << ": " << got << " vs " << want[i]
                              << " (tolerance " << tol << ")";
        }
}

// `steps` decode steps of `B` sequences (padding ones on slot -1) through the fused kernel and
// through the CPU backend's separate ops, each step continuing from the states the last one left.
// With `out`, the kernel applies the out-projection too (check_out_parts).
void check_decode(const DecodeShape& sh, int B, const std::vector<int>& padding, int steps, uint32_t seed,
                  fast::GdnDecodeVariant variant, const OutCase* out = nullptr) {
    const int64_t nk = sh.nk, nv = sh.nv, dk = sh.dk, dv = sh.dv, K = sh.K;
    SCOPED_TRACE("decode nk=" + std::to_string(nk) + " nv=" + std::to_string(nv) + " dk=" + std::to_string(dk) +
                 " dv=" + std::to_string(dv) + " K=" + std::to_string(K) + (sh.tiled ? " tiled" : " grouped") +
                 " batch " + std::to_string(B) + " variant " + std::to_string(int(variant)));
    std::mt19937 rng(seed);
    const int64_t C = 2 * nk * dk + nv * dv, HV = nv * dv, n_slots = B + 2;
    const int64_t mixed_s = C + 3, z_s = HV + 1, ba_s = 2 * nv + 1, y_s = HV + 2;  // padded rows
    const std::vector<int32_t> slot = random_slots(size_t(B), n_slots, rng, padding);
    const std::vector<float> conv_w = random_floats(size_t(C * K), rng, -0.6f, 0.6f);
    const std::vector<float> neg_exp_a = random_floats(size_t(nv), rng, -2.f, -0.1f);
    const std::vector<float> dt_bias = random_floats(size_t(nv), rng, -1.f, 1.f);
    const std::vector<float> norm_w = random_floats(size_t(dv), rng, 0.5f, 1.5f);
    std::vector<float> conv_cpu = random_floats(size_t(n_slots * (K - 1) * C), rng, -1.f, 1.f);
    std::vector<float> st_cpu = random_floats(size_t(n_slots * nv * dk * dv), rng, -0.5f, 0.5f);
    DeviceBuffer d_conv_w = to_device(conv_w), d_nea = to_device(neg_exp_a), d_dtb = to_device(dt_bias),
                 d_norm = to_device(norm_w), d_conv = to_device(conv_cpu), d_st = to_device(st_cpu),
                 d_slot = to_device(slot);
    auto be = make_cpu_backend();
    std::vector<int32_t> q_start(size_t(B) + 1);
    std::iota(q_start.begin(), q_start.end(), 0);
    const SeqPlan plan{B, q_start.data(), slot.data()};
    auto where_y = [&](size_t i) {
        const int64_t x = int64_t(i);
        return "sequence " + std::to_string(x / HV) + " head " + std::to_string(x % HV / dv) + " column " +
               std::to_string(x % dv);
    };
    auto where_st = [&](size_t i) {
        const int64_t x = int64_t(i);
        return "slot " + std::to_string(x / (nv * dk * dv)) + " head " + std::to_string(x / (dk * dv) % nv) +
               " row " + std::to_string(x / dv % dk) + " column " + std::to_string(x % dv);
    };
    for (int step = 0; step < steps; ++step) {
        SCOPED_TRACE("step " + std::to_string(step));
        std::vector<float> mixed = random_floats(size_t(B * mixed_s), rng, -2.f, 2.f);
        std::vector<float> z = random_floats(size_t(B * z_s), rng, -2.f, 2.f);
        std::vector<float> ba = random_floats(size_t(B * ba_s), rng, -3.f, 3.f);  // b | a per row

        // CPU: the layer's ops in GatedDeltaNet::forward's order.
        std::vector<float> qkv(size_t(B * C)), beta(size_t(B * nv)), g(size_t(B * nv)), o(size_t(B * HV)),
            y_cpu(size_t(B * HV));
        Tensor t_qkv(qkv.data(), DType::F32, {B, C});
        be->conv1d_silu(t_qkv, reftest::rows_view(mixed.data(), B, C, mixed_s),
                        Tensor(const_cast<float*>(conv_w.data()), DType::F32, {C, K}),
                        Tensor(conv_cpu.data(), DType::F32, {n_slots, K - 1, C}), plan);
        const Tensor q = reftest::heads_view(qkv.data(), B, nk, dk, C, dk);
        const Tensor k = reftest::heads_view(qkv.data() + nk * dk, B, nk, dk, C, dk);
        const Tensor v = reftest::heads_view(qkv.data() + 2 * nk * dk, B, nv, dv, C, dv);
        be->l2_norm(q, 1e-6f, 1.0f / std::sqrt(float(dk)));
        be->l2_norm(k, 1e-6f, 1.0f);
        Tensor t_beta(beta.data(), DType::F32, {B, nv}), t_g(g.data(), DType::F32, {B, nv});
        be->gdn_gates(t_beta, t_g, reftest::rows_view(ba.data(), B, nv, ba_s),
                      reftest::rows_view(ba.data() + nv, B, nv, ba_s),
                      Tensor(const_cast<float*>(neg_exp_a.data()), DType::F32, {nv}),
                      Tensor(const_cast<float*>(dt_bias.data()), DType::F32, {nv}));
        GdnParams gp;
        gp.n_k_heads = int(nk);
        gp.n_v_heads = int(nv);
        gp.tiled_heads = sh.tiled;
        gp.mode = GdnMode::Chunked;
        const Tensor o3(o.data(), DType::F32, {B, nv, dv});
        be->gated_delta_rule(o3, q, k, v, t_g, t_beta, Tensor(st_cpu.data(), DType::F32, {n_slots, nv, dk, dv}), plan,
                             gp);
        be->rms_norm_gated(Tensor(y_cpu.data(), DType::F32, {B, nv, dv}), o3,
                           reftest::heads_view(z.data(), B, nv, dv, z_s, dv),
                           Tensor(const_cast<float*>(norm_w.data()), DType::F32, {dv}), 1e-6f);

        // GPU: one fused launch.
        DeviceBuffer d_mixed = to_device(mixed), d_z = to_device(z), d_ba = to_device(ba),
                     d_y = to_device(std::vector<float>(size_t(B * y_s), reftest::kPad));
        fast::GdnDecodeArgs a;
        a.n_seqs = B;
        a.slot = d_slot.as<int32_t>();
        a.nk = nk;
        a.nv = nv;
        a.dk = dk;
        a.dv = dv;
        a.tiled_heads = sh.tiled;
        a.mixed = d_mixed.as<float>();
        a.mixed_s = mixed_s;
        a.z = d_z.as<float>();
        a.z_s = z_s;
        a.b = d_ba.as<float>();
        a.b_s = ba_s;
        a.a = d_ba.as<float>() + nv;
        a.a_s = ba_s;
        a.conv_w = d_conv_w.as<float>();
        a.conv_k = K;
        a.conv_state = d_conv.as<float>();
        a.conv_slot_stride = (K - 1) * C;
        a.neg_exp_a = d_nea.as<float>();
        a.dt_bias = d_dtb.as<float>();
        a.state = d_st.as<float>();
        a.state_slot_stride = nv * dk * dv;
        a.n_slots = n_slots;
        a.norm_w = d_norm.as<float>();
        a.rms_eps = 1e-6f;
        a.y = d_y.as<float>();
        a.y_s = y_s;
        a.variant = int(variant);
        PackedHost w_out;
        gemvtest::DevicePacked d_w;
        DeviceBuffer d_parts;
        const int64_t parts_row_s = out ? out->H + 3 : 0;
        if (out) {
            SCOPED_TRACE(std::string("out-projection ") + out->layout.name + (out->tiles ? " tiles" : " rows") +
                         " H=" + std::to_string(out->H));
            w_out = gemvtest::random_packed(out->layout, out->H, HV, seed + 100 + uint32_t(step));
            PackedHost stored = w_out;
            if (out->tiles) tile_packed(stored);
            d_w = gemvtest::upload(stored);
            d_parts = to_device(std::vector<float>(size_t(nk * B * parts_row_s), reftest::kPad));
            a.out_w = d_w.m;
            a.out_parts = d_parts.as<float>();
            a.out_part_s = B * parts_row_s;
            a.out_row_s = parts_row_s;
            ASSERT_TRUE(fast::gdn_decode_out_fits(a, a.out_w));
        }
        Stream stream;
        fast::gdn_decode_step(a, stream);
        stream.synchronize();
        const std::vector<float> y_pad = to_host<float>(d_y);
        std::vector<float> y(size_t(B * HV));
        for (int64_t s = 0; s < B; ++s) {
            std::copy_n(y_pad.begin() + s * y_s, HV, y.begin() + s * HV);
            for (int64_t x = HV; x < y_s; ++x)
                EXPECT_EQ(y_pad[size_t(s * y_s + x)], reftest::kPad) << "y row padding of sequence " << s;
        }
        compare(y, y_cpu, kTolDecode, "y", where_y);
        if (out) check_out_parts(w_out, to_host<float>(d_parts), nk, B, parts_row_s, y, HV);
        compare(to_host<float>(d_st), st_cpu, kTolDecode, "state", where_st);
        const std::vector<float> conv_gpu = to_host<float>(d_conv);
        expect_same_bits(conv_gpu, conv_cpu, "conv state", [&](size_t i) {
            const int64_t x = int64_t(i);
            return "slot " + std::to_string(x / ((K - 1) * C)) + " row " + std::to_string(x / C % (K - 1)) +
                   " channel " + std::to_string(x % C);
        });
        if (::testing::Test::HasFailure()) return;  // later steps would only repeat the first miss
        // The CPU and GPU states agree within tolerance; continue both from the CPU's values so the
        // next step checks one step's error, not the accumulated one.
        d_st.upload(st_cpu.data(), st_cpu.size() * sizeof(float));
    }
}

// Every kernel of the step (Auto: gdn_decode_variant's choice — HeadSplit at one sequence where it
// splits a head, else Cols32 — and Head256 from two; Cols16 falls back to 32 columns past
// dv 128, Head256 / Head512 / HeadSplit to Cols32 past dk or dv 128 or r 8; HeadSplit splits a head
// over 4 blocks at r <= 2 where dv > 96, over 2 at r <= 4 where dv > 64, else runs Head256).
constexpr fast::GdnDecodeVariant kDecodeVariants[] = {
    fast::GdnDecodeVariant::Auto,   fast::GdnDecodeVariant::ClusterPerKeyHead, fast::GdnDecodeVariant::Cols32,
    fast::GdnDecodeVariant::Cols16, fast::GdnDecodeVariant::Head256,           fast::GdnDecodeVariant::Head512,
    fast::GdnDecodeVariant::HeadSplit};
static_assert(std::size(kDecodeVariants) == fast::kGdnDecodeVariants);

TEST(FastGdnDecodeStep, MatchesTheSeparateCpuOps) {
    REQUIRE_CUDA();
    for (fast::GdnDecodeVariant v : kDecodeVariants) {
        check_decode({16, 32, 128, 128, 4, false}, 1, {}, 3, 21, v);   // the flagship, batch 1
        check_decode({16, 32, 128, 128, 4, true}, 8, {3}, 3, 22, v);   // tiled heads, batch 8 with a padding sequence
        check_decode({16, 32, 128, 128, 4, false}, 64, {0, 63}, 2, 23, v);
        check_decode({16, 32, 128, 128, 4, true}, 19, {5}, 1, 29, v);
    }
}

TEST(FastGdnDecodeStep, OtherShapes) {
    REQUIRE_CUDA();
    for (fast::GdnDecodeVariant v : kDecodeVariants) {
        check_decode({4, 4, 128, 128, 4, false}, 3, {}, 2, 24, v);     // r = 1
        check_decode({2, 6, 48, 37, 4, true}, 3, {1}, 2, 25, v);       // r = 3 (two passes of 2 heads), partial column block
        check_decode({1, 8, 64, 64, 2, false}, 2, {}, 2, 26, v);       // r = 8, conv kernel 2
        check_decode({1, 2, 256, 256, 4, false}, 2, {}, 2, 27, v);     // dk = dv = 256: a cluster of 8 blocks
        check_decode({3, 3, 5, 7, 3, false}, 4, {2}, 3, 28, v);        // tiny odd heads, K = 3
        check_decode({2, 4, 256, 64, 8, false}, 2, {}, 2, 30, v);      // conv kernel 8, dk 256 (the q/k taps past 16 KB)
        check_decode({1, 16, 32, 48, 4, true}, 2, {}, 2, 31, v);       // r = 16: past the head kernels' clusters
        check_decode({3, 6, 128, 100, 8, true}, 5, {4}, 2, 32, v);     // r = 2 tiled, conv kernel 8, dv short of 128
        check_decode({2, 8, 128, 96, 4, false}, 3, {0}, 2, 33, v);     // r = 4: HeadSplit in 2 blocks (clusters of 8)
        check_decode({2, 6, 112, 65, 4, true}, 2, {}, 2, 34, v);       // r = 3, dv just past 64: 2 blocks, one column
        check_decode({2, 8, 128, 96, 4, true}, 1, {}, 2, 35, v);       // one sequence (Auto: HeadSplit in 2 blocks)
        check_decode({1, 8, 64, 64, 2, false}, 1, {}, 2, 36, v);       // one sequence, r = 8 (Auto: no split, Cols32)
    }
}

// The out-projection fused into HeadSplit (4 blocks a head: r <= 2, dv 128): every Int4 layout,
// rows and 16-row tiles, H from a few rows to kGdnOutMaxRows, one sequence (the choice) and several.
TEST(FastGdnDecodeStep, FusedOutProjection) {
    REQUIRE_CUDA();
    using V = fast::GdnDecodeVariant;
    const auto& L = gemvtest::kLayouts;  // 0: g32, 1: g64 biases, 2: g128 biases, 3: g128
    const OutCase flagship{L[0], true, 2048}, g64{L[1], true, 4096}, g128{L[2], false, 200}, odd{L[3], false, 17};
    check_decode({16, 32, 128, 128, 4, false}, 1, {}, 3, 41, V::Auto, &flagship);  // the flagship's step
    check_decode({16, 32, 128, 128, 4, true}, 1, {}, 2, 42, V::HeadSplit, &g64);
    check_decode({4, 4, 128, 128, 4, false}, 3, {1}, 2, 43, V::HeadSplit, &g128);  // r = 1: clusters of 4
    check_decode({2, 4, 96, 128, 8, true}, 5, {0, 4}, 2, 44, V::HeadSplit, &odd);   // dk 96, conv 8, 17 rows
}

// Where the fused out-projection does not apply, gdn_decode_out_fits says so and the step refuses it.
TEST(FastGdnDecodeStep, FusedOutProjectionShapes) {
    using V = fast::GdnDecodeVariant;
    fast::GdnDecodeArgs a;
    a.n_seqs = 1, a.nk = 16, a.nv = 32, a.dk = 128, a.dv = 128, a.conv_k = 4;
    PackedMatrix w;
    w.kind = PackedKind::Int4, w.n = 2048, w.k = 32 * 128, w.group = 32;
    static const uint8_t codes[16] = {};
    static const uint16_t scales[1] = {};
    w.codes = codes, w.scales = scales;
    EXPECT_TRUE(fast::gdn_decode_out_fits(a, w));
    auto fits = [&](auto edit) {
        fast::GdnDecodeArgs b = a;
        PackedMatrix m = w;
        edit(b, m);
        return fast::gdn_decode_out_fits(b, m);
    };
    EXPECT_FALSE(fits([](auto& b, auto&) { b.n_seqs = 2; }));                  // Auto: Head256 from two
    EXPECT_TRUE(fits([](auto& b, auto&) { b.n_seqs = 2, b.variant = int(V::HeadSplit); }));
    EXPECT_FALSE(fits([](auto& b, auto&) { b.variant = int(V::Cols32); }));
    EXPECT_FALSE(fits([](auto& b, auto&) { b.nk = 8; }));                      // r = 4: 2 blocks a head
    EXPECT_FALSE(fits([](auto& b, auto&) { b.dv = 96; }));                     // dv short of 128
    EXPECT_FALSE(fits([](auto&, auto& m) { m.n = fast::kGdnOutMaxRows + 1; }));
    EXPECT_TRUE(fits([](auto&, auto& m) { m.n = fast::kGdnOutMaxRows; }));
    EXPECT_FALSE(fits([](auto&, auto& m) { m.k = 31 * 128; }));
    EXPECT_FALSE(fits([](auto&, auto& m) { m.kind = PackedKind::Int8; }));
    EXPECT_FALSE(fits([](auto&, auto& m) { m.group = 16; }));
}

TEST(FastGdnDecodeStep, BadSlotGivesNaN) {
    REQUIRE_CUDA();
    const int64_t nk = 1, nv = 2, dk = 8, dv = 8, K = 4, C = 2 * nk * dk + nv * dv, HV = nv * dv;
    std::vector<float> ones(size_t(4 * C), 0.5f), conv(size_t(2 * (K - 1) * C), 0.25f), st(size_t(2 * nv * dk * dv), 0.1f);
    const std::vector<int32_t> slot = {7, 0};  // slot 7 of 2
    DeviceBuffer d_in = to_device(ones), d_conv = to_device(conv), d_st = to_device(st), d_slot = to_device(slot),
                 d_y = to_device(std::vector<float>(size_t(2 * HV), 0.f));
    fast::GdnDecodeArgs a;
    a.n_seqs = 2;
    a.slot = d_slot.as<int32_t>();
    a.nk = nk;
    a.nv = nv;
    a.dk = dk;
    a.dv = dv;
    a.mixed = a.z = a.b = a.a = a.conv_w = a.neg_exp_a = a.dt_bias = a.norm_w = d_in.as<float>();
    a.mixed_s = C;
    a.z_s = HV;
    a.b_s = a.a_s = nv;
    a.conv_k = K;
    a.conv_state = d_conv.as<float>();
    a.conv_slot_stride = (K - 1) * C;
    a.state = d_st.as<float>();
    a.state_slot_stride = nv * dk * dv;
    a.n_slots = 2;
    a.y = d_y.as<float>();
    a.y_s = HV;
    for (fast::GdnDecodeVariant v : kDecodeVariants) {
        SCOPED_TRACE("variant " + std::to_string(int(v)));
        a.variant = int(v);
        d_y.upload(std::vector<float>(size_t(2 * HV), 0.f).data(), size_t(2 * HV) * sizeof(float));
        fast::gdn_decode_step(a, nullptr);
        const std::vector<float> y = to_host<float>(d_y);
        for (int64_t i = 0; i < HV; ++i) EXPECT_TRUE(std::isnan(y[size_t(i)])) << "sequence 0, element " << i;
        for (int64_t i = HV; i < 2 * HV; ++i) EXPECT_FALSE(std::isnan(y[size_t(i)])) << "sequence 1, element " << i;
    }
}

// The stamped diagnosis kernels (GdnDecodeArgs::stamps, bench_fast_gdn --stamps) compute what the
// plain ones do, bit for bit, and stamp every step of every block in order; other variants and the
// fused projection refuse stamps.
TEST(FastGdnDecodeStep, StampsChangeNothing) {
    REQUIRE_CUDA();
    const int64_t nk = 16, nv = 32, dk = 128, dv = 128, K = 4, C = 2 * nk * dk + nv * dv, HV = nv * dv;
    std::mt19937 rng(77);
    auto rand_vec = [&](size_t n, float lo, float hi) {
        std::uniform_real_distribution<float> d(lo, hi);
        std::vector<float> v(n);
        for (auto& x : v) x = d(rng);
        return v;
    };
    const std::vector<float> mixed = rand_vec(size_t(C), -1, 1), z = rand_vec(size_t(HV), -1, 1),
                             b = rand_vec(size_t(nv), -2, 2), aa = rand_vec(size_t(nv), -2, 2),
                             conv_w = rand_vec(size_t(C * K), -0.5, 0.5), conv = rand_vec(size_t((K - 1) * C), -1, 1),
                             nea = rand_vec(size_t(nv), -2, -0.1f), dtb = rand_vec(size_t(nv), -1, 1),
                             st = rand_vec(size_t(nv * dk * dv), -0.5, 0.5), norm = rand_vec(size_t(dv), 0.5, 1.5);
    DeviceBuffer d_mixed = to_device(mixed), d_z = to_device(z), d_b = to_device(b), d_a = to_device(aa),
                 d_cw = to_device(conv_w), d_nea = to_device(nea), d_dtb = to_device(dtb), d_norm = to_device(norm),
                 d_slot = to_device(std::vector<int32_t>{0});
    // The flagship's step for one sequence in slot 0, its conv state, state and y in these buffers.
    auto args = [&](DeviceBuffer& d_conv, DeviceBuffer& d_st, DeviceBuffer& d_y) {
        fast::GdnDecodeArgs a;
        a.n_seqs = 1, a.slot = d_slot.as<int32_t>(), a.nk = nk, a.nv = nv, a.dk = dk, a.dv = dv;
        a.mixed = d_mixed.as<float>(), a.mixed_s = C, a.z = d_z.as<float>(), a.z_s = HV;
        a.b = d_b.as<float>(), a.b_s = nv, a.a = d_a.as<float>(), a.a_s = nv;
        a.conv_w = d_cw.as<float>(), a.conv_k = K, a.conv_state = d_conv.as<float>(), a.conv_slot_stride = (K - 1) * C;
        a.neg_exp_a = d_nea.as<float>(), a.dt_bias = d_dtb.as<float>();
        a.state = d_st.as<float>(), a.state_slot_stride = nv * dk * dv, a.n_slots = 1;
        a.norm_w = d_norm.as<float>(), a.y = d_y.as<float>(), a.y_s = HV;
        return a;
    };
    using V = fast::GdnDecodeVariant;
    for (V v : {V::HeadSplit, V::Head256}) {
        SCOPED_TRACE("variant " + std::to_string(int(v)));
        const int64_t blocks = nv * (v == V::HeadSplit ? 4 : 1);
        std::vector<float> y_out[2], st_out[2], conv_out[2];
        std::vector<unsigned long long> stamps;
        for (int stamped = 0; stamped < 2; ++stamped) {
            DeviceBuffer d_conv = to_device(conv), d_st = to_device(st), d_y(size_t(HV) * sizeof(float));
            DeviceBuffer d_stamps(size_t(2 * blocks * fast::kGdnDecodeStamps * 2) * sizeof(unsigned long long));
            fast::GdnDecodeArgs a = args(d_conv, d_st, d_y);
            a.variant = int(v);
            if (stamped) a.stamps = d_stamps.as<unsigned long long>(), a.stamp_launch = 1;  // the second of two
            fast::gdn_decode_step(a, nullptr);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            y_out[stamped] = to_host<float>(d_y);
            st_out[stamped] = to_host<float>(d_st);
            conv_out[stamped] = to_host<float>(d_conv);
            if (stamped) stamps = to_host<unsigned long long>(d_stamps);
        }
        expect_same_bits(y_out[1], y_out[0], "y", [](size_t i) { return std::to_string(i); });
        expect_same_bits(st_out[1], st_out[0], "state", [](size_t i) { return std::to_string(i); });
        expect_same_bits(conv_out[1], conv_out[0], "conv state", [](size_t i) { return std::to_string(i); });
        constexpr int P = fast::kGdnDecodeStamps;
        for (int64_t blk = 0; blk < blocks; ++blk) {
            const unsigned long long* p = stamps.data() + size_t((blocks + blk) * P * 2);  // launch 1
            EXPECT_GT(p[0], 0ull) << "block " << blk;
            for (int i = 1; i < P; ++i) {
                EXPECT_GE(p[2 * i], p[2 * (i - 1)]) << "block " << blk << " step " << i << " (globaltimer)";
                EXPECT_GT(p[2 * i + 1], p[2 * (i - 1) + 1]) << "block " << blk << " step " << i << " (clock)";
            }
            if (::testing::Test::HasFailure()) break;
        }
    }
    // The checks before any launch: valid arguments but for the stamps.
    DeviceBuffer d_conv = to_device(conv), d_st = to_device(st), d_y(size_t(HV) * sizeof(float));
    DeviceBuffer d_stamps(size_t(nv * 4 * fast::kGdnDecodeStamps * 2) * sizeof(unsigned long long));
    fast::GdnDecodeArgs a = args(d_conv, d_st, d_y);
    a.stamps = d_stamps.as<unsigned long long>();
    for (V v : {V::Cols32, V::Head512, V::ClusterPerKeyHead}) {
        a.variant = int(v);
        try {
            fast::gdn_decode_step(a, nullptr);
            ADD_FAILURE() << "variant " << int(v) << " took stamps";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("stamps"), std::string::npos) << e.what();
        }
    }
    a.variant = int(V::HeadSplit);  // the same arguments launch where stamps are taken
    EXPECT_NO_THROW(fast::gdn_decode_step(a, nullptr));
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
