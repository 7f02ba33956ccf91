#include "runtime/hf_names.h"

#include <cstdlib>
#include <string_view>

namespace tessera {

namespace {
struct Rule {
    std::string_view hf;    // suffix after "model.layers.N."
    std::string_view gguf;  // suffix after "blk.N."
};
// Dense llama / qwen2 / qwen3 blocks.
constexpr Rule kLayerRules[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
    {"self_attn.o_proj.bias", "attn_output.bias"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};
// Hybrid Qwen3.5 / Qwen3-Next blocks (llama.cpp's qwen35 / qwen35moe / qwen3next names). Tensors
// without a llama.cpp twin get a tessera name in the same style (per-expert, A_log).
constexpr Rule kHybridRules[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"post_attention_layernorm.weight", "post_attention_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},  // q and gate interleaved per head
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"linear_attn.in_proj_qkv.weight", "attn_qkv.weight"},
    {"linear_attn.in_proj_z.weight", "attn_gate.weight"},
    {"linear_attn.in_proj_b.weight", "ssm_beta.weight"},
    {"linear_attn.in_proj_a.weight", "ssm_alpha.weight"},
    {"linear_attn.in_proj_qkvz.weight", "ssm_in.weight"},  // Qwen3-Next: fused, grouped per key head
    {"linear_attn.in_proj_ba.weight", "ssm_ba.weight"},
    {"linear_attn.conv1d.weight", "ssm_conv1d.weight"},
    {"linear_attn.dt_bias", "ssm_dt.bias"},
    {"linear_attn.A_log", "ssm_a_log"},
    {"linear_attn.norm.weight", "ssm_norm.weight"},
    {"linear_attn.out_proj.weight", "ssm_out.weight"},
    {"mlp.gate.weight", "ffn_gate_inp.weight"},
    {"mlp.experts.gate_up_proj", "ffn_gate_up_exps.weight"},
    {"mlp.experts.down_proj", "ffn_down_exps.weight"},
    {"mlp.switch_mlp.gate_proj.weight", "ffn_gate_exps.weight"},  // MLX (mlx-lm) stacked experts
    {"mlp.switch_mlp.up_proj.weight", "ffn_up_exps.weight"},
    {"mlp.switch_mlp.down_proj.weight", "ffn_down_exps.weight"},
    {"mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    {"mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    {"mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
    {"mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
};

constexpr Rule kGlobalRules[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
}  // namespace

bool is_hybrid_arch(const std::string& arch) { return arch == "qwen35" || arch == "qwen35moe" || arch == "qwen3next"; }

std::optional<std::string> hf_to_gguf_name(const std::string& name, const std::string& arch) {
    for (const auto& r : kGlobalRules)
        if (name == r.hf) return std::string(r.gguf);
    constexpr std::string_view prefix = "model.layers.";
    if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
    const size_t num_end = name.find('.', prefix.size());
    if (num_end == std::string::npos || num_end == prefix.size()) return std::nullopt;
    const std::string num = name.substr(prefix.size(), num_end - prefix.size());
    for (char c : num)
        if (c < '0' || c > '9') return std::nullopt;
    const std::string_view rest = std::string_view(name).substr(num_end + 1);
    const std::string blk = "blk." + num + ".";
    if (!is_hybrid_arch(arch)) {
        for (const auto& r : kLayerRules)
            if (rest == r.hf) return blk + std::string(r.gguf);
        return std::nullopt;
    }
    for (const auto& r : kHybridRules)
        if (rest == r.hf) return blk + std::string(r.gguf);
    // Older checkpoints: one Linear per expert, mlp.experts.E.{gate,up,down}_proj.weight.
    constexpr std::string_view experts = "mlp.experts.";
    if (rest.compare(0, experts.size(), experts) == 0) {
        const std::string_view tail = rest.substr(experts.size());
        const size_t dot = tail.find('.');
        if (dot == std::string_view::npos || dot == 0) return std::nullopt;
        const std::string_view e = tail.substr(0, dot), proj = tail.substr(dot + 1);
        for (char c : e)
            if (c < '0' || c > '9') return std::nullopt;
        for (const char* which : {"gate", "up", "down"})
            if (proj == std::string(which) + "_proj.weight")
                return blk + "ffn_" + which + "_exps." + std::string(e) + ".weight";
    }
    return std::nullopt;
}

}  // namespace tessera
