// The physical limits a kernel benchmark reports against: memory bandwidth, peak FLOP/s and the
// last-level cache. The H200's come from ../shared/PERF.md; the CPU's are measured at start-up.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace tessera::bench {

struct Limits {
    std::string name;
    double bandwidth = 0;     // bytes/s
    double flops = 0;         // FLOP/s
    int64_t cache_bytes = 0;  // last-level cache: weights are rotated over ≥ 4× this to read cold
    std::string bandwidth_source, flops_source;
};

// H200 (PERF.md): a device-to-device copy measures ~4.3 TB/s; a large bf16 GEMM 770–800 TFLOP/s.
inline Limits h200_limits() {
    return {"NVIDIA H200",
            4.3e12,
            800e12,
            int64_t(50) << 20,
            "4.3 TB/s device-to-device copy, measured (PERF.md)",
            "800 TFLOP/s large bf16 GEMM, measured (PERF.md)"};
}

// Bytes/s of a streaming read of `bytes` over every pool thread (best of `reps`): the ceiling for
// CPU decode, which reads each weight once per token. AVX2 loads, four independent sums.
inline double measure_read_bandwidth(size_t bytes, int reps) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> a(n, 1.0f);
    auto& pool = ThreadPool::global();
    double best = 0, sink = 0;
    for (int rep = 0; rep < reps; ++rep) {
        std::vector<double> partial(size_t(pool.size()) * 8, 0.0);
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(
            int64_t(n),
            [&](int64_t b, int64_t e) {
                float s = 0;
                int64_t i = b;
#if defined(__AVX2__) && defined(__FMA__)
                __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
                for (; i + 32 <= e; i += 32) {
                    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(&a[size_t(i)]));
                    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(&a[size_t(i + 8)]));
                    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(&a[size_t(i + 16)]));
                    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(&a[size_t(i + 24)]));
                }
                alignas(32) float lanes[8];
                _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
                for (float l : lanes) s += l;
#endif
                for (; i < e; ++i) s += a[size_t(i)];
                partial[size_t(b / int64_t(1 << 20)) % partial.size()] += double(s);
            },
            1 << 20);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, double(n * sizeof(float)) / dt);
        for (double p : partial) sink += p;
    }
    if (sink < 0) std::puts("");  // keep the sums alive
    return best;
}

// f32 FLOP/s of independent FMA chains on every pool thread (best of 3): the peak the CPU
// kernels (AVX2 + FMA) can reach. 0 when this build has no FMA.
inline double measure_fma_peak() {
#if defined(__AVX2__) && defined(__FMA__)
    auto& pool = ThreadPool::global();
    const int threads = pool.size();
    constexpr int64_t kIters = 4 << 20;  // × 10 chains × 8 lanes × 2 FLOP
    double best = 0;
    std::vector<float> out(size_t(threads) * 8);
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(
            threads,
            [&](int64_t b, int64_t e) {
                for (int64_t t = b; t < e; ++t) {
                    __m256 c[10];
                    for (int j = 0; j < 10; ++j) c[j] = _mm256_set1_ps(float(j) * 1e-3f);
                    const __m256 m = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
                    for (int64_t i = 0; i < kIters; ++i)
                        for (int j = 0; j < 10; ++j) c[j] = _mm256_fmadd_ps(c[j], m, add);
                    __m256 s = c[0];
                    for (int j = 1; j < 10; ++j) s = _mm256_add_ps(s, c[j]);
                    _mm256_storeu_ps(&out[size_t(t) * 8], s);
                }
            },
            1);
        const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        best = std::max(best, double(threads) * double(kIters) * 10 * 8 * 2 / dt);
    }
    return best;
#else
    return 0;
#endif
}

// Size of the last-level cache from sysfs (0 if unknown).
inline int64_t cpu_llc_bytes() {
    int64_t best = 0;
    for (int idx = 0; idx < 8; ++idx) {
        const std::string path = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(idx) + "/size";
        FILE* f = std::fopen(path.c_str(), "r");
        if (!f) break;
        long v = 0;
        char unit = 0;
        if (std::fscanf(f, "%ld%c", &v, &unit) >= 1)
            best = std::max(best, int64_t(v) * (unit == 'K' ? 1024 : unit == 'M' ? (1 << 20) : 1));
        std::fclose(f);
    }
    return best;
}

// "AMD EPYC ..." from /proc/cpuinfo ("CPU" if unknown).
inline std::string cpu_model_name() {
    FILE* f = std::fopen("/proc/cpuinfo", "r");
    if (!f) return "CPU";
    char line[512];
    std::string name = "CPU";
    while (std::fgets(line, sizeof line, f)) {
        const std::string s = line;
        if (s.rfind("model name", 0) == 0 && s.find(':') != std::string::npos) {
            name = s.substr(s.find(':') + 2);
            while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
            break;
        }
    }
    std::fclose(f);
    return name;
}

// The CPU's limits: measured (or the given overrides, when > 0).
inline Limits cpu_limits(double bandwidth_override, double flops_override) {
    Limits l;
    const int threads = ThreadPool::global().size();
    l.name = cpu_model_name() + ", " + std::to_string(threads) + " threads";
    l.cache_bytes = cpu_llc_bytes();
    l.bandwidth = bandwidth_override > 0 ? bandwidth_override : measure_read_bandwidth(size_t(512) << 20, 3);
    l.bandwidth_source =
        bandwidth_override > 0 ? "given by --cpu-bw" : "streaming read of 512 MiB, best of 3, measured now";
    l.flops = flops_override > 0 ? flops_override : measure_fma_peak();
    l.flops_source = flops_override > 0 ? "given by --cpu-flops" : "f32 AVX2 FMA chains on every thread, measured now";
    return l;
}

}  // namespace tessera::bench
