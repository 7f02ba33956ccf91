// Hugging Face tensor names -> llama.cpp GGUF names, so models and `tessera convert` speak one
// naming scheme. Names are expected already canonical (no model.language_model. prefix).
#pragma once
#include <optional>
#include <string>

namespace tessera {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight" for architecture `arch`
// (tessera's key: llama, qwen2, qwen3, qwen35, qwen35moe, qwen3next); nullopt if unknown.
std::optional<std::string> hf_to_gguf_name(const std::string& hf_name, const std::string& arch);
// The Gated DeltaNet hybrids (zero-centred norms, recurrent layers).
bool is_hybrid_arch(const std::string& arch);

}  // namespace tessera
