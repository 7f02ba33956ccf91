// Hugging Face tensor names -> llama.cpp GGUF names, so models and `tessera convert` speak one
// naming scheme. Names are expected already canonical (no model.language_model. prefix).
#pragma once
#include <optional>
#include <string>

namespace tessera {

// "model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"; nullopt if unknown.
std::optional<std::string> hf_to_gguf_name(const std::string& hf_name);

}  // namespace tessera
