// fast::conv1d_silu (fast_gdn_conv.cu) against the reference kernels on the same inputs: without
// norms, the bits of ref::conv1d_silu (outputs and every slot of the conv state); with the q / k
// norms, the bits of ref::conv1d_silu followed by ref::l2_norm on q (scaled) and k — for K = 2, 3
// and 4, heads of 128 (the flagship's), 64 and 100 (a partial warp), channel counts past and short
// of a 128-channel group, sequences of 1 and 2 tokens (shorter than K-1: their state shifts), runs
// of the kernel's 32 tokens cut by sequence starts, padding sequences (no state), calls chained over
// the same slots, padded rows, and a plan row naming a slot out of range (NaN rows in both). Then
// the backends: CudaBackend::conv1d_silu_qk_norm (fast and TESSERA_FAST_GDN=0) against the CPU
// backend's ops in turn, within f32 rounding. Without a GPU the device tests skip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/ref_gdn.h"
#include "kernels/cuda/ref_norm.h"
#include "kernels/cuda/stream.h"
#include "gdn_test_util.h"
#include "ref_test_util.h"  // REQUIRE_CUDA, to_device, to_host

using namespace tessera;
using namespace tessera::cuda;
using namespace gdntest;
using reftest::to_device;
using reftest::to_host;

namespace {

constexpr float kPad = 0.3125f;  // y's row padding: a kernel writing there shows

// Equal values (+0 and −0 alike, NaN where the other is NaN), naming the first difference.
void expect_same_values(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                        int64_t row) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        const bool same = got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]));
        if (!same && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ; first at row "
                       << int64_t(first) / row << " column " << int64_t(first) % row << ": " << got[first] << " vs "
                       << want[first];
}

struct ConvCase {
    int64_t nk = 0, dk = 0, rest = 0, K = 4;  // C = 2·nk·dk + rest; nk = 0: no norm
    std::vector<std::vector<int32_t>> calls;  // each call's sequence lengths
    std::vector<int> padding;                 // sequences of every call with slot -1
    int bad_seq = -1;                         // a sequence of every call whose slot is out of range
};

// Runs the fast kernel and the reference ops on the same inputs call after call (each continuing
// from the conv states its own path left) and compares y and the whole state after each call.
void check(const ConvCase& cc, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t C = 2 * cc.nk * cc.dk + cc.rest, K = cc.K, n_slots = 11, xs = C + 5, ys = C + 3;
    const fast::ConvNorm norm{2 * cc.nk, cc.dk, cc.nk, 1e-6f, cc.dk ? 1.0f / std::sqrt(float(cc.dk)) : 1.f};
    ASSERT_TRUE(fast::conv1d_silu_fits(K, norm));
    const std::vector<float> w = random_floats(size_t(C * K), rng, -1.f, 1.f);
    const std::vector<float> st0 = random_floats(size_t(n_slots * (K - 1) * C), rng, -2.f, 2.f);
    DeviceBuffer d_w = to_device(w), st_fast = to_device(st0), st_ref = to_device(st0);
    Stream stream;
    for (size_t call = 0; call < cc.calls.size(); ++call) {
        const std::vector<int32_t>& lengths = cc.calls[call];
        SCOPED_TRACE("C=" + std::to_string(C) + " K=" + std::to_string(K) + " heads " + std::to_string(2 * cc.nk) +
                     " of " + std::to_string(cc.dk) + ", call " + std::to_string(call));
        const std::vector<int32_t> q_start = starts(lengths);
        std::vector<int32_t> slot = random_slots(lengths.size(), n_slots, rng, cc.padding);
        if (cc.bad_seq >= 0) slot[size_t(cc.bad_seq)] = int32_t(n_slots + 2);
        const int64_t T = q_start.back();
        const std::vector<float> x = random_floats(size_t(T * xs), rng, -2.f, 2.f);
        DeviceBuffer d_x = to_device(x), d_qs = to_device(q_start), d_slot = to_device(slot);
        DeviceBuffer y_fast = to_device(std::vector<float>(size_t(T * ys), kPad));
        DeviceBuffer y_ref = to_device(std::vector<float>(size_t(T * ys), kPad));
        const SeqPlan plan{int(lengths.size()), d_qs.as<int32_t>(), d_slot.as<int32_t>()};
        fast::conv1d_silu(y_fast.as<float>(), ys, d_x.as<float>(), xs, T, C, d_w.as<float>(), K, st_fast.as<float>(),
                          (K - 1) * C, n_slots, plan, norm, stream);
        ref::conv1d_silu(y_ref.as<float>(), ys, d_x.as<float>(), xs, T, C, d_w.as<float>(), K, st_ref.as<float>(),
                         (K - 1) * C, n_slots, plan, stream);
        if (cc.nk > 0) {
            ref::l2_norm(y_ref.as<float>(), ys, cc.dk, T, cc.nk, cc.dk, norm.eps, norm.scale, stream);
            ref::l2_norm(y_ref.as<float>() + cc.nk * cc.dk, ys, cc.dk, T, cc.nk, cc.dk, norm.eps, 1.f, stream);
        }
        stream.synchronize();
        const std::vector<float> yf = to_host<float>(y_fast), yr = to_host<float>(y_ref);
        expect_same_values(yf, yr, "y", ys);
        expect_same_values(to_host<float>(st_fast), to_host<float>(st_ref), "conv state", (K - 1) * C);
        // The test means something: the outputs are neither the padding nor all NaN.
        size_t finite = 0;
        for (int64_t t = 0; t < T; ++t)
            for (int64_t c = 0; c < C; ++c) {
                const float v = yf[size_t(t * ys + c)];
                finite += std::isfinite(v) && v != kPad;
            }
        EXPECT_GT(finite, size_t(T * C) / 2);
    }
}

// Sequence lengths that cut the kernel's 32-token runs in many places.
const std::vector<std::vector<int32_t>> kCalls = {{1, 2, 3, 5, 64, 65, 31, 33, 100},
                                                  {2, 1, 1, 3, 1, 1, 1, 1, 1},
                                                  {1, 1, 1, 1, 1, 1, 1, 1, 1},
                                                  {70, 1, 40, 2, 3, 1, 1, 1, 33}};

}  // namespace

TEST(FastGdnConv, ConvGivesTheReferenceBits) {
    REQUIRE_CUDA();
    for (int64_t C : {300, 7, 129, 8192}) {
        check({0, 0, C, 4, kCalls, {}, -1}, uint32_t(C));
        check({0, 0, C, 2, {{1, 2, 65}, {1, 3}}, {}, -1}, uint32_t(C) + 1);
        check({0, 0, C, 3, {{1, 1, 40}, {2, 33}}, {}, -1}, uint32_t(C) + 2);
    }
    check({0, 0, 33, 4, {{2}, {1}, {1}, {1}, {1}}, {}, -1}, 5);  // one slot's prefill, then decodes
}

TEST(FastGdnConv, NormsGiveTheReferenceOpsBits) {
    REQUIRE_CUDA();
    check({16, 128, 32 * 128, 4, {{2048}, {600, 1000, 1}}, {}, -1}, 11);  // the flagship's layer
    check({2, 128, 4 * 128, 4, kCalls, {}, -1}, 12);
    check({3, 64, 37, 4, kCalls, {}, -1}, 13);   // two heads a 128-channel span, an odd rest
    check({2, 100, 0, 3, kCalls, {}, -1}, 14);   // heads of a partial warp, nothing after k
    check({1, 1, 5, 2, {{1, 2, 65}, {3, 1}}, {}, -1}, 15);
}

TEST(FastGdnConv, PaddingAndBadSlotsAsTheReference) {
    REQUIRE_CUDA();
    // Padding sequences read zeros before their first token and keep no state; a slot out of range
    // gives NaN rows (normalised NaN too) and no state write — in both paths alike.
    check({2, 128, 200, 4, kCalls, {1, 4}, -1}, 21);
    check({2, 128, 200, 4, kCalls, {}, 6}, 22);
    check({0, 0, 300, 4, kCalls, {0}, 7}, 23);
}

TEST(FastGdnConv, BadArgumentsAreErrors) {  // checked on the host before any launch: needs no GPU
    float* f = reinterpret_cast<float*>(uintptr_t(256));
    const int32_t* ip = reinterpret_cast<const int32_t*>(uintptr_t(256));
    const SeqPlan plan{1, ip, ip};
    const fast::ConvNorm none{}, qk{4, 128, 2, 1e-6f, 0.1f};
    EXPECT_FALSE(fast::conv1d_silu_fits(5, none));
    EXPECT_FALSE(fast::conv1d_silu_fits(1, none));
    EXPECT_FALSE(fast::conv1d_silu_fits(4, fast::ConvNorm{2, 256, 1, 1e-6f, 1.f}));
    EXPECT_TRUE(fast::conv1d_silu_fits(4, qk));
    EXPECT_THROW(fast::conv1d_silu(f, 8, f, 8, 3, 8, f, 5, f, 32, 1, plan, none, nullptr), Error);  // K = 5
    EXPECT_THROW(fast::conv1d_silu(f, 4, f, 8, 3, 8, f, 4, f, 24, 1, plan, none, nullptr), Error);  // ys < C
    EXPECT_THROW(fast::conv1d_silu(f, 8, f, 8, 3, 8, f, 4, f, 10, 1, plan, none, nullptr), Error);  // slot stride
    EXPECT_THROW(fast::conv1d_silu(f, 512, f, 512, 3, 500, f, 4, f, 1500, 1, plan, qk, nullptr), Error);  // heads > C
    EXPECT_THROW(fast::conv1d_silu(f, 512, f, 512, 3, 512, f, 4, f, 1536, 1, plan,
                                   fast::ConvNorm{4, 128, 5, 1e-6f, 1.f}, nullptr),
                 Error);  // more scaled heads than heads
    EXPECT_NO_THROW(fast::conv1d_silu(nullptr, 8, nullptr, 8, 0, 8, nullptr, 4, nullptr, 24, 1, SeqPlan{}, none,
                                      nullptr));  // no tokens: nothing to do
}

// The backend op the layer calls: the CUDA backend (fast, then reference kernels) against the CPU
// backend's three ops, within f32 rounding (the CPU's conv and norm round differently).
TEST(FastGdnConv, BackendMatchesTheCpu) {
    REQUIRE_CUDA();
    std::mt19937 rng(31);
    const int64_t nk = 4, dk = 128, C = 2 * nk * dk + 8 * 128, K = 4, n_slots = 5;
    const std::vector<int32_t> lengths = {1, 37, 2, 90}, q_start = starts(lengths);
    const std::vector<int32_t> slot = {3, -1, 0, 4};
    const int64_t T = q_start.back();
    const std::vector<float> x = random_floats(size_t(T * C), rng, -2.f, 2.f);
    const std::vector<float> w = random_floats(size_t(C * K), rng, -1.f, 1.f);
    const std::vector<float> st0 = random_floats(size_t(n_slots * (K - 1) * C), rng, -2.f, 2.f);
    const float q_scale = 1.0f / std::sqrt(float(dk));

    std::vector<float> y_cpu(size_t(T * C)), st_cpu = st0;
    make_cpu_backend()->conv1d_silu_qk_norm(
        Tensor(y_cpu.data(), DType::F32, {T, C}), Tensor(const_cast<float*>(x.data()), DType::F32, {T, C}),
        Tensor(const_cast<float*>(w.data()), DType::F32, {C, K}),
        Tensor(st_cpu.data(), DType::F32, {n_slots, K - 1, C}),
        SeqPlan{int(lengths.size()), q_start.data(), slot.data()}, nk, dk, 1e-6f, q_scale);

    auto gpu = make_cuda_backend();
    const char* old = std::getenv("TESSERA_FAST_GDN");
    const std::string saved = old ? old : "";
    for (const char* mode : {"1", "0"}) {
        SCOPED_TRACE(std::string("TESSERA_FAST_GDN=") + mode);
        setenv("TESSERA_FAST_GDN", mode, 1);
        DeviceBuffer d_x = to_device(x), d_w = to_device(w), d_st = to_device(st0), d_y(size_t(T * C) * 4);
        DeviceBuffer d_qs = to_device(q_start), d_slot = to_device(slot);
        gpu->conv1d_silu_qk_norm(Tensor(d_y.as<float>(), DType::F32, {T, C}, Device::CUDA),
                                 Tensor(d_x.as<float>(), DType::F32, {T, C}, Device::CUDA),
                                 Tensor(d_w.as<float>(), DType::F32, {C, K}, Device::CUDA),
                                 Tensor(d_st.as<float>(), DType::F32, {n_slots, K - 1, C}, Device::CUDA),
                                 SeqPlan{int(lengths.size()), d_qs.as<int32_t>(), d_slot.as<int32_t>()}, nk, dk, 1e-6f,
                                 q_scale);
        gpu->synchronize();
        compare(to_host<float>(d_y), y_cpu, 1e-5, "y", [&](size_t i) {
            return "token " + std::to_string(int64_t(i) / C) + " channel " + std::to_string(int64_t(i) % C);
        });
        EXPECT_EQ(to_host<float>(d_st), st_cpu) << "conv state";
    }
    if (old) setenv("TESSERA_FAST_GDN", saved.c_str(), 1);
    else unsetenv("TESSERA_FAST_GDN");
}
