// Causal depthwise conv1d + SiLU over each sequence of a batch, with the last K-1 inputs of every
// sequence kept in its state slot (decode continues from them).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, const float* w, int64_t C, int64_t K,
                 float* state, int64_t slot_stride, const SeqPlan& plan) {
    // wt[K, C]: tap-major so the inner loop runs along contiguous channels.
    std::vector<float> wt(size_t(K * C));
    for (int64_t c = 0; c < C; ++c)
        for (int64_t j = 0; j < K; ++j) wt[size_t(j * C + c)] = w[c * K + j];
    constexpr int64_t kBlock = 256;  // channels per work item
    const int64_t n_blocks = (C + kBlock - 1) / kBlock;
    ThreadPool::global().parallel_for(int64_t(plan.n_seqs) * n_blocks, [&](int64_t b, int64_t e) {
        float acc[kBlock];
        std::vector<float> padding_state;  // slot -1: a padding sequence starts from zeros, keeps nothing
        for (int64_t item = b; item < e; ++item) {
            // Block-major, like the delta rule: a long sequence's blocks spread over the pool's chunks.
            const int64_t s = item % plan.n_seqs, c0 = (item / plan.n_seqs) * kBlock, nc = std::min(kBlock, C - c0);
            const int64_t t0 = plan.q_start[s], n = plan.q_start[s + 1] - t0;
            const bool padding = plan.slot[s] < 0;
            if (padding) padding_state.assign(size_t(std::max<int64_t>(K - 1, 0) * C), 0.f);
            // Row r (oldest first) at st + r*C.
            float* st = padding ? padding_state.data() + c0 : state + plan.slot[s] * slot_stride + c0;
            // Input p of the sequence (p < 0: from the state, which holds inputs -(K-1) .. -1).
            auto input = [&](int64_t p) -> const float* {
                return p >= 0 ? x + (t0 + p) * xs + c0 : st + (K - 1 + p) * C;
            };
            for (int64_t i = 0; i < n; ++i) {
                std::fill(acc, acc + nc, 0.f);
                for (int64_t j = 0; j < K; ++j) {
                    const float* in = input(i - (K - 1) + j);
                    const float* wj = wt.data() + j * C + c0;
                    for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * in[c];
                }
                float* yr = y + (t0 + i) * ys + c0;
                for (int64_t c = 0; c < nc; ++c) yr[c] = acc[c] / (1.f + std::exp(-acc[c]));
            }
            // New state row r = input n-(K-1)+r; ascending r only reads rows not yet rewritten.
            if (n > 0 && !padding)
                for (int64_t r = 0; r < K - 1; ++r) {
                    const float* src = input(n - (K - 1) + r);
                    std::copy(src, src + nc, st + r * C);
                }
        }
    });
}

}  // namespace tessera::cpu
