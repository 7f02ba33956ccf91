// RMSNorm over rows: y = x · rsqrt(mean(x²) + eps) · w.
#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void rms_norm(float* y, int64_t y_stride, const float* x, int64_t x_stride, const float* w, int64_t R, int64_t C,
              float eps) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* xr = x + r * x_stride;
            float* yr = y + r * y_stride;
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
    }, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)));
}

}  // namespace tessera::cpu
