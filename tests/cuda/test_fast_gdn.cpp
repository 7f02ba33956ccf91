// The fast Gated DeltaNet kernels (kernels/cuda/fast_gdn.h) against the CPU backend on the same
// inputs. The delta rule in both modes: lengths 1/63/64/65/1000/4097 from random starting states,
// several sequences of different lengths in one call with shuffled and padding (-1) slots, the
// grouped and tiled head orders, nk < nv and nk == nv, odd head sizes; a prefill split at multiples
// of 64 equals one pass bit for bit, and a decode gives the same bits alone or batched (the fused
// decode step: test_fast_gdn_decode.cpp). Every comparison names its shape and reports the
// first and the worst mismatch by (token, head, column) or (slot, head, row, column). Every chunked
// test runs the split state pass too (GdnChunkVariant::Split), which must give the same bits, and
// the 3×F16 form (GdnChunkVariant::F16x3, F16x3Wg: its state pass on the warpgroup MMA, F16x3Rt:
// the state transposed into wgmma accumulators, dk 113–128 (other heads take F16x3Wg's pass), and
// F16x3Rt2: that on two warpgroups; other bits, the same tolerances), which also keeps values far
// outside f16's range, and F16Rt (F16x3Rt's kernels on one f16 product each: kF16RtScale × those)
// and F16RtLean (F16Rt's lean forms, meant to give its bits).
// Without a GPU the device tests skip; the argument checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/stream.h"
#include "gdn_test_util.h"
#include "ref_test_util.h"  // REQUIRE_CUDA, to_device, to_host

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;
using namespace gdntest;

namespace {

// Tolerances, as max |gpu − cpu| / max(1, max |cpu|) over a buffer.
// - Recurrent vs the CPU's Recurrent: the same f32 recurrence; only the summation order of Sᵀk,
//   Sᵀq (8 per-warp partials, then in warp order) and o = S'ᵀq + δ·kᵀq instead of (S' + kδᵀ)ᵀq
//   differ: a few ulp of O(1) sums per token, and the decay (e^g < 1) and the delta rule's
//   contraction keep them from compounding: 2e-5 at any length.
// - Chunked vs the CPU's Chunked (the same WY steps and rounding points): the products run on
//   the tensor cores as 3×TF32, whose dropped lo·lo term is ~2^-22 relative, plus the different
//   summation order of 64- and 128-term dot products; over many chunks the state carries them:
//   1e-4 up to 130 tokens, 5e-4 for 1000 and 4097 (still far below any real bug — a wrong key
//   head, a lost token, a chunk boundary off by one — which is O(1)). F16x3 is held to the same:
//   its operands are x·2^e = hi + 2^-11·lo with 11 + 11 bits (3×TF32: 11 + ~10), its dropped
//   lo·lo term ~2^-22 of a product, and the per-tile scale 2^e costs nothing relative to the
//   tile's largest element (the norm these tolerances measure against); it also folds e^Γ into Q
//   and e^(Γlast−Γ) into K before rounding (one more f32 rounding each).
// - F16Rt takes each product as hi·hi alone: every operand f16 under its tile's or row's power of
//   two, an error of up to 2^-12 of the tile's max where 3×F16's is ~2^-22 (FLA, vLLM's kernel,
//   rounds to bf16: 2^-9); the accumulators and the state stay f32. Held to kF16RtScale × the
//   above, still far below a real bug's O(1); where the WY products cancel on purpose
//   (NoDecayBetaNearOneAndCorrelatedKeys: T's entries large, W and Vn small differences of O(1)
//   terms) each rounding is amplified — measured 1.1e-3 of the state's max at 130 tokens and 2.8e-3
//   at 1,000 (session 22) — and it is held to kF16RtIllScale ×.
constexpr double kTolRec = 2e-5, kTolChunkShort = 1e-4, kTolChunkLong = 5e-4, kF16RtScale = 5, kF16RtIllScale = 20;
double tol_for(fast::GdnChunkVariant v, double tol) {
    return fast::gdn_chunk_f16rt(v) ? tol * kF16RtScale : tol;
}

// ---- the delta rule ----

struct Shape {
    int64_t nk, nv, dk, dv;
    bool tiled = false;
};

std::string describe(const Shape& s, GdnMode mode, const std::vector<int32_t>& lengths) {
    std::string l;
    for (size_t i = 0; i < lengths.size() && i < 12; ++i) {
        if (i) l += ',';
        l += std::to_string(lengths[i]);
    }
    if (lengths.size() > 12) l += ",...";
    return "nk=" + std::to_string(s.nk) + " nv=" + std::to_string(s.nv) + " dk=" + std::to_string(s.dk) +
           " dv=" + std::to_string(s.dv) + (s.tiled ? " tiled" : " grouped") +
           (mode == GdnMode::Chunked ? " chunked" : " recurrent") + " lengths {" + l + "}";
}

// Host inputs for T tokens: the fused row q | k | v (+ 2 padding floats) with q, k l2-normed (q also
// scaled by 1/√dk) as after l2_norm; g and β as columns of one [T, 2·nv + 1] buffer; states.
struct RuleInputs {
    Shape sh;
    int64_t T = 0, n_slots = 0, row = 0, gb_s = 0;
    std::vector<float> qkv, gb, init;

    // pad: floats after each token's q | k | v (2: rows not 16-byte aligned; 0 and 4·n heads: aligned).
    RuleInputs(const Shape& s, int64_t T_, int64_t slots, std::mt19937& rng, int64_t pad = 2)
        : sh(s), T(T_), n_slots(slots) {
        const int64_t nk = s.nk, nv = s.nv, dk = s.dk, dv = s.dv;
        row = 2 * nk * dk + nv * dv + pad;
        gb_s = 2 * nv + 1;
        qkv = random_floats(size_t(T * row), rng, -1.f, 1.f);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t part = 0; part < 2; ++part)
                for (int64_t h = 0; h < nk; ++h) {
                    float* x = qkv.data() + t * row + part * nk * dk + h * dk;
                    double ss = 0;
                    for (int64_t i = 0; i < dk; ++i) ss += double(x[i]) * x[i];
                    const double f = 1.0 / std::sqrt(ss) / (part == 0 ? std::sqrt(double(dk)) : 1.0);
                    for (int64_t i = 0; i < dk; ++i) x[i] = float(x[i] * f);
                }
        gb.assign(size_t(T * gb_s), 0.f);
        std::uniform_real_distribution<float> g(-0.5f, -0.001f), b(0.f, 1.f);  // decays e^g in [0.6, 1)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nv; ++h) {
                gb[size_t(t * gb_s + h)] = g(rng);
                gb[size_t(t * gb_s + nv + h)] = b(rng);
            }
        init = random_floats(size_t(n_slots * nv * dk * dv), rng, -1.f, 1.f);
    }
    GdnParams params(GdnMode mode) const {
        GdnParams p;
        p.n_k_heads = int(sh.nk);
        p.n_v_heads = int(sh.nv);
        p.tiled_heads = sh.tiled;
        p.mode = mode;
        return p;
    }
    std::function<std::string(size_t)> where_o() const {
        return [nv = sh.nv, dv = sh.dv](size_t i) {
            const int64_t x = int64_t(i);
            return "token " + std::to_string(x / (nv * dv)) + " head " + std::to_string(x / dv % nv) + " column " +
                   std::to_string(x % dv);
        };
    }
    std::function<std::string(size_t)> where_state() const {
        return [nv = sh.nv, dk = sh.dk, dv = sh.dv](size_t i) {
            const int64_t x = int64_t(i);
            return "slot " + std::to_string(x / (nv * dk * dv)) + " head " + std::to_string(x / (dk * dv) % nv) +
                   " row " + std::to_string(x / dv % dk) + " column " + std::to_string(x % dv);
        };
    }
};

// The CPU backend over tokens [t_off, t_off + T) of the inputs: o [T, nv, dv]; st updated.
void cpu_rule(const RuleInputs& in, GdnMode mode, int64_t t_off, const std::vector<int32_t>& lengths,
              const std::vector<int32_t>& slot, std::vector<float>& st, std::vector<float>& o) {
    const std::vector<int32_t> q_start = starts(lengths);
    const int64_t T = q_start.back(), nk = in.sh.nk, nv = in.sh.nv, dk = in.sh.dk, dv = in.sh.dv;
    float* base = const_cast<float*>(in.qkv.data()) + t_off * in.row;
    float* gb = const_cast<float*>(in.gb.data()) + t_off * in.gb_s;
    auto view3 = [&](float* p, int64_t n, int64_t d) {
        Tensor t(p, DType::F32, {T, n, d});
        t.stride = {in.row * 4, d * 4, 4, 0};
        return t;
    };
    auto col = [&](float* p) {
        Tensor t(p, DType::F32, {T, in.gb_s});
        t.shape[1] = nv;
        return t;
    };
    o.assign(size_t(T * nv * dv), 0.f);
    const SeqPlan plan{int(lengths.size()), q_start.data(), slot.data()};
    make_cpu_backend()->gated_delta_rule(Tensor(o.data(), DType::F32, {T, nv, dv}), view3(base, nk, dk),
                                         view3(base + nk * dk, nk, dk), view3(base + 2 * nk * dk, nv, dv), col(gb),
                                         col(gb + nv), Tensor(st.data(), DType::F32, {in.n_slots, nv, dk, dv}), plan,
                                         in.params(mode));
}

// The device copies of the inputs and the fast kernel over tokens [t_off, t_off + T).
struct GpuRule {
    const RuleInputs& in;
    DeviceBuffer qkv, gb, st;
    explicit GpuRule(const RuleInputs& i) : in(i), qkv(to_device(i.qkv)), gb(to_device(i.gb)), st(to_device(i.init)) {}

    std::vector<float> run(GdnMode mode, int64_t t_off, const std::vector<int32_t>& lengths,
                           const std::vector<int32_t>& slot, int64_t max_len,
                           fast::GdnChunkVariant variant = fast::GdnChunkVariant::Auto) {
        const std::vector<int32_t> q_start = starts(lengths);
        const int64_t T = q_start.back(), nk = in.sh.nk, nv = in.sh.nv, dk = in.sh.dk, dv = in.sh.dv;
        // o rows padded by 3 floats so a write past a row shows up as a wrong neighbour.
        const int64_t o_ts = nv * dv + 3;
        DeviceBuffer d_o = to_device(std::vector<float>(size_t(T * o_ts), 0.f));
        DeviceBuffer d_qs = to_device(q_start), d_slot = to_device(slot);
        const GdnParams p = in.params(mode);
        const int64_t scratch_n =
            std::max<int64_t>(1, fast::gated_delta_rule_scratch_floats(T, nv, dk, dv, p, variant));
        DeviceBuffer scratch(size_t(scratch_n) * sizeof(float));
        const float* base = qkv.as<float>() + t_off * in.row;
        const float* gbp = gb.as<float>() + t_off * in.gb_s;
        const fast::HeadsIn q{base, in.row, dk}, k{base + nk * dk, in.row, dk}, v{base + 2 * nk * dk, in.row, dv};
        const SeqPlan dplan{int(lengths.size()), d_qs.as<int32_t>(), d_slot.as<int32_t>()};
        Stream stream;
        fast::gated_delta_rule(d_o.as<float>(), o_ts, dv, q, k, v, gbp, in.gb_s, gbp + nv, in.gb_s, T, dk, dv,
                               st.as<float>(), nv * dk * dv, in.n_slots, dplan, p, scratch.as<float>(), max_len,
                               stream, variant);
        stream.synchronize();
        const std::vector<float> padded = to_host<float>(d_o);
        std::vector<float> o(size_t(T * nv * dv));
        for (int64_t t = 0; t < T; ++t) {
            std::copy_n(padded.begin() + t * o_ts, nv * dv, o.begin() + t * nv * dv);
            for (int64_t x = nv * dv; x < o_ts; ++x)
                EXPECT_EQ(padded[size_t(t * o_ts + x)], 0.f) << "o row padding of token " << t << " was written";
        }
        return o;
    }
};

// One call over sequences of these lengths (random starting states, shuffled slots among
// n_seqs + 3, `padding` sequences on slot -1): the fast kernel vs the CPU in the same mode, o and
// the whole state buffer (untouched slots included).
void check_rule(const Shape& sh, GdnMode mode, const std::vector<int32_t>& lengths, double tol, uint32_t seed,
                const std::vector<int>& padding = {}, bool exact_max_len = false,
                fast::GdnChunkVariant variant = fast::GdnChunkVariant::Auto) {
    SCOPED_TRACE(describe(sh, mode, lengths) + " variant " + std::to_string(int(variant)));
    tol = tol_for(variant, tol);
    std::mt19937 rng(seed);
    const int64_t T = starts(lengths).back(), n_slots = int64_t(lengths.size()) + 3;
    const std::vector<int32_t> slot = random_slots(lengths.size(), n_slots, rng, padding);
    const RuleInputs in(sh, T, n_slots, rng);
    std::vector<float> st_cpu = in.init, o_cpu;
    cpu_rule(in, mode, 0, lengths, slot, st_cpu, o_cpu);
    GpuRule gpu(in);
    const int64_t max_len = exact_max_len ? *std::max_element(lengths.begin(), lengths.end()) : 0;
    const std::vector<float> o = gpu.run(mode, 0, lengths, slot, max_len, variant);
    compare(o, o_cpu, tol, "o", in.where_o());
    compare(to_host<float>(gpu.st), st_cpu, tol, "state", in.where_state());
}

const Shape kFlagship{16, 32, 128, 128, false};

// The chunked state pass in one launch (wy_state), split in two (wy_carry + wy_out), on f16 tiles
// (wy_prep16 + wy_state16), those on the warpgroup MMA (wy_state16_wg), with Sᵀ in its accumulators
// (wy_state16_rt: F16x3Rt), that on two warpgroups a block (wy_state16_rt2) and on one f16 product
// (F16Rt, the backend's pick: its prep staged or DIRECT by the block count, so both forms run here),
// and F16RtLean (F16Rt's lean prep and pass: opt-in until it has run here); F16RtU16 (U in the scratch
// as f16: not F16RtLean's bits, so here against the CPU only).
constexpr fast::GdnChunkVariant kChunkVariants[] = {
    fast::GdnChunkVariant::Auto,    fast::GdnChunkVariant::Split,    fast::GdnChunkVariant::F16x3,
    fast::GdnChunkVariant::F16x3Wg, fast::GdnChunkVariant::F16x3Rt, fast::GdnChunkVariant::F16x3Rt2,
    fast::GdnChunkVariant::F16Rt,   fast::GdnChunkVariant::F16RtLean, fast::GdnChunkVariant::F16RtLean1,
    fast::GdnChunkVariant::F16RtLean2, fast::GdnChunkVariant::F16RtSched, fast::GdnChunkVariant::F16RtSched16,
    fast::GdnChunkVariant::F16RtSolo1, fast::GdnChunkVariant::F16RtSolo2, fast::GdnChunkVariant::F16RtStay,
    fast::GdnChunkVariant::F16RtU16};
// The f16 forms (every variant that rounds its operands to f16).
constexpr fast::GdnChunkVariant kF16Variants[] = {fast::GdnChunkVariant::F16x3, fast::GdnChunkVariant::F16x3Wg,
                                                  fast::GdnChunkVariant::F16x3Rt, fast::GdnChunkVariant::F16x3Rt2,
                                                  fast::GdnChunkVariant::F16Rt, fast::GdnChunkVariant::F16RtLean,
                                                  fast::GdnChunkVariant::F16RtLean1, fast::GdnChunkVariant::F16RtLean2,
                                                  fast::GdnChunkVariant::F16RtSched,
                                                  fast::GdnChunkVariant::F16RtSched16,
                                                  fast::GdnChunkVariant::F16RtSolo1,
                                                  fast::GdnChunkVariant::F16RtSolo2,
                                                  fast::GdnChunkVariant::F16RtStay,
                                                  fast::GdnChunkVariant::F16RtU16};

TEST(FastGdnRecurrent, LengthsAroundTheChunk) {
    REQUIRE_CUDA();
    for (int32_t n : {1, 2, 63, 64, 65, 1000, 4097}) check_rule(kFlagship, GdnMode::Recurrent, {n}, kTolRec, uint32_t(n));
}

TEST(FastGdnChunked, LengthsAroundTheChunk) {
    REQUIRE_CUDA();
    for (fast::GdnChunkVariant v : kChunkVariants) {
        for (int32_t n : {1, 2, 63, 64, 65, 66, 127, 128, 129, 130})
            check_rule(kFlagship, GdnMode::Chunked, {n}, kTolChunkShort, uint32_t(n), {}, false, v);
        for (int32_t n : {1000, 4097})
            check_rule(kFlagship, GdnMode::Chunked, {n}, kTolChunkLong, uint32_t(n), {}, false, v);
    }
}

TEST(FastGdnChunked, U16ErrorBesideSched) {
    REQUIRE_CUDA();
    // F16RtU16 (U in the scratch as f16, the default since session 53) and F16RtSched (U in f32) on the
    // same inputs, each against the CPU (compare's measure: max error over max(1, max |cpu|)): both
    // printed, U16's held within 3× F16RtSched's — U's rounding is one more f16 rounding beside W's,
    // K̃'s, Q̃'s and P's, so a scale that lost bits (a bound off by more than f16's range) shows here
    // long before the tolerance.
    auto rel_err = [](const std::vector<float>& got, const std::vector<float>& want) {
        double norm = 1, worst = 0;
        for (float x : want) norm = std::max(norm, double(std::fabs(x)));
        for (size_t i = 0; i < got.size(); ++i) {
            const double e = std::fabs(double(got[i]) - double(want[i]));
            worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
        return worst / norm;
    };
    for (const std::vector<int32_t>& lengths :
         std::vector<std::vector<int32_t>>{{1000}, {4097}, {1000, 65, 1, 130}, {512, 512, 512, 500}}) {
        SCOPED_TRACE(describe(kFlagship, GdnMode::Chunked, lengths));
        std::mt19937 rng(41);
        const int64_t T = starts(lengths).back(), n_slots = int64_t(lengths.size()) + 3;
        const std::vector<int32_t> slot = random_slots(lengths.size(), n_slots, rng);
        const RuleInputs in(kFlagship, T, n_slots, rng);
        std::vector<float> st_cpu = in.init, o_cpu;
        cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
        double err[2][2];  // [sched, u16][o, state]
        int i = 0;
        for (auto v : {fast::GdnChunkVariant::F16RtSched, fast::GdnChunkVariant::F16RtU16}) {
            GpuRule gpu(in);
            const std::vector<float> o = gpu.run(GdnMode::Chunked, 0, lengths, slot, 0, v);
            err[i][0] = rel_err(o, o_cpu);
            err[i][1] = rel_err(to_host<float>(gpu.st), st_cpu);
            ++i;
        }
        std::printf("U16ErrorBesideSched %s: o %.3g (sched %.3g), state %.3g (sched %.3g)\n",
                    describe(kFlagship, GdnMode::Chunked, lengths).c_str(), err[1][0], err[0][0], err[1][1],
                    err[0][1]);
        EXPECT_LE(err[1][0], 3 * err[0][0] + 1e-6) << "o";
        EXPECT_LE(err[1][1], 3 * err[0][1] + 1e-6) << "state";
    }
}

TEST(FastGdn, SeveralSequencesSlotsAndPaddingInOneCall) {
    REQUIRE_CUDA();
    // Decodes mixed with prefills around the chunk size, an empty sequence, padding sequences
    // (slot -1: zero starting state, nothing written back; one of 65 tokens, whose last token
    // follows its WY chunk without a slot to carry the state), shuffled slots.
    const std::vector<int32_t> lengths = {1, 65, 1, 0, 64, 63, 1, 130, 129, 2, 200, 65};
    const std::vector<int> padding = {1, 2, 7};
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
        const double tol = mode == GdnMode::Chunked ? kTolChunkShort : kTolRec;
        for (const Shape& s : {kFlagship, Shape{16, 32, 128, 128, true}, Shape{4, 4, 128, 128, false}}) {
            check_rule(s, mode, lengths, tol, 3, padding);
            check_rule(s, mode, lengths, tol, 4, padding, true);  // max_len = the longest sequence
        }
    }
    for (fast::GdnChunkVariant v : kChunkVariants)
        for (const Shape& s : {kFlagship, Shape{16, 32, 128, 128, true}, Shape{4, 4, 128, 128, false}}) {
            check_rule(s, GdnMode::Chunked, lengths, kTolChunkShort, 3, padding, false, v);
            check_rule(s, GdnMode::Chunked, lengths, kTolChunkShort, 4, padding, true, v);
        }
}

TEST(FastGdn, OddHeadSizes) {
    REQUIRE_CUDA();
    // dk not a multiple of 8 or 32, dv not a multiple of 32 (partial column blocks), dv = 256
    // (8 column blocks), dk = 256 (recurrent only: the chunked form takes dk <= 128).
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
        const double tol = mode == GdnMode::Chunked ? kTolChunkShort : kTolRec;
        check_rule({2, 6, 48, 37, true}, mode, {1, 70, 5}, tol, 4);
        check_rule({3, 3, 5, 7, false}, mode, {64, 1, 65}, tol, 5);
        check_rule({1, 2, 100, 256, false}, mode, {1, 130}, tol, 6);
        check_rule({2, 4, 128, 64, true}, mode, {129, 3}, tol, 7);
    }
    const double tol = kTolChunkShort;
    for (fast::GdnChunkVariant v : kChunkVariants) {
        check_rule({2, 6, 48, 37, true}, GdnMode::Chunked, {1, 70, 5}, tol, 4, {}, false, v);
        check_rule({3, 3, 5, 7, false}, GdnMode::Chunked, {64, 1, 65}, tol, 5, {}, false, v);
        check_rule({1, 2, 100, 256, false}, GdnMode::Chunked, {1, 130}, tol, 6, {}, false, v);
        check_rule({2, 4, 128, 64, true}, GdnMode::Chunked, {129, 3}, tol, 7, {}, false, v);
        // dk 120 (F16x3Rt's heads: dk rounds to 128, zero columns past it), dv 100 (its second
        // 64-column block half past dv).
        check_rule({1, 3, 120, 100, false}, GdnMode::Chunked, {1, 200, 64, 2}, tol, 9, {}, false, v);
    }
    check_rule({1, 2, 256, 256, false}, GdnMode::Recurrent, {1, 66}, kTolRec, 8);
}

// Tokens [0, n) of one sequence through `rule` in calls ending at each cut, then at n; o of all
// the calls in token order. SCOPED_TRACE name: "split at c1 c2 …".
std::vector<float> run_in_cuts(GpuRule& rule, const std::vector<int64_t>& cuts, int64_t n,
                               const std::vector<int32_t>& slot, fast::GdnChunkVariant v) {
    std::vector<float> o_all;
    int64_t t = 0;
    for (size_t i = 0; i <= cuts.size(); ++i) {
        const int64_t end = i < cuts.size() ? cuts[i] : n;
        const std::vector<float> o = rule.run(GdnMode::Chunked, t, {int32_t(end - t)}, slot, 0, v);
        o_all.insert(o_all.end(), o.begin(), o.end());
        t = end;
    }
    return o_all;
}
std::string cuts_name(const std::vector<int64_t>& cuts) {
    std::string name = "split at";
    for (int64_t c : cuts) name += ' ' + std::to_string(c);
    return name;
}

TEST(FastGdnChunked, PrefillSplitAtMultiplesOf64EqualsOnePass) {
    REQUIRE_CUDA();
    // One sequence of 1000 tokens in one call, vs the same tokens in calls split at multiples of
    // 64 (chunk boundaries then fall where one pass puts them): the outputs and the final state
    // are the same bits. Each chunked variant.
    const Shape sh = kFlagship;
    std::mt19937 rng(11);
    const int64_t n = 1000, n_slots = 2;
    const RuleInputs in(sh, n, n_slots, rng);
    const std::vector<int32_t> slot = {1};
    for (fast::GdnChunkVariant v : kChunkVariants) {
        SCOPED_TRACE("variant " + std::to_string(int(v)));
        GpuRule one(in);
        const std::vector<float> o_one = one.run(GdnMode::Chunked, 0, {int32_t(n)}, slot, 0, v);
        const std::vector<float> st_one = to_host<float>(one.st);
        {
            std::vector<float> st_cpu = in.init, o_cpu;
            cpu_rule(in, GdnMode::Chunked, 0, {int32_t(n)}, slot, st_cpu, o_cpu);
            compare(o_one, o_cpu, tol_for(v, kTolChunkLong), "one pass: o", in.where_o());
            compare(st_one, st_cpu, tol_for(v, kTolChunkLong), "one pass: state", in.where_state());
        }
        for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{64, 640}, std::vector<int64_t>{128},
                                                 std::vector<int64_t>{64, 128, 192, 256, 896}}) {
            SCOPED_TRACE(cuts_name(cuts));
            GpuRule split(in);
            const std::vector<float> o_split = run_in_cuts(split, cuts, n, slot, v);
            expect_same_bits(o_split, o_one, "o", in.where_o());
            expect_same_bits(to_host<float>(split.st), st_one, "state", in.where_state());
        }
    }
}

TEST(FastGdnChunked, PrefillSplitMidChunkMatchesOnePass) {
    REQUIRE_CUDA();
    // The engine's chunked prefill may stop anywhere in a 64-token chunk (a step's token budget
    // shared between sequences): 1000 tokens in calls cut mid-chunk (the chunks then fall
    // elsewhere than in one pass, so the sums differ in order) against the CPU's one pass, the
    // outputs and the final state within the long-sequence tolerance, from a random state.
    const Shape sh = kFlagship;
    std::mt19937 rng(12);
    const int64_t n = 1000, n_slots = 2;
    const RuleInputs in(sh, n, n_slots, rng);
    const std::vector<int32_t> slot = {0};
    std::vector<float> st_cpu = in.init, o_cpu;
    cpu_rule(in, GdnMode::Chunked, 0, {int32_t(n)}, slot, st_cpu, o_cpu);
    for (fast::GdnChunkVariant v : kChunkVariants)
        for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{100}, std::vector<int64_t>{1, 65, 333},
                                                 std::vector<int64_t>{63, 127, 999}, std::vector<int64_t>{500, 501}}) {
            SCOPED_TRACE(cuts_name(cuts) + " variant " + std::to_string(int(v)));
            GpuRule split(in);
            const std::vector<float> o_split = run_in_cuts(split, cuts, n, slot, v);
            compare(o_split, o_cpu, tol_for(v, kTolChunkLong), "o", in.where_o());
            compare(to_host<float>(split.st), st_cpu, tol_for(v, kTolChunkLong), "state", in.where_state());
        }
}

// Shapes and row paddings of the variant comparisons: the flagship's head with rows padded by 2 (4-byte
// copies) and unpadded (16-byte copies), head sizes that are not multiples of 16 or 32.
const std::pair<Shape, int64_t> kLayoutCases[] = {{kFlagship, 2}, {kFlagship, 0}, {Shape{2, 6, 48, 37, true}, 0},
                                                  {Shape{2, 4, 40, 24, false}, 4}};

TEST(FastGdnChunked, VariantsGiveTheSameBits) {
    REQUIRE_CUDA();
    // The state pass in blocks of 8 or 16 warps (each tile is one warp's in either, same order);
    // tiles by 16-byte copies where rows are aligned (pad 0 with dk, dv % 4 == 0), else by 4-byte ones;
    // the state pass split in two (the same products in the same order), in each of those ways.
    for (const auto& [sh, pad] : kLayoutCases) {
        SCOPED_TRACE(describe(sh, GdnMode::Chunked, {1000, 65, 1, 130}) + " pad " + std::to_string(pad));
        std::mt19937 rng(14);
        const RuleInputs in(sh, 1196, 6, rng, pad);
        const std::vector<int32_t> lengths = {1000, 65, 1, 130}, slot = {4, -1, 0, 2};
        GpuRule w8(in), w16(in), vec(in);
        const std::vector<float> o8 = w8.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::StateWarps8);
        const std::vector<float> o16 =
            w16.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::StateWarps16);
        const std::vector<float> ov = vec.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::Vec16);
        expect_same_bits(o16, o8, "o, 16 vs 8 warps", in.where_o());
        expect_same_bits(to_host<float>(w16.st), to_host<float>(w8.st), "state, 16 vs 8 warps", in.where_state());
        expect_same_bits(ov, o16, "o, 16-byte vs 4-byte copies", in.where_o());
        expect_same_bits(to_host<float>(vec.st), to_host<float>(w16.st), "state, 16-byte vs 4-byte copies",
                         in.where_state());
        for (auto v : {fast::GdnChunkVariant::Split, fast::GdnChunkVariant::SplitWarps8,
                       fast::GdnChunkVariant::SplitVec16}) {
            const std::string name = "split variant " + std::to_string(int(v)) + " vs one state pass";
            GpuRule sp(in);
            const std::vector<float> os = sp.run(GdnMode::Chunked, 0, lengths, slot, 0, v);
            expect_same_bits(os, o16, "o, " + name, in.where_o());
            expect_same_bits(to_host<float>(sp.st), to_host<float>(w16.st), "state, " + name, in.where_state());
        }
        std::vector<float> st_cpu = in.init, o_cpu;
        cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
        compare(o16, o_cpu, kTolChunkLong, "o", in.where_o());
        compare(to_host<float>(w16.st), st_cpu, kTolChunkLong, "state", in.where_state());
    }
}

// The chunked rule in `variant` twice on the same inputs: the same bits both times (o and state),
// and the CPU's Chunked result within kTolChunkLong.
void expect_repeatable_and_close(const RuleInputs& in, const std::vector<int32_t>& lengths,
                                 const std::vector<int32_t>& slot, fast::GdnChunkVariant variant) {
    GpuRule first(in), second(in);
    const std::vector<float> o1 = first.run(GdnMode::Chunked, 0, lengths, slot, 0, variant);
    const std::vector<float> o2 = second.run(GdnMode::Chunked, 0, lengths, slot, 0, variant);
    expect_same_bits(o2, o1, "o, second run", in.where_o());
    expect_same_bits(to_host<float>(second.st), to_host<float>(first.st), "state, second run", in.where_state());
    std::vector<float> st_cpu = in.init, o_cpu;
    cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
    compare(o1, o_cpu, tol_for(variant, kTolChunkLong), "o", in.where_o());
    compare(to_host<float>(first.st), st_cpu, tol_for(variant, kTolChunkLong), "state", in.where_state());
}

TEST(FastGdnChunked, SplitGivesTheSameBitsAcrossRuns) {
    REQUIRE_CUDA();
    // The split state pass twice on the same inputs (several sequences, a padding one, a lone
    // token, a one-token last chunk): the same bits, and the CPU's result within tolerance.
    std::mt19937 rng(15);
    const std::vector<int32_t> lengths = {129, 1, 64, 300, 65}, slot = {3, 0, -1, 5, 1};
    const RuleInputs in(kFlagship, 559, 7, rng);
    expect_repeatable_and_close(in, lengths, slot, fast::GdnChunkVariant::Split);
}

TEST(FastGdnChunked, F16x3MatchesTheCpuAcrossLayoutsAndRuns) {
    REQUIRE_CUDA();
    // The 3×F16 form on VariantsGiveTheSameBits' shapes and row layouts (4- and 16-byte copies in
    // its prep; a padding sequence of 65 tokens, whose last token the state pass steps; dk, dv not
    // multiples of 16 or 32): the CPU's result within tolerance, and the same bits on a second run
    // (its tile maxima are order-free).
    for (const auto& [sh, pad] : kLayoutCases) {
        SCOPED_TRACE(describe(sh, GdnMode::Chunked, {1000, 65, 1, 130}) + " pad " + std::to_string(pad));
        std::mt19937 rng(14);
        const RuleInputs in(sh, 1196, 6, rng, pad);
        const std::vector<int32_t> lengths = {1000, 65, 1, 130}, slot = {4, -1, 0, 2};
        for (auto v : kF16Variants)
            expect_repeatable_and_close(in, lengths, slot, v);
    }
}

TEST(FastGdnChunked, LeanFormGivesF16RtBits) {
    REQUIRE_CUDA();
    // F16RtLean (the lean prep wy_prep_rt — K, Q and V through registers, the diagonal solve unrolled —
    // and the state pass's LEAN addressing) against F16Rt (wy_prep16's prep, staged or DIRECT by the
    // block count, gdn_prep_direct): the same bits, o and state, on both row layouts (4- and
    // 16-byte loads), tiled heads, heads narrower than 128 (dk 120, dv 100: zero columns), dv 256 (the
    // LEAN pass after wy_prep16's prep) and a padding sequence with a one-token last chunk. Where the
    // bits differ, the CPU's result too (within F16Rt's tolerance, or how far off).
    const std::vector<std::pair<Shape, int64_t>> cases = {{kFlagship, 2},
                                                          {kFlagship, 0},
                                                          {Shape{16, 32, 128, 128, true}, 0},
                                                          {Shape{1, 3, 120, 100, false}, 0},
                                                          {Shape{2, 4, 124, 128, false}, 2},
                                                          {Shape{1, 2, 128, 256, false}, 0}};
    for (const auto& [sh, pad] : cases)
        for (const auto& [lengths, slot] : std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>>{
                 {{1000, 65, 1, 130}, {4, -1, 0, 2}}, {{4097}, {1}}, {{63, 64, 2}, {0, 1, 2}}}) {
            SCOPED_TRACE(describe(sh, GdnMode::Chunked, lengths) + " pad " + std::to_string(pad));
            std::mt19937 rng(26);
            const RuleInputs in(sh, starts(lengths).back(), 6, rng, pad);
            GpuRule lean(in), prep16(in);
            const std::vector<float> ol =
                lean.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::F16RtLean);
            const std::vector<float> o16 =
                prep16.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::F16Rt);
            expect_same_bits(ol, o16, "o, lean prep vs wy_prep16", in.where_o());
            expect_same_bits(to_host<float>(lean.st), to_host<float>(prep16.st), "state, lean prep vs wy_prep16",
                             in.where_state());
            if (!::testing::Test::HasFailure()) continue;  // (F16Rt meets the CPU in the other tests)
            std::vector<float> st_cpu = in.init, o_cpu;  // how far off, where the bits differ
            cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
            const double tol = tol_for(fast::GdnChunkVariant::F16Rt, kTolChunkLong);
            compare(ol, o_cpu, tol, "o", in.where_o());
            compare(to_host<float>(lean.st), st_cpu, tol, "state", in.where_state());
        }
}

TEST(FastGdnChunked, SchedPlanAtItsEdges) {
    // gdn_sched_plan on 132 SMs of 3 prep blocks, the flagship's 32 value heads of 128 columns.
    using V = fast::GdnChunkVariant;
    auto plan = [](V v, int64_t seqs, int64_t len, bool overlap = true, int64_t nv = 32, int64_t dv = 128) {
        return fast::gdn_sched_plan(v, seqs, len, nv, dv, 132, 3, overlap);
    };
    // One sequence: one chain a block to 32 chunks, its 64 blocks' SMs set aside; two from 33 (32 set aside).
    for (int64_t len : {1, 64, 1024, 2048}) {
        SCOPED_TRACE(len);
        const fast::GdnSchedPlan p = plan(V::F16RtSched, 1, len);
        EXPECT_FALSE(p.two_chains);
        EXPECT_EQ(p.reserve, 64);
        EXPECT_EQ(p.persistent, len >= 1024);  // 512 chunks past (132 − 64) · 3 = 204 blocks; 32 are not
    }
    const fast::GdnSchedPlan p2049 = plan(V::F16RtSched, 1, 2049);
    EXPECT_TRUE(p2049.two_chains);
    EXPECT_EQ(p2049.reserve, 32);
    EXPECT_TRUE(p2049.persistent);  // 33 · 32 = 1,056 > 100 · 3
    // 33 heads: 66 blocks, the most set aside (half of 132); (132 − 66) · 3 = 198 blocks for the prep
    EXPECT_EQ(plan(V::F16RtSched, 1, 64 * 6, true, 33).reserve, 66);
    EXPECT_FALSE(plan(V::F16RtSched, 1, 64 * 6, true, 33).persistent);  // 6 · 33 = 198 chunks
    EXPECT_TRUE(plan(V::F16RtSched, 1, 64 * 6 + 1, true, 33).persistent);  // 231
    EXPECT_EQ(plan(V::F16RtSched, 1, 64, true, 34).reserve, 0);  // 68 blocks
    // Two sequences: two chains; their 64 blocks fit half the SMs (set aside), 3 sequences' 96 do not.
    EXPECT_TRUE(plan(V::F16RtSched, 2, 64).two_chains);
    EXPECT_EQ(plan(V::F16RtSched, 2, 64).reserve, 64);
    EXPECT_FALSE(plan(V::F16RtSched, 2, 64).persistent);  // 2 · 32 chunks
    EXPECT_EQ(plan(V::F16RtSched, 3, 1024).reserve, 0);
    EXPECT_TRUE(plan(V::F16RtSched, 3, 1024).persistent);   // 1,536 chunks > 396
    EXPECT_FALSE(plan(V::F16RtSched, 3, 64 * 4).persistent);  // 384 chunks fit every SM's blocks at once
    // Heads of 64 columns or fewer: one chain always; 65: two.
    EXPECT_FALSE(plan(V::F16RtSched, 4, 4096, true, 32, 64).two_chains);
    EXPECT_TRUE(plan(V::F16RtSched, 4, 4096, true, 32, 65).two_chains);
    // The forced forms; and where the pass cannot overlap, no SMs set aside, no persistent prep, and two
    // chains only where one a block would not fit the SMs at once (two blocks a 128-column head: 67
    // heads of one sequence pass 132).
    EXPECT_FALSE(plan(V::F16RtLean1, 4, 4096).two_chains);
    EXPECT_TRUE(plan(V::F16RtLean2, 1, 64).two_chains);
    EXPECT_EQ(plan(V::F16RtLean2, 1, 64).reserve, 32);
    const fast::GdnSchedPlan alone = plan(V::F16RtSched, 1, 16384, false);
    EXPECT_FALSE(alone.two_chains);
    EXPECT_EQ(alone.reserve, 0);
    EXPECT_FALSE(alone.persistent);
    EXPECT_FALSE(plan(V::F16RtSched, 1, 4096, false, 66).two_chains);
    EXPECT_TRUE(plan(V::F16RtSched, 1, 4096, false, 67).two_chains);
    EXPECT_TRUE(plan(V::F16RtSched, 3, 4096, false).two_chains);
    EXPECT_FALSE(plan(V::F16RtLean, 3, 4096).two_chains);  // (not a scheduled form)
    // F16RtSched16 picks as F16RtSched does; its prep's two blocks an SM change where it is persistent.
    for (int64_t len : {2048, 2049})
        EXPECT_EQ(plan(V::F16RtSched16, 1, len).two_chains, plan(V::F16RtSched, 1, len).two_chains) << len;
    EXPECT_FALSE(fast::gdn_sched_plan(V::F16RtSched16, 1, 64 * 4, 32, 128, 132, 2, true).persistent);  // 128 ≤ 136
    EXPECT_TRUE(fast::gdn_sched_plan(V::F16RtSched16, 1, 64 * 5, 32, 128, 132, 2, true).persistent);  // 160 > 136
    // The solo forms plan as F16RtSched, and where the prep is persistent beside SMs set aside, their
    // first items are the set-aside SMs' (solo blocks each, at most the blocks an SM holds); else none.
    for (int64_t len : {1024, 2048, 2049, 16384}) {
        SCOPED_TRACE(len);
        const fast::GdnSchedPlan p = plan(V::F16RtSched, 1, len), s1 = plan(V::F16RtSolo1, 1, len),
                                 s2 = plan(V::F16RtSolo2, 1, len);
        EXPECT_EQ(s1.two_chains, p.two_chains);
        EXPECT_EQ(s2.reserve, p.reserve);
        EXPECT_EQ(s2.persistent, p.persistent);
        EXPECT_EQ(s1.solo, 1);
        EXPECT_EQ(s1.front, p.reserve);
        EXPECT_EQ(s2.front, 2 * p.reserve);
    }
    EXPECT_EQ(plan(V::F16RtSolo2, 1, 64 * 4).front, 0);       // not persistent (128 chunks)
    EXPECT_EQ(plan(V::F16RtSolo2, 3, 1024).front, 0);         // none set aside
    EXPECT_EQ(plan(V::F16RtSolo2, 1, 1024, false).front, 0);  // no overlap
    // F16RtStay: Solo2's front, its first block staying where a pass block has one chain
    EXPECT_TRUE(plan(V::F16RtStay, 1, 1024).stay);
    EXPECT_EQ(plan(V::F16RtStay, 1, 1024).front, 128);
    EXPECT_FALSE(plan(V::F16RtStay, 1, 4096).stay);  // two chains a block: the pass block would not fit
    EXPECT_FALSE(plan(V::F16RtSolo2, 1, 1024).stay);
    EXPECT_EQ(fast::gdn_sched_plan(V::F16RtSolo2, 1, 1024, 32, 128, 132, 1, true).front, 64);  // one block an SM
    EXPECT_EQ(fast::gdn_sched_plan(V::F16RtSolo2, 1, 64 * 5, 32, 128, 132, 2, true).front, 128);  // 160 > 136
    EXPECT_EQ(fast::gdn_sched_plan(V::F16RtSolo1, 1, 64 * 5, 66, 128, 264, 1, true).front, 132);  // 330 items
    // F16RtSched takes two blocks where the chain bounds the call: the prep's items past its first wave
    // (items − 64 · 3 one chain a block, − 32 · 3 two) in waves of the free SMs' blocks ((132 − 64) · 3 =
    // 204, (132 − 32) · 3 = 300), × 9 one chain (7 two), fewer than the chunks.
    EXPECT_EQ(plan(V::F16RtSched, 1, 1024).front, 128);    // 16 chunks: 320 · 9 = 2,880 < 16 · 204
    EXPECT_EQ(plan(V::F16RtSched, 1, 1280).front, 128);    // 20: 448 · 9 = 4,032 < 4,080
    EXPECT_EQ(plan(V::F16RtSched, 1, 64 * 7).front, 128);  // 7 chunks, the first persistent: 224 > 204
    EXPECT_EQ(plan(V::F16RtSched, 1, 64 * 6).front, 0);    // (not persistent)
    EXPECT_EQ(plan(V::F16RtSched, 2, 2048).front, 0);      // two sequences: 1,856 · 7 > 32 · 204
    // … and where the prep bounds it with one chain a block, F16RtStay's plan: the same front, staying.
    for (int64_t len : {1024, 1280, 64 * 7}) EXPECT_FALSE(plan(V::F16RtSched, 1, len).stay) << len;
    for (int64_t len : {1281, 1536, 2048}) {  // 21: 480 · 9 = 4,320 > 21 · 204 = 4,284; 2,048: 832 · 9 > 32 · 204
        SCOPED_TRACE(len);
        const fast::GdnSchedPlan p = plan(V::F16RtSched, 1, len), s = plan(V::F16RtStay, 1, len);
        EXPECT_TRUE(p.stay);
        EXPECT_EQ(p.front, 128);
        EXPECT_EQ(p.solo, s.solo);
        EXPECT_EQ(p.reserve, s.reserve);
        EXPECT_EQ(p.persistent, s.persistent);
    }
    EXPECT_FALSE(plan(V::F16RtSched, 1, 2048, false).stay);  // no overlap
    EXPECT_FALSE(plan(V::F16RtLean1, 1, 2048).stay);         // (a forced form: no front)
    EXPECT_EQ(plan(V::F16RtSched, 1, 2049).front, 64);     // two chains: 960 · 7 < 33 · 300
    EXPECT_EQ(plan(V::F16RtSched, 1, 16384).front, 64);    // 8,096 · 7 < 256 · 300
    EXPECT_FALSE(plan(V::F16RtSched, 1, 2049).stay);
    // F16RtU16 plans as F16RtSched does.
    for (const auto& [seqs, len] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 64 * 6}, {1, 1024}, {1, 1281}, {1, 2048}, {1, 2049}, {1, 16384}, {2, 64}, {4, 1024}}) {
        SCOPED_TRACE(std::to_string(seqs) + " x " + std::to_string(len));
        const fast::GdnSchedPlan p = plan(V::F16RtSched, seqs, len), u = plan(V::F16RtU16, seqs, len);
        EXPECT_EQ(u.two_chains, p.two_chains);
        EXPECT_EQ(u.reserve, p.reserve);
        EXPECT_EQ(u.persistent, p.persistent);
        EXPECT_EQ(u.front, p.front);
        EXPECT_EQ(u.solo, p.solo);
        EXPECT_EQ(u.stay, p.stay);
    }
    EXPECT_EQ(plan(V::F16RtSched16, 1, 1024).front, 0);    // (not its plan)
    EXPECT_EQ(plan(V::F16RtLean1, 1, 1024).front, 0);
}

// gdn_next_prep_item on the host: the persistent prep's grid (per_sm blocks on each present SM id)
// asking for items as the kernel does — each block once at the launch in a random order, then the
// blocks not set aside again in any order until each gets none (a reserved block asks once). Every
// item must go to exactly one block whatever the order, with SM ids that have holes (%nsmid past the
// SMs: reserved ids absent) and where the first asks exhaust the counter; where no id is missing and
// the counter outlasts the first asks, the front items must be the reserved SMs' first blocks'.
TEST(FastGdnChunked, PrepItemsEachOnceInAnyOrder) {
    struct Case {
        uint32_t n_ids, present, per_sm, reserve, items, front, solo;
        bool stay = false;  // F16RtStay: the first block on a reserved SM asks on as a free SM's block
    };
    const Case cases[] = {
        {132, 132, 3, 64, 512, 128, 2},   // 1,024 tokens × 32 heads: the solo pick
        {132, 132, 3, 64, 512, 64, 1},    // Solo1
        {132, 132, 3, 64, 512, 0, 0},     // no front: one item from the counter a reserved block
        {132, 132, 3, 32, 2080, 64, 2},   // 4,097 tokens, two chains
        {132, 132, 3, 64, 300, 128, 2},   // the first asks take the counter's 172 items and steal fronts
        {144, 132, 3, 64, 512, 128, 2},   // 12 ids missing: fewer reserved SMs than the front needs
        {144, 100, 2, 50, 1000, 100, 2},  // many missing
        {132, 132, 3, 64, 512, 128, 2, true},   // F16RtStay
        {144, 132, 3, 64, 512, 128, 2, true},   // … with ids missing
        {132, 132, 3, 64, 300, 128, 2, true},   // … and fronts stolen
    };
    for (const Case& c : cases)
        for (uint32_t seed = 0; seed < 20; ++seed) {
            SCOPED_TRACE("ids " + std::to_string(c.n_ids) + " present " + std::to_string(c.present) + " items " +
                         std::to_string(c.items) + " front " + std::to_string(c.front) + (c.stay ? " stay" : "") +
                         " seed " + std::to_string(seed));
            std::mt19937 rng(seed);
            std::vector<uint32_t> ids(c.n_ids);
            std::iota(ids.begin(), ids.end(), 0u);
            std::shuffle(ids.begin(), ids.end(), rng);
            ids.resize(c.present);
            struct Block {
                uint32_t sm;
                bool reserved, done;
            };
            std::vector<Block> blocks;
            for (uint32_t sm : ids)
                for (uint32_t b = 0; b < c.per_sm; ++b)
                    blocks.push_back({sm, fast::gdn_reserved_sm(sm, c.n_ids, c.reserve), false});
            std::vector<uint32_t> ctr(fast::kGdnPrepCtrWords, 0u);
            std::vector<int> taken(c.items, 0), by_reserved(c.items, 0);
            auto ask = [&](Block& b) {
                uint32_t rank = UINT32_MAX;
                const uint32_t item = fast::gdn_next_prep_item(ctr.data(), c.items, c.front, c.solo, b.reserved, b.sm,
                                                               [](uint32_t* w) { return (*w)++; }, &rank);
                if (item < c.items) {
                    ++taken[item];
                    by_reserved[item] = b.reserved;
                }
                const bool stays = c.stay && b.reserved && rank == 0 && item < c.items;  // (the kernel's loop)
                b.done = (b.reserved && !stays) || item >= c.items;
                if (stays) b.reserved = false;
            };
            std::vector<size_t> order(blocks.size());
            std::iota(order.begin(), order.end(), size_t(0));
            std::shuffle(order.begin(), order.end(), rng);
            for (size_t i : order) ask(blocks[i]);
            for (;;) {
                std::vector<size_t> left;
                for (size_t i = 0; i < blocks.size(); ++i)
                    if (!blocks[i].done) left.push_back(i);
                if (left.empty()) break;
                ask(blocks[left[rng() % left.size()]]);
            }
            for (uint32_t i = 0; i < c.items; ++i) ASSERT_EQ(taken[i], 1) << "item " << i;
            const uint32_t free_blocks = (c.n_ids - c.reserve) * c.per_sm;
            if (c.present == c.n_ids && c.items - c.front >= free_blocks) {
                for (uint32_t i = 0; i < c.front; ++i) EXPECT_TRUE(by_reserved[i]) << "front item " << i;
            }
        }
}

TEST(FastGdnChunked, ScheduledFormsGiveLeanBits) {
    REQUIRE_CUDA();
    // F16RtLean1 (the lean prep persistent, SMs set aside for the state pass, its blocks taking
    // chunks from a counter), F16RtLean2 (that with two chains a state-pass block: a warpgroup
    // each, 128 value columns — dv 100 leaves warpgroup 1 36 of them, dv 256 two blocks a head) and
    // F16RtSched (their pick) against F16RtLean: the same bits, o and state, where the prep is
    // persistent (the flagship's 32 value heads: 2,080 chunks of 4,097 tokens, 2,048 of the first
    // batch and of the eight sequences of ≤ 512) and where it is not (3 heads: every chunk fits the
    // free SMs at once, the plain grid; dv 256: wy_prep16's prep, two chains a block, two blocks a
    // head). Called twice, each on fresh scratch — which cudaMalloc tends to hand back at the first
    // call's address, its counter at its last value: a launch that did not zero it would skip every
    // chunk.
    const std::vector<std::pair<Shape, int64_t>> cases = {{kFlagship, 2}, {kFlagship, 0},
                                                          {Shape{16, 32, 128, 128, true}, 0},
                                                          {Shape{1, 3, 120, 100, false}, 0},
                                                          {Shape{1, 2, 128, 256, false}, 2}};
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> batches = {
        {{1000, 65, 1, 130}, {4, -1, 0, 2}},
        {{4097}, {1}},
        {{63, 64, 2}, {0, 1, 2}},
        {{512, 512, 512, 512, 512, 512, 512, 500}, {0, 1, 2, 3, 4, 5, 6, 7}}};
    for (const auto& [sh, pad] : cases)
        for (const auto& [lengths, slot] : batches) {
            SCOPED_TRACE(describe(sh, GdnMode::Chunked, lengths) + " pad " + std::to_string(pad));
            std::mt19937 rng(31);
            const RuleInputs in(sh, starts(lengths).back(), 9, rng, pad);
            GpuRule lean(in), res(in);
            const std::vector<float> ol =
                lean.run(GdnMode::Chunked, 0, lengths, slot, 0, fast::GdnChunkVariant::F16RtLean);
            for (auto v : {fast::GdnChunkVariant::F16RtLean1, fast::GdnChunkVariant::F16RtLean2,
                           fast::GdnChunkVariant::F16RtSched, fast::GdnChunkVariant::F16RtSched16,
                           fast::GdnChunkVariant::F16RtSolo1, fast::GdnChunkVariant::F16RtSolo2,
                           fast::GdnChunkVariant::F16RtStay})
                for (int call = 0; call < 2; ++call) {
                    SCOPED_TRACE("variant " + std::to_string(int(v)) + " call " + std::to_string(call));
                    res.st.upload(in.init.data(), in.init.size() * sizeof(float));
                    const std::vector<float> orr = res.run(GdnMode::Chunked, 0, lengths, slot, 0, v);
                    expect_same_bits(orr, ol, "o, against F16RtLean", in.where_o());
                    expect_same_bits(to_host<float>(res.st), to_host<float>(lean.st), "state, against F16RtLean",
                                     in.where_state());
                }
        }
}

// ---- F16Rt's state pass overlapping its prep (behind per-chunk flags) ----

// One chunked call on device inputs laid out as RuleInputs' (q | k | v rows of in.row floats, g | β
// columns): o written at `o` (o_ts floats a token, dv a head), the state in `st`.
struct RuleCall {
    const RuleInputs& in;
    const DeviceBuffer &qkv, &gb;
    DeviceBuffer& st;
    std::vector<int32_t> lengths, slot;
    void launch(float* o, int64_t o_ts, float* scratch, cudaStream_t stream, fast::GdnChunkVariant variant,
                const DeviceBuffer& qs, const DeviceBuffer& slots) {
        const int64_t T = starts(lengths).back(), nk = in.sh.nk, nv = in.sh.nv, dk = in.sh.dk, dv = in.sh.dv;
        const float* base = qkv.as<float>();
        const fast::HeadsIn q{base, in.row, dk}, k{base + nk * dk, in.row, dk}, v{base + 2 * nk * dk, in.row, dv};
        fast::gated_delta_rule(o, o_ts, dv, q, k, v, gb.as<float>(), in.gb_s, gb.as<float>() + nv, in.gb_s, T, dk, dv,
                               st.as<float>(), nv * dk * dv, in.n_slots,
                               SeqPlan{int(lengths.size()), qs.as<int32_t>(), slots.as<int32_t>()},
                               in.params(GdnMode::Chunked), scratch, 0, stream, variant);
    }
    // o [T, nv, dv] and the state after one call in `variant`, on a fresh state and scratch.
    std::pair<std::vector<float>, std::vector<float>> run(fast::GdnChunkVariant variant) {
        const int64_t T = starts(lengths).back(), nv = in.sh.nv, dv = in.sh.dv;
        st.upload(in.init.data(), in.init.size() * sizeof(float));
        DeviceBuffer d_o(size_t(T * nv * dv) * sizeof(float)), qs = to_device(starts(lengths)), slots = to_device(slot);
        DeviceBuffer scratch(size_t(scratch_floats()) * sizeof(float));
        Stream stream;
        launch(d_o.as<float>(), nv * dv, scratch.as<float>(), stream, variant, qs, slots);
        stream.synchronize();
        return {to_host<float>(d_o), to_host<float>(st)};
    }
    int64_t scratch_floats() const {
        return fast::gated_delta_rule_scratch_floats(starts(lengths).back(), in.sh.nv, in.sh.dk, in.sh.dv,
                                                     in.params(GdnMode::Chunked), fast::GdnChunkVariant::F16Rt);
    }
};

TEST(FastGdnChunked, LeanPrepWritesThePrep16Scratch) {
    REQUIRE_CUDA();
    // The scratch rows themselves after an F16RtLean and an F16Rt call on zeroed scratch: the same
    // bits everywhere but each row's last float (a chunk's flag: the call's own tag where the passes
    // overlap) — so a wrong lean prep is named by field (W, K̃, Q̃, P: f16 hi halves; U; the chunk's
    // scales), token, head and column, not only by the outputs it spoils.
    for (const auto& [sh, pad] : std::vector<std::pair<Shape, int64_t>>{{kFlagship, 0}, {kFlagship, 2},
                                                                         {Shape{1, 3, 120, 100, false}, 0}}) {
        const std::vector<int32_t> lengths = {1000, 65, 1, 130}, slot = {4, -1, 0, 2};
        SCOPED_TRACE(describe(sh, GdnMode::Chunked, lengths) + " pad " + std::to_string(pad));
        std::mt19937 rng(27);
        const RuleInputs in(sh, starts(lengths).back(), 6, rng, pad);
        const DeviceBuffer qkv = to_device(in.qkv), gb = to_device(in.gb);
        DeviceBuffer st(in.init.size() * sizeof(float));
        RuleCall call{in, qkv, gb, st, lengths, slot};
        const int64_t T = starts(lengths).back(), rs = fast::gdn_chunk16_row_floats(sh.dk, sh.dv);
        const DeviceBuffer qs = to_device(starts(lengths)), slots = to_device(slot);
        std::vector<std::vector<float>> rows;
        for (auto v : {fast::GdnChunkVariant::F16Rt, fast::GdnChunkVariant::F16RtLean}) {
            st.upload(in.init.data(), in.init.size() * sizeof(float));
            DeviceBuffer scratch(size_t(call.scratch_floats()) * sizeof(float)),
                o(size_t(T * sh.nv * sh.dv) * sizeof(float));
            Stream stream;
            scratch.fill(0, scratch.size(), 0, stream);
            call.launch(o.as<float>(), sh.nv * sh.dv, scratch.as<float>(), stream, v, qs, slots);
            stream.synchronize();
            rows.push_back(to_host<float>(scratch));
        }
        ASSERT_EQ(rows[0].size(), rows[1].size());
        const int64_t dkq = 128, meta = 3 * dkq + fast::kGdnChunk + (sh.dv + 3) / 4 * 4;
        int64_t bad = 0;
        for (size_t i = 0; i < rows[0].size(); ++i) {
            const int64_t x = int64_t(i) % rs, row = int64_t(i) / rs;
            if (x == rs - 1 || std::memcmp(&rows[0][i], &rows[1][i], sizeof(float)) == 0) continue;
            if (bad++ < 8) {
                const char* field = x < dkq / 2       ? "W"
                                    : x < dkq          ? "W lo"
                                    : x < 3 * dkq / 2  ? "K~"
                                    : x < 2 * dkq      ? "K~ lo"
                                    : x < 5 * dkq / 2  ? "Q~"
                                    : x < 3 * dkq      ? "Q~ lo"
                                    : x < 3 * dkq + 32 ? "P"
                                    : x < 3 * dkq + 64 ? "P lo"
                                    : x < meta         ? "U"
                                                       : "meta";
                ADD_FAILURE() << "scratch differs: token " << row / sh.nv << " head " << row % sh.nv << " float "
                              << x << " (" << field << ") lean " << rows[1][i] << " vs " << rows[0][i];
            }
        }
        EXPECT_EQ(bad, 0) << "scratch floats that differ";
    }
}

TEST(FastGdnChunked, OverlappedPassesGiveTheSequentialBits) {
    REQUIRE_CUDA();
    // F16Rt (the state pass launched behind the prep, waiting on each chunk's flag) against F16RtSeq
    // (the same kernels, the pass after the prep has completed): the same bits, o and state — one long
    // sequence (4,097 tokens: 2,080 prep blocks in several waves, its DIRECT form), two (a padding
    // sequence with a one-token last chunk, then a lone token: the grid's last prep blocks return at
    // once) and several with a padding one, a lone token and a one-token last chunk; then three calls
    // more on one scratch, the earlier calls' flags still in it, each the same bits again.
    const std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> cases = {
        {{4097}, {1}}, {{1025, 1}, {-1, 2}}, {{1000, 65, 1, 130, 2000}, {4, -1, 0, 2, 5}}};
    for (const auto& [lengths, slot] : cases) {
        SCOPED_TRACE(describe(kFlagship, GdnMode::Chunked, lengths));
        std::mt19937 rng(23);
        const RuleInputs in(kFlagship, starts(lengths).back(), 6, rng, 0);
        const DeviceBuffer qkv = to_device(in.qkv), gb = to_device(in.gb);
        DeviceBuffer st(in.init.size() * sizeof(float));
        RuleCall call{in, qkv, gb, st, lengths, slot};
        const auto [o_seq, st_seq] = call.run(fast::GdnChunkVariant::F16RtSeq);
        const auto [o_ovl, st_ovl] = call.run(fast::GdnChunkVariant::F16Rt);
        expect_same_bits(o_ovl, o_seq, "o, overlapped vs sequential", in.where_o());
        expect_same_bits(st_ovl, st_seq, "state, overlapped vs sequential", in.where_state());

        const int64_t T = starts(lengths).back(), n_o = T * in.sh.nv * in.sh.dv;
        DeviceBuffer scratch(size_t(call.scratch_floats()) * sizeof(float)), d_o(size_t(n_o) * sizeof(float));
        const DeviceBuffer qs = to_device(starts(lengths)), slots = to_device(slot);
        Stream stream;
        for (int r = 0; r < 3; ++r) {
            st.upload(in.init.data(), in.init.size() * sizeof(float));
            d_o.fill(0xff, d_o.size(), 0, stream);  // NaN: an output not written shows
            call.launch(d_o.as<float>(), in.sh.nv * in.sh.dv, scratch.as<float>(), stream,
                        fast::GdnChunkVariant::F16Rt, qs, slots);
            stream.synchronize();
            expect_same_bits(to_host<float>(d_o), o_seq, "o, call " + std::to_string(r + 2) + " on one scratch",
                             in.where_o());
            expect_same_bits(to_host<float>(st), st_seq, "state, call " + std::to_string(r + 2), in.where_state());
        }
    }
}

TEST(FastGdnChunked, LeanPassStoresOAtAnyTokenStride) {
    REQUIRE_CUDA();
    // The lean passes' O stores (a chunk's O kept in shared memory, stored under the next chunk's
    // products) at token strides other than nv·dv: 4 floats between tokens (rows still 16-byte
    // aligned) and 1 (not). F16RtLean (one chain a block) and F16RtSched (two here: its prep
    // persistent) give the bits F16Rt (the plain pass) gives with o contiguous and leave the floats
    // between tokens as they were — full chunks, partial last chunks, a padding sequence and a lone
    // token. (Session 52 ran it on O by TMA stores too, which needed the map to skip those floats.)
    const std::vector<int32_t> lengths = {1000, 65, 1, 130, 128}, slot = {4, -1, 0, 2, 5};
    std::mt19937 rng(41);
    const RuleInputs in(kFlagship, starts(lengths).back(), 6, rng, 0);
    const DeviceBuffer qkv = to_device(in.qkv), gb = to_device(in.gb);
    DeviceBuffer st(in.init.size() * sizeof(float));
    RuleCall call{in, qkv, gb, st, lengths, slot};
    const auto [o_want, st_want] = call.run(fast::GdnChunkVariant::F16Rt);
    const int64_t T = starts(lengths).back(), row = in.sh.nv * in.sh.dv;
    const DeviceBuffer qs = to_device(starts(lengths)), slots = to_device(slot);
    for (int64_t gap : {4, 1})
        for (auto v : {fast::GdnChunkVariant::F16RtLean, fast::GdnChunkVariant::F16RtSched}) {
            SCOPED_TRACE("o_ts = nv·dv + " + std::to_string(gap) + ", variant " + std::to_string(int(v)));
            const int64_t o_ts = row + gap;
            st.upload(in.init.data(), in.init.size() * sizeof(float));
            DeviceBuffer d_o(size_t(T * o_ts) * sizeof(float)), scratch(size_t(call.scratch_floats()) * sizeof(float));
            Stream stream;
            d_o.fill(0xff, d_o.size(), 0, stream);  // NaN bits: a gap written over or a row not written shows
            call.launch(d_o.as<float>(), o_ts, scratch.as<float>(), stream, v, qs, slots);
            stream.synchronize();
            const std::vector<float> got = to_host<float>(d_o);
            std::vector<float> rows(size_t(T * row));
            int64_t gaps_written = 0;
            for (int64_t t = 0; t < T; ++t) {
                std::copy_n(got.begin() + t * o_ts, row, rows.begin() + t * row);
                for (int64_t i = row; i < o_ts; ++i) {
                    uint32_t bits;
                    std::memcpy(&bits, &got[size_t(t * o_ts + i)], 4);
                    gaps_written += bits != 0xffffffffu;
                }
            }
            expect_same_bits(rows, o_want, "o at a token stride, against F16Rt's contiguous o", in.where_o());
            expect_same_bits(to_host<float>(st), st_want, "state, against F16Rt", in.where_state());
            EXPECT_EQ(gaps_written, 0) << "floats between the tokens' rows written";
        }
}

TEST(FastGdnChunked, OverlapStepsAsideWhereOutputsMeetInputs) {
    REQUIRE_CUDA();
    // o written over v 28 chunks later (token t's o on token t + 1,792's v): 2,048 tokens are 1,024
    // prep blocks, ~2.6 waves, and the last wave reads those rows of v just as an overlapped state
    // pass would start writing its first chunks' o there. F16Rt must see that o meets v and run the
    // passes in turn: the same bits as F16RtSeq with o apart (the CPU test OverlapSpans checks the
    // test itself; this one, the fallback's results). F16RtU16 (the default since session 53) alike:
    // its plain prep and the pass after it against its own overlapped call with o apart (the
    // persistent prep, the pass behind its flags; the same item and chunk arithmetic).
    const std::vector<int32_t> lengths = {2048}, slot = {1};
    const int64_t T = 2048, shift = 28 * fast::kGdnChunk, nk = kFlagship.nk, nv = kFlagship.nv, dk = kFlagship.dk,
                  dv = kFlagship.dv;
    std::mt19937 rng(24);
    const RuleInputs in(kFlagship, T + shift, 3, rng, 0);  // rows past token T: room for o
    const DeviceBuffer gb = to_device(in.gb);
    using V = fast::GdnChunkVariant;
    for (const auto& [variant, apart_variant] :
         {std::pair{V::F16Rt, V::F16RtSeq}, std::pair{V::F16RtU16, V::F16RtU16}}) {
        SCOPED_TRACE("variant " + std::to_string(int(variant)));
        DeviceBuffer qkv_apart = to_device(in.qkv), st(in.init.size() * sizeof(float));
        RuleCall apart{in, qkv_apart, gb, st, lengths, slot};
        const auto [o_seq, st_seq] = apart.run(apart_variant);

        DeviceBuffer qkv = to_device(in.qkv);
        RuleCall over{in, qkv, gb, st, lengths, slot};
        st.upload(in.init.data(), in.init.size() * sizeof(float));
        DeviceBuffer scratch(size_t(over.scratch_floats()) * sizeof(float));
        const DeviceBuffer qs = to_device(starts(lengths)), slots = to_device(slot);
        Stream stream;
        float* o = qkv.as<float>() + shift * in.row + 2 * nk * dk;
        over.launch(o, in.row, scratch.as<float>(), stream, variant, qs, slots);
        stream.synchronize();
        const std::vector<float> rows = to_host<float>(qkv);
        std::vector<float> o_got(size_t(T * nv * dv));
        for (int64_t t = 0; t < T; ++t)
            std::copy_n(rows.begin() + (t + shift) * in.row + 2 * nk * dk, nv * dv, o_got.begin() + t * nv * dv);
        expect_same_bits(o_got, o_seq, "o written over v, against the call with o apart", in.where_o());
        expect_same_bits(to_host<float>(st), st_seq, "state", in.where_state());
    }
}

TEST(FastGdnChunked, OverlapInAGraphReplaysOnNewInputs) {
    REQUIRE_CUDA();
    // F16Rt captured into a CUDA graph (where a replay would repeat the flags' tag, so the passes
    // run in turn), replayed on two sets of inputs written into the same buffers: each replay the
    // bits of a direct F16RtSeq call on its inputs. F16RtU16 (the default since session 53) alike,
    // against its own direct, overlapped calls (the persistent prep, the pass behind its flags).
    const std::vector<int32_t> lengths = {1000, 65, 130}, slot = {4, 0, 2};
    const int64_t T = starts(lengths).back(), n_o = T * kFlagship.nv * kFlagship.dv;
    std::mt19937 rng(25);
    const RuleInputs in_a(kFlagship, T, 6, rng, 0), in_b(kFlagship, T, 6, rng, 0);
    using V = fast::GdnChunkVariant;
    for (const auto& [variant, direct] : {std::pair{V::F16Rt, V::F16RtSeq}, std::pair{V::F16RtU16, V::F16RtU16}}) {
        SCOPED_TRACE("variant " + std::to_string(int(variant)));
        DeviceBuffer qkv = to_device(in_a.qkv), gb = to_device(in_a.gb), st(in_a.init.size() * sizeof(float));
        RuleCall call{in_a, qkv, gb, st, lengths, slot};
        const auto [o_a, st_a] = call.run(direct);
        DeviceBuffer qkv_b = to_device(in_b.qkv), gb_b = to_device(in_b.gb);
        RuleCall call_b{in_b, qkv_b, gb_b, st, lengths, slot};
        const auto [o_b, st_b] = call_b.run(direct);

        DeviceBuffer scratch(size_t(call.scratch_floats()) * sizeof(float)), d_o(size_t(n_o) * sizeof(float));
        const DeviceBuffer qs = to_device(starts(lengths)), slots = to_device(slot);
        Stream stream;
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
        call.launch(d_o.as<float>(), kFlagship.nv * kFlagship.dv, scratch.as<float>(), stream, variant, qs, slots);
        ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
        ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
        for (const auto* x : {&in_a, &in_b}) {
            qkv.upload(x->qkv.data(), x->qkv.size() * sizeof(float));
            gb.upload(x->gb.data(), x->gb.size() * sizeof(float));
            st.upload(x->init.data(), x->init.size() * sizeof(float));
            ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
            stream.synchronize();
            const bool a = x == &in_a;
            expect_same_bits(to_host<float>(d_o), a ? o_a : o_b, a ? "o, replay on inputs A" : "o, replay on inputs B",
                             x->where_o());
            expect_same_bits(to_host<float>(st), a ? st_a : st_b, "state, replay", x->where_state());
        }
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
    }
}

TEST(FastGdnChunked, F16x3KeepsValuesOutsideHalfRange) {
    REQUIRE_CUDA();
    // F16x3 rounds its operands to f16 (largest 65504, smallest normal 6.1e-5) under a power of
    // two per tile: v and the starting states times 1e6 (S, U, Vn and o far above f16's range) or
    // 1e-6 (far below its normal range) against the CPU on the same inputs, both divided back by
    // the factor so the tolerance measures against O(1) values either way.
    for (float f : {1e6f, 1e-6f}) {
        SCOPED_TRACE("v and states times " + std::to_string(f));
        std::mt19937 rng(16);
        RuleInputs in(kFlagship, 196, 4, rng);
        const int64_t v0 = 2 * in.sh.nk * in.sh.dk, nvdv = in.sh.nv * in.sh.dv;
        for (int64_t t = 0; t < in.T; ++t)
            for (int64_t i = 0; i < nvdv; ++i) in.qkv[size_t(t * in.row + v0 + i)] *= f;
        for (float& x : in.init) x *= f;
        const std::vector<int32_t> lengths = {130, 65, 1}, slot = {3, -1, 0};
        std::vector<float> st_cpu = in.init, o_cpu;
        cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
        for (float& y : o_cpu) y /= f;
        for (float& y : st_cpu) y /= f;
        for (auto v : kF16Variants) {
            SCOPED_TRACE("variant " + std::to_string(int(v)));
            GpuRule gpu(in);
            std::vector<float> o = gpu.run(GdnMode::Chunked, 0, lengths, slot, 0, v);
            std::vector<float> st = to_host<float>(gpu.st);
            for (auto* x : {&o, &st})
                for (float& y : *x) y /= f;
            compare(o, o_cpu, tol_for(v, kTolChunkShort), "o", in.where_o());
            compare(st, st_cpu, tol_for(v, kTolChunkShort), "state", in.where_state());
        }
    }
}

TEST(FastGdnChunked, NoDecayBetaNearOneAndCorrelatedKeys) {
    REQUIRE_CUDA();
    // The WY products at their least benign: decays e^g within 1e-4 of 1 (the state keeps every
    // chunk's rounding), β in [0.95, 1] and each key head's keys within ~1° of one direction (A's
    // entries near −1: W = T·(βe^Γ K) and Vn = U − W·S cancel to small differences of O(1)
    // terms, and F16x3 takes W's power of two from the bound max_i Σ_j |T(i, j)|·β_j e^Γj · max |k|,
    // well above max |W| here). A numpy model of the chunked rule puts f32 within ~6e-7 of f64 on
    // such inputs. Every chunked variant against the CPU at the usual tolerances.
    for (int32_t n : {130, 1000}) {
        SCOPED_TRACE("length " + std::to_string(n));
        std::mt19937 rng(uint32_t(17 + n));
        RuleInputs in(kFlagship, n, 3, rng);
        const int64_t nk = in.sh.nk, nv = in.sh.nv, dk = in.sh.dk;
        std::uniform_real_distribution<float> u(-1.f, 1.f), g(-1e-4f, -1e-6f), b(0.95f, 1.f);
        const std::vector<float> dir = random_floats(size_t(nk * dk), rng, -1.f, 1.f);
        for (int64_t t = 0; t < n; ++t) {
            for (int64_t hh = 0; hh < nk; ++hh) {
                float* x = in.qkv.data() + t * in.row + nk * dk + hh * dk;
                double ss = 0;
                for (int64_t i = 0; i < dk; ++i) {
                    x[i] = dir[size_t(hh * dk + i)] + 0.02f * u(rng);
                    ss += double(x[i]) * x[i];
                }
                for (int64_t i = 0; i < dk; ++i) x[i] = float(x[i] / std::sqrt(ss));
            }
            for (int64_t hh = 0; hh < nv; ++hh) {
                in.gb[size_t(t * in.gb_s + hh)] = g(rng);
                in.gb[size_t(t * in.gb_s + nv + hh)] = b(rng);
            }
        }
        const std::vector<int32_t> lengths = {n}, slot = {1};
        std::vector<float> st_cpu = in.init, o_cpu;
        cpu_rule(in, GdnMode::Chunked, 0, lengths, slot, st_cpu, o_cpu);
        for (fast::GdnChunkVariant v : kChunkVariants) {
            SCOPED_TRACE("variant " + std::to_string(int(v)));
            const double tol = (n <= 130 ? kTolChunkShort : kTolChunkLong) *
                               (fast::gdn_chunk_f16rt(v) ? kF16RtIllScale : 1.0);
            GpuRule gpu(in);
            const std::vector<float> o = gpu.run(GdnMode::Chunked, 0, lengths, slot, 0, v);
            compare(o, o_cpu, tol, "o", in.where_o());
            compare(to_host<float>(gpu.st), st_cpu, tol, "state", in.where_state());
        }
    }
}

TEST(FastGdnChunked, DecodeGivesTheSameBitsAloneOrBatched) {
    REQUIRE_CUDA();
    // Sequence 0 decodes one token; alone, and batched with a 300-token prefill and two more
    // decodes (slots differ, inputs of sequence 0 the same): its output and state are the same bits.
    const Shape sh = kFlagship;
    std::mt19937 rng(12);
    const RuleInputs in(sh, 303, 4, rng);
    GpuRule alone(in), batched(in);
    const std::vector<float> o_alone = alone.run(GdnMode::Chunked, 0, {1}, {2}, 1);
    const std::vector<float> o_batch = batched.run(GdnMode::Chunked, 0, {1, 300, 1, 1}, {2, 0, 1, 3}, 0);
    const int64_t HV = sh.nv * sh.dv, S = sh.nv * sh.dk * sh.dv;
    expect_same_bits(std::vector<float>(o_batch.begin(), o_batch.begin() + HV), o_alone, "o of the decode",
                     in.where_o());
    const std::vector<float> st_a = to_host<float>(alone.st), st_b = to_host<float>(batched.st);
    expect_same_bits(std::vector<float>(st_b.begin() + 2 * S, st_b.begin() + 3 * S),
                     std::vector<float>(st_a.begin() + 2 * S, st_a.begin() + 3 * S), "state of slot 2",
                     in.where_state());
}

TEST(FastGdn, BadSlotOrTooLongSequenceGivesNaN) {
    REQUIRE_CUDA();
    const int64_t T = 70, dk = 8, dv = 8;
    std::mt19937 rng(13);
    std::vector<float> x = random_floats(size_t(T * dk), rng, -0.3f, 0.3f), gb(size_t(T), -0.1f),
                       st(size_t(dk * dv), 1.f);
    const std::vector<int32_t> q_start = {0, 66, 70}, slot = {5, 0};  // sequence 0's slot 5 is out of range
    DeviceBuffer d_x = to_device(x), d_gb = to_device(gb), d_st = to_device(st), d_qs = to_device(q_start),
                 d_slot = to_device(slot);
    const fast::HeadsIn h{d_x.as<float>(), dk, dk};
    const SeqPlan plan{2, d_qs.as<int32_t>(), d_slot.as<int32_t>()};
    for (const auto& [mode, variant] : {std::pair{GdnMode::Recurrent, fast::GdnChunkVariant::Auto},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::Auto},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::Split},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::F16x3},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::F16x3Wg},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::F16x3Rt},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::F16x3Rt2},
                                        std::pair{GdnMode::Chunked, fast::GdnChunkVariant::F16Rt}}) {
        SCOPED_TRACE(std::string(mode == GdnMode::Chunked ? "chunked" : "recurrent") + " variant " +
                     std::to_string(int(variant)));
        GdnParams p;
        p.n_k_heads = p.n_v_heads = 1;
        p.mode = mode;
        DeviceBuffer d_o = to_device(std::vector<float>(size_t(T * dv), 0.f));
        DeviceBuffer scratch(
            size_t(std::max<int64_t>(1, fast::gated_delta_rule_scratch_floats(T, 1, dk, dv, p, variant))) * 4);
        fast::gated_delta_rule(d_o.as<float>(), dv, dv, h, h, h, d_gb.as<float>(), 1, d_gb.as<float>(), 1, T, dk, dv,
                               d_st.as<float>(), dk * dv, 1, plan, p, scratch.as<float>(), 0, nullptr, variant);
        const std::vector<float> o = to_host<float>(d_o);
        for (int64_t i = 0; i < 66 * dv; ++i) ASSERT_TRUE(std::isnan(o[size_t(i)])) << "sequence 0, element " << i;
        for (int64_t i = 66 * dv; i < T * dv; ++i) ASSERT_FALSE(std::isnan(o[size_t(i)])) << "sequence 1, element " << i;
    }
    // max_len 4 with a 66-token sequence (slot 0 now valid): NaN outputs, its state kept.
    const std::vector<int32_t> ok_slot = {0, -1};
    DeviceBuffer d_ok = to_device(ok_slot);
    for (fast::GdnChunkVariant variant : kChunkVariants) {
        SCOPED_TRACE("too long, variant " + std::to_string(int(variant)));
        DeviceBuffer d_st2 = to_device(st);
        GdnParams p;
        p.n_k_heads = p.n_v_heads = 1;
        p.mode = GdnMode::Chunked;
        DeviceBuffer d_o = to_device(std::vector<float>(size_t(T * dv), 0.f));
        DeviceBuffer scratch(size_t(fast::gated_delta_rule_scratch_floats(T, 1, dk, dv, p, variant)) * 4);
        fast::gated_delta_rule(d_o.as<float>(), dv, dv, h, h, h, d_gb.as<float>(), 1, d_gb.as<float>(), 1, T, dk, dv,
                               d_st2.as<float>(), dk * dv, 1, SeqPlan{2, d_qs.as<int32_t>(), d_ok.as<int32_t>()}, p,
                               scratch.as<float>(), 4, nullptr, variant);
        const std::vector<float> o = to_host<float>(d_o);
        for (int64_t i = 0; i < 66 * dv; ++i) ASSERT_TRUE(std::isnan(o[size_t(i)])) << "too long: element " << i;
        EXPECT_EQ(to_host<float>(d_st2), st) << "the state of a sequence longer than max_len must be kept";
    }
}
TEST(FastGdn, PrepFormByWaves) {  // host arithmetic: needs no GPU
    // F16Rt's prep takes its DIRECT form (three blocks an SM) only where that saves a wave of blocks
    // over the staged form's two an SM: with 132 SMs, 264 / 396 blocks a wave.
    for (const auto& [blocks, direct] : {std::pair<int64_t, bool>{0, false}, {1, false}, {264, false}, {265, true},
                                         {396, true}, {397, false}, {512, false}, {528, false}, {529, true},
                                         {792, true}, {793, true}, {1024, true}, {2048, true}})
        EXPECT_EQ(fast::gdn_prep_direct(blocks, 132), direct) << blocks << " blocks";
    EXPECT_FALSE(fast::gdn_prep_direct(1000, 0));
    EXPECT_TRUE(fast::gdn_prep_direct(3, 1));   // 1 wave of 3 against 2 of 2
    EXPECT_FALSE(fast::gdn_prep_direct(4, 1));  // 2 waves either way
}

TEST(FastGdn, OverlapSpans) {  // host arithmetic: needs no GPU
    // The floats a [T][heads][d] view spans, and whether two spans share one (F16Rt runs its passes
    // in turn where o meets q, k or v).
    EXPECT_EQ(fast::gdn_view_span(3, 4, 8, 100, 10), 2 * 100 + 3 * 10 + 8);
    EXPECT_EQ(fast::gdn_view_span(1, 1, 5, 0, 0), 5);
    EXPECT_EQ(fast::gdn_view_span(0, 4, 8, 100, 10), 0);
    float buf[64];
    EXPECT_TRUE(fast::gdn_spans_disjoint(buf, 8, buf + 8, 8));   // adjacent
    EXPECT_FALSE(fast::gdn_spans_disjoint(buf, 9, buf + 8, 8));  // one float shared
    EXPECT_FALSE(fast::gdn_spans_disjoint(buf + 8, 8, buf, 9));
    EXPECT_FALSE(fast::gdn_spans_disjoint(buf + 2, 2, buf, 64));  // inside
    EXPECT_TRUE(fast::gdn_spans_disjoint(buf, 0, buf, 64));      // empty
}

TEST(FastGdn, PrepBlocksInChunkMajorOrder) {  // host arithmetic: needs no GPU
    // wy_prep16's grid: every (chunk, sequence, value head) once, heads fastest, then sequences.
    const uint32_t nv = 3, n_seqs = 5, chunks = 4;
    uint32_t bid = 0;
    for (uint32_t c = 0; c < chunks; ++c)
        for (uint32_t s = 0; s < n_seqs; ++s)
            for (uint32_t h = 0; h < nv; ++h, ++bid) {
                const fast::GdnPrepBlock b = fast::gdn_prep_block(bid, nv, n_seqs);
                EXPECT_TRUE(b.chunk == c && b.seq == s && b.head == h)
                    << "block " << bid << ": " << b.chunk << "," << b.seq << "," << b.head;
            }
    const fast::GdnPrepBlock big = fast::gdn_prep_block(0x7fffffffu, 65535, 65535);  // the grid's extremes
    EXPECT_EQ(uint64_t(big.chunk) * 65535 * 65535 + uint64_t(big.seq) * 65535 + big.head, 0x7fffffffull);
    EXPECT_LT(big.head, 65535u);
    EXPECT_LT(big.seq, 65535u);
}

TEST(FastGdn, BadArgumentsAreErrors) {  // checked on the host before any launch: needs no GPU
    float* f = reinterpret_cast<float*>(16);
    const int32_t* ip = reinterpret_cast<const int32_t*>(16);
    const SeqPlan plan{1, ip, ip};
    GdnParams p;
    p.n_k_heads = 2;
    p.n_v_heads = 4;
    auto rule = [&](const GdnParams& gp, int64_t dk, int64_t dv, float* scratch, int64_t max_len) {
        const fast::HeadsIn hh{f, 4 * std::max(dk, dv), std::max(dk, dv)};
        fast::gated_delta_rule(f, 4 * dv, dv, hh, hh, hh, f, 4, f, 4, 5, dk, dv, f, 4 * dk * dv, 2, plan, gp, scratch,
                               max_len, nullptr);
    };
    p.n_v_heads = 3;  // not a multiple of 2
    EXPECT_THROW(rule(p, 16, 16, f, 0), Error);
    p.n_v_heads = 4;
    EXPECT_THROW(rule(p, 300, 16, f, 0), Error);  // dk > 256
    EXPECT_THROW(rule(p, 16, 16, f, 6), Error);   // max_len > T
    p.mode = GdnMode::Chunked;
    EXPECT_THROW(rule(p, 16, 16, nullptr, 0), Error);  // no scratch
    EXPECT_THROW(rule(p, 256, 16, f, 0), Error);       // the chunked form takes dk <= 128
    p.chunk = 32;
    EXPECT_THROW(rule(p, 16, 16, f, 0), Error);  // chunks of 64 only
    EXPECT_EQ(fast::gated_delta_rule_scratch_floats(1024, 32, 128, 128, p), 1024 * 32 * 324);
    {  // 64 tokens × nv heads of scratch rows past 2^31 floats: the F16x3 preps' 32-bit row offsets
        GdnParams big = p;
        big.chunk = fast::kGdnChunk;
        big.n_v_heads = 65534;  // × 712 floats a row at 128 × 256: 64 rows span 2^31.5
        const int64_t nv = big.n_v_heads, dk = 128, dv = 256;
        const fast::HeadsIn qk{f, 2 * dk, dk}, vv{f, nv * dv, dv};
        try {
            fast::gated_delta_rule(f, nv * dv, dv, qk, qk, vv, f, nv, f, nv, 5, dk, dv, f, nv * dk * dv, 2, plan, big,
                                   f, 0, nullptr, fast::GdnChunkVariant::F16Rt);
            ADD_FAILURE() << "no error for 65534 value heads of 128 × 256";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("32-bit row offsets"), std::string::npos) << e.what();
        }
    }
    {  // one chunk × 65535 sequences × 65534 value heads: more blocks than the prep's 1-D grid takes
        GdnParams many = p;
        many.chunk = fast::kGdnChunk;
        many.n_v_heads = 65534;
        const int64_t nv = many.n_v_heads, d = 16;
        const SeqPlan wide{65535, ip, ip};
        const fast::HeadsIn qk{f, 2 * d, d}, vv{f, nv * d, d};
        try {
            fast::gated_delta_rule(f, nv * d, d, qk, qk, vv, f, nv, f, nv, 5, d, d, f, nv * d * d, 2, wide, many, f,
                                   2, nullptr, fast::GdnChunkVariant::F16Rt);
            ADD_FAILURE() << "no error for 65535 sequences × 65534 value heads";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("one-dimensional grid"), std::string::npos) << e.what();
        }
    }

    fast::GdnDecodeArgs a;
    a.n_seqs = 1;
    a.slot = ip;
    a.nk = 1;
    a.nv = 2;
    a.dk = a.dv = 8;
    a.mixed = a.z = a.b = a.a = a.conv_w = a.neg_exp_a = a.dt_bias = a.norm_w = f;
    a.conv_k = 4;
    a.conv_state = a.state = a.y = f;
    a.conv_slot_stride = 3 * 32;
    a.state_slot_stride = 2 * 64;
    a.n_slots = 1;
    fast::GdnDecodeArgs bad = a;
    bad.conv_k = 1;
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
    bad = a;
    bad.nv = 17;  // r = 17 > 16
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
    bad = a;
    bad.state = nullptr;
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
    bad = a;
    bad.conv_slot_stride = 10;
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
    bad = a;
    bad.variant = fast::kGdnDecodeVariants;
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
    bad.variant = -1;
    EXPECT_THROW(fast::gdn_decode_step(bad, nullptr), Error);
}

}  // namespace
