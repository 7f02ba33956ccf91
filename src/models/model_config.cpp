#include "models/model_config.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>

#include "core/status.h"

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

void ModelConfig::check(const std::string& source) const {
    const auto within = [&](const char* what, int64_t v, int64_t max) {
        TS_CHECK(v >= 0 && v <= max, "{}: {} = {} is outside [0, {}]", source, what, v, max);
    };
    within("vocabulary size", vocab_size, int64_t{1} << 24);
    within("hidden size", hidden, int64_t{1} << 17);
    within("layers", n_layers, int64_t{1} << 12);
    within("attention heads", n_heads, int64_t{1} << 12);
    within("key/value heads", n_kv_heads, int64_t{1} << 12);
    within("head dim", head_dim, int64_t{1} << 13);
    within("feed-forward size", ffn_hidden, int64_t{1} << 20);
    within("context length", max_ctx, INT64_MAX);
    within("linear attention key heads", gdn_k_heads, int64_t{1} << 12);
    within("linear attention value heads", gdn_v_heads, int64_t{1} << 12);
    within("linear attention key dim", gdn_dk, int64_t{1} << 13);
    within("linear attention value dim", gdn_dv, int64_t{1} << 13);
    within("conv kernel", conv_kernel, int64_t{1} << 8);
    within("experts", n_experts, int64_t{1} << 16);
    within("experts a token", n_experts_used, n_experts);
    within("expert feed-forward size", expert_ffn, int64_t{1} << 20);
    within("shared expert feed-forward size", shared_expert_ffn, int64_t{1} << 20);
    within("multi-token-prediction layers", mtp_layers, int64_t{1} << 8);
    TS_CHECK(full_attention.empty() || int64_t(full_attention.size()) == n_layers, "{}: {} layer types for {} layers",
             source, full_attention.size(), n_layers);
    TS_CHECK(moe_layer.empty() || int64_t(moe_layer.size()) == n_layers, "{}: {} MoE flags for {} layers", source,
             moe_layer.size(), n_layers);
    if (!full_attention.empty())  // a hybrid: its Gated DeltaNet sizes, whatever its layer types
        TS_CHECK(gdn_k_heads > 0 && gdn_v_heads > 0 && gdn_v_heads % gdn_k_heads == 0 && gdn_dk > 0 && gdn_dv > 0 &&
                     conv_kernel > 0,
                 "{}: linear attention sizes invalid: {} key heads, {} value heads, dk {}, dv {}, conv {}", source,
                 gdn_k_heads, gdn_v_heads, gdn_dk, gdn_dv, conv_kernel);
    if (!moe_layer.empty())  // a MoE model: its expert sizes, whatever its dense layers
        TS_CHECK(n_experts > 0 && n_experts_used > 0 && expert_ffn > 0, "{}: MoE sizes invalid: {} experts, top-{}, ffn {}",
                 source, n_experts, n_experts_used, expert_ffn);
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
