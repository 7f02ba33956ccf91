// The reference MoE (router top-k and the SwiGLU experts) against the CPU backend: ids exactly
// equal (ties to the lower index), weights to a few ulps, expert outputs within a stated bound of
// a double-precision reference (and the CPU within the same bound). Shapes: 1 token to 513,
// E = 8 and 256, k = 1, 2, 8, experts with no tokens, one expert taking every token, H and I off
// the warp width, strided x and y rows. Without a GPU (CI) every test that needs one skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ref_moe.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;


namespace {

using reftest::normal_floats;

// A cudaMemcpy from pageable memory may return before its DMA lands, and the tests' streams do
// not wait for the legacy default stream: wait for the device before using the copy.
template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
    DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), b.size());
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    return b;
}

template <typename T>
std::vector<T> to_host(const DeviceBuffer& b, size_t n) {
    std::vector<T> v(n);
    b.download(v.data(), n * sizeof(T));
    return v;
}

// ---- router ----

struct TopkResult {
    std::vector<int32_t> ids;
    std::vector<float> weights;
};

// With `shared`, logits are [T, E + 1] (the shared expert's gate last), ids / weights [T, k + 1].
TopkResult cpu_topk(Backend& cpu, std::vector<float>& logits, int64_t T, int64_t E, int k, bool renorm,
                    bool shared = false) {
    const int64_t S = k + shared;
    TopkResult r{std::vector<int32_t>(size_t(T * S)), std::vector<float>(size_t(T * S))};
    cpu.moe_topk(Tensor(logits.data(), DType::F32, {T, E + shared}), {k, renorm, shared}, r.ids.data(),
                 r.weights.data());
    return r;
}

TopkResult gpu_topk(const std::vector<float>& logits, int64_t T, int64_t E, int k, bool renorm, bool shared = false) {
    const int64_t S = k + shared;
    const DeviceBuffer d_l = to_device(logits);
    DeviceBuffer d_ids(size_t(T * S) * 4), d_w(size_t(T * S) * 4);
    Stream stream;
    ref::moe_topk(d_l.as<float>(), T, E, k, renorm, shared, d_ids.as<int32_t>(), d_w.as<float>(), stream);
    stream.synchronize();
    return {to_host<int32_t>(d_ids, size_t(T * S)), to_host<float>(d_w, size_t(T * S))};
}

// ids exactly; weights within 1e-6 (a few ulps of values <= 1: the softmax's exp may differ by
// an ulp between the C library and the device, and renormalisation divides by a k-term sum).
void expect_topk_equal(const TopkResult& got, const TopkResult& want, int64_t T, int k, const std::string& what) {
    SCOPED_TRACE(what);
    int bad = 0;
    for (int64_t i = 0; i < T * k; ++i) {
        const float g = got.weights[size_t(i)], w = want.weights[size_t(i)];
        const bool ok = got.ids[size_t(i)] == want.ids[size_t(i)] &&
                        (std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= 1e-6f);
        if (!ok && ++bad <= 5)
            ADD_FAILURE() << "[" << i / k << ", " << i % k << "]: got expert " << got.ids[size_t(i)] << " weight " << g
                          << ", want expert " << want.ids[size_t(i)] << " weight " << w;
    }
    EXPECT_EQ(bad, 0);
}

// ---- experts ----

// Stacked expert weights of one element type W (bf16 bits or f32), on the host and the device:
// gate, up [E, I, H], down [E, H, I]; `value` holds what each element means in f32.
template <typename W>
struct Experts {
    int E = 0;
    int64_t H = 0, I = 0;
    std::vector<W> gate, up, down;
    std::vector<float> gate_f, up_f, down_f;
    DeviceBuffer d_gate, d_up, d_down;        // the weights
    DeviceBuffer d_pgate, d_pup, d_pdown;     // [E] device pointers to each expert's matrix

    Experts(int E_, int64_t H_, int64_t I_, uint32_t seed) : E(E_), H(H_), I(I_) {
        make(gate, gate_f, size_t(E) * I * H, seed, 1.f / std::sqrt(float(H)));
        make(up, up_f, size_t(E) * I * H, seed + 1, 1.f / std::sqrt(float(H)));
        make(down, down_f, size_t(E) * H * I, seed + 2, 1.f / std::sqrt(float(I)));
        d_gate = to_device(gate);
        d_up = to_device(up);
        d_down = to_device(down);
        d_pgate = pointers(d_gate, I * H);
        d_pup = pointers(d_up, I * H);
        d_pdown = pointers(d_down, H * I);
    }
    const W* const* pgate() const { return d_pgate.as<const W*>(); }
    const W* const* pup() const { return d_pup.as<const W*>(); }
    const W* const* pdown() const { return d_pdown.as<const W*>(); }

    MoeWeights cpu_view() {
        const DType dt = std::is_same_v<W, float> ? DType::F32 : DType::BF16;
        MoeWeights w;
        for (int e = 0; e < E; ++e) {
            w.gate.push_back(Tensor(gate.data() + size_t(e) * I * H, dt, {I, H}));
            w.up.push_back(Tensor(up.data() + size_t(e) * I * H, dt, {I, H}));
            w.down.push_back(Tensor(down.data() + size_t(e) * H * I, dt, {H, I}));
        }
        return w;
    }

private:
    static void make(std::vector<W>& w, std::vector<float>& f, size_t n, uint32_t seed, float scale) {
        f = normal_floats(n, seed, scale);
        w.resize(n);
        for (size_t i = 0; i < n; ++i) {
            if constexpr (std::is_same_v<W, float>) {
                w[i] = f[i];
            } else {
                w[i] = f32_to_bf16(f[i]);
                f[i] = bf16_to_f32(w[i]);
            }
        }
    }
    DeviceBuffer pointers(const DeviceBuffer& base, int64_t per_expert) {
        std::vector<const W*> p(static_cast<size_t>(E));
        for (int e = 0; e < E; ++e) p[size_t(e)] = base.as<W>() + size_t(e) * per_expert;
        return to_device(p);
    }
};

struct Routing {
    std::vector<int32_t> ids;    // [T, k]
    std::vector<float> weights;  // [T, k]
};

// k distinct experts per token drawn from `pool` (all of [0, E) when empty), random weights.
Routing random_routing(int64_t T, int E, int k, uint32_t seed, std::vector<int32_t> pool = {}) {
    if (pool.empty()) {
        pool.resize(size_t(E));
        std::iota(pool.begin(), pool.end(), 0);
    }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.05f, 1.f);
    Routing r;
    for (int64_t t = 0; t < T; ++t) {
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int j = 0; j < k; ++j) {
            r.ids.push_back(pool[size_t(j)]);
            r.weights.push_back(u(rng));
        }
    }
    return r;
}

// Double-precision y [T, H] and a bound on the f32 error of any evaluation order. Each dot
// product in f32 is off by at most ~n·2^-24 of Σ|terms|; silu has |silu'| <= 1.1, so an error
// δg in g and δu in u move act by <= 1.1·δg·|u| + |silu(g)|·δu (+ a few ulps of act for exp,
// divide, multiply); the down dot and the k-term weighted sum add their own n·2^-24. The bound
// is c·2^-24·(H + I + k + 8)·Σ_j |w_j| Σ_i |down|·(|act| + 1.1·G·|u| + |g|·U + |act|), with
// G = Σ|gate·x|, U = Σ|up·x| and c = 4 for slack.
struct MoeReference {
    std::vector<double> y, bound;  // [T, H]
};

template <typename W>
MoeReference moe_reference(const Experts<W>& ex, const std::vector<float>& x, int64_t ldx, int64_t T,
                           const Routing& r, int k) {
    const int64_t H = ex.H, I = ex.I;
    MoeReference ref{std::vector<double>(size_t(T * H), 0.0), std::vector<double>(size_t(T * H), 0.0)};
    const double eps = 4.0 * std::ldexp(1.0, -24) * double(H + I + k + 8);
    std::vector<double> act(static_cast<size_t>(I)), act_err(static_cast<size_t>(I));
    for (int64_t t = 0; t < T; ++t) {
        const float* xt = x.data() + t * ldx;
        for (int j = 0; j < k; ++j) {
            const int e = r.ids[size_t(t * k + j)];
            const double w = r.weights[size_t(t * k + j)];
            for (int64_t i = 0; i < I; ++i) {
                const float* gr = ex.gate_f.data() + (size_t(e) * I + i) * H;
                const float* ur = ex.up_f.data() + (size_t(e) * I + i) * H;
                double g = 0, u = 0, G = 0, U = 0;
                for (int64_t h = 0; h < H; ++h) {
                    g += double(gr[h]) * xt[h];
                    u += double(ur[h]) * xt[h];
                    G += std::fabs(double(gr[h]) * xt[h]);
                    U += std::fabs(double(ur[h]) * xt[h]);
                }
                const double silu = g / (1.0 + std::exp(-g));
                act[size_t(i)] = silu * u;
                act_err[size_t(i)] = 2 * std::fabs(act[size_t(i)]) + 1.1 * G * std::fabs(u) + std::fabs(silu) * U;
            }
            for (int64_t h = 0; h < H; ++h) {
                const float* dr = ex.down_f.data() + (size_t(e) * H + h) * I;
                double o = 0, b = 0;
                for (int64_t i = 0; i < I; ++i) {
                    o += double(dr[i]) * act[size_t(i)];
                    b += std::fabs(double(dr[i])) * act_err[size_t(i)];
                }
                ref.y[size_t(t * H + h)] += w * o;
                ref.bound[size_t(t * H + h)] += std::fabs(w) * b * eps;
            }
        }
    }
    return ref;
}

void expect_near_reference(const std::vector<float>& y, int64_t ldy, const MoeReference& ref, int64_t T, int64_t H,
                           const char* who) {
    SCOPED_TRACE(who);
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const double g = y[size_t(t * ldy + h)], want = ref.y[size_t(t * H + h)];
            const double bound = ref.bound[size_t(t * H + h)] + 1e-30;
            if (!(std::fabs(g - want) <= bound) && ++bad <= 5)
                ADD_FAILURE() << "y[" << t << ", " << h << "] = " << g << ", reference " << want << ", error "
                              << std::fabs(g - want) << " > bound " << bound;
        }
    EXPECT_EQ(bad, 0);
}

struct ExpertCase {
    const char* name;
    int64_t T, H, I;
    int E, k;
    int64_t pad;  // extra floats per x and y row
};

// Runs the device experts and the CPU backend on the same inputs; both against the reference.
template <typename W>
void check_experts(Backend& cpu, Experts<W>& ex, const ExpertCase& c, const Routing& r, uint32_t seed) {
    SCOPED_TRACE(std::string(c.name) + (std::is_same_v<W, float> ? " f32" : " bf16") + " T=" + std::to_string(c.T) +
                 " H=" + std::to_string(c.H) + " I=" + std::to_string(c.I) + " E=" + std::to_string(c.E) +
                 " k=" + std::to_string(c.k));
    const int64_t T = c.T, H = c.H, I = c.I, ldx = H + c.pad, ldy = H + 2 * c.pad;
    const std::vector<float> x = normal_floats(size_t(T * ldx), seed);
    const MoeReference ref = moe_reference(ex, x, ldx, T, r, c.k);
    const float kPad = -777.f;

    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    std::vector<float> y(size_t(T * ldy), kPad);
    DeviceBuffer d_y = to_device(y), d_scratch(size_t(ref::moe_experts_scratch_floats(T, c.k, I)) * 4);
    Stream stream;
    ref::moe_experts(d_y.as<float>(), ldy, d_x.as<float>(), ldx, T, H, I, c.E, ex.pgate(), ex.pup(), ex.pdown(),
                     d_ids.as<int32_t>(), d_w.as<float>(), c.k, d_scratch.as<float>(), stream);
    stream.synchronize();
    y = to_host<float>(d_y, y.size());
    expect_near_reference(y, ldy, ref, T, H, "cuda moe_experts");
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = H; h < ldy; ++h) ASSERT_EQ(y[size_t(t * ldy + h)], kPad) << "padding y[" << t << ", " << h << "]";

    std::vector<float> ycpu(size_t(T * ldy), kPad);
    Tensor ty(ycpu.data(), DType::F32, {T, H}), tx(const_cast<float*>(x.data()), DType::F32, {T, H});
    ty.stride[0] = ldy * 4;
    tx.stride[0] = ldx * 4;
    cpu.moe_experts(ty, tx, ex.cpu_view(), r.ids.data(), r.weights.data(), c.k);
    expect_near_reference(ycpu, ldy, ref, T, H, "cpu moe_experts");
}

template <typename W>
void expert_cases(Backend& cpu) {
    uint32_t seed = std::is_same_v<W, float> ? 100 : 200;
    {  // E = 8: generic routings, 1 token, every expert per token, one expert for every token
        Experts<W> ex(8, 96, 40, seed);
        const ExpertCase generic{"generic", 17, 96, 40, 8, 2, 3};
        check_experts(cpu, ex, generic, random_routing(generic.T, 8, 2, seed + 10), seed + 11);
        const ExpertCase one_token{"one token", 1, 96, 40, 8, 1, 0};
        check_experts(cpu, ex, one_token, random_routing(1, 8, 1, seed + 12), seed + 13);
        const ExpertCase all{"k = E", 5, 96, 40, 8, 8, 1};
        check_experts(cpu, ex, all, random_routing(all.T, 8, 8, seed + 14), seed + 15);
        // Expert 3 receives every token, the other seven none.
        const ExpertCase single{"one expert takes every token", 64, 96, 40, 8, 1, 0};
        check_experts(cpu, ex, single, random_routing(single.T, 8, 1, seed + 16, {3}), seed + 17);
        // Only experts 1 and 6 are used (by k = 2 of every token); 513 tokens.
        const ExpertCase many{"513 tokens, two experts", 513, 96, 40, 8, 2, 2};
        check_experts(cpu, ex, many, random_routing(many.T, 8, 2, seed + 18, {1, 6}), seed + 19);
    }
    {  // H and I off the warp width: H = 33, I = 17
        Experts<W> ex(8, 33, 17, seed + 20);
        const ExpertCase odd{"odd H and I", 65, 33, 17, 8, 2, 1};
        check_experts(cpu, ex, odd, random_routing(odd.T, 8, 2, seed + 21), seed + 22);
    }
    {  // E = 256, k = 8: most experts receive no token
        Experts<W> ex(256, 64, 32, seed + 30);
        const ExpertCase wide{"E = 256", 9, 64, 32, 256, 8, 4};
        check_experts(cpu, ex, wide, random_routing(wide.T, 256, 8, seed + 31), seed + 32);
        const ExpertCase wide1{"E = 256, 1 token", 1, 64, 32, 256, 8, 0};
        check_experts(cpu, ex, wide1, random_routing(1, 256, 8, seed + 33), seed + 34);
    }
}

}  // namespace

TEST(CudaRefMoe, TopkMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 1;
    for (int64_t E : {8, 256})
        for (int k : {1, 2, 8})
            for (int64_t T : {1, 7, 64, 513})
                for (bool renorm : {false, true}) {
                    std::vector<float> logits = normal_floats(size_t(T * E), seed++, 2.f);
                    const TopkResult want = cpu_topk(*cpu, logits, T, E, k, renorm);
                    expect_topk_equal(gpu_topk(logits, T, E, k, renorm), want, T, k,
                                      "E=" + std::to_string(E) + " k=" + std::to_string(k) + " T=" + std::to_string(T) +
                                          (renorm ? " renormalized" : ""));
                    if (HasFailure()) return;
                }
}

TEST(CudaRefMoe, TopkWithASharedExpertMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 700;
    for (int64_t E : {8, 513})
        for (int k : {1, 8})
            for (int64_t T : {1, 7})
                for (bool renorm : {false, true}) {
                    std::vector<float> logits = normal_floats(size_t(T * (E + 1)), seed++, 2.f);
                    const TopkResult want = cpu_topk(*cpu, logits, T, E, k, renorm, true);
                    expect_topk_equal(gpu_topk(logits, T, E, k, renorm, true), want, T, k + 1,
                                      "shared E=" + std::to_string(E) + " k=" + std::to_string(k) +
                                          " T=" + std::to_string(T) + (renorm ? " renormalized" : ""));
                    if (HasFailure()) return;
                }
}

TEST(CudaRefMoe, TopkTiesGoToTheLowerIndex) {
    // Logits from {0, 1, 2}: most scores tie exactly; the ids must still match the CPU's order.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    std::mt19937 rng(5);
    for (int64_t E : {8, 256})
        for (int k : {1, 2, 8}) {
            const int64_t T = 33;
            std::vector<float> logits(size_t(T * E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = 1.f;  // token 0: every expert ties
            const TopkResult want = cpu_topk(*cpu, logits, T, E, k, true);
            for (int j = 0; j < k; ++j) ASSERT_EQ(want.ids[size_t(j)], j);
            expect_topk_equal(gpu_topk(logits, T, E, k, true), want, T, k,
                              "ties E=" + std::to_string(E) + " k=" + std::to_string(k));
        }
}

TEST(CudaRefMoe, TopkNanAndInfinityRankAsOnCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t E = 8;
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> logits = {
        0.f, 1.f, -inf, 2.f, -inf, 0.5f, 2.f, -1.f,        // -inf experts get probability 0
        -inf, -inf, -inf, 3.f, -inf, -inf, -inf, -inf,     // one finite logit: probability 1
        0.f, 1.f, nan, 2.f, 0.f, 0.f, 0.f, 0.f,            // a NaN poisons the row: NaN ranks first
    };
    const int64_t T = int64_t(logits.size()) / E;
    for (int k : {1, 3})
        for (bool renorm : {false, true})
            expect_topk_equal(gpu_topk(logits, T, E, k, renorm), cpu_topk(*cpu, logits, T, E, k, renorm), T, k,
                              "specials k=" + std::to_string(k));
}

TEST(CudaRefMoe, ExpertsBf16MatchCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    expert_cases<uint16_t>(*cpu);
}

TEST(CudaRefMoe, ExpertsF32MatchCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    expert_cases<float>(*cpu);
}

TEST(CudaRefMoe, RouterThenExpertsOnTheDeviceIsDeterministic) {
    // logits -> moe_topk -> moe_experts with no host round trip, twice: identical bits, and
    // y = x in place; the CPU chain on the same logits routes identically.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t T = 65, H = 64, I = 48;
    const int E = 256, k = 8;
    Experts<uint16_t> ex(E, H, I, 9);
    std::vector<float> logits = normal_floats(size_t(T * E), 10, 3.f);
    const std::vector<float> x = normal_floats(size_t(T * H), 11);
    const DeviceBuffer d_logits = to_device(logits), d_x = to_device(x);
    DeviceBuffer d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4), d_y(size_t(T * H) * 4),
        d_scratch(size_t(ref::moe_experts_scratch_floats(T, k, I)) * 4);
    Stream stream;
    std::vector<uint32_t> runs[3];
    for (int run = 0; run < 3; ++run) {
        float* y = d_y.as<float>();
        if (run == 2) d_y.copy_from(d_x, d_y.size(), 0, 0, stream);  // in place: y is x
        ref::moe_topk(d_logits.as<float>(), T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(), stream);
        ref::moe_experts(y, H, run == 2 ? y : d_x.as<float>(), H, T, H, I, E, ex.pgate(), ex.pup(), ex.pdown(),
                         d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.as<float>(), stream);
        stream.synchronize();
        runs[run] = to_host<uint32_t>(d_y, size_t(T * H));
    }
    EXPECT_EQ(runs[0], runs[1]) << "two runs differ";
    EXPECT_EQ(runs[0], runs[2]) << "y = x in place differs";

    const TopkResult want = cpu_topk(*cpu, logits, T, E, k, true);
    const TopkResult got{to_host<int32_t>(d_ids, size_t(T * k)), to_host<float>(d_w, size_t(T * k))};
    expect_topk_equal(got, want, T, k, "router");
    const MoeReference ref = moe_reference(ex, x, H, T, Routing{got.ids, got.weights}, k);  // ids as the CPU's
    std::vector<float> y(size_t(T * H));
    std::memcpy(y.data(), runs[0].data(), y.size() * 4);
    expect_near_reference(y, H, ref, T, H, "device chain");
}

TEST(CudaRefMoe, OutOfRangeIdPoisonsOnlyItsToken) {
    REQUIRE_CUDA();
    const int64_t T = 3, H = 40, I = 24;
    const int E = 8, k = 2;
    Experts<float> ex(E, H, I, 3);
    const std::vector<float> x = normal_floats(size_t(T * H), 4);
    const Routing r{{0, 1, 2, 8, 5, 4}, {0.5f, 0.5f, 0.5f, 0.5f, 0.3f, 0.7f}};  // token 1 names expert 8 of 8
    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    DeviceBuffer d_y(size_t(T * H) * 4), d_scratch(size_t(T * k * I) * 4);
    ref::moe_experts(d_y.as<float>(), H, d_x.as<float>(), H, T, H, I, E, ex.pgate(), ex.pup(), ex.pdown(),
                     d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.as<float>(), nullptr);
    const std::vector<float> y = to_host<float>(d_y, size_t(T * H));  // cudaMemcpy waits for the default stream
    for (int64_t h = 0; h < H; ++h) {
        EXPECT_TRUE(std::isfinite(y[size_t(h)]));
        EXPECT_TRUE(std::isnan(y[size_t(H + h)]));
        EXPECT_TRUE(std::isfinite(y[size_t(2 * H + h)]));
    }
}

TEST(CudaRefMoe, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float* f = nullptr;
    int32_t* ids = nullptr;
    const uint16_t* const* w = nullptr;
    EXPECT_NO_THROW(ref::moe_topk(f, 0, 8, 2, true, false, ids, f, nullptr));  // no tokens
    EXPECT_THROW(ref::moe_topk(f, 1, 8, 9, true, false, ids, f, nullptr), Error);  // k > E
    EXPECT_THROW(ref::moe_topk(f, 1, 8, 0, true, false, ids, f, nullptr), Error);  // k = 0
    EXPECT_THROW(ref::moe_topk(f, 1, ref::kMoeTopkMaxExperts + 1, 2, true, false, ids, f, nullptr), Error);
    EXPECT_THROW(ref::moe_topk(f, 1, 8, 2, true, false, ids, f, nullptr), Error);  // null pointers
    EXPECT_NO_THROW(ref::moe_experts(f, 8, f, 8, 0, 8, 4, 2, w, w, w, ids, f, 1, f, nullptr));  // no tokens
    EXPECT_THROW(ref::moe_experts(f, 8, f, 8, 2, 8, 4, 2, w, w, w, ids, f, 1, f, nullptr), Error);  // null
    EXPECT_THROW(ref::moe_experts(f, 8, f, 7, 2, 8, 4, 2, w, w, w, ids, f, 1, f, nullptr), Error);  // ldx < H
    EXPECT_THROW(ref::moe_experts(f, 8, f, 8, 2, 8, 4, 0, w, w, w, ids, f, 1, f, nullptr), Error);  // E = 0
    // y overlapping x without being x.
    float* p = reinterpret_cast<float*>(uintptr_t(4096));
    EXPECT_THROW(ref::moe_experts(p + 1, 8, p, 8, 2, 8, 4, 2, reinterpret_cast<const uint16_t* const*>(p),
                                  reinterpret_cast<const uint16_t* const*>(p), reinterpret_cast<const uint16_t* const*>(p),
                                  reinterpret_cast<int32_t*>(p), p, 1, p, nullptr),
                 Error);
}
