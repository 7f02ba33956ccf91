// Gating ops of the hybrid models: the sigmoid output gate (y = x ⊙ σ(g)) and the MoE router
// (softmax over experts, top-k, optional renormalisation).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

namespace {
int64_t row_grain(int64_t C) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)); }
inline float sigmoid(float v) { return 1.f / (1.f + std::exp(-v)); }  // exp overflow -> 0, fine
}  // namespace

void sigmoid_mul(float* y, int64_t ys, const float* x, int64_t xs, const float* g, int64_t gs, bool per_row,
                 int64_t R, int64_t C) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * xs;
            const float* gr = g + r * gs;
            float* yr = y + r * ys;
            if (per_row) {
                const float s = sigmoid(gr[0]);
                for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * s;
            } else {
                for (int64_t c = 0; c < C; ++c) yr[c] = xr[c] * sigmoid(gr[c]);
            }
        }
    }, row_grain(C));
}

// Ranking of router probabilities: larger first, NaN above everything (as torch.topk ranks it),
// equal values by the lower expert index. torch.topk documents tie order as unspecified, and it
// differs by device (torch 2.11, p = [.1 .3 .3 0 .3 .2], k = 3: cpu [2 4 1], cuda [4 2 1]), so
// no order matches it; the lower index is the stable-sort order, the same on every backend.
namespace {
inline bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na != nb) return na;
    if (!na && a != b) return a > b;
    return ia < ib;
}
}  // namespace

void sigmoid_mul_heads(const HeadsView& y, const HeadsView& x, const HeadsView& g) {
    const int64_t n = x.n_heads, D = x.D;
    ThreadPool::global().parallel_for(x.T * n, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const int64_t t = r / n, h = r % n;
            const float* xr = x.data + t * x.tok_stride + h * x.head_stride;
            const float* gr = g.data + t * g.tok_stride + h * g.head_stride;
            float* yr = y.data + t * y.tok_stride + h * y.head_stride;
            for (int64_t c = 0; c < D; ++c) yr[c] = xr[c] * sigmoid(gr[c]);
        }
    }, row_grain(D));
}

void moe_topk(const float* logits, int64_t ls, int64_t T, int64_t E, const MoeRouting& r, int32_t* ids,
              float* weights) {
    const int k = r.k, slots = r.slots();
    const bool renormalize = r.renormalize;
    TS_CHECK(E > 0 && k >= 1 && k <= E, "moe_topk: k = {} must be in [1, {}] (the number of experts)", k, E);
    ThreadPool::global().parallel_for(T, [&](int64_t b, int64_t e) {
        std::vector<float> p(static_cast<size_t>(E));
        std::vector<int32_t> order(static_cast<size_t>(E));
        for (int64_t t = b; t < e; ++t) {
            // p = softmax(logits[t]) in f32 (the sum in double, as cpu::softmax).
            const float* l = logits + t * ls;
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t i = 0; i < E; ++i) m = std::max(m, l[i]);
            double sum = 0.0;
            for (int64_t i = 0; i < E; ++i) {
                p[size_t(i)] = std::exp(l[i] - m);
                sum += p[size_t(i)];
            }
            const float inv = float(1.0 / sum);
            for (int64_t i = 0; i < E; ++i) p[size_t(i)] *= inv;

            for (int64_t i = 0; i < E; ++i) order[size_t(i)] = int32_t(i);
            std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t c) {
                return ranks_before(p[size_t(a)], a, p[size_t(c)], c);
            });
            int32_t* id = ids + t * slots;
            float* w = weights + t * slots;
            float wsum = 0.f;
            for (int j = 0; j < k; ++j) {
                id[j] = order[size_t(j)];
                w[j] = p[size_t(id[j])];
                wsum += w[j];
            }
            if (renormalize)
                for (int j = 0; j < k; ++j) w[j] /= wsum;
            if (r.shared) {
                id[k] = int32_t(E);
                w[k] = sigmoid(l[E]);
            }
        }
    }, row_grain(E));
}

}  // namespace tessera::cpu
