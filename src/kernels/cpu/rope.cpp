// Rotary position embedding, NeoX (rotate-half) and GPT-J (interleaved), full or partial; the
// frequencies come from tessera::rope_inv_freq (kernels/backend.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void rope(float* x, int64_t T, int64_t tok_stride, int64_t n_head, int64_t head_stride, int64_t D,
          const int32_t* pos, const RopeParams& p) {
    const int rot = p.rot_dims, half = rot / 2;
    TS_CHECK(rot > 0 && rot % 2 == 0 && rot <= D, "rope: rot_dims {} must be even and in (0, head dim {}]", rot, D);
    std::vector<float> inv_freq(static_cast<size_t>(half));
    rope_inv_freq(p, inv_freq.data());
    ThreadPool::global().parallel_for(T, [&](int64_t b, int64_t e) {
        std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
        for (int64_t t = b; t < e; ++t) {
            for (int i = 0; i < half; ++i) {
                const float angle = float(pos[t]) * inv_freq[size_t(i)];  // f32 like HF
                cs[size_t(i)] = float(std::cos(double(angle)));
                sn[size_t(i)] = float(std::sin(double(angle)));
            }
            for (int64_t h = 0; h < n_head; ++h) {
                float* v = x + t * tok_stride + h * head_stride;
                for (int i = 0; i < half; ++i) {
                    const int i0 = p.style == RopeStyle::NeoX ? i : 2 * i;
                    const int i1 = p.style == RopeStyle::NeoX ? i + half : 2 * i + 1;
                    const float a = v[i0], c = v[i1];
                    v[i0] = a * cs[size_t(i)] - c * sn[size_t(i)];
                    v[i1] = c * cs[size_t(i)] + a * sn[size_t(i)];
                }
            }
        }
    });
}

}  // namespace tessera::cpu
