// ModelConfig: the hyper-parameters a model file needs, read from HF config.json or GGUF
// metadata into one struct, so the model code never looks at either format.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace tessera {

struct ModelConfig {
    std::string arch;          // registry key: "llama", "qwen2", "qwen3", ...
    int64_t vocab_size = 0;
    int64_t hidden = 0;        // H
    int64_t n_layers = 0;
    int64_t n_heads = 0;       // query heads
    int64_t n_kv_heads = 0;    // key/value heads (GQA)
    int64_t head_dim = 0;      // D
    int64_t ffn_hidden = 0;    // SwiGLU intermediate size
    float rms_eps = 1e-6f;
    int64_t max_ctx = 0;       // the model's trained context length
    bool tied_embeddings = false;

    // RoPE: style and the inverse frequencies [rot_dims / 2] derived once at load from
    // theta and any scaling (HF rope_scaling / rope_parameters, or GGUF rope_freqs).
    int64_t rot_dims = 0;
    float rope_theta = 10000.f;
    RopeStyle rope_style = RopeStyle::NeoX;
    std::vector<float> inv_freq;

    // ---- Gated DeltaNet hybrids (qwen35, qwen35moe, qwen3next) ----
    // Per layer: 1 = full (gated) attention, 0 = Gated DeltaNet. Empty: every layer is attention.
    std::vector<uint8_t> full_attention;
    bool attn_output_gate = false;  // q_proj yields [q | gate] per head; out ⊙ σ(gate)
    int64_t gdn_k_heads = 0, gdn_v_heads = 0, gdn_dk = 0, gdn_dv = 0, conv_kernel = 0;
    bool gdn_tiled_heads = false;   // llama.cpp's re-tiled value-head order (qwen35* GGUF)

    // ---- MoE ----
    int64_t n_experts = 0, n_experts_used = 0, expert_ffn = 0, shared_expert_ffn = 0;
    bool norm_topk = true;          // renormalise the top-k router weights
    std::vector<uint8_t> moe_layer; // per layer: 1 = sparse MoE block, 0 = dense MLP (empty: none)
    int64_t mtp_layers = 0;         // multi-token-prediction layers in the checkpoint (kept, unused)

    bool is_attention_layer(int64_t il) const { return full_attention.empty() || full_attention[size_t(il)]; }
    bool is_moe_layer(int64_t il) const { return !moe_layer.empty() && moe_layer[size_t(il)]; }
    int64_t n_attention_layers() const;
    int64_t n_recurrent_layers() const { return n_layers - n_attention_layers(); }

    std::string describe() const;

    // Refuses sizes no model has (negative, or past generous bounds: hidden 131,072, 4,096 layers,
    // heads, head dim 8,192, vocabulary 2^24, experts 65,536 …) so that a hostile config.json or GGUF
    // is an error, not an allocation sized from it; and, once the hybrid fields are read, sizes a
    // Gated DeltaNet or MoE layer cannot run with. `source` names the file in the error. The
    // readers call it before anything is sized from the dimensions, and again at their end.
    void check(const std::string& source) const;
};

// Inverse frequencies theta^(-2i/rot_dims), i < rot_dims/2 (HF default rope).
std::vector<float> rope_default_inv_freq(int64_t rot_dims, float theta);
// HF `_compute_llama3_parameters`: scales low frequencies by 1/factor, smoothly in between.
void rope_apply_llama3(std::vector<float>& inv_freq, float factor, float low_freq_factor, float high_freq_factor,
                       int64_t original_ctx);

}  // namespace tessera
