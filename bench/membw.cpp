// Host memory read bandwidth (GB/s) and f32 FMA peak (GFLOP/s) with every core: the CPU limits the
// kernel benchmarks report against (device_limits.h; the same measurement they run at start-up).
// Usage: bench_membw [GiB=2]
#include <cstdio>
#include <cstdlib>

#include "device_limits.h"

int main(int argc, char** argv) {
    using namespace tessera;
    const double gib = argc > 1 ? std::atof(argv[1]) : 2.0;
    const double bw = bench::measure_read_bandwidth(size_t(gib * double(1 << 30)), 5);
    const double peak = bench::measure_fma_peak();
    const int threads = ThreadPool::global().size();
    std::printf("read bandwidth: %.1f GB/s (%d threads, %.1f GiB, best of 5)\n", bw / 1e9, threads, gib);
    std::printf("f32 FMA peak: %.1f GFLOP/s (%d threads, AVX2 FMA chains, best of 3)\n", peak / 1e9, threads);
    std::printf("%s, last-level cache %lld MiB\n", bench::cpu_model_name().c_str(),
                (long long)(bench::cpu_llc_bytes() >> 20));
    return 0;
}
