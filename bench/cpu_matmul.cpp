// CPU matmul throughput: decode (T=1, GB/s of weights read) and prefill (T=64, GFLOP/s) per
// weight dtype and thread count. Usage: bench_cpu_matmul [N] [K] [dtype,...] [threads,...]
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

// Seconds per call, from enough repetitions to fill ~0.5 s.
double time_call(Backend& be, const Tensor& y, const Tensor& x, const Tensor& w) {
    be.matmul(y, x, w);  // warm-up
    using clock = std::chrono::steady_clock;
    int reps = 0;
    const auto t0 = clock::now();
    double dt = 0;
    do {
        be.matmul(y, x, w);
        ++reps;
        dt = std::chrono::duration<double>(clock::now() - t0).count();
    } while (dt < 0.5);
    return dt / reps;
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t N = argc > 1 ? std::atoll(argv[1]) : 4096, K = argc > 2 ? std::atoll(argv[2]) : 4096;
    const auto dtypes = split(argc > 3 ? argv[3] : "f32,f16,bf16,q8_0,q4_0,q4_k,q6_k,mxfp4");
    const auto threads = split(argc > 4 ? argv[4] : "1,2");
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<float> src(size_t(N * K));
    for (auto& v : src) v = dist(rng);
    std::vector<float> x(size_t(64 * K)), y(size_t(64 * N));
    for (auto& v : x) v = dist(rng);
    auto be = make_cpu_backend();
    std::printf("matmul N=%lld K=%lld\n%-6s %7s %14s %14s\n", (long long)N, (long long)K, "dtype", "threads",
                "T=1 GB/s", "T=64 GFLOP/s");
    for (const auto& name : dtypes) {
        const DType t = dtype_from_name(name);
        std::vector<uint8_t> w(dtype_row_bytes(t, K) * size_t(N));
        quantize_tensor(t, src.data(), w.data(), N, K);
        const Tensor wt(w.data(), t, {N, K});
        for (const auto& th : threads) {
            ThreadPool::set_global_threads(std::atoi(th.c_str()));
            const double t1 = time_call(*be, Tensor(y.data(), DType::F32, {1, N}), Tensor(x.data(), DType::F32, {1, K}), wt);
            const double t64 = time_call(*be, Tensor(y.data(), DType::F32, {64, N}), Tensor(x.data(), DType::F32, {64, K}), wt);
            std::printf("%-6s %7s %14.2f %14.2f\n", name.c_str(), th.c_str(), double(w.size()) / t1 / 1e9,
                        2.0 * 64 * double(N) * double(K) / t64 / 1e9);
        }
    }
    return 0;
}
