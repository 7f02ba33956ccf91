// CPU gated delta rule: recurrent vs chunked (C = 64) time for one sequence of T tokens over
// nv value heads of dk × dv (default 32 × 128 × 128, T = 1, 64, 1024), per thread count.
// Usage: bench_cpu_gdn [nv] [d] [threads,...]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/simd.h"

using namespace tessera;

namespace {

std::vector<int> split_ints(const std::string& s) {
    std::vector<int> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(std::atoi(item.c_str()));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t nv = argc > 1 ? std::atoll(argv[1]) : 32, d = argc > 2 ? std::atoll(argv[2]) : 128;
    const auto threads = split_ints(argc > 3 ? argv[3] : "1,2");
    const int64_t nk = nv / 2 > 0 ? nv / 2 : 1, Tmax = 1024;
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    auto fill = [&](size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto& x : v) x = lo + (hi - lo) * (u(rng) + 1.f) / 2.f;
        return v;
    };
    // q, k normalised (q scaled) as the layer feeds them.
    auto q = fill(size_t(Tmax * nk * d), -1.f, 1.f), k = fill(size_t(Tmax * nk * d), -1.f, 1.f);
    for (auto* x : {&q, &k})
        for (int64_t r = 0; r < Tmax * nk; ++r) {
            double ss = 0;
            for (int64_t i = 0; i < d; ++i) ss += double((*x)[size_t(r * d + i)]) * (*x)[size_t(r * d + i)];
            for (int64_t i = 0; i < d; ++i) (*x)[size_t(r * d + i)] = float((*x)[size_t(r * d + i)] / std::sqrt(ss));
        }
    auto v = fill(size_t(Tmax * nv * d), -1.f, 1.f), g = fill(size_t(Tmax * nv), -2.f, -0.01f),
         beta = fill(size_t(Tmax * nv), 0.f, 1.f), out = std::vector<float>(size_t(Tmax * nv * d));
    auto state = std::vector<float>(size_t(nv * d * d), 0.f);
    auto be = make_cpu_backend();
    std::printf("gated_delta_rule nk=%lld nv=%lld dk=dv=%lld (%s)\n%7s %6s %14s %14s %9s\n", (long long)nk,
                (long long)nv, (long long)d, cpu::simd_enabled() ? "simd" : "scalar", "threads", "T",
                "recurrent ms", "chunked ms", "speedup");
    for (int th : threads) {
        ThreadPool::set_global_threads(th);
        for (int64_t T : {int64_t(1), int64_t(64), Tmax}) {
            const int32_t q_start[] = {0, int32_t(T)}, slot[] = {0};
            double ms[2];
            for (GdnMode mode : {GdnMode::Recurrent, GdnMode::Chunked}) {
                GdnParams p;
                p.n_k_heads = int(nk);
                p.n_v_heads = int(nv);
                p.mode = mode;
                auto call = [&] {
                    be->gated_delta_rule(Tensor(out.data(), DType::F32, {T, nv, d}),
                                         Tensor(q.data(), DType::F32, {T, nk, d}),
                                         Tensor(k.data(), DType::F32, {T, nk, d}),
                                         Tensor(v.data(), DType::F32, {T, nv, d}),
                                         Tensor(g.data(), DType::F32, {T, nv}),
                                         Tensor(beta.data(), DType::F32, {T, nv}),
                                         Tensor(state.data(), DType::F32, {1, nv, d, d}), SeqPlan{1, q_start, slot}, p);
                };
                call();  // warm-up
                using clock = std::chrono::steady_clock;
                int reps = 0;
                const auto t0 = clock::now();
                double dt = 0;
                do {
                    call();
                    ++reps;
                    dt = std::chrono::duration<double>(clock::now() - t0).count();
                } while (dt < 0.3);
                ms[int(mode)] = 1e3 * dt / reps;
            }
            std::printf("%7d %6lld %14.3f %14.3f %8.2fx\n", th, (long long)T, ms[0], ms[1], ms[0] / ms[1]);
        }
    }
    return 0;
}
