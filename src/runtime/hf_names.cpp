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
constexpr Rule kGlobalRules[] = {
    {"model.embed_tokens.weight", "token_embd.weight"},
    {"model.norm.weight", "output_norm.weight"},
    {"lm_head.weight", "output.weight"},
};
}  // namespace

std::optional<std::string> hf_to_gguf_name(const std::string& name) {
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
    for (const auto& r : kLayerRules)
        if (rest == r.hf) return "blk." + num + "." + std::string(r.gguf);
    return std::nullopt;
}

}  // namespace tessera
