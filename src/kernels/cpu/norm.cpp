// RMSNorm over rows: y = x · rsqrt(mean(x²) + eps) · w.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

namespace {
// One row of C values (yr may be xr).
void rms_norm_row(float* yr, const float* xr, const float* w, int64_t C, float eps) {
    // Eight partial sums in double: accurate for long rows and still vectorisable.
    double acc[8] = {};
    int64_t c = 0;
    for (; c + 8 <= C; c += 8)
        for (int j = 0; j < 8; ++j) acc[j] += double(xr[c + j]) * xr[c + j];
    double ss = 0.0;
    for (; c < C; ++c) ss += double(xr[c]) * xr[c];
    for (double a : acc) ss += a;
    const float inv = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
    for (int64_t i = 0; i < C; ++i) yr[i] = xr[i] * inv * w[i];
}
int64_t row_grain(int64_t C) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)); }
}  // namespace

void rms_norm(float* y, int64_t y_stride, const float* x, int64_t x_stride, const float* w, int64_t R, int64_t C,
              float eps) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) rms_norm_row(y + r * y_stride, x + r * x_stride, w, C, eps);
    }, row_grain(C));
}

void rms_norm_heads(const HeadsView& y, const HeadsView& x, const float* w, float eps) {
    const int64_t n = x.n_heads;
    ThreadPool::global().parallel_for(x.T * n, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const int64_t t = r / n, h = r % n;
            rms_norm_row(y.data + t * y.tok_stride + h * y.head_stride, x.data + t * x.tok_stride + h * x.head_stride,
                         w, x.D, eps);
        }
    }, row_grain(x.D));
}

}  // namespace tessera::cpu
