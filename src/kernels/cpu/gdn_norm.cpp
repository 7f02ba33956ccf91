// Elementwise pieces of a Gated DeltaNet layer: the q/k l2 norm, the gated output RMSNorm and
// the decay / write gates (softplus as torch computes it: x > 20 → x).
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

namespace {
// Heads per parallel chunk so a chunk holds at least ~16K elements.
int64_t head_grain(int64_t D) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(D, 1)); }

double sum_squares(const float* x, int64_t n) {
    double acc[8] = {}, ss = 0.0;  // partial sums: accurate and still vectorisable
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += double(x[i + j]) * x[i + j];
    for (; i < n; ++i) ss += double(x[i]) * x[i];
    for (double a : acc) ss += a;
    return ss;
}

inline float silu(float x) { return x / (1.f + std::exp(-x)); }
}  // namespace

void l2_norm(const HeadsView& x, float eps, float scale) {
    ThreadPool::global().parallel_for(x.T * x.n_heads, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            float* row = x.data + (r / x.n_heads) * x.tok_stride + (r % x.n_heads) * x.head_stride;
            const float inv = float(1.0 / std::sqrt(sum_squares(row, x.D) + double(eps)));
            for (int64_t i = 0; i < x.D; ++i) row[i] = row[i] * inv * scale;
        }
    }, head_grain(x.D));
}

void rms_norm_gated(const HeadsView& y, const HeadsView& x, const HeadsView& z, const float* w, float eps) {
    ThreadPool::global().parallel_for(x.T * x.n_heads, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const int64_t t = r / x.n_heads, h = r % x.n_heads;
            const float* xr = x.data + t * x.tok_stride + h * x.head_stride;
            const float* zr = z.data + t * z.tok_stride + h * z.head_stride;
            float* yr = y.data + t * y.tok_stride + h * y.head_stride;
            const float inv = float(1.0 / std::sqrt(sum_squares(xr, x.D) / double(x.D) + double(eps)));
            for (int64_t i = 0; i < x.D; ++i) yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
        }
    }, head_grain(x.D));
}

void gdn_gates(float* beta, int64_t beta_s, float* g, int64_t g_s, const float* b, int64_t b_s, const float* a,
               int64_t a_s, const float* neg_exp_a, const float* dt_bias, int64_t T, int64_t nv) {
    ThreadPool::global().parallel_for(T, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t)
            for (int64_t h = 0; h < nv; ++h) {
                const float x = a[t * a_s + h] + dt_bias[h];
                const float softplus = x > 20.f ? x : std::log1p(std::exp(x));
                g[t * g_s + h] = neg_exp_a[h] * softplus;
                beta[t * beta_s + h] = 1.f / (1.f + std::exp(-b[t * b_s + h]));
            }
    }, head_grain(nv));
}

}  // namespace tessera::cpu
