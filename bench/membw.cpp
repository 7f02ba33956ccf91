// Host memory read bandwidth (GB/s) with every core: the ceiling for CPU decode, which reads
// every weight once per token. Usage: bench_membw [GiB=2]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/thread_pool.h"

int main(int argc, char** argv) {
    const double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
    const size_t n = size_t(gib * (1 << 30)) / sizeof(float);
    std::vector<float> a(n, 1.0f);
    auto& pool = tessera::ThreadPool::global();
    std::vector<double> best;
    double best_gbs = 0;
    for (int rep = 0; rep < 5; ++rep) {
        std::vector<double> partial(size_t(pool.size()) * 64, 0.0);
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e) {
            float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int64_t i = b;
            for (; i + 4 <= e; i += 4) {
                s0 += a[size_t(i)];
                s1 += a[size_t(i + 1)];
                s2 += a[size_t(i + 2)];
                s3 += a[size_t(i + 3)];
            }
            for (; i < e; ++i) s0 += a[size_t(i)];
            partial[size_t(b % 64)] += double(s0 + s1 + s2 + s3);
        }, 1 << 20);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best_gbs = std::max(best_gbs, double(n * sizeof(float)) / s / 1e9);
        double total = 0;
        for (double p : partial) total += p;
        if (total < 0) std::puts("");  // keep the sum alive
    }
    std::printf("read bandwidth: %.1f GB/s (%d threads, %.1f GiB, best of 5)\n", best_gbs, pool.size(), gib);
    return 0;
}
