// Backend-neutral helpers shared by every backend: the RoPE frequency schedule.
#include "kernels/backend.h"

#include <algorithm>
#include <cmath>

namespace tessera {

void rope_inv_freq(const RopeParams& p, float* inv_freq) {
    const int dim = p.rot_dims, half = dim / 2;
    if (p.inv_freq) {
        std::copy(p.inv_freq, p.inv_freq + half, inv_freq);
        return;
    }
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

}  // namespace tessera
