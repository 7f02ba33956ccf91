// The fast MoE (kernels/cuda/fast_moe.h): the router and the grouping, and the whole chain on the
// device. Router: ids exactly the CPU's (ties to the lower index, NaN first), weights within 1e-6
// (bit mismatches counted and printed). Grouping: exactly a host model of it. The chain: router
// then experts with no host round trip (the router against the CPU, the experts against the
// double reference), x settled before the routing, one capture into a CUDA graph; and the bad
// arguments every entry point rejects. The expert kernels' own tests: test_fast_moe_experts.cpp.
// Every case prints its name when it fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_fused_map.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/cuda/ref_elementwise.h"
#include "kernels/cuda/stream.h"

#include "moe_test_util.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using namespace tessera::cuda::moetest;

TEST(FastMoe, RouteMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 1;
    for (int E : {8, 33, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;
            for (int64_t T : {1, 2, 3, 17, 64})
                for (bool renorm : {false, true}) {
                    const int64_t ldl = E + (T % 2 ? 0 : 3);
                    std::vector<float> logits = reftest::random_rows(T, E, ldl, seed++, -6.f, 6.f);
                    const std::string what = "E=" + std::to_string(E) + " k=" + std::to_string(k) + " T=" +
                                             std::to_string(T) + (renorm ? " renormalized" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, renorm), cpu_topk(*cpu, logits, T, E, ldl, k, renorm),
                                      T, k, what);
                    if (HasFailure()) return;
                }
        }
}

// A shared expert as slot k (MoeRouting::shared): the gate column after the E router logits.
TEST(FastMoe, RouteWithASharedExpertMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 900;
    for (int E : {8, 256, 512})
        for (int k : {1, 8, 16})
            for (int64_t T : {1, 2, 17})
                for (bool renorm : {false, true}) {
                    if (k > E) continue;
                    const int64_t ldl = E + 1 + (T % 2 ? 0 : 2);
                    std::vector<float> logits = reftest::random_rows(T, E + 1, ldl, seed++, -6.f, 6.f);
                    logits[size_t(E)] = -120.f;  // σ = 0 (the gate's exp overflows to inf)
                    const std::string what = "shared E=" + std::to_string(E) + " k=" + std::to_string(k) + " T=" +
                                             std::to_string(T) + (renorm ? " renormalized" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, renorm, true),
                                      cpu_topk(*cpu, logits, T, E, ldl, k, renorm, true), T, k + 1, what);
                    if (HasFailure()) return;
                }
}

TEST(FastMoe, RouteTiesGoToTheLowerIndex) {
    // Logits from {0, 1, 2}: most probabilities tie exactly; the ids must match the CPU's order.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    std::mt19937 rng(5);
    for (int E : {8, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;  // the op takes k <= E
            const int64_t T = 33;
            std::vector<float> logits(size_t(T * E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = 1.f;  // token 0: every expert ties
            const TopkResult want = cpu_topk(*cpu, logits, T, E, E, k, true);
            for (int j = 0; j < k; ++j) ASSERT_EQ(want.ids[size_t(j)], j);
            expect_topk_equal(gpu_route(logits, T, E, E, k, true), want, T, k,
                              "ties E=" + std::to_string(E) + " k=" + std::to_string(k));
        }
}

TEST(FastMoe, RouteNanAndInfinityRankAsOnCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t E = 8;
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> logits = {
        0.f,  1.f,  -inf, 2.f,  -inf, 0.5f, 2.f,  -1.f,  // -inf experts get probability 0
        -inf, -inf, -inf, 3.f,  -inf, -inf, -inf, -inf,  // one finite logit: probability 1
        0.f,  1.f,  nan,  2.f,  0.f,  0.f,  0.f,  0.f,   // a NaN poisons the row: NaN ranks first
        -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,  // all -inf: NaN everywhere (as the CPU)
    };
    const int64_t T = int64_t(logits.size()) / E;
    for (int k : {1, 3, 8})
        for (bool renorm : {false, true})
            expect_topk_equal(gpu_route(logits, T, E, E, k, renorm), cpu_topk(*cpu, logits, T, E, E, k, renorm), T, k,
                              "specials k=" + std::to_string(k));
}

// The backend's default routing (exact = false, renormalised): picks ranked on the logits, weights
// from the picks' f32 exponentials. Random logits never tie after rounding, so the ids are the CPU's
// exactly and the weights agree to f32 rounding; exact ties go to the lower index; -inf experts
// weigh 0; a row of -inf is NaN as on the CPU.
TEST(FastMoe, RouteOnLogitsMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 1200;
    for (int E : {8, 33, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;
            for (int64_t T : {1, 2, 17, 64})
                for (bool shared : {false, true}) {
                    const int64_t ldl = E + shared + (T % 2 ? 0 : 3);
                    std::vector<float> logits = reftest::random_rows(T, E + shared, ldl, seed++, -6.f, 6.f);
                    const std::string what = "logits E=" + std::to_string(E) + " k=" + std::to_string(k) +
                                             " T=" + std::to_string(T) + (shared ? " shared" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, true, shared, false),
                                      cpu_topk(*cpu, logits, T, E, ldl, k, true, shared), T, k + shared, what, 2e-6f);
                    if (HasFailure()) return;
                }
        }
    std::mt19937 rng(6);
    for (int E : {8, 256})
        for (int k : {1, 8}) {
            const int64_t T = 33;
            std::vector<float> logits(size_t(T * E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = 1.f;  // token 0: every expert ties
            expect_topk_equal(gpu_route(logits, T, E, E, k, true, false, false), cpu_topk(*cpu, logits, T, E, E, k, true),
                              T, k, "logits, ties E=" + std::to_string(E) + " k=" + std::to_string(k), 2e-6f);
        }
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> specials = {
        0.f,  1.f,  -inf, 2.f,  -inf, 0.5f, 2.f,  -1.f,  // -inf experts weigh 0
        -inf, -inf, -inf, 3.f,  -inf, -inf, -inf, -inf,  // one finite logit: weight 1
        -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,  // all -inf: NaN everywhere (as the CPU)
    };
    for (int k : {1, 3, 8})
        expect_topk_equal(gpu_route(specials, 3, 8, 8, k, true, false, false), cpu_topk(*cpu, specials, 3, 8, 8, k, true),
                          3, k, "logits, specials k=" + std::to_string(k), 2e-6f);
}

TEST(FastMoe, GroupingMatchesHostModel) {
    REQUIRE_CUDA();
    uint32_t seed = 40;
    struct G {
        int64_t T;
        int E, k;
        std::vector<int32_t> pool;  // empty: every expert
        const char* name;
    };
    const G cases[] = {
        {1, 8, 1, {}, "1 token"},        {1, 256, 8, {}, "1 token top-8 of 256"},
        {3, 128, 8, {}, "3 tokens"},     {17, 8, 2, {}, "17 tokens"},
        {64, 512, 16, {}, "64 tokens, E = 512, k = 16"},
        {64, 8, 1, {3}, "one expert takes every token"},
        {513, 8, 2, {1, 6}, "513 tokens, two experts"},
        {2048, 256, 8, {}, "2048 tokens top-8 of 256"},
        // Past kMoeGroupOneBlock pairs: the counting and placing kernels over chunks of 1,024
        {257, 256, 8, {}, "257 tokens: 3 chunks, the last of 8 pairs"},
        {1000, 128, 8, {}, "1000 tokens: 8 chunks, the last short"},
        {3000, 8, 2, {3}, "3000 tokens, one expert takes every pair"},
        {4097, 512, 16, {}, "4097 tokens, E = 512, k = 16: 65 chunks"},
    };
    for (const G& c : cases)
        for (int tile : {1, 3, 8, 64}) {
            const std::string what = std::string(c.name) + " tile " + std::to_string(tile);
            SCOPED_TRACE(what);
            Routing r = random_routing(c.T, c.E, c.k, seed++, c.pool);
            if (c.T >= 3) r.ids[1] = c.E;  // out of range: left out of every expert
            const int64_t P = c.T * c.k, MI = fast::moe_max_items(c.T, c.k, c.E, tile);
            const HostGrouping want = host_group(r.ids, c.T, c.k, c.E, tile);
            ASSERT_LE(int64_t(want.item_expert.size()), MI);
            const DeviceBuffer d_ids = to_device(r.ids);
            DeviceBuffer scratch(fast::moe_group_scratch_bytes(c.T, c.k, c.E, tile));
            Stream stream;
            const fast::MoeGrouping g =
                fast::moe_group(d_ids.as<int32_t>(), c.T, c.k, c.E, tile, scratch.data(), stream);
            stream.synchronize();
            auto get = [&](const int32_t* p, size_t n) {
                std::vector<int32_t> v(n);
                if (n) TS_CUDA_CHECK(cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDeviceToHost));
                return v;
            };
            const int32_t n_items = get(g.n_items, 1)[0];
            EXPECT_EQ(g.max_items, MI);
            EXPECT_EQ(n_items, int32_t(want.item_expert.size()));
            EXPECT_EQ(get(g.offsets, size_t(c.E) + 1), want.offsets);
            EXPECT_EQ(get(g.perm, size_t(P)), want.perm);
            EXPECT_EQ(get(g.row_of_slot, size_t(P)), want.row_of_slot);
            const size_t n = size_t(std::max(0, n_items));
            EXPECT_EQ(get(g.item_expert, n), want.item_expert);
            EXPECT_EQ(get(g.item_row0, n), want.item_row0);
            EXPECT_EQ(get(g.item_rows, n), want.item_rows);
            if (HasFailure()) return;
        }
}

TEST(FastMoe, RouterThenExpertsOnTheDevice) {
    // logits → moe_route → moe_experts_packed with no host round trip, twice: identical bits; the
    // router agrees with the CPU's and the experts with the double reference on those ids.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t T = 17;
    const int E = 128, k = 8;
    Experts ex(E, 192, 96, DType::Q4_0, 9);
    std::vector<float> logits = normal_floats(size_t(T * E), 10, 3.f);
    for (int e = 0; e < 8; ++e) logits[size_t(5 * E + 40 + e)] = 50.f;  // token 5: eight-way tie at the top
    const std::vector<float> x = normal_floats(size_t(T * ex.H), 11);
    const DeviceBuffer d_logits = to_device(logits), d_x = to_device(x);
    DeviceBuffer d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4), d_y(size_t(T * ex.H) * 4),
        d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
    Stream stream;
    std::vector<uint32_t> runs[2];
    for (auto& run : runs) {
        fast::moe_route(d_logits.as<float>(), E, T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(), stream);
        fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), d_ids.as<int32_t>(),
                                 d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        run = to_host<uint32_t>(d_y, size_t(T * ex.H));
    }
    EXPECT_EQ(runs[0], runs[1]) << "two runs differ";
    const TopkResult want = cpu_topk(*cpu, logits, T, E, E, k, true);
    const TopkResult got{to_host<int32_t>(d_ids, size_t(T * k)), to_host<float>(d_w, size_t(T * k))};
    expect_topk_equal(got, want, T, k, "router");
    for (int j = 0; j < k; ++j) EXPECT_EQ(got.ids[size_t(5 * k + j)], 40 + j);
    std::vector<float> y(size_t(T * ex.H));
    std::memcpy(y.data(), runs[0].data(), y.size() * 4);
    const Reference ref = reference(ex, x, ex.H, T, Routing{got.ids, got.weights}, k);
    const fast::MoePlan pick = fast::moe_pick(T, k, E);
    expect_near_reference(y, ex.H, ref, T, ex.H,
                          pick.large_tiles || pick.mma_decode || pick.dp4a_decode ? ref.eps_bf16() : ref.eps_f32);
    // The tensor-core decode kernels on the router's ids (the eight-way tie included).
    fast::moe_experts_packed_plan(kMmaDecodePlans[0], d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                  d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
    stream.synchronize();
    expect_near_reference(to_host<float>(d_y, size_t(T * ex.H)), ex.H, ref, T, ex.H, ref.eps_bf16());
}

namespace {

// The chain as the backend runs a decode step's MoE: x written by a kernel (x0 + 0, after NaN bytes:
// an async copy would not do, a PDL wait orders kernels only), the router on the logits [T, ldl]
// (E experts, k picks, a shared expert's gate at E), then the experts (k + shared slots) told
// x_settled, and with `ahead` to rank the logits themselves (MoeRouteAhead). y's bits, the router's
// ids and weights.
struct RoutedStep {
    std::vector<uint32_t> y;
    std::vector<int32_t> ids;
    std::vector<float> weights;
};
RoutedStep routed_step(const Experts& ex, const std::vector<float>& logits, int64_t ldl, const std::vector<float>& x,
                       int64_t T, int E, int k, bool shared, bool settled, bool ahead) {
    const int slots = k + (shared ? 1 : 0);
    const DeviceBuffer d_logits = to_device(logits), d_x0 = to_device(x),
                       d_zero = to_device(std::vector<float>(size_t(T * ex.H), 0.f));
    DeviceBuffer d_x(size_t(T * ex.H) * 4), d_ids(size_t(T * slots) * 4), d_w(size_t(T * slots) * 4),
        d_y(size_t(T * ex.H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, slots, ex.E, ex.H, ex.I));
    Stream stream;
    TS_CUDA_CHECK(cudaMemsetAsync(d_x.data(), 0xff, size_t(T * ex.H) * 4, stream));  // NaN until written
    ref::add(d_x.as<float>(), ex.H, d_x0.as<float>(), ex.H, d_zero.as<float>(), ex.H, T, ex.H, stream);
    fast::moe_route(d_logits.as<float>(), ldl, T, E, k, true, shared, d_ids.as<int32_t>(), d_w.as<float>(), stream);
    const fast::MoeRouteAhead ra{d_logits.as<float>(), ldl, E, k, shared};
    fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), d_ids.as<int32_t>(),
                             d_w.as<float>(), slots, d_scratch.data(), stream,
                             {.x_settled = settled, .route_ahead = ahead ? &ra : nullptr});
    stream.synchronize();
    return {to_host<uint32_t>(d_y, size_t(T * ex.H)), to_host<int32_t>(d_ids, size_t(T * slots)),
            to_host<float>(d_w, size_t(T * slots))};
}

}  // namespace

TEST(FastMoe, SettledXGivesTheSameBits) {
    // The decode kernels told x was complete before the routing (x_settled: quantized before the
    // PDL wait) after moe_route, on a row of x just written by a kernel before the router's own:
    // the same bits as without, the double reference on the router's ids.
    REQUIRE_CUDA();
    const int E = 64, k = 6;
    Experts ex(E, 256, 160, DType::Q4_0, 31);
    for (int64_t T : {1, 2}) {
        SCOPED_TRACE("T " + std::to_string(T));
        const std::vector<float> logits = normal_floats(size_t(T * E), 32 + uint32_t(T), 2.f);
        const std::vector<float> x = normal_floats(size_t(T * ex.H), 34 + uint32_t(T));
        const RoutedStep plain = routed_step(ex, logits, E, x, T, E, k, false, false, false);
        const RoutedStep settled = routed_step(ex, logits, E, x, T, E, k, false, true, false);
        EXPECT_EQ(plain.y, settled.y) << "x_settled changed the result";
        std::vector<float> y(size_t(T * ex.H));
        std::memcpy(y.data(), settled.y.data(), y.size() * 4);
        const Reference ref = reference(ex, x, ex.H, T, Routing{settled.ids, settled.weights}, k);
        expect_near_reference(y, ex.H, ref, T, ex.H, ref.eps_bf16());
    }
}

TEST(FastMoe, RouteAheadGivesTheSameBits) {
    // The decode's gate+up ranking its token's router logits itself (MoeRouteAhead) after moe_route
    // on them: the same bits as on the routing kernel's ids — its picks are that kernel's — on
    // row-major and tiled experts, with a shared expert (slot k: id E), an eight-way tie at the top
    // and a tie at the k-th pick; 1 and 2 tokens. (A NaN logit would make every weight of its
    // token NaN, hiding the picks: the ranking of NaN is the routing kernel's own code, tested there.)
    REQUIRE_CUDA();
    struct Case {
        int E, k;
        bool shared, tiled;
    };
    for (const Case c : {Case{64, 6, false, false}, Case{128, 8, false, true}, Case{255, 8, true, true}}) {
        const int En = c.E + (c.shared ? 1 : 0), slots = c.k + (c.shared ? 1 : 0);
        Experts ex(En, 256, 128, DType::Q4_0, 41 + uint32_t(c.E));
        if (c.tiled) {
            ASSERT_EQ(ex.tile(), 3);
        }
        for (int64_t T : {1, 2}) {
            SCOPED_TRACE("E " + std::to_string(c.E) + " k " + std::to_string(c.k) + (c.shared ? " shared" : "") +
                         (c.tiled ? " tiled" : "") + " T " + std::to_string(T));
            std::vector<float> logits = normal_floats(size_t(T * En), 42 + uint32_t(T), 2.f);
            for (int e = 0; e < 8; ++e) logits[size_t(3 + 5 * e)] = 20.f;  // token 0: eight-way tie at the top
            if (T > 1)  // token 1: k − 1 clear picks, then two equal logits for the k-th
                for (int e = 0; e < c.k + 1; ++e) logits[size_t(En + 10 + e)] = e < c.k - 1 ? 21.f + float(e) : 20.f;
            const std::vector<float> x = normal_floats(size_t(T * ex.H), 44 + uint32_t(T));
            const RoutedStep ids_path = routed_step(ex, logits, En, x, T, c.E, c.k, c.shared, true, false);
            const RoutedStep ahead = routed_step(ex, logits, En, x, T, c.E, c.k, c.shared, true, true);
            EXPECT_EQ(ids_path.y, ahead.y) << "ranking ahead changed the result";
            const std::vector<int32_t>& ids = ahead.ids;
            for (int e = 0; e < c.k; ++e) EXPECT_EQ(ids[size_t(e)], 3 + 5 * e) << "token 0's tie, by index";
            if (c.shared) {
                EXPECT_EQ(ids[size_t(c.k)], c.E) << "the shared expert's slot";
            }
            if (T > 1) {
                EXPECT_EQ(ids[size_t(slots + c.k - 1)], 10 + c.k - 1) << "token 1's k-th pick, by index";
            }
        }
    }
}

TEST(FastMoe, RecordsIntoACudaGraph) {
    // The whole chain (router, grouping, experts) for each tile kind, captured once and replayed:
    // the same bits as eager calls (no host round trip, no allocation, fixed launch shapes). Each
    // T with the pick, then with the tensor-core decode kernels (plain and by pdl), then the mid
    // kernels (grouping, gather, two kernels by pdl, combine). T = 300 (2,400 pairs): the grouping's
    // counting and placing kernels, the second by pdl.
    REQUIRE_CUDA();
    const int E = 128, k = 8;
    Experts ex(E, 192, 96, DType::Q4_0, 21);
    for (int64_t T : {1, 8, 40, 300})
        for (int variant : {0, 1, 2, 3}) {  // the pick, the mma decode kernels, and by pdl; the mid kernels
            if (T > fast::kMoeGroupOneBlock / k && (variant == 1 || variant == 2)) continue;  // decode kernels: few T
            const bool mma = variant > 0;      // a plan of its own
            const fast::MoePlan plan = variant == 3   ? fast::moe_mid_plan()
                                       : variant == 2 ? kMmaDecodePlans[3]
                                       : mma          ? kMmaDecodePlans[0]
                                                      : fast::moe_pick(T, k, E);
            SCOPED_TRACE("T=" + std::to_string(T) + " " + str(plan));
            const std::vector<float> logits = normal_floats(size_t(T * E), 22, 2.f),
                                     x = normal_floats(size_t(T * ex.H), 23);
            const DeviceBuffer d_logits = to_device(logits), d_x = to_device(x);
            DeviceBuffer d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4), d_y(size_t(T * ex.H) * 4),
                d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
            Stream stream;
            auto chain = [&] {
                fast::moe_route(d_logits.as<float>(), E, T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(), stream);
                if (mma)
                    fast::moe_experts_packed_plan(plan, d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                                  d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
                else
                    fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                             d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
            };
            chain();
            stream.synchronize();
            const std::vector<uint32_t> eager = to_host<uint32_t>(d_y, size_t(T * ex.H));
            expect_graph_replays(stream, chain, d_y, size_t(T * ex.H), eager, 2);
            if (HasFailure()) return;
        }
}

// moe_pick's regions at their edges (a pure function: needs no GPU). Rows an expert on average
// avg = T·k / E: T ≤ 2 the decode kernels; T·k < E the v2 tiles of 16 (the backend's mid
// kernels); then the warp-specialised wgmma tiles — 16 rows with two m-tiles below avg 12, 32 with
// two up to 24, 64 with one beyond, taken in turn by resident blocks (persistent: session 45).
TEST(FastMoe, PickRegionsAtTheirEdges) {
    struct Want {
        int64_t T;
        int k, E;
        bool decode, v2;
        int tile, mt;
    };
    const Want wants[] = {
        {1, 8, 256, true, false, 0, 0},    {2, 8, 256, true, false, 0, 0},    {3, 8, 256, false, true, 16, 0},
        {31, 8, 256, false, true, 16, 0},  {32, 8, 256, false, false, 16, 2}, {16, 8, 128, false, false, 16, 2},
        {15, 8, 128, false, true, 16, 0},  {383, 8, 256, false, false, 16, 2}, {384, 8, 256, false, false, 32, 2},
        {192, 8, 128, false, false, 32, 2}, {399, 8, 128, false, false, 32, 2}, {400, 8, 128, false, false, 48, 0},
        {591, 8, 128, false, false, 48, 0}, {592, 8, 128, false, false, 64, 0}, {1152, 8, 256, false, false, 48, 0},
        {1184, 8, 256, false, false, 64, 0}, {2048, 8, 256, false, false, 64, 0}, {3, 1, 2, false, false, 16, 2},
    };
    for (const Want& w : wants) {
        SCOPED_TRACE("T=" + std::to_string(w.T) + " k=" + std::to_string(w.k) + " E=" + std::to_string(w.E));
        const fast::MoePlan p = fast::moe_pick(w.T, w.k, w.E);
        EXPECT_EQ(p.dp4a_decode, w.decode);
        if (w.decode) {
            EXPECT_EQ(p.mma_down_warps, w.T == 1 ? 16 : 8);  // dp4a down blocks: 16 warps at one token, 8 at two
            continue;
        }
        EXPECT_TRUE(p.grouped && p.large_tiles && !p.down_by_token);
        EXPECT_EQ(p.v2, w.v2);
        EXPECT_EQ(p.wgmma, !w.v2);
        EXPECT_EQ(p.wgmma_tma, w.v2 ? 0 : 1);
        EXPECT_EQ(p.tile_rows, w.tile);
        EXPECT_EQ(p.wgmma_mt, w.mt);
        EXPECT_EQ(p.wgmma_persist, !w.v2 && w.tile >= 32 ? 1 : 0);  // tiles of 16 one block a tile
        EXPECT_FALSE(p.wgmma_gather);
    }
}

// The gather's rows a block (a pure function: needs no GPU): one below 16,384 grouped rows, two from
// there (2,048 tokens of top-8).
TEST(FastMoe, GatherRowsPickAtItsEdge) {
    EXPECT_EQ(fast::detail::moe_gather_rows_per_block(0), 1);
    EXPECT_EQ(fast::detail::moe_gather_rows_per_block(512 * 8), 1);
    EXPECT_EQ(fast::detail::moe_gather_rows_per_block(16383), 1);
    EXPECT_EQ(fast::detail::moe_gather_rows_per_block(16384), 2);
    EXPECT_EQ(fast::detail::moe_gather_rows_per_block(2048 * 9), 2);
}

// moe_fused_shape (a pure function: needs no GPU) on the model shapes, by hand: llama.cpp's
// Qwen3-30B (H 2048, I 768, G 32) in clusters of 16 — I / 16 = 48 rows tiles, 3 a block for gate
// and up, H / 16 = 128, 8 a block for down; a gate or up stage one row tile's 16 k-tiles (16 KB of
// codes, 2 KB of scales), 6 of them; down's 6 k-tiles a row, so 2 row tiles a stage, 4 stages; of
// the 10 stages a ring of 5 fits 110 KB beside x's 4,608 bytes, act's 3,072 and 1,728 (staged), the
// warps' gate / up parts (3 × 8 × 2 × 16 floats) and down's k-tile parts (8 × 6 × 16 floats).
// The flagship (I 512): 2 and 8 row tiles, 4 + 2 stages (4 down row tiles a stage), a ring of 5.
// Groups of 64, biases: scales take 1 KB a stage, twice. And what it refuses.
TEST(FastMoe, FusedShapeOnTheModelShapes) {
    auto tiling = [](int G, bool bias_gu, bool bias_d) {
        fast::MoeTiling t;
        t.gate_up = t.down = true;
        t.gate0.group = t.up0.group = t.down0.group = G;
        static const uint16_t dummy[8] = {};
        if (bias_gu) t.gate0.biases = t.up0.biases = dummy;
        if (bias_d) t.down0.biases = dummy;
        return t;
    };
    const fast::MoeFusedShape l = fast::moe_fused_shape(2048, 768, tiling(32, false, false));
    EXPECT_EQ(l.cluster, 16);
    EXPECT_EQ(l.rt_gu, 3);
    EXPECT_EQ(l.rt_d, 8);
    EXPECT_EQ(l.nkt_h, 16);
    EXPECT_EQ(l.nkt_i, 6);
    EXPECT_EQ(l.nk_gu, 16);
    EXPECT_EQ(l.nr_d, 2);
    EXPECT_EQ(l.nk_d, 6);
    EXPECT_EQ(l.stages_gu, 6);
    EXPECT_EQ(l.stages_d, 4);
    EXPECT_EQ(l.stage_bytes, 16384 + 2048);
    EXPECT_EQ(l.ring, 5);
    EXPECT_EQ(l.off_x, 5 * (16384 + 2048));
    EXPECT_EQ(l.off_bar, l.off_x + 4608 + 3072 + 1728 + 3 * 8 * 2 * 16 * 4 + 8 * 6 * 16 * 4);
    EXPECT_EQ(l.warps, 8);
    EXPECT_LE(l.smem, size_t(fast::kMoeFusedSmemBudget));
    // After off_bar: full and empty a ring stage, act_bar (8-byte aligned mbarriers) and the last flag.
    EXPECT_EQ(l.off_bar % 8, 0);
    EXPECT_GE(l.smem, size_t(l.off_bar) + size_t(2 * l.ring + 1) * 8 + 4);
    // Form 2, one block an SM: 8 of the 10 stages in 220 KB. Form 3: the same with 16 warps' parts.
    const fast::MoeFusedShape l1 = fast::moe_fused_shape(2048, 768, tiling(32, false, false), 2);
    EXPECT_EQ(l1.ring, 8);
    EXPECT_EQ(l1.off_x, 8 * (16384 + 2048));
    const fast::MoeFusedShape l3 = fast::moe_fused_shape(2048, 768, tiling(32, false, false), 3);
    EXPECT_EQ(l3.warps, 16);
    EXPECT_EQ(l3.ring, 8);
    EXPECT_EQ(l3.off_part - l3.off_red, 3 * 16 * 2 * 16 * 4);
    EXPECT_EQ(fast::moe_fused_shape(2048, 768, tiling(32, false, false), 4).cluster, 0) << "forms 1, 2 and 3";
    const fast::MoeFusedShape q = fast::moe_fused_shape(2048, 512, tiling(32, false, false));
    EXPECT_EQ(q.cluster, 16);
    EXPECT_EQ(q.rt_gu, 2);
    EXPECT_EQ(q.rt_d, 8);
    EXPECT_EQ(q.nr_d, 4);
    EXPECT_EQ(q.stages_gu, 4);
    EXPECT_EQ(q.stages_d, 2);
    EXPECT_EQ(q.ring, 5);
    const fast::MoeFusedShape b = fast::moe_fused_shape(384, 128, tiling(64, true, true));
    EXPECT_EQ(b.cluster, 8);  // H / 16 = 24
    EXPECT_EQ(b.rt_gu, 1);
    EXPECT_EQ(b.rt_d, 3);
    EXPECT_EQ(b.scale_bytes, 1024);
    EXPECT_EQ(b.stage_bytes, 16384 + 2 * 1024);
    EXPECT_EQ(b.stages_gu, 2);
    EXPECT_EQ(b.nr_d, 3);  // all three down row tiles (1 k-tile each) in one stage
    EXPECT_EQ(b.stages_d, 1);
    EXPECT_EQ(b.ring, 3);
    // H = 4096 (32 k-tiles), I = 2560 (20): gate and up row tiles in two k-ranges of 16, down a row
    // tile's k-ranges of 16 and 4 a stage each.
    const fast::MoeFusedShape w = fast::moe_fused_shape(4096, 2560, tiling(32, false, false));
    EXPECT_EQ(w.cluster, 16);
    EXPECT_EQ(w.rt_gu, 10);
    EXPECT_EQ(w.stages_gu, 10 * 2 * 2);
    EXPECT_EQ(w.nk_d, 16);
    EXPECT_EQ(w.nr_d, 1);
    EXPECT_EQ(w.stages_d, 16 * 2);
    fast::MoeTiling mixed = tiling(32, false, false);
    mixed.down0.group = 64;
    fast::MoeTiling one_bias = tiling(32, false, false);
    static const uint16_t dummy[8] = {};
    one_bias.gate0.biases = dummy;
    fast::MoeTiling untiled = tiling(32, false, false);
    untiled.down = false;
    EXPECT_EQ(fast::moe_fused_shape(2048, 768, mixed).cluster, 0) << "groups differ";
    EXPECT_EQ(fast::moe_fused_shape(2048, 768, one_bias).cluster, 0) << "gate with biases, up without";
    EXPECT_EQ(fast::moe_fused_shape(2048, 768, untiled).cluster, 0) << "down not in stacked tiles";
    EXPECT_EQ(fast::moe_fused_shape(2048 + 32, 768, tiling(32, false, false)).cluster, 0) << "H % 128";
    EXPECT_EQ(fast::moe_fused_shape(2048, 768 + 64, tiling(32, false, false)).cluster, 0) << "I % 128";
    EXPECT_EQ(fast::moe_fused_shape(2048, 1 << 16, tiling(32, false, false)).cluster, 0) << "act past shared memory";
    EXPECT_EQ(fast::moe_fused_counters_bytes(2, 16), size_t(2 * 16 * 4));
}

// The fused decode kernel's index maps (fast_moe_fused_map.h: host and device; needs no GPU)
// against PackedLayout's stacked 16-row tiles: over every block of a slot's cluster and every
// stage, each (matrix, row, 32-column chunk) of the slot's expert is staged exactly once, by the
// block that owns its row, at the place where the lane of the pair that claims it reads it — its
// codes, its scale (bias) group, and x's columns for it; and the stages come in the order the
// consumers sum in (a row tile's gate k-ranges ascending, then its up k-ranges, its last up stage
// ending at the row's last k-tile; down's after all of them).
TEST(FastMoe, FusedStagesReadEveryWeightOnce) {
    struct Shape {
        int64_t H, I;
        int G;
    };
    // The model shapes, and odd ones: down stages cut short (H 2176 / 1152: 17 / 9 row tiles a block
    // of 8 in stages of 5), k-ranges cut short (H 3200: 25 k-tiles in 16 + 9), one k-tile rows (128).
    for (const Shape sh : {Shape{2048, 768, 32}, Shape{2048, 512, 32}, Shape{384, 128, 64}, Shape{384, 128, 128},
                           Shape{4096, 2560, 32}, Shape{256, 512, 32}, Shape{768, 256, 32}, Shape{2176, 384, 32},
                           Shape{1152, 384, 64}, Shape{3200, 1408, 32}, Shape{128, 128, 128}, Shape{640, 2176, 64}}) {
        SCOPED_TRACE("H=" + std::to_string(sh.H) + " I=" + std::to_string(sh.I) + " G=" + std::to_string(sh.G));
        fast::MoeTiling t;
        t.gate_up = t.down = true;
        t.gate0.group = t.up0.group = t.down0.group = sh.G;
        for (int form : {1, 2, 3}) {
            const fast::MoeFusedShape f = fast::moe_fused_shape(sh.H, sh.I, t, form);
            ASSERT_GT(f.cluster, 0);
            const int lg = sh.G == 32 ? 0 : sh.G == 64 ? 1 : 2, gpt = 4 >> lg;
            std::vector<int> seen[3];
            PackedLayout lay[3];
            int64_t chunks[3];
            for (int m = 0; m < 3; ++m) {
                const int64_t K = m < 2 ? sh.H : sh.I, N = m < 2 ? sh.I : sh.H;
                chunks[m] = K / 32;
                seen[m].assign(size_t(N * chunks[m]), 0);
                lay[m] = packed_layout_k32(sh.G, true, int(K));
            }
            for (int rank = 0; rank < f.cluster; ++rank) {
                int last_rt = -1, last_mat = 0, next_k = 0;
                for (int s = 0; s < f.stages_gu + f.stages_d; ++s) {
                    const fast::MoeFusedStage st = fast::moe_fused_stage(f, s);
                    const fast::MoeFusedSource src = fast::moe_fused_source(f, st, int(sh.H), int(sh.I), lg, rank);
                    ASSERT_EQ(st.mat == 2, s >= f.stages_gu) << "stage " << s;
                    ASSERT_GE(st.nr, 1);
                    ASSERT_GE(st.nk, 1);
                    ASSERT_LE(st.nr * st.nk * 1024, fast::kMoeFusedStageCodes) << "stage " << s;
                    ASSERT_LE(int(src.scale_halves) * 2, f.scale_bytes) << "stage " << s;
                    ASSERT_EQ(src.code_bytes, uint32_t(st.nr * st.nk * 1024));
                    if (st.mat < 2) {  // the consumers' order: gate's k-ranges, then up's, row tile by row tile
                        if (st.r0 != last_rt || st.mat != last_mat) {
                            ASSERT_TRUE(st.r0 == last_rt ? st.mat == 1 && last_mat == 0 && next_k == f.nkt_h
                                                         : st.r0 == last_rt + 1 && st.mat == 0 &&
                                                               (last_rt < 0 || (last_mat == 1 && next_k == f.nkt_h)))
                                << "stage " << s;
                            next_k = 0;
                        }
                        ASSERT_EQ(st.k0, next_k) << "stage " << s;
                        next_k = st.k0 + st.nk;
                        last_rt = st.r0, last_mat = st.mat;
                    }
                    const int m = st.mat;
                    for (int p = 0; p < st.nr * st.nk; ++p) {
                        int rt = 0, kt = 0;
                        fast::moe_fused_pair(st, p, rt, kt);
                        ASSERT_LT(rt, m < 2 ? f.rt_gu : f.rt_d);
                        const int64_t R = int64_t(rank) * (m < 2 ? f.rt_gu : f.rt_d) + rt;
                        for (int lane = 0; lane < 32; ++lane) {
                            const fast::MoeFusedLane ln = fast::moe_fused_lane(lane, lg);
                            for (int half = 0; half < 2; ++half) {
                                const int64_t row = R * 16 + (lane >> 2) + 8 * half, ch = 4 * int64_t(kt) + (lane & 3);
                                ASSERT_EQ(src.code + p * 1024 + ln.code + 512 * half, lay[m].code_row(row) + lay[m].chunk(ch))
                                    << "codes: matrix " << m << " stage " << s << " pair " << p << " lane " << lane;
                                ASSERT_EQ(src.scale + p * 16 * gpt + (half ? ln.scale1 : ln.scale0),
                                          lay[m].scale_row(row) + lay[m].scale_group(ch * 32 / sh.G))
                                    << "scales: matrix " << m << " stage " << s << " pair " << p << " lane " << lane;
                                ASSERT_EQ(kt * 128 + ln.xcol, ch * 32) << "x's columns";
                                ++seen[m][size_t(row * chunks[m] + ch)];
                            }
                        }
                    }
                }
            }
            for (int m = 0; m < 3; ++m)
                for (size_t i = 0; i < seen[m].size(); ++i)
                    ASSERT_EQ(seen[m][i], 1) << "matrix " << m << " row " << i / size_t(chunks[m]) << " chunk "
                                             << i % size_t(chunks[m]) << " staged " << seen[m][i] << " times";
        }
    }
}

TEST(FastMoe, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float* f = nullptr;
    int32_t* ids = nullptr;
    EXPECT_NO_THROW(fast::moe_route(f, 8, 0, 8, 2, true, false, ids, f, nullptr));  // no tokens
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 9, true, false, ids, f, nullptr), Error);            // k > E
    EXPECT_THROW(fast::moe_route(f, 64, 1, 64, 17, true, false, ids, f, nullptr), Error);         // k > 16
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 0, true, false, ids, f, nullptr), Error);            // k = 0
    EXPECT_THROW(fast::moe_route(f, 513, 1, 513, 2, true, false, ids, f, nullptr), Error);        // E > 512
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 2, true, false, ids, f, nullptr), Error);            // null
    float* p = reinterpret_cast<float*>(uintptr_t(4096));
    EXPECT_THROW(fast::moe_route(p, 7, 2, 8, 2, true, false, ids, f, nullptr), Error);            // ldl < E
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 0, p, nullptr), Error);                     // tile 0
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 8, p + 1, nullptr), Error);                 // misaligned scratch

    const PackedMatrix* d = reinterpret_cast<const PackedMatrix*>(p);
    const fast::MoePackedExperts w{8, 64, 32, d, d, d, {}};
    auto run = [&](const fast::MoePlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                   fast::MoePackedExperts ww, int k, void* scratch) {
        fast::moe_experts_packed_plan(plan, y, ldy, x, ldx, T, ww, reinterpret_cast<int32_t*>(p), p, k, scratch,
                                      nullptr);
    };
    float* y = p + 4096;  // disjoint from x = p
    EXPECT_NO_THROW(run({}, y, 64, p, 64, 0, w, 2, p));                                  // no tokens
    EXPECT_THROW(run({false, false, 8}, y, 64, p, 64, 2, w, 2, p), Error);               // by item needs grouping
    EXPECT_THROW(run({true, true, 9}, y, 64, p, 64, 2, w, 2, p), Error);                 // tile > 8
    EXPECT_THROW(run({true, false, 16, true}, y, 64, p, 64, 2, w, 2, p), Error);         // large tile of 16
    EXPECT_THROW(run({true, true, 32, true}, y, 64, p, 64, 2, w, 2, p), Error);          // large, by token
    EXPECT_THROW(run({true, true, 8, false, true}, y, 64, p, 64, 2, w, 2, p), Error);    // v2 small, grouped
    EXPECT_THROW(run({true, false, 8, true, true}, y, 64, p, 64, 2, w, 2, p), Error);    // v2 large tile 8
    EXPECT_THROW(run({true, true, 8, false, false, true}, y, 64, p, 64, 2, w, 2, p), Error);   // mma decode, grouped
    EXPECT_THROW(run({false, true, 8, false, true, true}, y, 64, p, 64, 2, w, 2, p), Error);   // mma decode and v2
    EXPECT_THROW(run({false, true, 8, false, false, true, 3}, y, 64, p, 64, 2, w, 2, p), Error);  // batch 3
    EXPECT_THROW(run({false, true, 8, false, false, true, 0, false, 3}, y, 64, p, 64, 2, w, 2, p), Error);
    EXPECT_THROW(run({false, true, 8, false, false, true, 0, false, 0, 12}, y, 64, p, 64, 2, w, 2, p), Error);
    for (const fast::MoePlan& base : {fast::MoePlan{true, false, 8, true}, fast::MoePlan{true, false, 256, true},
                                     fast::MoePlan{true, false, 32, false}, fast::MoePlan{true, false, 32, true, true}}) {
        fast::MoePlan bad = base;  // wgmma with tiles of 8 or 256, not large, or with v2
        bad.wgmma = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
    }
    {  // wgmma_tma: a form of the wgmma tiles of 16, 32, 48, 64 or 128 rows (128 without clusters) only;
       // two m-tiles up to 64 rows, without clusters
        fast::MoePlan bad{true, false, 32, true};
        bad.wgmma_tma = 1;  // without wgmma
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad.wgmma = true;
        bad.wgmma_tma = 3;  // clusters of 1 or 2 only
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad.wgmma_tma = 2;
        bad.tile_rows = 128;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad.wgmma_tma = 1;
        bad.wgmma_mt = 2;  // two m-tiles of 128 rows: 128 accumulators a thread
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad.tile_rows = 64;
        bad.wgmma_tma = 2;  // two m-tiles in clusters
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        // Tiles of 48: warp-specialised, one m-tile, without clusters, the gathered A or a fitted N;
        // the plain wgmma tiles have no form of 48.
        fast::MoePlan t48{true, false, 48, true};
        t48.wgmma = true;
        EXPECT_THROW(run(t48, y, 64, p, 64, 2, w, 2, p), Error);  // plain
        t48.wgmma_tma = 2;
        EXPECT_THROW(run(t48, y, 64, p, 64, 2, w, 2, p), Error);  // clusters
        t48.wgmma_tma = 1;
        for (int what = 0; what < 3; ++what) {
            fast::MoePlan b = t48;
            if (what == 0) b.wgmma_mt = 2;
            if (what == 1) b.wgmma_gather = true;
            if (what == 2) b.wgmma_fit = true;
            EXPECT_THROW(run(b, y, 64, p, 64, 2, w, 2, p), Error) << "tiles of 48, case " << what;
        }
        fast::MoePlan mid = fast::moe_mid_plan();
        mid.wgmma_tma = 1;
        EXPECT_THROW(run(mid, y, 64, p, 64, 2, w, 2, p), Error);
        // The plan check itself refuses these (its message names the field — not a launch that
        // fails on this test's fake pointers).
        auto refused = [&](const fast::MoePlan& plan, const char* field) {
            try {
                run(plan, y, 64, p, 64, 2, w, 2, p);
                ADD_FAILURE() << "accepted a plan with a bad " << field;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
            }
        };
        // persistent: the warp-specialised tiles without clusters or the gathered A, a count ≥ 0
        fast::MoePlan per{true, false, 32, true};
        per.wgmma = true;
        per.wgmma_persist = 1;  // without wgmma_tma
        refused(per, "wgmma_persist");
        per.wgmma_tma = 2;  // in clusters
        refused(per, "wgmma_persist");
        per.wgmma_tma = 1;
        per.wgmma_gather = true;
        refused(per, "wgmma_persist");
        per.wgmma_gather = false;
        per.wgmma_persist = -1;
        refused(per, "wgmma_persist");
        // fitted N: the warp-specialised tiles of up to 64 rows without clusters, the gathered A or
        // persistence
        fast::MoePlan fit{true, false, 128, true};
        fit.wgmma = true;
        fit.wgmma_tma = 1;
        fit.wgmma_fit = true;  // tiles of 128
        refused(fit, "wgmma_fit");
        fit.tile_rows = 64;
        fit.wgmma_tma = 2;  // in clusters
        refused(fit, "wgmma_fit");
        fit.wgmma_tma = 0;  // not warp-specialised
        refused(fit, "wgmma_fit");
        fit.wgmma_tma = 1;
        fit.wgmma_gather = true;
        refused(fit, "wgmma_fit");
        fit.wgmma_gather = false;
        fit.wgmma_persist = 1;  // persistent too (not built: ptxas serializes its wgmma)
        refused(fit, "wgmma_fit");
        // four consumer warpgroups (2 or 4) and N in steps of 8: forms of the warp-specialised tiles of
        // 32 to 64 rows in one m-tile, neither clustered, gathered nor fitted
        auto refused_forms = [&](const fast::MoePlan& good, const char* field) {
            for (int what = 0; what < 6; ++what) {
                fast::MoePlan b = good;
                if (what == 0) b.tile_rows = 16;
                if (what == 1) b.tile_rows = 128;
                if (what == 2) b.wgmma_tma = 2;
                if (what == 3) b.wgmma_mt = 2;
                if (what == 4) b.wgmma_gather = true;
                if (what == 5) b.wgmma_fit = true;
                refused(b, field);
            }
        };
        fast::MoePlan wg{true, false, 64, true};
        wg.wgmma = true;
        wg.wgmma_tma = 1;
        wg.wgmma_warpgroups = 3;
        refused(wg, "wgmma_warpgroups");
        fast::MoePlan f8 = wg;
        wg.wgmma_warpgroups = 4;  // (taken where the tiles take them — the bits test runs them)
        refused_forms(wg, "wgmma_warpgroups");
        f8.wgmma_warpgroups = 2, f8.wgmma_fit8 = true;
        refused_forms(f8, "wgmma_fit8");
    }
    {  // the mid plan: grouped, by item, tile_rows 8, no other kernels, ring 0, 3 or 4, row tiles a warp
        const fast::MoePlan mid = fast::moe_mid_plan();
        fast::MoePlan bad = mid;
        bad.tile_rows = 16;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.down_by_token = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.grouped = false;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.v2 = bad.large_tiles = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.dp4a_decode = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.mid_ring = 2;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.mid_down_tiles = 3;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.mid_gate_up_tiles = 3;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        try {  // H = 8192: x's 8 rows staged would take 130 KB of shared memory
            run(mid, p + 65536, 8192, p, 8192, 2, {8, 8192, 32, d, d, d, {}}, 2, p);
            ADD_FAILURE() << "H = 8192 accepted by the mid kernels";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find("shared memory"), std::string::npos) << err.what();
        }
    }
    {  // wgmma_combine: a form of the warp-specialised tiles, with ticket words
        auto refused = [&](const fast::MoePlan& plan, const fast::MoePackedExperts& ww, const char* what) {
            try {
                run(plan, y, 64, p, 64, 2, ww, 2, p);
                ADD_FAILURE() << "accepted wgmma_combine " << what;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("wgmma_combine"), std::string::npos) << what << ": " << e.what();
            }
        };
        fast::MoePlan plan{true, false, 32, true};
        plan.wgmma = true;
        plan.wgmma_combine = true;
        fast::MoePackedExperts with = w;
        with.combine_counters = reinterpret_cast<unsigned*>(p + 65536);
        refused(plan, with, "without wgmma_tma");
        plan.wgmma_tma = 1;
        refused(plan, w, "without ticket words");
    }
    {  // wgmma_l2_first: 0 … 3, and 2 (A's boxes evicted last) not in clusters
        auto refused = [&](int l2, int tma, const char* what) {
            fast::MoePlan plan{true, false, 32, true};
            plan.wgmma = true;
            plan.wgmma_tma = tma;
            plan.wgmma_l2_first = l2;
            try {
                run(plan, y, 64, p, 64, 2, w, 2, p);
                ADD_FAILURE() << "accepted wgmma_l2_first " << what;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("wgmma_l2_first"), std::string::npos) << what << ": " << e.what();
            }
        };
        refused(-1, 1, "-1");
        refused(4, 1, "4");
        refused(2, 2, "2 in clusters");
    }
    {  // wgmma_out16: the warp-specialised tiles, without their own slot sum (which reads f32 rows)
        auto refused = [&](int tma, bool combine, const char* what) {
            fast::MoePlan plan{true, false, 32, true};
            plan.wgmma = true;
            plan.wgmma_tma = tma;
            plan.wgmma_combine = combine;
            plan.wgmma_out16 = true;
            fast::MoePackedExperts with = w;
            with.combine_counters = reinterpret_cast<unsigned*>(p + 65536);
            try {
                run(plan, y, 64, p, 64, 2, with, 2, p);
                ADD_FAILURE() << "accepted wgmma_out16 " << what;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("wgmma_out16"), std::string::npos) << what << ": " << e.what();
            }
        };
        refused(0, false, "without wgmma_tma");
        refused(1, true, "with wgmma_combine");
    }
    {  // route_ahead: after the routing kernel on x's logits (x_settled), its picks and experts the slots'
        const float* lg = p + 8192;
        auto ahead = [&](bool settled, const fast::MoeRouteAhead& ra, int k) {
            fast::moe_experts_packed_plan({}, y, 64, p, 64, 1, w, reinterpret_cast<int32_t*>(p), p, k, p, nullptr,
                                          settled, ra);
        };
        auto refused = [&](bool settled, const fast::MoeRouteAhead& ra, int k, const char* what) {
            try {
                ahead(settled, ra, k);
                ADD_FAILURE() << "accepted route_ahead " << what;
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("route_ahead"), std::string::npos) << what << ": " << e.what();
            }
        };
        for (const fast::MoeRouteAhead& fine : {fast::MoeRouteAhead{lg, 8, 8, 2, false}, {lg, 8, 7, 1, true}})
            EXPECT_NO_THROW(fast::moe_experts_packed_plan({}, y, 64, p, 64, 0, w, reinterpret_cast<int32_t*>(p), p, 2,
                                                          p, nullptr, true, fine));  // (no tokens: no launch)
        refused(false, {lg, 8, 8, 2, false}, 2, "without x_settled");
        refused(true, {lg, 8, 8, 3, false}, 2, "of 3 picks for 2 slots");
        refused(true, {lg, 8, 7, 2, false}, 2, "over 7 of 8 experts");
        refused(true, {lg, 8, 7, 2, true}, 2, "with a shared expert past the slots");
        refused(true, {lg, 7, 8, 2, false}, 2, "with a row stride under E");
        refused(true, {lg, 8, 8, 9, false}, 9, "of more picks than experts");
        const fast::MoePackedExperts wide{300, 64, 32, d, d, d, {}};
        try {  // more experts than the ranking holds
            fast::moe_experts_packed_plan({}, y, 64, p, 64, 1, wide, reinterpret_cast<int32_t*>(p), p, 2, p, nullptr,
                                          true, {lg, 300, 300, 2, false});
            ADD_FAILURE() << "accepted route_ahead over 300 experts";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("route_ahead"), std::string::npos) << e.what();
        }
    }
    {  // the fused decode kernel: per slot, no other flags; experts stacked in tiles; counters
        fast::MoePlan fused;
        fused.fused_decode = 1;
        fast::MoePlan bad = fused;
        bad.dp4a_decode = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = fused;
        bad.grouped = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = fused;
        bad.fused_decode = 4;  // forms 1, 2 and 3
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        try {  // w's experts are not stacked tiles (tiling {})
            run(fused, y, 64, p, 64, 2, w, 2, p);
            ADD_FAILURE() << "the fused decode kernel accepted experts that are not stacked tiles";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find("stacked in 16-row tiles"), std::string::npos) << err.what();
        }
        fast::MoePackedExperts tiled{8, 256, 128, d, d, d, {}};
        tiled.tiling.gate_up = tiled.tiling.down = true;
        tiled.tiling.gate0.group = tiled.tiling.up0.group = tiled.tiling.down0.group = 32;
        ASSERT_GT(fast::moe_fused_shape(256, 128, tiled.tiling).cluster, 0);
        try {  // no counters
            run(fused, p + 65536, 256, p, 256, 2, tiled, 2, p);
            ADD_FAILURE() << "the fused decode kernel ran without counters";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find("counters"), std::string::npos) << err.what();
        }
    }
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 129, p, nullptr), Error);  // tile > 128
    EXPECT_THROW(run({}, y, 64, p, 63, 2, w, 2, p), Error);                              // ldx < H
    EXPECT_THROW(run({}, p + 1, 64, p, 64, 2, w, 2, p), Error);                          // y overlaps x
    EXPECT_THROW(run({}, y, 64, p, 64, 2, w, 2, reinterpret_cast<char*>(p) + 4), Error); // misaligned scratch
    EXPECT_THROW(run({}, y, 64, p, 64, 2, {8, 48, 32, d, d, d, {}}, 2, p), Error);       // H not a multiple of 32
    EXPECT_THROW(run({}, y, 64, p, 64, 2, {8, 64, 32, nullptr, d, d, {}}, 2, p), Error); // null descriptors

    // Host descriptors: shape, kind, group, alignment.
    PackedMatrix g;
    g.n = 32;
    g.k = 64;
    g.codes = reinterpret_cast<const uint8_t*>(p);
    g.scales = reinterpret_cast<const uint16_t*>(p);
    PackedMatrix dn = g;
    dn.n = 64;
    dn.k = 32;
    EXPECT_NO_THROW(fast::moe_check_experts(&g, &g, &dn, 1, 64, 32));
    EXPECT_THROW(fast::moe_check_experts(&g, &g, &g, 1, 64, 32), Error);  // down [32, 64], not [64, 32]
    PackedMatrix bad = g;
    bad.kind = PackedKind::Int8;
    EXPECT_THROW(fast::moe_check_experts(&bad, &g, &dn, 1, 64, 32), Error);
    bad = g;
    bad.group = 48;
    EXPECT_THROW(fast::moe_check_experts(&g, &bad, &dn, 1, 64, 32), Error);
    bad = g;
    bad.codes += 8;
    EXPECT_THROW(fast::moe_check_experts(&g, &bad, &dn, 1, 64, 32), Error);
    bad = g;
    bad.tiles = true;  // k = 64: no whole 128-column k-tiles
    EXPECT_THROW(fast::moe_check_experts(&bad, &g, &dn, 1, 64, 32), Error);
    PackedMatrix gt = g, dt = dn;  // gate and up [32, 128] in tiles, down [128, 32] row-major: fine
    gt.k = 128;
    gt.tiles = true;
    dt.n = 128;
    EXPECT_NO_THROW(fast::moe_check_experts(&gt, &gt, &dt, 1, 128, 32));
    {  // what the whole-tile copies may read: gate and up tiled here, down not; scales 16-byte aligned
        const fast::MoeTiling t = fast::moe_check_experts(&gt, &gt, &dt, 1, 128, 32);
        EXPECT_TRUE(t.gate_up);
        EXPECT_FALSE(t.down);
        PackedMatrix up = gt;
        up.scales += 1;  // 2 bytes off
        EXPECT_FALSE(fast::moe_check_experts(&gt, &up, &dt, 1, 128, 32).gate_up);
        up = gt;
        up.biases = up.scales + 4;  // 8 bytes off
        EXPECT_FALSE(fast::moe_check_experts(&gt, &up, &dt, 1, 128, 32).gate_up);
        up = gt;
        up.tiles = false;  // up row-major
        EXPECT_FALSE(fast::moe_check_experts(&gt, &up, &dt, 1, 128, 32).gate_up);
        // Two experts: one stack a matrix (expert 1 right after expert 0), else not (the maps
        // describe the stack from expert 0's descriptor)
        PackedMatrix g2[2] = {gt, gt}, d2[2] = {dt, dt};
        g2[1].codes += 32 * 128 / 2;
        g2[1].scales += 32 * 128 / 32;
        d2[1].codes += 128 * 32 / 2;
        d2[1].scales += 128 * 32 / 32;
        const fast::MoeTiling t2 = fast::moe_check_experts(g2, g2, d2, 2, 128, 32);
        EXPECT_TRUE(t2.gate_up);
        EXPECT_EQ(t2.gate0.codes, gt.codes);
        g2[1].codes += 16;  // a gap between the experts
        EXPECT_FALSE(fast::moe_check_experts(g2, g2, d2, 2, 128, 32).gate_up);
        g2[1].codes -= 16;
        g2[1].group = 64;  // another group size
        EXPECT_FALSE(fast::moe_check_experts(g2, g2, d2, 2, 128, 32).gate_up);
    }
    PackedMatrix g96 = g, d96 = dn;  // [32, 192] of group 96: a multiple of 32 dividing k, but not 32·2^j
    g96.k = 192;
    g96.group = 96;
    d96.n = 192;
    EXPECT_THROW(fast::moe_check_experts(&g96, &g96, &d96, 1, 192, 32), Error);
}

// The backend's TESSERA_MOE_WARPGROUPS=auto (MoeSwitches::warpgroups = 0): four consumer warpgroups
// in gate+up's tiles of 48 rows, and of 64 from 2,048 tokens, where they were measured ahead
// (sessions 60, 61), two elsewhere; 4 asks for them wherever the tiles take them; 2 never. And
// MoeSwitches::fit8 wherever the tiles take it, MoeSwitches::dynamic where they are persistent with it,
// MoeSwitches::fused_tiles where they are drawn with out in bf16 (and fused_warp with it only).
// Host only: moe_plan reads no device memory.
TEST(FastMoe, PlanTakesFourWarpgroupsWhereTheyPay) {
    fast::MoePackedExperts w{128, 2048, 768, nullptr, nullptr, nullptr, {}};
    w.tiling.gate_up = w.tiling.down = true;
    auto warpgroups = [&](int64_t T, int asked) {
        fast::MoeSwitches sw;
        sw.warpgroups = asked;
        return fast::moe_plan(T, 8, w, sw).wgmma_warpgroups;
    };
    // llama.cpp's shape at 512 tokens: persistent tiles of 48 (the figure's case)
    const fast::MoePlan at512 = fast::moe_plan(512, 8, w, {});
    ASSERT_EQ(at512.tile_rows, 48);
    ASSERT_TRUE(fast::moe_tiles_take_wide_forms(at512));
    EXPECT_EQ(warpgroups(512, 0), 4);
    EXPECT_EQ(warpgroups(512, 2), 2);
    EXPECT_EQ(at512.wgmma_warpgroups, 2);  // the kernel API's default: moe_pick's plan as it is
    int wide = 0, at48 = 0, at64 = 0, fits8 = 0, dynamic = 0, fused = 0;
    for (int64_t T = 1; T <= 8192; T += T < 64 ? 1 : T / 8) {
        fast::MoeSwitches sw;
        sw.warpgroups = 2;
        const fast::MoePlan p = fast::moe_plan(T, 8, w, sw);
        const bool takes = fast::moe_tiles_take_wide_forms(p);
        wide += takes;
        at48 += takes && p.tile_rows == 48;
        at64 += takes && p.tile_rows == 64 && T >= 2048;
        EXPECT_EQ(p.wgmma_warpgroups, 2) << "T " << T;
        EXPECT_EQ(warpgroups(T, 4), takes ? 4 : 2) << "T " << T;
        const bool pays = p.tile_rows == 48 || (p.tile_rows == 64 && T >= 2048);
        EXPECT_EQ(warpgroups(T, 0), takes && pays ? 4 : 2) << "T " << T << " tiles " << p.tile_rows;
        // wgmma's N in steps of 8 (the backend's TESSERA_MOE_FIT8=on): wherever the tiles take it
        EXPECT_FALSE(p.wgmma_fit8) << "T " << T;
        sw.fit8 = true;
        EXPECT_EQ(fast::moe_plan(T, 8, w, sw).wgmma_fit8, fast::moe_tiles_take_fit8(p)) << "T " << T;
        fits8 += fast::moe_tiles_take_fit8(p) && !takes;
        // the persistent tiles drawn in turn (TESSERA_MOE_DYNAMIC=on): with N in steps of 8, never without
        sw.dynamic = true;
        const fast::MoePlan drawn = fast::moe_plan(T, 8, w, sw);
        EXPECT_EQ(drawn.wgmma_dynamic, takes && p.wgmma_persist > 0) << "T " << T;
        dynamic += drawn.wgmma_dynamic;
        // gate+up's and down's drawn tiles in one launch (TESSERA_MOE_FUSED_TILES=on): where the tiles are
        // drawn and out is in bf16 (gate+up then in four warpgroups), never with out in f32
        sw.fused_tiles = true;
        EXPECT_FALSE(fast::moe_plan(T, 8, w, sw).wgmma_fused) << "T " << T << ": fused with out in f32";
        sw.out16 = true;
        const fast::MoePlan one = fast::moe_plan(T, 8, w, sw);
        EXPECT_EQ(one.wgmma_fused, drawn.wgmma_dynamic) << "T " << T;
        if (one.wgmma_fused) {
            EXPECT_EQ(one.wgmma_warpgroups, 4) << "T " << T;
        }
        EXPECT_FALSE(one.wgmma_fused_warp) << "T " << T << ": counted by a producer warp unasked";
        fused += one.wgmma_fused;
        sw.fused_warp = true;  // (TESSERA_MOE_FUSED_TILES=warp): that form of the same launch, and no other
        const fast::MoePlan counted = fast::moe_plan(T, 8, w, sw);
        EXPECT_EQ(counted.wgmma_fused_warp, one.wgmma_fused) << "T " << T;
        EXPECT_EQ(counted.wgmma_fused, one.wgmma_fused) << "T " << T;
        sw.fused_tiles = false;
        EXPECT_FALSE(fast::moe_plan(T, 8, w, sw).wgmma_fused_warp) << "T " << T << ": the warp's form, not fused";
        sw.out16 = sw.fused_warp = false;
        sw.fit8 = false;
        EXPECT_FALSE(fast::moe_plan(T, 8, w, sw).wgmma_dynamic) << "T " << T << ": drawn without fit8";
    }
    EXPECT_GT(at48, 0);
    EXPECT_GT(at64, 0);
    EXPECT_GT(wide, at48 + at64);  // tiles of 32 or 64 (below 2,048 tokens) too, where auto keeps two
    EXPECT_GT(fits8, 0);    // two m-tiles of 32 take N in steps of 8 too
    EXPECT_GT(dynamic, 0);
    EXPECT_EQ(fused, dynamic);
    // The flagship's shape at 512 tokens: two m-tiles of 32 — not a form that takes four
    w = {256, 2048, 512, nullptr, nullptr, nullptr, {}};
    w.tiling.gate_up = w.tiling.down = true;
    EXPECT_EQ(warpgroups(512, 0), 2);
}
