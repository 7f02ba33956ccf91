#include "models/model_config.h"

#include <fmt/format.h>

#include <cmath>

namespace tessera {

std::string ModelConfig::describe() const {
    std::string extra;
    if (n_recurrent_layers() > 0)
        extra += fmt::format(", {} Gated DeltaNet layers ({}/{} heads x {}/{})", n_recurrent_layers(), gdn_k_heads,
                             gdn_v_heads, gdn_dk, gdn_dv);
    if (n_experts > 0) extra += fmt::format(", {} experts top-{} x {}", n_experts, n_experts_used, expert_ffn);
    return fmt::format("{}: vocab {}, hidden {}, layers {}, heads {}/{} x {}, ffn {}, ctx {}, rope {} dims theta {}{}{}",
                       arch, vocab_size, hidden, n_layers, n_heads, n_kv_heads, head_dim, ffn_hidden, max_ctx,
                       rot_dims, rope_theta, tied_embeddings ? ", tied embeddings" : "", extra);
}

int64_t ModelConfig::n_attention_layers() const {
    int64_t n = 0;
    for (int64_t il = 0; il < n_layers; ++il) n += is_attention_layer(il);
    return n;
}

std::vector<float> rope_default_inv_freq(int64_t rot_dims, float theta) {
    std::vector<float> f(size_t(rot_dims / 2));
    for (int64_t i = 0; i < rot_dims / 2; ++i)
        f[size_t(i)] = float(1.0 / std::pow(double(theta), double(2 * i) / double(rot_dims)));
    return f;
}

void rope_apply_llama3(std::vector<float>& inv_freq, float factor, float low_freq_factor, float high_freq_factor,
                       int64_t original_ctx) {
    const double low_wavelen = double(original_ctx) / low_freq_factor;
    const double high_wavelen = double(original_ctx) / high_freq_factor;
    for (float& f : inv_freq) {
        const double wavelen = 2 * M_PI / f;
        if (wavelen > low_wavelen) {
            f = float(f / factor);
        } else if (wavelen >= high_wavelen) {  // medium band: interpolate
            const double smooth = (double(original_ctx) / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
            f = float((1 - smooth) * f / factor + smooth * f);
        }
    }
}

}  // namespace tessera
