// Rotary position embedding, NeoX (rotate-half) and GPT-J (interleaved), full or partial, with
// the default, linear and llama3 frequency schedules computed as HF transformers does (f32).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

void rope_inv_freq(const RopeParams& p, float* inv_freq) {
    const int dim = p.rot_dims, half = dim / 2;
    for (int i = 0; i < half; ++i) {
        // HF: 1 / base ** (arange(0, dim, 2).float() / dim), all f32.
        const float e = float(2 * i) / float(dim);
        inv_freq[i] = 1.f / std::pow(p.theta, e);
    }
    if (p.linear_factor != 1.f)
        for (int i = 0; i < half; ++i) inv_freq[i] /= p.linear_factor;
    if (p.llama3_factor > 1.f) {
        // HF _compute_llama3_parameters.
        const float factor = p.llama3_factor, lo = p.llama3_low_freq_factor, hi = p.llama3_high_freq_factor;
        const float old_ctx = float(p.llama3_original_ctx);
        const float low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
        for (int i = 0; i < half; ++i) {
            const float f = inv_freq[i];
            const float wavelen = float(2.0 * M_PI) / f;
            float out = wavelen > low_freq_wavelen ? f / factor : f;
            if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
                const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
                out = (1.f - smooth) * out / factor + smooth * out;
            }
            inv_freq[i] = out;
        }
    }
}

void rope(float* x, int64_t T, int64_t tok_stride, int64_t n_head, int64_t head_stride, int64_t D,
          const int32_t* pos, const RopeParams& p) {
    const int rot = p.rot_dims, half = rot / 2;
    TS_CHECK(rot > 0 && rot % 2 == 0 && rot <= D, "rope: rot_dims {} must be even and in (0, head dim {}]", rot, D);
    std::vector<float> inv_freq(static_cast<size_t>(half));
    if (p.inv_freq)
        std::copy(p.inv_freq, p.inv_freq + half, inv_freq.begin());
    else
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
