// bench_fast_gemm: the prefill GEMM kernel fast::gemm_packed on device buffers — the dispatch's
// pick (x → bf16 pass + GEMM), the x pass alone, and the GEMM kernel of every tile configuration —
// against cuBLAS bf16 (GemmEx alone, bf16 x and w) on the same shape. CUDA events on one stream,
// median of --runs after warm-up; weights are L2-hot after the first call (as in llama.cpp's
// test-backend-ops). TFLOP/s = 2·T·N·K / time; % of 800 TFLOP/s, the measured bf16 peak (PERF.md).
// --kinds f32: the f32 GEMM fast::gemm_f32_tf32x3 (3×TF32 on the warpgroup MMA, w's split included,
// and its product alone) against cuBLAS's f32 GEMM on the MoE routers' shapes (experts × hidden);
// its % is of 3×TF32's ceiling, a third of the TF32 peak (half the bf16 one).
//   bench_fast_gemm [--tokens 512,2048] [--runs 20] [--kinds int4,int8,f32] [--filter TEXT] [--configs all|auto] [--rows]
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "cuda_timer.h"
#include "data.h"
#include "kernel_args.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_gemm.h"
#include "kernels/cuda/fast_gemm_f32.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/ref_matmul.h"
#include "kernels/cuda/stream.h"
#include "matmul_cases.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

constexpr double kPeak = 800e12;  // measured bf16 dense peak on the H200 (PERF.md)

struct Args {
    std::vector<int64_t> tokens = {512, 2048};
    std::vector<std::string> kinds = {"int4"};
    int runs = 20, warmup = 5;
    std::string filter;
    bool all_configs = true;
    bool rows = false;  // Int4 weights row-major (default: 16-row tiles where they fit, as the backend)
};

using Rng = bench::XorShift;

using Timer = bench::CudaTimer;

void row(const std::string& shape, int64_t T, const std::string& kind, const std::string& what, double sec,
         double flops, double cublas_sec, const std::string& note) {
    std::printf("| %-22s | %5lld | %-4s | %-30s | %9.2f | %7.1f | %5.1f%% | %5s | %s\n", shape.c_str(), (long long)T,
                kind.c_str(), what.c_str(), sec * 1e6, flops / sec / 1e12, 100.0 * flops / sec / kPeak,
                cublas_sec > 0 ? (std::to_string(int(100.0 * cublas_sec / sec + 0.5)) + "%").c_str() : "",
                note.c_str());
    std::fflush(stdout);
}

void bench_shape(const Args& a, const bench::MatmulShape& s, const std::string& kind, Stream& stream,
                 CublasHandle& blas, Timer& timer) {
    const int64_t N = s.N, K = s.K;
    const bool int8 = kind == "int8";
    const int group = 32;
    Rng rng{0x9e3779b97f4a7c15ull ^ uint64_t(N * 131 + K)};

    // The packed matrix (Q4_0-like: no biases) and the same-shaped bf16 matrix for cuBLAS.
    std::vector<uint8_t> codes(size_t(N * (int8 ? K : K / 2)));
    for (auto& b : codes) b = uint8_t(rng.next());
    std::vector<uint16_t> scales(size_t(N * (K / group)));
    for (auto& v : scales) v = f32_to_f16(rng.uniform(-0.02f, 0.02f));
    std::vector<uint16_t> wbf(size_t(N * K));
    for (auto& v : wbf) v = f32_to_bf16(rng.uniform(-0.1f, 0.1f));
    DeviceBuffer dcodes(codes.size()), dscales(scales.size() * 2), dwbf(wbf.size() * 2);
    dcodes.upload(codes.data(), codes.size());
    dscales.upload(scales.data(), scales.size() * 2);
    dwbf.upload(wbf.data(), wbf.size() * 2);
    PackedMatrix w;
    w.kind = int8 ? PackedKind::Int8 : PackedKind::Int4;
    w.n = N;
    w.k = K;
    w.group = group;
    w.codes = dcodes.as<uint8_t>();
    w.scales = dscales.as<uint16_t>();
    // Random bytes: the tiled order is the same bytes read another way (the timing is the layout's).
    w.tiles = !a.rows && packed_tiles_fit(w.kind, N, K, group);

    for (int64_t T : a.tokens) {
        const std::string label = std::string(s.name) + " " + kind + " T=" + std::to_string(T);
        const std::string kind_w = kind + (w.tiles ? "t" : "");
        if (!a.filter.empty() && label.find(a.filter) == std::string::npos) continue;
        std::vector<float> x(size_t(T * K));
        for (auto& v : x) v = rng.uniform(-1.f, 1.f);
        DeviceBuffer dx(x.size() * 4), dy(size_t(T * N) * 4), scratch(fast::gemm_packed_scratch(T, K));
        dx.upload(x.data(), x.size() * 4);
        const double flops = 2.0 * double(T) * double(N) * double(K);
        const cudaStream_t st = stream.get();

        // cuBLAS bf16 on the same shape: y[T, N] = xb[T, K] · wbf[N, K]ᵀ (column-major yᵀ = w·xᵀ).
        TS_CUDA_CHECK(fast::detail::launch_convert_x(scratch.as<uint16_t>(), dx.as<float>(), K, T, K,
                                                     fast::detail::XOrder::plain, st));
        blas.bind(st);
        const float one = 1.f, zero = 0.f;
        const double cublas = timer.median(a.warmup, a.runs, [&] {
            TS_CUBLAS_CHECK(cublasGemmEx(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(T), int(K), &one,
                                         dwbf.data(), CUDA_R_16BF, int(K), scratch.data(), CUDA_R_16BF, int(K), &zero,
                                         dy.data(), CUDA_R_32F, int(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        });
        std::string anchor = bench::matmul_anchor(s, int8 ? "q8_0" : "q4_0", T);
        row(s.name, T, "bf16", "cuBLAS GemmEx (bf16 x, w)", cublas, flops, cublas,
            bench::matmul_anchor(s, "bf16", T).empty() ? "" : "llama.cpp/cuBLAS " + bench::matmul_anchor(s, "bf16", T));

        const fast::GemmPlan pick = fast::gemm_pick(T, N, K, w.kind, w.tiles);
        const double full = timer.median(a.warmup, a.runs, [&] {
            fast::gemm_packed(dy.as<float>(), N, dx.as<float>(), K, T, w, scratch.data(), st);
        });
        row(s.name, T, kind_w,
            std::string("gemm_packed (") + fast::detail::kGemmConfigs[pick.config].name +
                (pick.splits > 1 ? " k/2)" : ")"),
            full, flops,
            cublas, anchor.empty() ? "x pass + GEMM" : "x pass + GEMM; llama.cpp q4_0 " + anchor);
        const double conv = timer.median(a.warmup, a.runs, [&] {
            TS_CUDA_CHECK(fast::detail::launch_convert_x(scratch.as<uint16_t>(), dx.as<float>(), K, T, K,
                                                         fast::detail::x_order(fast::detail::kGemmConfigs[pick.config]), st));
        });
        std::printf("| %-22s | %5lld | %-4s | %-30s | %9.2f | %7s | %6s | %5s | %.2f TB/s\n", s.name, (long long)T,
                    "f32", "x -> bf16 pass alone", conv * 1e6, "", "", "", double(T * K * 6) / conv / 1e12);
        if (!a.all_configs) continue;
        TS_CUDA_CHECK(fast::detail::launch_convert_x(scratch.as<uint16_t>(), dx.as<float>(), K, T, K,
                                                     fast::detail::XOrder::plain, st));
        if (!int8)
            for (int c : {0, 1, 7}) {  // the same kernels without dequantization: the ceiling of this design
                if (w.tiles) break;  // (the probe reads the row-major order)
                const fast::detail::GemmArgs ga{dy.as<float>(), N, scratch.as<uint16_t>(), w, T, 1};
                const double t = timer.median(a.warmup, a.runs, [&] {
                    TS_CUDA_CHECK(fast::detail::launch_gemm_probe(c, ga, st));
                });
                row(s.name, T, kind_w, std::string("probe, no dequant ") + fast::detail::kGemmConfigs[c].name, t,
                    flops, cublas, "wrong results; the mma + pipeline ceiling");
            }
        for (int c = 0; c < fast::detail::kGemmConfigCount; ++c)
            for (int splits = 1; splits <= 2; ++splits) {
                if (fast::detail::gemm_blocks_per_sm(c, w.kind) == 0) continue;  // wgmma: Int4 only
                if (fast::detail::kGemmConfigs[c].tma_cluster > 0 && !w.tiles) continue;  // TMA: tiles only
                TS_CUDA_CHECK(fast::detail::launch_convert_x(scratch.as<uint16_t>(), dx.as<float>(), K, T, K,
                                                             fast::detail::x_order(fast::detail::kGemmConfigs[c]), st));
                const fast::GemmPlan plan{c, splits};
                const double t = timer.median(a.warmup, a.runs, [&] {
                    fast::gemm_packed_plan(plan, false, dy.as<float>(), N, dx.as<float>(), K, T, w, scratch.data(), st);
                });
                row(s.name, T, kind_w,
                    std::string("GEMM only ") + fast::detail::kGemmConfigs[c].name + (splits > 1 ? " k/2" : ""), t,
                    flops, cublas,
                    std::to_string(fast::detail::gemm_blocks_per_sm(c, w.kind)) + " blocks/SM" +
                        (c == pick.config && splits == pick.splits ? ", picked" : ""));
            }
    }
}

// The f32 GEMM on a router's shape: cuBLAS's f32 GEMM (ref::matmul_f32, the reference path's and
// TESSERA_F32_GEMM=cublas), gemm_f32_tf32x3 as the backend calls it (w split into scratch each
// call), and its product alone on w's halves.
void bench_f32(const Args& a, const char* name, int64_t N, int64_t K, Stream& stream, CublasHandle& blas,
               Timer& timer) {
    constexpr double kCeiling = kPeak / 2 / 3;  // TF32 at half bf16's rate, three products
    Rng rng{0x5851f42d4c957f2dull ^ uint64_t(N * 131 + K)};
    std::vector<float> w(size_t(N * K));
    for (auto& v : w) v = rng.uniform(-0.1f, 0.1f);
    int64_t most = 0;
    for (int64_t T : a.tokens) most = std::max<int64_t>(most, int64_t(fast::gemm_f32_tf32x3_scratch(T, N, K)));
    DeviceBuffer dw(w.size() * 4), scratch{size_t(most)};
    dw.upload(w.data(), w.size() * 4);
    const cudaStream_t st = stream.get();
    float* const hi = scratch.as<float>();
    float* const lo = hi + N * K;
    const int sms = current_sm_count();
    auto print = [&](int64_t T, const char* what, double sec, double cublas_sec, const std::string& note) {
        const double flops = 2.0 * double(T) * double(N) * double(K);
        std::printf("| %-22s | %5lld | %-4s | %-30s | %9.2f | %7.1f | %5.1f%% | %5s | %s\n", name, (long long)T, "f32",
                    what, sec * 1e6, flops / sec / 1e12, 100.0 * flops / sec / kCeiling,
                    (std::to_string(int(100.0 * cublas_sec / sec + 0.5)) + "%").c_str(), note.c_str());
        std::fflush(stdout);
    };
    for (int64_t T : a.tokens) {
        const std::string label = std::string(name) + " f32 T=" + std::to_string(T);
        if (!a.filter.empty() && label.find(a.filter) == std::string::npos) continue;
        std::vector<float> x(size_t(T * K));
        for (auto& v : x) v = rng.uniform(-1.f, 1.f);
        DeviceBuffer dx(x.size() * 4), dy(size_t(T * N) * 4);
        dx.upload(x.data(), x.size() * 4);
        blas.bind(st);
        const double cublas = timer.median(a.warmup, a.runs, [&] {
            ref::matmul_f32(dy.as<float>(), N, dx.as<float>(), K, dw.as<float>(), T, N, K, blas, st);
        });
        print(T, "cuBLAS f32 GEMM (SIMT)", cublas, cublas,
              T >= fast::kGemmF32MinTokens ? "" : "the backend's pick at this T");
        const double full = timer.median(a.warmup, a.runs, [&] {
            fast::gemm_f32_tf32x3(dy.as<float>(), N, dx.as<float>(), K, dw.as<float>(), T, N, K, scratch.data(),
                                  scratch.size(), st);
        });
        print(T, "gemm_f32_tf32x3 (w split + product)", full, cublas,
              T >= fast::kGemmF32MinTokens ? "the backend's pick at this T" : "");
        const fast::GemmF32Split split = fast::gemm_f32_split(T, N, K, sms);
        const double product = timer.median(a.warmup, a.runs, [&] {
            TS_CUDA_CHECK(fast::detail::launch_gemm_f32_tf32x3_tma(dy.as<float>(), N, dx.as<float>(), K, hi, lo, int(T),
                                                                   int(N), int(K), split, lo + N * K, st));
        });
        print(T, "its product alone", product, cublas,
              "on w's halves: what a split at load would leave; K in " + std::to_string(split.splits));
        if (split.splits > 1) {  // the K split's worth: one split
            const double whole = timer.median(a.warmup, a.runs, [&] {
                TS_CUDA_CHECK(fast::detail::launch_gemm_f32_tf32x3_tma(dy.as<float>(), N, dx.as<float>(), K, hi, lo,
                                                                       int(T), int(N), int(K),
                                                                       fast::GemmF32Split{1, int(fast::gemm_f32_k_steps(K))},
                                                                       nullptr, st));
            });
            print(T, "its product, K whole", whole, cublas, "");
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    try {
        Args a;
        const char* usage =
            "bench_fast_gemm: fast::gemm_packed (prefill GEMM) per tile configuration vs cuBLAS bf16\n"
            "  --tokens LIST   token counts (default 512,2048)\n"
            "  --kinds LIST    int4,int8,f32 (default int4; f32: the routers' f32 GEMM)\n"
            "  --runs N        timed calls, median (default 20); --warmup N (default 5)\n"
            "  --filter TEXT   only cases whose label \"<shape> <kind> T=<n>\" contains TEXT\n"
            "  --configs all|auto  time every tile configuration's kernel or only the pick (default all)\n"
            "  --rows          Int4 weights row-major (default: 16-row tiles where they fit, as the backend\n"
            "                  stores them — \"int4t\" in the table)\n";
        bench::KernelArgs args(usage);
        args.ints("--tokens", a.tokens).words("--kinds", a.kinds).count("--runs", a.runs, 1).count("--warmup", a.warmup, 0);
        if (!args.text("--filter", a.filter).choice("--configs", a.all_configs, "all").flag("--rows", a.rows).parse(argc, argv))
            return 0;
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        std::printf("bench_fast_gemm on %s (%d SMs); runs %d, warm-up %d, median; %% of %.0f TFLOP/s; "
                    "vs cuBLAS = cuBLAS time / this time\n\n",
                    p.name, p.multiProcessorCount, a.runs, a.warmup, kPeak / 1e12);
        std::printf("| %-22s | %5s | %-4s | %-30s | %9s | %7s | %6s | %5s | %s\n", "shape N x K", "T", "w", "kernel",
                    "median us", "TFLOP/s", "% peak", "vs cuBLAS", "note");
        Stream stream;
        CublasHandle blas(stream.get());
        Timer timer(stream.get());
        for (const std::string& kind : a.kinds) {
            TS_CHECK(kind == "int4" || kind == "int8" || kind == "f32", "--kinds: {} is not int4, int8 or f32", kind);
            if (kind == "f32") {  // the MoE routers: the flagship's 256 experts + its shared-expert gate row, Qwen3-30B's 128
                bench_f32(a, "router 257x2048", 257, 2048, stream, blas, timer);
                bench_f32(a, "router 128x2048", 128, 2048, stream, blas, timer);
                continue;
            }
            for (const bench::MatmulShape& s : bench::matmul_shapes())
                if (s.prefill) bench_shape(a, s, kind, stream, blas, timer);
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_gemm: error: %s\n", e.what());
        return 1;
    }
}
