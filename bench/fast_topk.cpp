// bench_fast_topk: what a sampled decode step's logits cost to leave the GPU. The row-wise top-k
// (fast_topk.h: k candidates a row), the argmax (greedy) and sampling on the device
// (fast_sample.h: temperature alone, top-k 50, top-p 0.9, both, min-p; on flat rows and on a
// language model's shape, the plan walking its candidates and, "(row)", the whole row) against
// copying the whole rows to page-locked host memory (what host sampling needs), for
// vocabularies of 151,936 (Qwen3) and 248,320 (Qwen3.5/3.6) and 1, 8, 64 rows. CUDA events on
// one stream behind a StreamGate (no launch latency); the copy is timed the same way.
//   bench_fast_topk [--runs N (50)] [--warmup N (5)]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "cuda_timer.h"
#include "kernel_args.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_sample.h"
#include "kernels/cuda/fast_topk.h"
#include "kernels/cuda/pinned_memory.h"
#include "kernels/cuda/ref_misc.h"
#include "kernels/cuda/stream.h"

using namespace tessera;
using namespace tessera::cuda;

int main(int argc, char** argv) {
    try {
        int runs = 50, warmup = 5;
        bench::KernelArgs args("bench_fast_topk [--runs N (50)] [--warmup N (5)]\n");
        if (!args.count("--runs", runs, 1).count("--warmup", warmup, 0).parse(argc, argv)) return 0;
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        std::printf("bench_fast_topk on %s; median of %d runs after %d\n\n", p.name, runs, warmup);
        std::printf("| %7s | %4s | %-36s | %9s |\n", "vocab", "rows", "what leaves the GPU", "median us");
        Stream stream;
        bench::CudaTimer timer(stream.get());
        std::mt19937 rng(1);
        std::normal_distribution<float> nd(0.f, 3.f);
        for (int64_t V : {151936, 248320})
            for (int64_t R : {1, 8, 64}) {
                std::vector<float> h(size_t(R * V));
                for (float& x : h) x = nd(rng);
                DeviceBuffer x(h.size() * 4), ids(size_t(R) * 128 * 4), vals(size_t(R) * 128 * 4);
                x.upload(h.data(), h.size() * 4);
                PinnedMemory pinned;
                void* host = pinned.allocate(h.size() * 4);
                auto row = [&](const std::string& what, double s) {
                    std::printf("| %7lld | %4lld | %-36s | %9.2f |\n", (long long)V, (long long)R, what.c_str(),
                                s * 1e6);
                };
                row("whole rows (D2H copy)", timer.median(warmup, runs, [&] {
                    TS_CUDA_CHECK(cudaMemcpyAsync(host, x.data(), h.size() * 4, cudaMemcpyDeviceToHost, stream.get()));
                }));
                row("argmax, reference kernel", timer.median(warmup, runs, [&] {
                    ref::argmax(static_cast<const float*>(x.data()), V, R, V, static_cast<int32_t*>(ids.data()), stream.get());
                }));
                DeviceBuffer sc(std::max(fast::argmax_scratch_bytes(R, V), fast::top_k_scratch_bytes(R, V, 128)));
                row("argmax (ids only)", timer.median(warmup, runs, [&] {
                    fast::argmax(static_cast<const float*>(x.data()), V, R, V, static_cast<int32_t*>(ids.data()),
                                 sc.data(), stream.get());
                }));
                for (int k : {21, 128})
                    row("top_k " + std::to_string(k), timer.median(warmup, runs, [&] {
                        fast::top_k(static_cast<const float*>(x.data()), V, R, V, k, static_cast<float*>(vals.data()),
                                    static_cast<int32_t*>(ids.data()), sc.data(), stream.get());
                    }));
                struct Mode {
                    const char* name;
                    int32_t top_k;
                    float top_p, min_p;
                };
                // Each filter on these rows (N(0, 3): flat, the nucleus thousands of tokens wide) and on
                // a language model's shape (N(0, 1), 40 tokens a row 10 to 18 above it), the plan walking
                // the candidates (the default) and the whole row (before session 43).
                std::vector<float> hl(h.size());
                std::normal_distribution<float> n1(0.f, 1.f);
                for (float& v : hl) v = n1(rng);
                for (int64_t r = 0; r < R; ++r)
                    for (int j = 0; j < 40; ++j)
                        hl[size_t(r * V + int64_t(rng() % uint32_t(V)))] = 10.f + float(j % 17) / 2.f;
                DeviceBuffer xl(hl.size() * 4);
                xl.upload(hl.data(), hl.size() * 4);
                for (const DeviceBuffer* data : {&x, &xl})
                    for (const Mode& m : {Mode{"sample: temperature", 0, 1.f, 0.f},
                                          Mode{"sample: top_k 50", 50, 1.f, 0.f}, Mode{"sample: top_p 0.9", 0, 0.9f, 0.f},
                                          Mode{"sample: top_k 50 top_p 0.9", 50, 0.9f, 0.f},
                                          Mode{"sample: top_k 20 top_p 0.8", 20, 0.8f, 0.f},
                                          Mode{"sample: min_p 0.05", 0, 1.f, 0.05f}}) {
                        std::vector<SampleRow> rows(static_cast<size_t>(R));
                        for (size_t r = 0; r < rows.size(); ++r) {
                            rows[r].top_k = m.top_k, rows[r].top_p = m.top_p, rows[r].min_p = m.min_p;
                            rows[r].seed = r;
                        }
                        DeviceBuffer drows(rows.size() * sizeof(SampleRow));
                        drows.upload(rows.data(), rows.size() * sizeof(SampleRow));
                        DeviceBuffer ssc(fast::sample_scratch_bytes(R, V));
                        const bool cuts = m.top_k > 0 || m.top_p < 1.f;
                        for (fast::SamplePlan how : {fast::SamplePlan::Candidates, fast::SamplePlan::Row}) {
                            if (!cuts && how == fast::SamplePlan::Row) continue;  // (no cut: the same kernels)
                            const std::string name = std::string(data == &xl ? "lm " : "") + m.name +
                                                     (how == fast::SamplePlan::Row ? " (row)" : "");
                            row(name, timer.median(warmup, runs, [&] {
                                fast::sample(static_cast<const float*>(data->data()), V, R, V,
                                             static_cast<const SampleRow*>(drows.data()),
                                             static_cast<int32_t*>(ids.data()), ssc.data(), stream.get(), how);
                            }));
                        }
                    }
                pinned.deallocate(host);
            }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_topk: %s\n", e.what());
        return 1;
    }
}
