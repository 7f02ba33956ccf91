// The GPU's sampling (fast::sample through CudaBackend::sample) against the CPU reference
// (cpu::sample through the CPU backend): the same token for every row, on rows of 1 .. 248320
// logits (the flagship's vocabulary) and batches of 1 .. 64 rows, for greedy rows, temperature
// alone, top-k (1, 2, at the count of finite logits, past it), top-p (tiny, middling, just
// under 1), min-p and their combinations; logits smooth, peaked, on a coarse grid (ties at the
// top-k and top-p boundaries, cut by id), all equal, with NaN and ±inf sprinkled in, and a
// strided batch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_sample.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;

namespace {

// kind 0: N(0, 3); 1: rounded to halves (many ties); 2: NaN, ±inf sprinkled; 3: peaked (one
// logit far above, the rest N(0, 1)); 4: all equal; 5: few finite logits (the rest NaN / -inf);
// 6: a language model's shape — N(0, 1), 40 tokens a row 10 to 18 above it, ties among them.
std::vector<float> make_rows(int64_t R, int64_t V, int64_t ld, int kind, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, kind == 3 ? 1.f : 3.f);
    std::vector<float> x(size_t(R * ld), 777.f);  // padding past V: never read
    for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < V; ++c) {
            float v = nd(rng);
            if (kind == 1) v = std::round(2.f * v) / 2.f;
            if (kind == 2 && c % 11 == 1) v = NAN;
            if (kind == 2 && c % 13 == 3) v = -INFINITY;
            if (kind == 2 && r % 2 == 1 && c % 997 == 5) v = INFINITY;
            if (kind == 3 && c == (r * 7919) % V) v = 12.f;
            if (kind == 4) v = 0.5f;
            if (kind == 5 && c % 50 != 7) v = c % 2 ? NAN : -INFINITY;
            if (kind == 6) v /= 3.f;
            x[size_t(r * ld + c)] = v;
        }
    if (kind == 6)
        for (int64_t r = 0; r < R; ++r)
            for (int j = 0; j < 40; ++j)  // (a few land on one column: fewer, which is fine)
                x[size_t(r * ld + int64_t(rng() % uint32_t(V)))] = 10.f + float(j % 17) / 2.f;
    return x;
}

std::vector<SampleRow> make_params(int64_t R, int64_t V, uint32_t seed) {
    std::mt19937 rng(seed);
    const float temps[] = {0.f, 0.3f, 0.7f, 1.f, 1.5f, 4.f};
    const int32_t ks[] = {0, 0, 0, 1, 2, 20, 128, int32_t(V), int32_t(V) + 5, 1000};
    const float ps[] = {1.f, 1.f, 1e-6f, 0.1f, 0.5f, 0.9f, 0.95f, 0.999f};
    const float mins[] = {0.f, 0.f, 0.f, 0.01f, 0.1f, 0.9f, 1.f};
    std::vector<SampleRow> rows(static_cast<size_t>(R));
    for (SampleRow& p : rows) {
        p.temperature = temps[rng() % 6];
        p.top_k = ks[rng() % 10];
        p.top_p = ps[rng() % 8];
        p.min_p = mins[rng() % 7];
        p.seed = (uint64_t(rng()) << 32) | rng();
        p.counter = rng() % 1000;
    }
    return rows;
}

void check(int64_t R, int64_t V, int kind, uint32_t seed) {
    const int64_t ld = V + (R > 1 ? 5 : 0);
    const std::string what = "sample R " + std::to_string(R) + " V " + std::to_string(V) + " kind " +
                             std::to_string(kind) + " seed " + std::to_string(seed);
    const std::vector<float> x = make_rows(R, V, ld, kind, seed);
    const std::vector<SampleRow> rows = make_params(R, V, seed * 3 + 1);
    Tensor xt(const_cast<float*>(x.data()), DType::F32, {R, V});
    xt.stride[0] = ld * 4;
    std::vector<int32_t> want(size_t(R), -1);
    make_cpu_backend()->sample(xt, rows.data(), want.data());

    auto be = make_cuda_backend(0);
    DeviceBuffer dx = to_device(x), dids(size_t(R) * 4);
    Tensor dt(dx.data(), DType::F32, {R, V}, Device::CUDA);
    dt.stride[0] = ld * 4;
    be->sample(dt, rows.data(), static_cast<int32_t*>(dids.data()));
    be->synchronize();
    const std::vector<int32_t> got = to_host<int32_t>(dids);
    for (int64_t r = 0; r < R; ++r) {
        const SampleRow& p = rows[size_t(r)];
        EXPECT_EQ(got[size_t(r)], want[size_t(r)])
            << what << " row " << r << ": t " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
            << " min_p " << p.min_p << " counter " << p.counter;
    }
}

}  // namespace

TEST(FastSample, MatchesTheCpu) {
    REQUIRE_CUDA();
    for (int kind = 0; kind < 6; ++kind)
        for (int64_t V : {1, 2, 7, 100, 1000, 2049, 5003})
            for (uint32_t seed : {1u, 2u, 3u}) check(16, V, kind, seed * 100 + uint32_t(V) + uint32_t(kind));
}

TEST(FastSample, FlagshipVocabularyAndBatches) {
    REQUIRE_CUDA();
    for (int kind : {0, 1, 2, 3}) check(8, 248320, kind, 11 + uint32_t(kind));
    check(1, 248320, 0, 5);
    check(64, 151936, 0, 6);
}

// One row, one parameter set at a time, over the boundaries the filters cut at.
TEST(FastSample, EachFilterAlone) {
    REQUIRE_CUDA();
    const int64_t V = 3001;
    auto be = make_cuda_backend(0), cpu = make_cpu_backend();
    for (int kind : {0, 1, 3, 4}) {
        const std::vector<float> x = make_rows(1, V, V, kind, 77 + uint32_t(kind));
        DeviceBuffer dx = to_device(x), did(4);
        for (float t : {0.5f, 1.f, 2.f})
            for (int32_t k : {0, 2, 17, 3000, 3001})
                for (float tp : {1.f, 0.05f, 0.6f, 0.97f})
                    for (float mp : {0.f, 0.2f})
                        for (uint64_t c : {0ull, 1ull, 99ull}) {
                            SampleRow p;
                            p.temperature = t;
                            p.top_k = k;
                            p.top_p = tp;
                            p.min_p = mp;
                            p.seed = 42;
                            p.counter = c;
                            int32_t want = -1;
                            cpu->sample(Tensor(const_cast<float*>(x.data()), DType::F32, {1, V}), &p, &want);
                            be->sample(Tensor(dx.data(), DType::F32, {1, V}, Device::CUDA), &p,
                                       static_cast<int32_t*>(did.data()));
                            be->synchronize();
                            EXPECT_EQ(to_host<int32_t>(did)[0], want) << "kind " << kind << " t " << t << " k " << k
                                                                      << " top_p " << tp << " min_p " << mp << " c " << c;
                        }
    }
}

TEST(FastSample, BadArguments) {
    REQUIRE_CUDA();
    auto be = make_cuda_backend(0);
    const std::vector<float> x(10, 0.f);
    DeviceBuffer dx = to_device(x), did(8);
    SampleRow p;
    p.top_p = 0.f;
    EXPECT_THROW(be->sample(Tensor(dx.data(), DType::F32, {1, 10}, Device::CUDA), &p, static_cast<int32_t*>(did.data())),
                 Error);
    p.top_p = 1.f;
    DeviceBuffer drow = to_device(std::vector<SampleRow>{p}), sc(fast::sample_scratch_bytes(1, 10));
    const auto* rp = static_cast<const SampleRow*>(drow.data());
    auto* ids = static_cast<int32_t*>(did.data());
    EXPECT_THROW(fast::sample(static_cast<const float*>(dx.data()), 10, 1, 0, rp, ids, sc.data(), nullptr),
                 Error);  // empty rows
    EXPECT_THROW(fast::sample(static_cast<const float*>(dx.data()), int64_t(1) << 22, 1, int64_t(1) << 22, rp, ids,
                              sc.data(), nullptr),
                 Error);  // past the fixed-point bound
    EXPECT_THROW(fast::sample(static_cast<const float*>(dx.data()), 10, 1, 10, rp, ids, nullptr, nullptr),
                 Error);  // no scratch
    fast::sample(static_cast<const float*>(dx.data()), 10, 1, 10, rp, ids, sc.data(), nullptr);
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_GE(to_host<int32_t>(did)[0], 0);
}

// The plan's two walks (fast_sample.cu): the candidate set where it provably holds the cuts, and the
// whole row (staged in shared memory up to 262,144 columns, read from global memory past that) —
// the same token as the CPU from both, on every kind of row, with the candidates taken
// where they must be (a language model's rows: top-k up to kCandMaxK, top-k with top-p, top-p alone
// with its mass in the set) and the whole row where they cannot hold the cut (all logits equal:
// every block's set past its room; top-p alone over a flat row; k past kCandMaxK).
TEST(FastSample, CandidatesAndTheWholeRowMatchTheCpu) {
    REQUIRE_CUDA();
    struct Case {
        int32_t top_k;
        float top_p, temperature;
        int want;  // 1: the candidates, 0: the whole row, -1: either
    };
    auto cpu = make_cpu_backend();
    for (int64_t V : {1000, 5003, 151936, 248320, 300001})  // (300,001: a slice too long to stage)
        for (int kind = 0; kind <= 6; ++kind) {
            const bool lm = kind == 6, flat = kind == 4, big = V >= 151936;
            const int lm_cands = lm ? 1 : flat && big ? 0 : -1;  // all equal: every block's set past kCand
            const std::vector<Case> cases = {
                {20, 1.f, 0.7f, lm_cands},
                {1, 0.5f, 1.f, -1},  // (greedy)
                {50, 0.9f, 1.3f, lm_cands},
                {1000, 1.f, 0.7f, lm && V > 1000 ? 1 : -1},
                {1025, 1.f, 1.f, V > 1025 && kind != 5 ? 0 : -1},  // k past kCandMaxK
                {0, 0.8f, 1.3f, lm_cands},
                {0, 0.999f, 4.f, kind == 0 ? (big ? 0 : 1) : -1},  // flat at t 4: the set's mass too little
                {2, 1e-6f, 0.7f, -1},
                {int32_t(V) - 1, 0.95f, 1.f, -1},
            };
            const int64_t R = int64_t(cases.size());
            const uint32_t seed = 900 + uint32_t(kind) * 7 + uint32_t(V);
            const std::vector<float> x = make_rows(R, V, V, kind, seed);
            std::vector<SampleRow> rows(cases.size());
            for (size_t r = 0; r < cases.size(); ++r) {
                rows[r].temperature = cases[r].temperature;
                rows[r].top_k = cases[r].top_k;
                rows[r].top_p = cases[r].top_p;
                rows[r].min_p = r % 4 == 3 ? 0.05f : 0.f;
                rows[r].seed = seed + r;
                rows[r].counter = r * 13;
            }
            std::vector<int32_t> want(cases.size(), -1);
            cpu->sample(Tensor(const_cast<float*>(x.data()), DType::F32, {R, V}), rows.data(), want.data());
            DeviceBuffer dx = to_device(x), drows = to_device(rows), dids(cases.size() * 4),
                         sc(fast::sample_scratch_bytes(R, V));
            const auto* xp = static_cast<const float*>(dx.data());
            const auto* rp = static_cast<const SampleRow*>(drows.data());
            auto* ids = static_cast<int32_t*>(dids.data());
            for (fast::SamplePlan how : {fast::SamplePlan::Candidates, fast::SamplePlan::Row}) {
                const bool cands = how == fast::SamplePlan::Candidates;
                fast::sample(xp, V, R, V, rp, ids, sc.data(), nullptr, how);
                TS_CUDA_CHECK(cudaDeviceSynchronize());
                const std::vector<int32_t> got = to_host<int32_t>(dids);
                const std::vector<int32_t> from = fast::detail::sample_plans_from_candidates(sc.data(), R);
                ASSERT_EQ(from.size(), cases.size());
                for (size_t r = 0; r < cases.size(); ++r) {
                    const std::string what = "V " + std::to_string(V) + " kind " + std::to_string(kind) + " top_k " +
                                             std::to_string(cases[r].top_k) + " top_p " +
                                             std::to_string(cases[r].top_p) + (cands ? " candidates" : " whole row");
                    EXPECT_EQ(got[r], want[r]) << what;
                    if (!cands) {
                        EXPECT_NE(from[r], 1) << what << ": the whole row was asked for";
                    } else if (cases[r].want >= 0) {
                        EXPECT_EQ(from[r], cases[r].want) << what << ": walked";
                    }
                }
            }
        }
}

// The draw's two stages (fast_sample.cu, sample_draw_kernel): f32 noise for every kept token, the
// exact double noise only within 2δ of a segment's best. With δ = 64 every kept token is drawn
// exactly (the all-double draw); with the default only the few near the best — the same token as
// the CPU both ways, on rows the draw kernel plans alone (the whole row walked: no candidates) at
// temperatures 0.3 … 4, where many tokens come close to the best. A δ below the default is refused.
TEST(FastSample, TheDrawsMarginGivesTheCpusToken) {
    REQUIRE_CUDA();
    auto cpu = make_cpu_backend();
    for (int64_t V : {5003, 248320})
        for (int kind : {0, 1, 3, 6}) {
            const int64_t R = 12;
            const uint32_t seed = 500 + uint32_t(kind) + uint32_t(V);
            const std::vector<float> x = make_rows(R, V, V, kind, seed);
            std::vector<SampleRow> rows(static_cast<size_t>(R));
            const float temps[] = {0.3f, 0.7f, 1.f, 1.5f, 4.f, 1.f};
            for (size_t r = 0; r < rows.size(); ++r) {
                rows[r].temperature = temps[r % 6];
                rows[r].top_p = r % 4 == 1 ? 0.9f : 1.f;
                rows[r].top_k = r % 4 == 2 ? 40 : 0;
                rows[r].min_p = r % 4 == 3 ? 0.02f : 0.f;
                rows[r].seed = seed * 7 + r;
                rows[r].counter = r;
            }
            std::vector<int32_t> want(rows.size(), -1);
            cpu->sample(Tensor(const_cast<float*>(x.data()), DType::F32, {R, V}), rows.data(), want.data());
            DeviceBuffer dx = to_device(x), drows = to_device(rows), dids(rows.size() * 4),
                         sc(fast::sample_scratch_bytes(R, V));
            for (double delta : {0x1p-14, 64.0}) {
                TS_CUDA_CHECK(fast::detail::launch_sample(static_cast<const float*>(dx.data()), V, R, V,
                                                          static_cast<const SampleRow*>(drows.data()),
                                                          static_cast<int32_t*>(dids.data()), sc.data(), nullptr,
                                                          fast::SamplePlan::Row, delta));
                TS_CUDA_CHECK(cudaDeviceSynchronize());
                const std::vector<int32_t> got = to_host<int32_t>(dids);
                for (size_t r = 0; r < rows.size(); ++r)
                    EXPECT_EQ(got[r], want[r]) << "V " << V << " kind " << kind << " row " << r << " t "
                                               << rows[r].temperature << " delta " << delta;
            }
            EXPECT_EQ(fast::detail::launch_sample(static_cast<const float*>(dx.data()), V, R, V,
                                                  static_cast<const SampleRow*>(drows.data()),
                                                  static_cast<int32_t*>(dids.data()), sc.data(), nullptr,
                                                  fast::SamplePlan::Row, 0x1p-15),
                      cudaErrorInvalidValue);
        }
}
