// The host side of the chunked GDN's phase stamps (fast_gdn_phases.h); empty unless the build stamps.
#include "kernels/cuda/fast_gdn_phases.h"

#if TESSERA_GDN_PHASES
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tessera::cuda::fast::detail {

namespace {
unsigned long long* g_buf = nullptr;
int g_calls = 0;
}  // namespace

unsigned long long* gdn_phases_begin(cudaStream_t stream) {
    const char* prefix = std::getenv("TESSERA_GDN_PHASES");
    const char* which = std::getenv("TESSERA_GDN_PHASES_CALL");
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;  // (a captured call cannot wait for its stamps)
    if (!prefix || cudaStreamIsCapturing(stream, &capture) != cudaSuccess || capture != cudaStreamCaptureStatusNone ||
        ++g_calls != (which ? std::atoi(which) : 6))
        return nullptr;
    const size_t bytes = sizeof(unsigned long long) * kPhaseWords;
    if (!g_buf && cudaMalloc(&g_buf, bytes) != cudaSuccess) {
        g_buf = nullptr;
        std::fprintf(stderr, "gdn phases: no room for the stamps (%zu bytes)\n", bytes);
        return nullptr;
    }
    return cudaMemsetAsync(g_buf, 0, bytes, stream) == cudaSuccess ? g_buf : nullptr;
}

void gdn_phases_end(const unsigned long long* buf, int64_t items, int64_t heads, int64_t chunks, cudaStream_t stream) {
    std::vector<unsigned long long> h(kPhaseWords);
    if (cudaStreamSynchronize(stream) != cudaSuccess ||
        cudaMemcpy(h.data(), buf, h.size() * sizeof(h[0]), cudaMemcpyDeviceToHost) != cudaSuccess) {
        std::fprintf(stderr, "gdn phases: the stamped call failed\n");
        return;
    }
    const std::string prefix = std::getenv("TESSERA_GDN_PHASES");
    FILE* f = std::fopen((prefix + "_prep.csv").c_str(), "w");
    FILE* g = std::fopen((prefix + "_pass.csv").c_str(), "w");
    if (!f || !g) {
        std::fprintf(stderr, "gdn phases: cannot write %s_*.csv\n", prefix.c_str());
        if (f) std::fclose(f);
        if (g) std::fclose(g);
        return;
    }
    std::fprintf(f, "item,sm,gt_start,gt_end,c0,c1,c2,c3,c4,c5,c6,c7,c8\n");
    for (int64_t i = 0; i < items && uint64_t(i) < kPhaseMaxItems; ++i) {
        const unsigned long long* r = h.data() + kPhaseItemWords * uint64_t(i);
        if (!r[1]) continue;  // (not a stamped item: another prep, or nothing to do)
        std::fprintf(f, "%lld,%llu,%llu,%llu", static_cast<long long>(i), r[0], r[1], r[11]);
        for (int k = 0; k < 9; ++k) std::fprintf(f, ",%llu", r[2 + k]);
        std::fprintf(f, "\n");
    }
    std::fprintf(g, "head,chunk,ready,start,end,block_start\n");
    for (int64_t hd = 0; hd < heads && uint64_t(hd) < kPhaseMaxHeads; ++hd)
        for (int64_t c = 0; c < chunks && uint64_t(c) < kPhaseMaxChunks; ++c) {
            const uint64_t at = kPhasePassBase + 4 * (uint64_t(hd) * kPhaseMaxChunks + uint64_t(c));
            const unsigned long long* r = h.data() + at;
            if (!r[1]) continue;
            std::fprintf(g, "%lld,%lld,%llu,%llu,%llu,%llu\n", static_cast<long long>(hd), static_cast<long long>(c),
                         r[0], r[1], r[2], c == 0 ? r[3] : 0ull);
        }
    std::fclose(f);
    std::fclose(g);
    std::fprintf(stderr, "gdn phases: call %d stamped into %s_prep.csv and %s_pass.csv\n", g_calls, prefix.c_str(),
                 prefix.c_str());
}

}  // namespace tessera::cuda::fast::detail
#endif
