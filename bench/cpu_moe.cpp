// CPU MoE expert throughput (moe_experts on q4_0 experts): time per call and GB/s of the expert
// weights the call touches (each routed-to expert's gate, up and down once), at 1, 8 and 64
// tokens, for Qwen3-MoE-like (128 experts, top-8, I 768) and Qwen3.5-MoE-like (256, top-8, I 512)
// layers with H 2048. Routings are random and change every call, so weights come from memory.
// Usage: bench_cpu_moe [dtype] [threads,...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "formats/quants.h"
#include "kernels/backend.h"

using namespace tessera;

namespace {

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
    return out;
}

struct Layer {
    int64_t E, I, H;
    DType t;
    std::vector<uint8_t> gate, up, down;  // stacked [E, I, H], [E, I, H], [E, H, I]
    MoeWeights w;
    size_t expert_bytes() const { return 2 * dtype_row_bytes(t, H) * size_t(I) + dtype_row_bytes(t, I) * size_t(H); }
};

// One random matrix quantized once and copied into every expert: the timing only needs distinct
// memory per expert, not distinct values.
void fill_stacked(std::vector<uint8_t>& dst, DType t, int64_t E, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> src(size_t(rows * cols));
    for (auto& v : src) v = dist(rng);
    const size_t bytes = dtype_row_bytes(t, cols) * size_t(rows);
    dst.resize(bytes * size_t(E));
    quantize_tensor(t, src.data(), dst.data(), rows, cols);
    for (int64_t e = 1; e < E; ++e) std::memcpy(dst.data() + bytes * size_t(e), dst.data(), bytes);
}

Layer make_layer(int64_t E, int64_t I, int64_t H, DType t) {
    Layer l{E, I, H, t, {}, {}, {}, {}};
    std::mt19937 rng(1);
    fill_stacked(l.gate, t, E, I, H, rng);
    fill_stacked(l.up, t, E, I, H, rng);
    fill_stacked(l.down, t, E, H, I, rng);
    const Tensor g(l.gate.data(), t, {E, I, H}), u(l.up.data(), t, {E, I, H}), d(l.down.data(), t, {E, H, I});
    for (int64_t e = 0; e < E; ++e) {
        l.w.gate.push_back(g.slice_rows(e, e + 1));
        l.w.up.push_back(u.slice_rows(e, e + 1));
        l.w.down.push_back(d.slice_rows(e, e + 1));
    }
    return l;
}

struct Routing {
    std::vector<int32_t> ids;
    std::vector<float> w;
    int64_t distinct = 0;  // experts touched
};

Routing random_routing(int64_t T, int k, int64_t E, std::mt19937& rng) {
    Routing r;
    std::vector<int32_t> pool(static_cast<size_t>(E));
    std::vector<char> used(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < T; ++t) {
        std::iota(pool.begin(), pool.end(), 0);
        for (int j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct experts
            std::swap(pool[size_t(j)], pool[size_t(j + int64_t(rng() % uint64_t(E - j)))]);
            r.ids.push_back(pool[size_t(j)]);
            r.w.push_back(1.f / float(k));
            used[size_t(pool[size_t(j)])] = 1;
        }
    }
    r.distinct = std::count(used.begin(), used.end(), 1);
    return r;
}

}  // namespace

int main(int argc, char** argv) {
    const DType t = dtype_from_name(argc > 1 ? argv[1] : "q4_0");
    const auto threads = split(argc > 2 ? argv[2] : "0");
    struct Shape { const char* name; int64_t E, I, H; int k; };
    const Shape shapes[] = {{"128x768x2048 top-8", 128, 768, 2048, 8}, {"256x512x2048 top-8", 256, 512, 2048, 8}};
    auto be = make_cpu_backend();
    std::printf("moe_experts, %s experts; GB/s = bytes of the experts a call touches / time\n", dtype_name(t));
    std::printf("%-20s %7s %6s %9s %11s %9s\n", "experts", "threads", "tokens", "touched", "ms/call", "GB/s");
    for (const Shape& s : shapes) {
        const Layer l = make_layer(s.E, s.I, s.H, t);
        std::mt19937 rng(7);
        std::vector<float> x(size_t(64 * s.H)), y(size_t(64 * s.H));
        for (auto& v : x) v = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
        for (const auto& th : threads) {
            ThreadPool::set_global_threads(std::atoi(th.c_str()));
            for (int64_t T : {1, 8, 64}) {
                std::vector<Routing> routes;
                for (int i = 0; i < 16; ++i) routes.push_back(random_routing(T, s.k, s.E, rng));
                const Tensor xt(x.data(), DType::F32, {T, s.H}), yt(y.data(), DType::F32, {T, s.H});
                auto call = [&](const Routing& r) { be->moe_experts(yt, xt, l.w, r.ids.data(), r.w.data(), s.k); };
                call(routes[0]);  // warm-up (scratch buffers)
                using clock = std::chrono::steady_clock;
                const auto t0 = clock::now();
                double dt = 0, bytes = 0, touched = 0;
                int reps = 0;
                do {
                    const Routing& r = routes[size_t(reps % 16)];
                    call(r);
                    bytes += double(r.distinct) * double(l.expert_bytes());
                    touched += double(r.distinct);
                    ++reps;
                    dt = std::chrono::duration<double>(clock::now() - t0).count();
                } while (dt < 0.5);
                std::printf("%-20s %7d %6lld %9.1f %11.3f %9.2f\n", s.name, ThreadPool::global().size(), (long long)T,
                            touched / reps, 1e3 * dt / reps, bytes / dt / 1e9);
            }
        }
    }
    return 0;
}
