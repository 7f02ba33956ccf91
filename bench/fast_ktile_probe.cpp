// bench_fast_ktile_probe: the MoE prefill tiles' consumer loop alone (fast_ktile_probe.h) — a
// gate+up k-tile of Int4 weights dequantized into wgmma's A registers against BN activation rows,
// over and over from shared memory with no producer, barriers or global loads — in its forms:
// the production loop ("tiles"), the dequantization alone, the wgmma alone, and the loop over 2,
// 3 and 4 register sets of a half k-tile and over 2 and 4 of a code word (1 to 3 groups of wgmma
// in flight); the loop with a leaner dequantization (code·s in one FMA a pair, the −8·s offsets by one
// more wgmma every 4 k-tiles: "lean", "lean-dequant" alone); the wgmma with independent work beside
// it — the dequantization, integer or f32 operations in its place ("mma+dequant", "int-ops",
// "mma+int-ops", "float-ops", "mma+float-ops"); and the production loop behind the tiles' ring (a
// producer, mbarriers, bulk copies of each stage: its codes and scales from one L2-hot image,
// "ring-l2", or streamed from 256 MB in DRAM, "ring-dram", and that in tiles of 16 k-tiles with an
// epilogue each, "ring-dram/16"; both with the activation rows from 16 MB in L2 rather than one
// image, "ring-dram+x[/16]"; two blocks an SM). Each row: the call's time for `iters` k-tiles a
// warpgroup on every SM, the SM cycles a k-tile round takes (every resident warpgroup one k-tile),
// and that time scaled to 372 warpgroup k-tiles an SM — the persistent gate+up tiles of 48 at 512
// tokens of llama.cpp's shape (118.4 µs on the H100, fifty-third round): how far the loop alone is
// from that kernel.
//   bench_fast_ktile_probe [--bn 16,32,48,64] [--blocks-per-sm 2,3] [--iters N (930)] [--runs N] [--warmup N]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/status.h"
#include "cuda_timer.h"
#include "kernel_args.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_ktile_probe.h"
#include "kernels/cuda/stream.h"

using namespace tessera;
using namespace tessera::cuda;

int main(int argc, char** argv) {
    try {
        std::vector<int64_t> bns = {32, 48, 64}, minbs = {2, 3};
        int iters = 930, runs = 20, warmup = 3;
        bench::KernelArgs args(
            "bench_fast_ktile_probe [--bn 16,32,48,64 (32,48,64)] [--blocks-per-sm 2,3 (2,3)] [--iters N (930)]\n"
            "                       [--runs N (20)] [--warmup N (3)]\n");
        if (!args.ints("--bn", bns)
                 .ints("--blocks-per-sm", minbs)
                 .count("--iters", iters, 12)
                 .count("--runs", runs, 1)
                 .count("--warmup", warmup, 0)
                 .parse(argc, argv))
            return 0;
        iters = iters / 12 * 12;  // whole rounds of every form's register sets (and lean's 4 k-tiles)
        cudaDeviceProp p{};
        TS_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
        int clock_khz = 0;
        TS_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
        std::printf("bench_fast_ktile_probe on %s (%d SMs, %.3f GHz max); %d k-tiles a warpgroup; median of %d runs\n",
                    p.name, p.multiProcessorCount, clock_khz * 1e-6, iters, runs);
        std::printf("(cycles a round at the max clock; \"372 an SM\": the time scaled to 372 warpgroup k-tiles "
                    "an SM)\n\n");
        std::printf("| %3s | %6s | %-12s | %9s | %12s | %12s |\n", "BN", "blk/SM", "form", "call us", "cycles/round",
                    "372 an SM us");
        Stream stream;
        bench::CudaTimer timer(stream.get());
        const bool rings = std::find(minbs.begin(), minbs.end(), 2) != minbs.end();  // (two blocks an SM only)
        for (int64_t bn : bns) {
            const std::vector<uint8_t> h = fast::ktile_probe_make_stage(int(bn), 7);
            DeviceBuffer stage(h.size());
            stage.upload(h.data(), h.size());
            // `bytes` of the stage from byte `from`, copied over and over into `total` bytes (doubling
            // copies on the device); the copies' count
            auto tiled = [&](DeviceBuffer& buf, int64_t from, int64_t bytes, int64_t total) {
                const int64_t copies = rings ? total / bytes : 0;
                buf = DeviceBuffer(size_t(copies * bytes));
                if (copies == 0) return copies;
                TS_CUDA_CHECK(cudaMemcpy(buf.data(), h.data() + from, size_t(bytes), cudaMemcpyHostToDevice));
                for (int64_t have = 1; have < copies; have *= 2)
                    TS_CUDA_CHECK(cudaMemcpy(static_cast<char*>(buf.data()) + have * bytes, buf.data(),
                                             size_t(std::min(have, copies - have) * bytes), cudaMemcpyDeviceToDevice));
                return copies;
            };
            // ring-dram's weights: the stage's codes and scales, 256 MB (past L2); ring-dram+x's activation
            // rows: the stage's, 16 MB (512 tokens × top-8 rows of 2,048 bf16: a prefill chunk in L2)
            const int64_t wb = fast::ktile_probe_weight_bytes(int(bn)), xb = fast::ktile_probe_act_bytes(int(bn));
            DeviceBuffer weights, acts;
            const int64_t wstages = tiled(weights, int64_t(h.size()) - wb, wb, int64_t(256) << 20);
            const int64_t astages = tiled(acts, 0, xb, int64_t(16) << 20);
            for (int64_t minb : minbs) {
                for (auto form : {fast::KtileProbeForm::Tiles, fast::KtileProbeForm::Dequant, fast::KtileProbeForm::Mma,
                                  fast::KtileProbeForm::Sets2, fast::KtileProbeForm::Sets3,
                                  fast::KtileProbeForm::Sets4, fast::KtileProbeForm::Words2,
                                  fast::KtileProbeForm::Words4, fast::KtileProbeForm::Lean,
                                  fast::KtileProbeForm::LeanDequant, fast::KtileProbeForm::MmaDequant,
                                  fast::KtileProbeForm::IntOps, fast::KtileProbeForm::MmaIntOps,
                                  fast::KtileProbeForm::FloatOps, fast::KtileProbeForm::MmaFloatOps,
                                  fast::KtileProbeForm::RingL2,
                                  fast::KtileProbeForm::RingDram}) {
                    const bool ring = form == fast::KtileProbeForm::RingL2 || form == fast::KtileProbeForm::RingDram;
                    if (ring && minb != 2) continue;
                    fast::KtileProbeArgs a;
                    a.bn = int(bn), a.blocks_per_sm = int(minb), a.form = form, a.iters = iters;
                    a.weights = weights.data(), a.weight_stages = wstages;
                    DeviceBuffer out(size_t(fast::ktile_probe_out_floats(a)) * 4);
                    auto time = [&] {
                        return timer.median(warmup, runs, [&] {
                            TS_CUDA_CHECK(fast::launch_ktile_probe(a, stage.data(), static_cast<float*>(out.data()),
                                                                   stream.get()));
                        });
                    };
                    const double wg_per_sm = 2.0 * double(minb);
                    auto line = [&](const std::string& name, double t) {
                        std::printf("| %3lld | %6lld | %-12s | %9.2f | %12.0f | %12.2f |\n", (long long)bn,
                                    (long long)minb, name.c_str(), t * 1e6, t * clock_khz * 1e3 / iters,
                                    t * 1e6 * 372.0 / (double(iters) * wg_per_sm));
                    };
                    line(fast::ktile_probe_form_name(form), time());
                    if (form != fast::KtileProbeForm::RingDram) continue;
                    a.tile_ktiles = 16;  // tiles of 16 k-tiles (gate+up at H = 2,048), an epilogue each
                    line("ring-dram/16", time());
                    a.acts = acts.data(), a.act_stages = astages;  // the activation rows from 16 MB in L2
                    line("ring-dram+x/16", time());
                    a.tile_ktiles = 0;
                    line("ring-dram+x", time());
                }
            }
        }
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_fast_ktile_probe: %s\n", e.what());
        return 1;
    }
}
