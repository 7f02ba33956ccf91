// The MoE tiles' k-tile probe (fast_ktile_probe.h): its production form computes gate+up's k-tile
// as a host model of the layouts says (weight rows by warp and lane, the codes' nibbles into A's
// k index, B's rows in the 128-byte swizzle), and the forms that reorder the loop — the wgmma
// alone on A made once, the register sets, the stages brought in by the tiles' ring — give its
// very bits; the dequantization alone makes
// the A words the host model makes (their sum mod 2^32). Bad arguments are errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_ktile_probe.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;

namespace {

// A row rho (0..63) of warpgroup wg, k index kappa (0..127, k-step kappa / 16) of the k-tile the
// stage holds: its Int4 code and its group's scale (f16, as bf16).
struct CodeScale {
    int code;
    float scale;
};
CodeScale code_scale(const std::vector<uint8_t>& st, int bn, int wg, int rho, int kappa) {
    const int w4 = rho / 16, g = rho % 16;
    const int f = wg * 32 + w4 * 8 + g % 8, row = g < 8 ? f : 64 + f;  // gate's row, or up's
    const int sigma = kappa / 16, kk = kappa % 16, t = (kk % 8) / 2, j = sigma / 2, s = sigma % 2;
    const int nib = 2 * s + (kk >= 8 ? 1 : 0) + (kk % 2 ? 4 : 0);
    const int64_t w_off = 2 * bn * 128, s_off = w_off + 8 * 1024;
    const uint8_t* word = st.data() + w_off + row * 64 + t * 16 + 4 * j;
    const uint32_t q = uint32_t(word[0]) | uint32_t(word[1]) << 8 | uint32_t(word[2]) << 16 | uint32_t(word[3]) << 24;
    const int code = int((q >> (4 * nib)) & 15u);
    const int64_t at = s_off + (row >> 4) * 128 + 2 * ((row & 15) * 4 + t);  // row's scale, group t
    return {code, bf16_to_f32(f32_to_bf16(f16_to_f32(uint16_t(st[size_t(at)] | st[size_t(at + 1)] << 8))))};
}

// The weight (code − 8)·s in bf16, as the lane holding it dequantizes it.
float weight(const std::vector<uint8_t>& st, int bn, int wg, int rho, int kappa) {
    const CodeScale w = code_scale(st, bn, wg, rho, kappa);
    return bf16_to_f32(f32_to_bf16(float(w.code - 8) * w.scale));  // (exact in f32: 4 × 8 bits)
}
// The lean form's: code·s in bf16, and its offset −8·s (exact).
float lean_weight(const std::vector<uint8_t>& st, int bn, int wg, int rho, int kappa) {
    const CodeScale w = code_scale(st, bn, wg, rho, kappa);
    return bf16_to_f32(f32_to_bf16(float(w.code) * w.scale));
}
float lean_offset(const std::vector<uint8_t>& st, int bn, int wg, int rho, int kappa) {
    return -8.f * code_scale(st, bn, wg, rho, kappa).scale;
}

// The sum mod 2^32 of the A words thread (wg, w4, gq, tq) makes from a k-tile: bf16 pairs of its
// rows' weights at k (2t, 2t + 1) and (2t + 8, 2t + 9) of each k-step (wgmma_a_fragments), low half first.
uint32_t a_word_sum(const std::vector<uint8_t>& st, int bn, int wg, int w4, int gq, int tq) {
    uint32_t sum = 0;
    for (int sigma = 0; sigma < 8; ++sigma)
        for (int rho : {16 * w4 + gq, 16 * w4 + gq + 8})
            for (int kk : {2 * tq, 2 * tq + 8}) {
                const uint32_t lo = f32_to_bf16(weight(st, bn, wg, rho, 16 * sigma + kk));
                const uint32_t hi = f32_to_bf16(weight(st, bn, wg, rho, 16 * sigma + kk + 1));
                sum += lo | hi << 16;
            }
    return sum;
}

// The overlap forms' side work of a k-tile for thread (wg, w4, gq, tq) (KIND 1: each pair's FMA as
// XOR and add; 2: as two f32 FMA on the words' bits): its 8 words' sum mod 2^32, from the lane's
// rows (gate's f, up's 64 + f), their scales as bf16 pairs s2 and offsets b2 = −8·s2.
uint32_t side_sum(const std::vector<uint8_t>& st, int bn, int kind, int wg, int w4, int gq, int tq) {
    const int f = wg * 32 + w4 * 8 + gq;
    const int64_t w_off = 2 * bn * 128, s_off = w_off + 8 * 1024;
    auto as_f = [](uint32_t u) { return std::bit_cast<float>(u); };
    uint32_t sum = 0;
    for (int row : {f, 64 + f}) {
        const int64_t at = s_off + (row >> 4) * 128 + 2 * ((row & 15) * 4 + tq);
        const uint32_t s = f32_to_bf16(f16_to_f32(uint16_t(st[size_t(at)] | st[size_t(at + 1)] << 8)));
        const uint32_t z = f32_to_bf16(-8.f * bf16_to_f32(uint16_t(s)));
        const uint32_t s2 = s | s << 16, b2 = z | z << 16;
        for (int j = 0; j < 4; ++j) {
            const uint8_t* w = st.data() + w_off + row * 64 + tq * 16 + 4 * j;
            const uint32_t q = uint32_t(w[0]) | uint32_t(w[1]) << 8 | uint32_t(w[2]) << 16 | uint32_t(w[3]) << 24;
            for (int i = 0; i < 4; ++i) {
                const uint32_t t = ((q >> (4 * i)) & 0x000f000fu) | 0x43004300u;
                if (kind == 1) sum += (t ^ s2) + b2;
                else
                    sum += std::bit_cast<uint32_t>(
                        std::fma(std::fma(as_f(t), as_f(s2), as_f(0xc300c300u)), as_f(s2), as_f(b2)));
            }
        }
    }
    return sum;
}

// B's value at k index kappa of activation row n: k-block kappa / 64, in the 128-byte swizzle.
float activation(const std::vector<uint8_t>& st, int bn, int kappa, int n) {
    const int hb = kappa / 64, p = kappa % 64, c = p / 8;
    const int64_t at = int64_t(hb) * bn * 128 + n * 128 + ((c ^ (n & 7)) << 4) + 2 * (p % 8);
    return bf16_to_f32(uint16_t(st[size_t(at)] | st[size_t(at + 1)] << 8));
}

// One run of the probe in form `form` (a's other fields as they are): its out, on the host.
std::vector<float> run_probe(fast::KtileProbeArgs& a, fast::KtileProbeForm form, const DeviceBuffer& stage,
                             Stream& s) {
    a.form = form;
    DeviceBuffer out(size_t(fast::ktile_probe_out_floats(a)) * 4);
    EXPECT_EQ(fast::launch_ktile_probe(a, stage.data(), out.as<float>(), s.get()), cudaSuccess);
    s.synchronize();
    return to_host<float>(out);
}

// Each accumulator of the probe's out (blocks of 256 threads, BN / 2 a thread, accumulator i at
// [block][i][thread]) against model(wg, rho, n) = {want, Σ|terms|} of A row rho of warpgroup wg and
// activation row n, within the f32 sums' rounding; returns the largest Σ|terms| seen.
template <class Model>
double expect_accumulators(const std::vector<float>& out, int bn, int blocks, Model&& model) {
    double worst = 0;
    for (int b = 0; b < blocks; ++b)
        for (int tid = 0; tid < 256; ++tid) {
            const int wg = tid / 128, w4 = (tid / 32) % 4, gq = (tid % 32) / 4, tq = tid % 4;
            for (int i = 0; i < bn / 8; ++i)
                for (int c = 0; c < 4; ++c) {
                    const int rho = 16 * w4 + gq + (c >= 2 ? 8 : 0), n = 8 * i + 2 * tq + (c & 1);
                    const auto [want, mag] = model(wg, rho, n);
                    const float got = out[(size_t(b) * (bn / 2) + 4 * i + c) * 256 + tid];
                    EXPECT_NEAR(got, want, 1e-5 * mag + 1e-6) << "block " << b << " thread " << tid << " acc "
                                                              << 4 * i + c;
                    if (std::fabs(got - want) > 1e-5 * mag + 1e-6) return worst;  // (one failure, not thousands)
                    worst = std::max(worst, mag);
                }
        }
    return worst;
}

}  // namespace

// Every form that runs the wgmma, at each N and both residencies: the production form within the
// f32 sums' rounding of iters × (the host's k-tile product), the others its bits.
TEST(FastKtileProbe, FormsComputeTheTilesKtile) {
    REQUIRE_CUDA();
    Stream s;
    for (const int bn : {16, 32, 48, 64}) {
        const std::vector<uint8_t> st = fast::ktile_probe_make_stage(bn, uint32_t(100 + bn));
        ASSERT_EQ(int64_t(st.size()), fast::ktile_probe_stage_bytes(bn));
        DeviceBuffer stage = to_device(st);
        for (const int minb : {2, 3}) {
            SCOPED_TRACE(testing::Message() << "BN " << bn << ", " << minb << " blocks an SM");
            fast::KtileProbeArgs a;
            a.bn = bn, a.blocks_per_sm = minb, a.iters = 12, a.blocks = 3;
            auto run = [&](fast::KtileProbeForm form) { return run_probe(a, form, stage, s); };
            const std::vector<float> tiles = run(fast::KtileProbeForm::Tiles);
            ASSERT_EQ(int64_t(tiles.size()), 3 * 256 * bn / 2);
            const double worst = expect_accumulators(tiles, bn, 3, [&](int wg, int rho, int n) {
                double want = 0, mag = 0;
                for (int kappa = 0; kappa < 128; ++kappa) {
                    const double p = double(weight(st, bn, wg, rho, kappa)) * activation(st, bn, kappa, n);
                    want += p, mag += std::fabs(p);
                }
                return std::pair{want * a.iters, mag * a.iters};
            });
            ASSERT_FALSE(HasFailure());
            EXPECT_GT(worst, 0.1);  // (the stage is not near zero: the comparison can fail)
            // the ring forms' weights: 5 copies of the stage's codes and scales, read in turn
            const int64_t wb = fast::ktile_probe_weight_bytes(bn);
            std::vector<uint8_t> wh;
            for (int c = 0; c < 5; ++c) wh.insert(wh.end(), st.end() - wb, st.end());
            const DeviceBuffer weights = to_device(wh);
            a.weights = weights.data(), a.weight_stages = 5;
            for (auto form : {fast::KtileProbeForm::Mma, fast::KtileProbeForm::Sets2, fast::KtileProbeForm::Sets3,
                              fast::KtileProbeForm::Sets4, fast::KtileProbeForm::Words2, fast::KtileProbeForm::Words4,
                              fast::KtileProbeForm::RingL2, fast::KtileProbeForm::RingDram}) {
                SCOPED_TRACE(fast::ktile_probe_form_name(form));
                const bool ring = form == fast::KtileProbeForm::RingL2 || form == fast::KtileProbeForm::RingDram;
                if (ring && minb != 2) continue;  // (the ring forms: two blocks an SM)
                const std::vector<float> got = run(form);
                ASSERT_EQ(got.size(), tiles.size());
                for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], tiles[i]) << "accumulator " << i;
                if (!ring) continue;
                // in tiles of 5 k-tiles: out holds the last tile's (2 k-tiles) — the loop's over 2 k-tiles
                a.tile_ktiles = 5;
                const std::vector<float> last = run(form);
                a.tile_ktiles = 0, a.iters = 2;
                const std::vector<float> two = run(fast::KtileProbeForm::Tiles);
                a.iters = 12;
                for (size_t i = 0; i < last.size(); ++i) ASSERT_EQ(last[i], two[i]) << "tiles of 5, accumulator " << i;
                if (form != fast::KtileProbeForm::RingDram) continue;
                // the activation rows from 3 copies of the stage's, read in turn: the same bits
                const int64_t xb = fast::ktile_probe_act_bytes(bn);
                std::vector<uint8_t> xh;
                for (int c = 0; c < 3; ++c) xh.insert(xh.end(), st.begin(), st.begin() + xb);
                const DeviceBuffer acts = to_device(xh);
                a.acts = acts.data(), a.act_stages = 3;
                const std::vector<float> from_acts = run(form);
                a.acts = nullptr, a.act_stages = 0;
                for (size_t i = 0; i < from_acts.size(); ++i)
                    ASSERT_EQ(from_acts[i], tiles[i]) << "activations in turn, accumulator " << i;
            }
            const std::vector<float> made = run(fast::KtileProbeForm::Dequant);  // acc[0]: the words' sum, else 0
            for (int b = 0; b < 3; ++b)
                for (int tid = 0; tid < 256; ++tid) {
                    const int wg = tid / 128, w4 = (tid / 32) % 4, gq = (tid % 32) / 4, tq = tid % 4;
                    auto got = [&](int i) { return made[(size_t(b) * (bn / 2) + i) * 256 + tid]; };
                    ASSERT_EQ(std::bit_cast<uint32_t>(got(0)), uint32_t(a.iters) * a_word_sum(st, bn, wg, w4, gq, tq))
                        << "block " << b << " thread " << tid;
                    for (int i = 1; i < bn / 2; ++i) ASSERT_EQ(got(i), 0.f);
                }
        }
    }
}

// The lean form (code·s, its offsets by one more wgmma every 4 k-tiles) against its host model:
// iters × Σ_κ bf16(code·s)·a + iters / 4 × Σ_κ' (−8·s of group t(κ') = (κ' mod 8) / 2)·a[κ'] over
// the stage's first k-step (κ' < 16), within the f32 sums' rounding; its dequantization alone
// makes that model's A words and offset pairs (their sum mod 2^32).
TEST(FastKtileProbe, LeanFormComputesItsModel) {
    REQUIRE_CUDA();
    Stream s;
    for (const int bn : {16, 32, 48, 64}) {
        const std::vector<uint8_t> st = fast::ktile_probe_make_stage(bn, uint32_t(200 + bn));
        DeviceBuffer stage = to_device(st);
        for (const int minb : {2, 3}) {
            SCOPED_TRACE(testing::Message() << "BN " << bn << ", " << minb << " blocks an SM");
            fast::KtileProbeArgs a;
            a.bn = bn, a.blocks_per_sm = minb, a.iters = 12, a.blocks = 3;
            auto run = [&](fast::KtileProbeForm form) { return run_probe(a, form, stage, s); };
            const std::vector<float> lean = run(fast::KtileProbeForm::Lean);
            ASSERT_EQ(int64_t(lean.size()), 3 * 256 * bn / 2);
            const double worst = expect_accumulators(lean, bn, 3, [&](int wg, int rho, int n) {
                double tile = 0, offs = 0, mag = 0;
                for (int kappa = 0; kappa < 128; ++kappa) {
                    const double p = double(lean_weight(st, bn, wg, rho, kappa)) * activation(st, bn, kappa, n);
                    tile += p, mag += std::fabs(p) * a.iters;
                }
                for (int kappa = 0; kappa < 16; ++kappa) {  // (of group (κ' mod 8) / 2, as k index κ')
                    const double p = double(lean_offset(st, bn, wg, rho, kappa)) * activation(st, bn, kappa, n);
                    offs += p, mag += std::fabs(p) * a.iters / 4;
                }
                return std::pair{tile * a.iters + offs * (a.iters / 4), mag};
            });
            ASSERT_FALSE(HasFailure());
            EXPECT_GT(worst, 0.1);
            const std::vector<float> made = run(fast::KtileProbeForm::LeanDequant);
            for (int b = 0; b < 3; ++b)
                for (int tid = 0; tid < 256; ++tid) {
                    const int wg = tid / 128, w4 = (tid / 32) % 4, gq = (tid % 32) / 4, tq = tid % 4;
                    uint32_t sum = 0;  // a k-tile's: the offset pairs of rows gq, gq + 8, then the A words
                    for (int rho : {16 * w4 + gq, 16 * w4 + gq + 8}) {
                        const uint32_t z = f32_to_bf16(lean_offset(st, bn, wg, rho, 2 * tq));  // (group tq)
                        sum += z | z << 16;
                    }
                    for (int sigma = 0; sigma < 8; ++sigma)
                        for (int rho : {16 * w4 + gq, 16 * w4 + gq + 8})
                            for (int kk : {2 * tq, 2 * tq + 8}) {
                                const uint32_t lo = f32_to_bf16(lean_weight(st, bn, wg, rho, 16 * sigma + kk));
                                const uint32_t hi = f32_to_bf16(lean_weight(st, bn, wg, rho, 16 * sigma + kk + 1));
                                sum += lo | hi << 16;
                            }
                    const float got = made[(size_t(b) * (bn / 2)) * 256 + tid];
                    ASSERT_EQ(std::bit_cast<uint32_t>(got), uint32_t(a.iters) * sum)
                        << "block " << b << " thread " << tid;
                }
        }
    }
}

// The overlap forms: the side work alone makes its host model's sum (acc[0]'s bits, the rest zero);
// beside Mma's loop it leaves Mma's sums alone but for acc[0]'s bits, XOR that sum.
TEST(FastKtileProbe, OverlapFormsDoTheirWork) {
    REQUIRE_CUDA();
    Stream s;
    for (const int bn : {16, 48, 64}) {
        const std::vector<uint8_t> st = fast::ktile_probe_make_stage(bn, uint32_t(300 + bn));
        DeviceBuffer stage = to_device(st);
        SCOPED_TRACE(testing::Message() << "BN " << bn);
        fast::KtileProbeArgs a;
        a.bn = bn, a.iters = 12, a.blocks = 2;
        auto run = [&](fast::KtileProbeForm form) { return run_probe(a, form, stage, s); };
        const std::vector<float> mma = run(fast::KtileProbeForm::Mma);
        using F = fast::KtileProbeForm;
        for (auto [alone, beside, kind] : {std::tuple{F::Dequant, F::MmaDequant, 0},
                                           std::tuple{F::IntOps, F::MmaIntOps, 1},
                                           std::tuple{F::FloatOps, F::MmaFloatOps, 2}}) {
            SCOPED_TRACE(fast::ktile_probe_form_name(beside));
            const std::vector<float> side = run(alone), both = run(beside);
            for (int b = 0; b < 2; ++b)
                for (int tid = 0; tid < 256; ++tid) {
                    const int wg = tid / 128, w4 = (tid / 32) % 4, gq = (tid % 32) / 4, tq = tid % 4;
                    auto at = [&](int i) { return (size_t(b) * (bn / 2) + i) * 256 + tid; };
                    const uint32_t want = uint32_t(a.iters) * (kind == 0 ? a_word_sum(st, bn, wg, w4, gq, tq)
                                                                         : side_sum(st, bn, kind, wg, w4, gq, tq));
                    ASSERT_EQ(std::bit_cast<uint32_t>(side[at(0)]), want) << "block " << b << " thread " << tid;
                    ASSERT_EQ(std::bit_cast<uint32_t>(both[at(0)]), std::bit_cast<uint32_t>(mma[at(0)]) ^ want)
                        << "block " << b << " thread " << tid;
                    for (int i = 1; i < bn / 2; ++i) {
                        ASSERT_EQ(side[at(i)], 0.f);
                        ASSERT_EQ(both[at(i)], mma[at(i)]);
                    }
                }
        }
    }
}

TEST(FastKtileProbe, BadArgumentsAreErrors) {
    REQUIRE_CUDA();
    const std::vector<uint8_t> st = fast::ktile_probe_make_stage(48, 1);
    DeviceBuffer stage = to_device(st), out(size_t(256 * 24 * 4));
    fast::KtileProbeArgs a;
    a.blocks = 1;
    EXPECT_EQ(fast::launch_ktile_probe(a, stage.data(), out.as<float>(), nullptr), cudaSuccess);
    auto bad = [&](fast::KtileProbeArgs b) {
        return fast::launch_ktile_probe(b, stage.data(), out.as<float>(), nullptr) == cudaErrorInvalidValue;
    };
    fast::KtileProbeArgs b = a;
    b.bn = 40;
    EXPECT_TRUE(bad(b));
    b = a, b.blocks_per_sm = 4;
    EXPECT_TRUE(bad(b));
    b = a, b.iters = 0;
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::Sets3, b.iters = 94;  // (not whole rounds of three sets)
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::Sets4, b.iters = 93;
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::Lean, b.iters = 94;  // (not whole rounds of 4 k-tiles)
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::RingL2, b.blocks_per_sm = 3;  // (the ring: two blocks an SM)
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::RingDram;  // (no weights)
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::RingL2, b.tile_ktiles = -1;
    EXPECT_TRUE(bad(b));
    b = a, b.form = fast::KtileProbeForm::RingL2, b.acts = stage.data(), b.act_stages = 1;  // (RingDram's only)
    EXPECT_TRUE(bad(b));
    EXPECT_EQ(fast::launch_ktile_probe(a, nullptr, out.as<float>(), nullptr), cudaErrorInvalidValue);
    EXPECT_TRUE(fast::ktile_probe_make_stage(40, 1).empty());
    cudaDeviceSynchronize();
}
