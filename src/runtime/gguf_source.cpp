#include "runtime/gguf_source.h"

#include "core/status.h"
#include "models/model_config.h"

namespace tessera {

Tensor GgufSource::get(const std::string& name) const {
    return with_context(file_->path(), [&] { return file_->tensor(name); });
}

std::vector<std::string> GgufSource::names() const {
    std::vector<std::string> v;
    for (const auto& t : file_->tensors()) v.push_back(t.name);
    return v;
}

namespace {

// The hybrid part of the metadata (llama.cpp's qwen35 / qwen35moe / qwen3next keys).
void gguf_hybrid_config(const GgufFile& f, ModelConfig& c) {
    const std::string a = c.arch + ".";
    const int64_t every = f.find_i64(a + "full_attention_interval").value_or(4);
    TS_CHECK(every >= 1, "full_attention_interval {} invalid", every);
    c.full_attention.assign(size_t(c.n_layers), 0);
    for (int64_t i = 0; i < c.n_layers; ++i) c.full_attention[size_t(i)] = (i + 1) % every == 0;
    c.attn_output_gate = true;
    c.conv_kernel = f.get_i64(a + "ssm.conv_kernel");
    c.gdn_dk = f.get_i64(a + "ssm.state_size");
    c.gdn_k_heads = f.get_i64(a + "ssm.group_count");
    c.gdn_v_heads = f.get_i64(a + "ssm.time_step_rank");
    const int64_t inner = f.get_i64(a + "ssm.inner_size");
    TS_CHECK(c.gdn_k_heads > 0 && c.gdn_v_heads > 0 && c.gdn_v_heads % c.gdn_k_heads == 0 && inner % c.gdn_v_heads == 0,
             "ssm sizes invalid: group_count {}, time_step_rank {}, inner_size {}", c.gdn_k_heads, c.gdn_v_heads, inner);
    c.gdn_dv = inner / c.gdn_v_heads;
    // llama.cpp re-tiles Qwen3.5's value heads (h' = j * nk + g); Qwen3-Next keeps HF's grouping.
    c.gdn_tiled_heads = c.arch != "qwen3next";
    c.mtp_layers = f.find_i64(a + "nextn_predict_layers").value_or(0);
    if (c.arch == "qwen35") return;
    c.n_experts = f.get_i64(a + "expert_count");
    c.n_experts_used = f.get_i64(a + "expert_used_count");
    c.expert_ffn = f.get_i64(a + "expert_feed_forward_length");
    c.shared_expert_ffn = f.find_i64(a + "expert_shared_feed_forward_length").value_or(0);
    c.norm_topk = f.find_bool(a + "expert_weights_norm").value_or(true);
    c.moe_layer.assign(size_t(c.n_layers), 1);
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
    return with_context(f.path(), [&] {
        ModelConfig c;
        c.arch = f.architecture();
        TS_CHECK(!c.arch.empty(), "no general.architecture");
        const std::string a = c.arch + ".";
        c.hidden = f.get_i64(a + "embedding_length");
        c.n_layers = f.get_i64(a + "block_count");
        c.n_heads = f.get_i64(a + "attention.head_count");
        c.n_kv_heads = f.find_i64(a + "attention.head_count_kv").value_or(c.n_heads);
        TS_CHECK(c.hidden > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0,
                 "bad dimensions: embedding_length {}, block_count {}, head_count {}, head_count_kv {}", c.hidden,
                 c.n_layers, c.n_heads, c.n_kv_heads);
        c.head_dim = f.find_i64(a + "attention.key_length").value_or(c.hidden / c.n_heads);
        c.ffn_hidden = f.find_i64(a + "feed_forward_length").value_or(0);
        c.rms_eps = f.find_f32(a + "attention.layer_norm_rms_epsilon").value_or(1e-6f);
        c.max_ctx = f.find_i64(a + "context_length").value_or(0);
        c.check(f.path());  // before anything is sized from them
        c.rope_theta = f.find_f32(a + "rope.freq_base").value_or(10000.f);
        c.rot_dims = f.find_i64(a + "rope.dimension_count").value_or(c.head_dim);
        TS_CHECK(c.rot_dims > 0 && c.rot_dims <= c.head_dim && c.rot_dims % 2 == 0,
                 "rope.dimension_count {} invalid for head dim {}", c.rot_dims, c.head_dim);
        // llama.cpp permutes Llama's q/k rows at conversion so its "normal" (GPT-J, interleaved)
        // rope applies; Qwen models keep HF's layout and use NeoX rotate-half.
        c.rope_style = c.arch == "llama" ? RopeStyle::GptJ : RopeStyle::NeoX;
        c.inv_freq = rope_default_inv_freq(c.rot_dims, c.rope_theta);
        if (const auto* ff = f.find_tensor("rope_freqs.weight")) {
            TS_CHECK(ff->numel() == c.rot_dims / 2 && ff->has_dtype() && ff->dtype() == DType::F32,
                     "tensor rope_freqs.weight: expected f32 [{}] got {} {}", c.rot_dims / 2, ff->type_name(),
                     ff->shape_str());
            const float* factors = reinterpret_cast<const float*>(ff->data);
            for (int64_t i = 0; i < c.rot_dims / 2; ++i) c.inv_freq[size_t(i)] /= factors[i];
        }
        const auto* emb = f.find_tensor("token_embd.weight");
        TS_CHECK(emb && emb->ndim == 2, "no 2-D tensor token_embd.weight");
        c.vocab_size = f.find_i64(a + "vocab_size").value_or(emb->shape[0]);
        c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
        if (c.arch == "qwen35" || c.arch == "qwen35moe" || c.arch == "qwen3next") gguf_hybrid_config(f, c);
        c.check(f.path());
        return c;
    });
}

}  // namespace tessera
