// The GPU's row-wise top-k (fast::top_k, CudaBackend::top_k) and logit edits (edit_logits)
// against the CPU backend's: the same ids in the same order and the same values, on rows of
// 1..248320 columns (the flagship's vocabulary), k = 1, 2, 21, 64, 128, with ties (a coarse grid
// of values, all zeros of both signs), NaN and ±inf sprinkled in, fewer non-NaN values than k,
// strided multi-row batches.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_topk.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;

namespace {

std::vector<float> make_rows(int64_t R, int64_t C, int64_t ld, int kind, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, 3.f);
    std::vector<float> x(size_t(R * ld), 777.f);  // padding past C: never read
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
            float v = nd(rng);
            if (kind == 1) v = std::round(v);                           // many ties
            if (kind == 2 && c % 5 == 1) v = NAN;                       // NaN never enters
            if (kind == 2 && c % 7 == 3) v = c % 2 ? INFINITY : -INFINITY;
            if (kind == 3) v = (rng() & 1) ? 0.f : -0.f;                // one value, two signs
            if (kind == 4 && c % 3 != 0) v = NAN;                       // few non-NaN values
            x[size_t(r * ld + c)] = v;
        }
    return x;
}

void check(int64_t R, int64_t C, int k, int kind) {
    const int64_t ld = C + 3;
    const std::string what = "top_k R " + std::to_string(R) + " C " + std::to_string(C) + " k " + std::to_string(k) +
                             " kind " + std::to_string(kind);
    const std::vector<float> x = make_rows(R, C, ld, kind, uint32_t(R * 31 + C + k));
    std::vector<float> want_v(size_t(R * k));
    std::vector<int32_t> want_i(size_t(R * k));
    Tensor xt(const_cast<float*>(x.data()), DType::F32, {R, C});
    xt.stride[0] = ld * 4;
    make_cpu_backend()->top_k(xt, k, want_v.data(), want_i.data());

    DeviceBuffer dx = to_device(x), dv(size_t(R * k) * 4), di(size_t(R * k) * 4);
    DeviceBuffer sc(std::max<size_t>(fast::top_k_scratch_bytes(R, C, k), 1));
    EXPECT_EQ(fast::top_k_scratch_bytes(R, C, k) > 0, C > fast::kTopKSegment);
    fast::top_k(static_cast<const float*>(dx.data()), ld, R, C, k, static_cast<float*>(dv.data()),
                static_cast<int32_t*>(di.data()), sc.data(), nullptr);
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<float> got_v = to_host<float>(dv);
    const std::vector<int32_t> got_i = to_host<int32_t>(di);
    int bad = 0;
    for (size_t j = 0; j < want_i.size(); ++j) {
        const bool same_v = (std::isnan(want_v[j]) && std::isnan(got_v[j])) ||
                            std::memcmp(&want_v[j], &got_v[j], sizeof(float)) == 0;
        if ((got_i[j] != want_i[j] || !same_v) && ++bad <= 5)
            ADD_FAILURE() << what << ": row " << j / size_t(k) << " rank " << j % size_t(k) << " got (" << got_i[j]
                          << ", " << got_v[j] << ") want (" << want_i[j] << ", " << want_v[j] << ")";
    }
    EXPECT_EQ(bad, 0) << what;
}

}  // namespace

TEST(FastTopK, MatchesTheCpu) {
    REQUIRE_CUDA();
    for (int kind = 0; kind < 5; ++kind)
        for (int64_t C : {1, 2, 5, 37, 1000, 1025, 4099})
            for (int k : {1, 2, 21, 64, 128}) check(3, C, k, kind);
}

TEST(FastTopK, FlagshipVocabularyAndManyRows) {
    REQUIRE_CUDA();
    for (int kind : {0, 1, 2}) check(2, 248320, 21, kind);
    check(64, 151936, 128, 0);
    check(1, 248320, 1, 3);
    // Two passes: just past one segment, a last segment of 1 column, a last segment shorter than
    // k, few non-NaN values spread over segments, ties across segments (kind 1 and 3).
    for (int kind = 0; kind < 5; ++kind)
        for (int64_t C : {int64_t(fast::kTopKSegment) + 1, 3 * int64_t(fast::kTopKSegment) + 100})
            for (int k : {1, 21, 128}) check(3, C, k, kind);
}

// fast::argmax (the CUDA backend's in fast mode) against the CPU backend's: ties (the first index,
// also across segments), NaN never winning, rows of NaN / -inf only (0), -0 against +0, one
// column, a segment edge, the flagship's vocabulary, many rows, strided.
TEST(FastArgmax, MatchesTheCpu) {
    REQUIRE_CUDA();
    const int64_t S = fast::kArgmaxSegment;
    for (int kind = 0; kind < 5; ++kind)
        for (int64_t C : {int64_t(1), int64_t(37), S, S + 1, 2 * S + 1, int64_t(151936), int64_t(248320)})
            for (int64_t R : {int64_t(1), int64_t(9)}) {
                const int64_t ld = C + 3;
                std::vector<float> x = make_rows(R, C, ld, kind, uint32_t(R * 7 + C + kind));
                auto row = [&](int64_t r) { return x.begin() + r * ld; };
                if (R > 1) {
                    std::fill(row(0), row(0) + C, NAN);                 // all NaN: 0
                    std::fill(row(1), row(1) + C, -INFINITY);           // all -inf: 0
                    std::fill(row(2), row(2) + C, 1.5f);                // all equal: 0
                    row(3)[C - 1] = 1000.f;                             // the last column
                    std::fill(row(4), row(4) + C, 0.f);                 // -0 before +0: the first
                    row(4)[0] = -0.f;
                    if (C > S) {                                        // a tie across segments
                        row(5)[S + 1] = 2000.f;
                        row(5)[C - 1] = 2000.f;
                        row(6)[S] = INFINITY;                           // +inf first in segment 2
                        row(6)[S - 1] = NAN;
                    }
                }
                std::vector<int32_t> want(size_t(R), -1);
                Tensor xt(x.data(), DType::F32, {R, C});
                xt.stride[0] = ld * 4;
                make_cpu_backend()->argmax(xt, want.data());
                DeviceBuffer dx = to_device(x), dout(size_t(R) * 4);
                DeviceBuffer sc(std::max<size_t>(fast::argmax_scratch_bytes(R, C), 1));
                fast::argmax(static_cast<const float*>(dx.data()), ld, R, C, static_cast<int32_t*>(dout.data()),
                             sc.data(), nullptr);
                TS_CUDA_CHECK(cudaDeviceSynchronize());
                EXPECT_EQ(to_host<int32_t>(dout), want) << "argmax [" << R << ", " << C << "] kind " << kind;
            }
    // The backend op in fast mode (scratch its own), and bad arguments.
    auto be = make_cuda_backend(0, CudaKernels::Fast);
    const std::vector<float> x = make_rows(2, 248320, 248320, 1, 5);
    std::vector<int32_t> want(2);
    make_cpu_backend()->argmax(Tensor(const_cast<float*>(x.data()), DType::F32, {2, 248320}), want.data());
    DeviceBuffer dx = to_device(x), dout(8);
    be->argmax(Tensor(dx.data(), DType::F32, {2, 248320}, Device::CUDA), static_cast<int32_t*>(dout.data()));
    be->synchronize();
    EXPECT_EQ(to_host<int32_t>(dout), want);
    EXPECT_THROW(fast::argmax(static_cast<const float*>(dx.data()), 248320, 2, 248320,
                              static_cast<int32_t*>(dout.data()), nullptr, nullptr),
                 Error);  // needs scratch
    EXPECT_THROW(fast::argmax(static_cast<const float*>(dx.data()), 4, 2, 0, static_cast<int32_t*>(dout.data()),
                              nullptr, nullptr),
                 Error);  // empty rows
}

TEST(FastTopK, BackendOpAndBadArguments) {
    REQUIRE_CUDA();
    auto be = make_cuda_backend(0);
    const std::vector<float> x = make_rows(2, 300, 300, 1, 3);
    DeviceBuffer dx = to_device(x), dv(2 * 8 * 4), di(2 * 8 * 4);
    be->top_k(Tensor(dx.data(), DType::F32, {2, 300}, Device::CUDA), 8, static_cast<float*>(dv.data()),
              static_cast<int32_t*>(di.data()));
    be->synchronize();
    std::vector<float> wv(16);
    std::vector<int32_t> wi(16);
    make_cpu_backend()->top_k(Tensor(const_cast<float*>(x.data()), DType::F32, {2, 300}), 8, wv.data(), wi.data());
    EXPECT_EQ(to_host<int32_t>(di), wi);
    EXPECT_THROW(fast::top_k(static_cast<const float*>(dx.data()), 300, 2, 300, 0, static_cast<float*>(dv.data()),
                             static_cast<int32_t*>(di.data()), nullptr, nullptr),
                 Error);
    EXPECT_THROW(fast::top_k(static_cast<const float*>(dx.data()), 300, 2, 300, fast::kTopKMax + 1,
                             static_cast<float*>(dv.data()), static_cast<int32_t*>(di.data()), nullptr, nullptr),
                 Error);
    EXPECT_THROW(fast::top_k(static_cast<const float*>(dx.data()), 300, 2, 30000, 8, static_cast<float*>(dv.data()),
                             static_cast<int32_t*>(di.data()), nullptr, nullptr),
                 Error);  // two passes need scratch
}

// edit_logits (penalties and bias where the logits are) gives the CPU backend's values bit for
// bit: every flag combination, negative / zero / -0 logits, edits on several rows, through the
// backend op (which copies the host edits to the device) and with a row out of range refused.
TEST(FastTopK, EditLogitsMatchesTheCpu) {
    REQUIRE_CUDA();
    const int64_t R = 3, V = 1000;
    std::vector<float> x = make_rows(R, V, V, 0, 9);
    x[5] = -0.f;
    x[6] = 0.f;
    std::vector<LogitEdit> edits;
    for (int32_t r = 0; r < R; ++r)
        for (int32_t id = int32_t(r); id < V; id += 7) {
            LogitEdit e;
            e.row = r;
            e.id = id;
            e.flags = uint32_t(1 + id % 7);  // every combination of bias, rep, sub
            e.bias = 0.5f - 0.01f * float(id % 13);
            e.rep = 1.1f + 0.05f * float(r);
            e.sub = -0.3f + 0.2f * float(id % 3);
            edits.push_back(e);
        }
    std::vector<float> want = x;
    make_cpu_backend()->edit_logits(Tensor(want.data(), DType::F32, {R, V}), edits.data(), int64_t(edits.size()));
    auto be = make_cuda_backend(0);
    DeviceBuffer dx = to_device(x);
    const Tensor xt(dx.data(), DType::F32, {R, V}, Device::CUDA);
    be->edit_logits(xt, edits.data(), int64_t(edits.size()));
    be->synchronize();
    const std::vector<float> got = to_host<float>(dx);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], 4) != 0 && ++bad <= 5)
            ADD_FAILURE() << "element " << i << ": got " << got[i] << " want " << want[i];
    EXPECT_EQ(bad, 0);
    LogitEdit out_of_range;
    out_of_range.row = int32_t(R);
    EXPECT_THROW(be->edit_logits(xt, &out_of_range, 1), Error);
}
