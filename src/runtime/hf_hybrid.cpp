// Hugging Face Qwen3.5 / Qwen3.5-MoE / Qwen3-Next checkpoints: their config.json fields, and the
// tensor transforms that bring them to llama.cpp's conventions (which the models expect).
// Qwen3-Next's fused projections keep HF's grouped row order, as llama.cpp's ssm_in / ssm_ba do.
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/half.h"
#include "core/status.h"
#include "formats/hf_config.h"
#include "formats/quants.h"
#include "runtime/hf_source.h"

namespace tessera {

void hf_hybrid_config(const HfConfig& c, ModelConfig& m) {
    const int64_t L = m.n_layers;
    m.full_attention.assign(size_t(L), 0);
    if (c.has("layer_types")) {
        const auto types = c.get_string_list("layer_types");
        TS_CHECK(int64_t(types.size()) >= L, "{}: layer_types has {} entries for {} layers", c.source(), types.size(), L);
        for (int64_t i = 0; i < L; ++i) {
            const std::string& t = types[size_t(i)];
            TS_CHECK(t == "full_attention" || t == "linear_attention", "{}: layer_types[{}] = '{}' is not supported",
                     c.source(), i, t);
            m.full_attention[size_t(i)] = t == "full_attention";
        }
    } else {
        const int64_t every = c.get_int("full_attention_interval", 4);
        TS_CHECK(every >= 1, "{}: full_attention_interval {} invalid", c.source(), every);
        for (int64_t i = 0; i < L; ++i) m.full_attention[size_t(i)] = (i + 1) % every == 0;
    }
    m.attn_output_gate = c.get_bool("attn_output_gate", true);
    m.gdn_k_heads = c.get_int("linear_num_key_heads");
    m.gdn_v_heads = c.get_int("linear_num_value_heads");
    m.gdn_dk = c.get_int("linear_key_head_dim");
    m.gdn_dv = c.get_int("linear_value_head_dim");
    m.conv_kernel = c.get_int("linear_conv_kernel_dim", 4);  // (checked with the rest: ModelConfig::check)
    m.gdn_tiled_heads = false;  // HF keeps value heads grouped by key head
    m.mtp_layers = c.get_int("mtp_num_hidden_layers", 0);
    if (m.arch == "qwen35") return;
    m.n_experts = c.get_int("num_experts");
    m.n_experts_used = c.get_int("num_experts_per_tok");
    m.expert_ffn = c.get_int("moe_intermediate_size");
    m.shared_expert_ffn = c.get_int("shared_expert_intermediate_size", 0);
    m.moe_layer.assign(size_t(L), 1);
    if (m.arch == "qwen3next") {  // Qwen3.5-MoE always renormalises and has MoE in every layer
        m.norm_topk = c.get_bool("norm_topk_prob", true);
        const int64_t step = c.get_int("decoder_sparse_step", 1);
        const auto dense = c.get_int_list("mlp_only_layers", {});
        for (int64_t i = 0; i < L; ++i) {
            bool moe = step > 0 && (i + 1) % step == 0;
            for (int64_t d : dense) moe = moe && d != i;
            m.moe_layer[size_t(i)] = moe;
        }
    }
}

void HfSource::derive_hybrid_tensors() {
    const ModelConfig& c = config_;
    auto plus_one = [&](const std::string& name) {
        if (!has(name) || mlx_) return;  // mlx-lm adds the 1 when it converts
        const Tensor src = get(name);
        std::vector<float> v(size_t(src.numel()));
        dequantize_row(src.dtype, src.data, v.data(), src.numel());
        Tensor d = derive(name, DType::F32, {src.numel()});
        for (size_t i = 0; i < v.size(); ++i) d.ptr<float>()[i] = v[i] + 1.f;
    };
    plus_one("output_norm.weight");
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        for (const char* n : {"attn_norm.weight", "post_attention_norm.weight", "attn_q_norm.weight", "attn_k_norm.weight"})
            plus_one(p + n);
        if (c.is_attention_layer(il)) continue;
        // ssm_a = -exp(A_log)
        const Tensor a_log = get(p + "ssm_a_log");
        std::vector<float> v(size_t(a_log.numel()));
        dequantize_row(a_log.dtype, a_log.data, v.data(), a_log.numel());
        Tensor a = derive(p + "ssm_a", DType::F32, {a_log.numel()});
        for (size_t i = 0; i < v.size(); ++i) a.ptr<float>()[i] = -std::exp(v[i]);
        derived_.erase(p + "ssm_a_log");
        map_.erase(p + "ssm_a_log");
        // conv1d [C, 1, K] -> [C, K]
        const Tensor conv = get(p + "ssm_conv1d.weight");
        // HF stores [C, 1, K], MLX [C, K, 1]: either way C rows of K taps.
        Tensor cf = derive(p + "ssm_conv1d.weight", DType::F32, {conv.dim(0), conv.numel() / conv.dim(0)});
        TS_CHECK(conv.numel() == cf.numel(), "{}: tensor {}ssm_conv1d: unexpected shape {}", dir_, p, conv.shape_str());
        dequantize_row(conv.dtype, conv.data, cf.ptr<float>(), conv.numel());
        // Qwen3-Next's fused in_proj_qkvz / in_proj_ba stay fused (llama.cpp's ssm_in / ssm_ba);
        // GatedDeltaNet::load regroups their rows.
    }
}

}  // namespace tessera
