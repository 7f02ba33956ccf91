// The reference CUDA Gated DeltaNet ops against the CPU backend on the same inputs: conv1d + SiLU
// (K = 4 and 2, sequences shorter than K-1 whose state shifts, calls chained over the same slots,
// strided rows, C past one channel block) and the gated delta rule (lengths 1/63/64/65/1000 from
// random starting states, several sequences with shuffled slots in one call, nk < nv in both head
// orders and nk == nv, odd head sizes, q/k/v as views of one fused row as the layer passes them,
// g/beta as strided columns). Outputs and the whole state buffers (untouched slots included) are
// compared. Without a GPU the device tests skip; the argument checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ref_gdn.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;


namespace {

std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    return b;
}

std::vector<float> to_host(const DeviceBuffer& b) {
    std::vector<float> v(b.size() / sizeof(float));
    b.download(v.data(), b.size());
    return v;
}

// Expects max |gpu − cpu| <= tol · max(1, max |cpu|) over the buffers (NaN anywhere fails).
void expect_close(const std::vector<float>& gpu, const std::vector<float>& cpu, double tol, const std::string& what) {
    ASSERT_EQ(gpu.size(), cpu.size()) << what;
    double ref_max = 1;
    for (float x : cpu) ref_max = std::max(ref_max, double(std::fabs(x)));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < gpu.size(); ++i) {
        const double err = std::fabs(double(gpu[i]) - double(cpu[i]));
        if (!(err <= worst)) {  // also takes NaN
            worst = std::isnan(err) ? INFINITY : err;
            at = i;
        }
    }
    EXPECT_LE(worst, tol * ref_max) << what << ": worst at element " << at << " gpu " << gpu[at] << " cpu " << cpu[at]
                                    << " (max |cpu| " << ref_max << ")";
}

// q_start of sequences with these lengths.
std::vector<int32_t> starts(const std::vector<int32_t>& lengths) {
    std::vector<int32_t> q(lengths.size() + 1, 0);
    for (size_t s = 0; s < lengths.size(); ++s) q[s + 1] = q[s] + lengths[s];
    return q;
}

// n distinct slots out of n_slots, shuffled.
std::vector<int32_t> random_slots(size_t n, int64_t n_slots, std::mt19937& rng) {
    std::vector<int32_t> all(static_cast<size_t>(n_slots));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(n);
    return all;
}

// ---- conv1d + SiLU ----

// Row padding of y on both sides: a kernel writing there shows up (small, so it does not loosen
// the tolerance, which scales with max |ref|).
constexpr float kPad = 0.3125f;

// Calls the CPU backend and the CUDA reference on the same batches in turn, each call continuing
// from the conv states the previous one left, and compares y and the whole state after each.
void check_conv(int64_t C, int64_t K, const std::vector<std::vector<int32_t>>& calls, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t n_slots = 9, xs = C + 5, ys = C + 3;  // padded rows
    const std::vector<float> w = random_floats(size_t(C * K), rng, -1.f, 1.f);
    std::vector<float> st_cpu = random_floats(size_t(n_slots * (K - 1) * C), rng, -2.f, 2.f);
    DeviceBuffer d_w = to_device(w), d_st = to_device(st_cpu);
    auto be = make_cpu_backend();
    Stream stream;
    for (size_t call = 0; call < calls.size(); ++call) {
        const std::vector<int32_t>& lengths = calls[call];
        SCOPED_TRACE("C=" + std::to_string(C) + " K=" + std::to_string(K) + " call " + std::to_string(call));
        const std::vector<int32_t> q_start = starts(lengths), slot = random_slots(lengths.size(), n_slots, rng);
        const int64_t T = q_start.back();
        const std::vector<float> x = random_floats(size_t(T * xs), rng, -2.f, 2.f);
        std::vector<float> y_cpu(size_t(T * ys), kPad);

        Tensor yt(y_cpu.data(), DType::F32, {T, ys}), xt(const_cast<float*>(x.data()), DType::F32, {T, xs});
        yt.shape[1] = C;
        xt.shape[1] = C;
        const SeqPlan plan{int(lengths.size()), q_start.data(), slot.data()};
        be->conv1d_silu(yt, xt, Tensor(const_cast<float*>(w.data()), DType::F32, {C, K}),
                        Tensor(st_cpu.data(), DType::F32, {n_slots, K - 1, C}), plan);

        DeviceBuffer d_x = to_device(x), d_y = to_device(std::vector<float>(size_t(T * ys), kPad));
        DeviceBuffer d_qs = to_device(q_start), d_slot = to_device(slot);
        const SeqPlan dplan{int(lengths.size()), d_qs.as<int32_t>(), d_slot.as<int32_t>()};
        ref::conv1d_silu(d_y.as<float>(), ys, d_x.as<float>(), xs, T, C, d_w.as<float>(), K, d_st.as<float>(),
                         (K - 1) * C, n_slots, dplan, stream);
        stream.synchronize();
        // y: outputs within 1e-5 (f32 conv of K terms, then SiLU); the padding must be untouched.
        expect_close(to_host(d_y), y_cpu, 1e-5, "y");
        // The state holds copies of inputs: exactly equal.
        EXPECT_EQ(to_host(d_st), st_cpu) << "conv state after the call";
    }
}

TEST(CudaRefConv, ShortAndLongSequencesShiftTheState) {
    REQUIRE_CUDA();
    // K = 4: sequences of 1 and 2 tokens (< K-1: the state shifts), exactly K-1, a few and 64/65;
    // then chained calls over the same slots so states written by short calls are read back.
    for (int64_t C : {300, 7}) {
        check_conv(C, 4, {{1, 2, 3, 5, 64, 65}, {2, 1, 1, 3, 1, 1}, {1, 1, 1, 1, 1, 1}, {70}}, uint32_t(C));
        check_conv(C, 2, {{1, 2, 65}, {1, 3}}, uint32_t(C) + 1);
    }
}

TEST(CudaRefConv, RepeatedDecodesOfOneSlot) {
    REQUIRE_CUDA();
    // A prefill shorter than K-1, then single-token decodes: each reads what the last one wrote.
    check_conv(33, 4, {{2}, {1}, {1}, {1}, {1}}, 5);
}

// ---- the gated delta rule ----

struct Shape {
    int64_t nk, nv, dk, dv;
    bool tiled = false;
};

std::string describe(const Shape& s, GdnMode mode) {
    return "nk=" + std::to_string(s.nk) + " nv=" + std::to_string(s.nv) + " dk=" + std::to_string(s.dk) +
           " dv=" + std::to_string(s.dv) + (s.tiled ? " tiled" : " grouped") +
           (mode == GdnMode::Chunked ? " chunked" : " recurrent");
}

// One call over sequences of these lengths (shuffled slots among n_seqs + 3, random starting
// states), CPU backend vs CUDA reference: o and the whole state buffer within tol · max(1, max|ref|).
void check_rule(const Shape& sh, GdnMode mode, const std::vector<int32_t>& lengths, double tol, uint32_t seed) {
    SCOPED_TRACE(describe(sh, mode));
    std::mt19937 rng(seed);
    const std::vector<int32_t> q_start = starts(lengths);
    const int64_t T = q_start.back(), n_slots = int64_t(lengths.size()) + 3;
    const std::vector<int32_t> slot = random_slots(lengths.size(), n_slots, rng);
    const int64_t nk = sh.nk, nv = sh.nv, dk = sh.dk, dv = sh.dv;

    // The fused row the layer feeds: q | k | v (+ 2 padding floats), q and k l2-normed (q also
    // scaled by 1/√dk) as after l2_norm. g and beta: columns of one [T, 2·nv + 1] buffer.
    const int64_t row = 2 * nk * dk + nv * dv + 2, gb_s = 2 * nv + 1;
    std::vector<float> qkv = random_floats(size_t(T * row), rng, -1.f, 1.f);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t part = 0; part < 2; ++part)
            for (int64_t h = 0; h < nk; ++h) {
                float* x = qkv.data() + t * row + part * nk * dk + h * dk;
                double ss = 0;
                for (int64_t i = 0; i < dk; ++i) ss += double(x[i]) * x[i];
                const double f = 1.0 / std::sqrt(ss) / (part == 0 ? std::sqrt(double(dk)) : 1.0);
                for (int64_t i = 0; i < dk; ++i) x[i] = float(x[i] * f);
            }
    std::vector<float> gb(size_t(T * gb_s));
    {
        std::uniform_real_distribution<float> g(-0.5f, -0.001f), b(0.f, 1.f);  // decays e^g in [0.6, 1)
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = 0; h < nv; ++h) {
                gb[size_t(t * gb_s + h)] = g(rng);
                gb[size_t(t * gb_s + nv + h)] = b(rng);
            }
    }
    const std::vector<float> init = random_floats(size_t(n_slots * nv * dk * dv), rng, -1.f, 1.f);

    // CPU ground truth.
    std::vector<float> st_cpu = init, o_cpu(size_t(T * nv * dv), 0.f);
    {
        auto view3 = [&](float* p, int64_t n, int64_t d) {
            Tensor t(p, DType::F32, {T, n, d});
            t.stride = {row * 4, d * 4, 4, 0};
            return t;
        };
        auto col = [&](float* p, int64_t n) {
            Tensor t(p, DType::F32, {T, gb_s});
            t.shape[1] = n;
            return t;
        };
        GdnParams p;
        p.n_k_heads = int(nk);
        p.n_v_heads = int(nv);
        p.tiled_heads = sh.tiled;
        p.mode = mode;
        const SeqPlan plan{int(lengths.size()), q_start.data(), slot.data()};
        make_cpu_backend()->gated_delta_rule(
            Tensor(o_cpu.data(), DType::F32, {T, nv, dv}), view3(qkv.data(), nk, dk),
            view3(qkv.data() + nk * dk, nk, dk), view3(qkv.data() + 2 * nk * dk, nv, dv), col(gb.data(), nv),
            col(gb.data() + nv, nv), Tensor(st_cpu.data(), DType::F32, {n_slots, nv, dk, dv}), plan, p);
    }

    // The CUDA reference.
    DeviceBuffer d_qkv = to_device(qkv), d_gb = to_device(gb), d_st = to_device(init),
                 d_o = to_device(std::vector<float>(size_t(T * nv * dv), 0.f));
    DeviceBuffer d_qs = to_device(q_start), d_slot = to_device(slot);
    const float* base = d_qkv.as<float>();
    const ref::HeadsIn q{base, row, dk}, k{base + nk * dk, row, dk}, v{base + 2 * nk * dk, row, dv};
    GdnParams p;
    p.n_k_heads = int(nk);
    p.n_v_heads = int(nv);
    p.tiled_heads = sh.tiled;
    p.mode = mode;
    const SeqPlan dplan{int(lengths.size()), d_qs.as<int32_t>(), d_slot.as<int32_t>()};
    Stream stream;
    ref::gated_delta_rule(d_o.as<float>(), nv * dv, dv, q, k, v, d_gb.as<float>(), gb_s, d_gb.as<float>() + nv, gb_s,
                          T, dk, dv, d_st.as<float>(), nv * dk * dv, n_slots, dplan, p, stream);
    stream.synchronize();
    expect_close(to_host(d_o), o_cpu, tol, "o");
    expect_close(to_host(d_st), st_cpu, tol, "state");
}

// Tolerances, normalised by max(1, max |ref|). Against the CPU's Recurrent mode both sides run
// the same f32 recurrence and differ only in summation order (warp tree vs sequential): 1e-4.
// Against Chunked (the CPU's WY form, the same math re-associated into 64-token matrix products)
// rounding differs more and, over a long run, compounds through the state from chunk to chunk:
// 1e-3 for the 1000-token runs. A real bug (wrong key head, lost or reordered token, a state not
// carried) is an O(1) error, far above either.
constexpr double kTolShort = 1e-4, kTolLong = 1e-3;

TEST(CudaRefGatedDeltaRule, LengthsAroundTheChunk) {
    REQUIRE_CUDA();
    const Shape s{16, 32, 128, 128, false};  // the flagship's heads: nk < nv, grouped order
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
        for (int32_t n : {1, 63, 64, 65}) {
            SCOPED_TRACE("T=" + std::to_string(n));
            check_rule(s, mode, {n}, kTolShort, uint32_t(n));
        }
        SCOPED_TRACE("T=1000");
        check_rule(s, mode, {1000}, kTolLong, 1000);
    }
}

TEST(CudaRefGatedDeltaRule, SeveralSequencesAndSlotsInOneCall) {
    REQUIRE_CUDA();
    // Decodes mixed with prefills around the chunk size (and an empty sequence), slots shuffled.
    const std::vector<int32_t> lengths = {1, 65, 1, 0, 64, 63, 1, 130};
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked})
        for (Shape s : {Shape{16, 32, 128, 128, false}, Shape{16, 32, 128, 128, true}, Shape{4, 4, 128, 128, false}})
            check_rule(s, mode, lengths, kTolShort, 3);
}

TEST(CudaRefGatedDeltaRule, OddHeadSizes) {
    REQUIRE_CUDA();
    // dk not a multiple of 32, dv not a multiple of the 4 columns per block, dk/dv up to 256.
    for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
        check_rule({2, 6, 48, 37, true}, mode, {1, 70, 5}, kTolShort, 4);
        check_rule({3, 3, 5, 7, false}, mode, {64, 1, 65}, kTolShort, 5);
        check_rule({1, 2, 256, 256, false}, mode, {1, 66}, kTolShort, 6);
    }
}

TEST(CudaRefGatedDeltaRule, BadSlotOnTheDeviceGivesNaN) {
    REQUIRE_CUDA();
    const int64_t T = 3, dk = 4, dv = 4;
    std::vector<float> x(size_t(T * dk), 0.25f), gb(size_t(T), -0.1f), st(size_t(dk * dv), 1.f);
    std::vector<int32_t> q_start = {0, 2, 3}, slot = {5, 0};  // sequence 0's slot 5 is out of range
    DeviceBuffer d_x = to_device(x), d_gb = to_device(gb), d_st = to_device(st),
                 d_o = to_device(std::vector<float>(size_t(T * dv), 0.f)), d_qs = to_device(q_start),
                 d_slot = to_device(slot);
    const ref::HeadsIn h{d_x.as<float>(), dk, dk};
    GdnParams p;
    p.n_k_heads = p.n_v_heads = 1;
    const SeqPlan plan{2, d_qs.as<int32_t>(), d_slot.as<int32_t>()};
    ref::gated_delta_rule(d_o.as<float>(), dv, dv, h, h, h, d_gb.as<float>(), 1, d_gb.as<float>(), 1, T, dk, dv,
                          d_st.as<float>(), dk * dv, 1, plan, p, nullptr);
    const std::vector<float> o = to_host(d_o);  // cudaMemcpy waits for the default stream
    for (int64_t i = 0; i < 2 * dv; ++i) EXPECT_TRUE(std::isnan(o[size_t(i)])) << "sequence 0, element " << i;
    for (int64_t i = 2 * dv; i < 3 * dv; ++i) EXPECT_FALSE(std::isnan(o[size_t(i)])) << "sequence 1, element " << i;
}

TEST(CudaRefGdn, BadArgumentsAreErrors) {  // checked on the host before any launch: needs no GPU
    float* f = reinterpret_cast<float*>(16);
    const int32_t* ip = reinterpret_cast<const int32_t*>(16);
    const SeqPlan plan{1, ip, ip};
    EXPECT_THROW(ref::conv1d_silu(f, 8, f, 8, 3, 8, f, 0, f, 0, 1, plan, nullptr), Error);   // K = 0
    EXPECT_THROW(ref::conv1d_silu(f, 4, f, 8, 3, 8, f, 4, f, 24, 1, plan, nullptr), Error);  // ys < C
    EXPECT_THROW(ref::conv1d_silu(f, 8, f, 8, 3, 8, f, 4, f, 10, 1, plan, nullptr), Error);  // slot stride < 3·8
    EXPECT_THROW(ref::conv1d_silu(f, 8, f, 8, 3, 8, f, 4, f, 24, 1, SeqPlan{1, ip, nullptr}, nullptr), Error);
    EXPECT_NO_THROW(ref::conv1d_silu(nullptr, 8, nullptr, 8, 0, 8, nullptr, 4, nullptr, 24, 1, SeqPlan{}, nullptr));

    const ref::HeadsIn h{f, 64, 16};
    GdnParams p;
    p.n_k_heads = 2;
    p.n_v_heads = 3;  // not a multiple of 2
    auto rule = [&](const GdnParams& gp, int64_t dk, int64_t dv, int64_t slot_stride) {
        ref::gated_delta_rule(f, 64, 16, h, h, h, f, 3, f, 3, 5, dk, dv, f, slot_stride, 2, plan, gp, nullptr);
    };
    EXPECT_THROW(rule(p, 16, 16, 4 * 256), Error);
    p.n_v_heads = 4;
    EXPECT_THROW(rule(p, 300, 16, 4 * 300 * 16), Error);  // dk > 256
    EXPECT_THROW(rule(p, 16, 16, 100), Error);            // slot stride < nv·dk·dv
    p.mode = GdnMode::Chunked;
    p.chunk = 0;
    EXPECT_THROW(rule(p, 16, 16, 4 * 256), Error);
}

}  // namespace
