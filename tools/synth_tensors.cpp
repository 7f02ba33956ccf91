// Tensor lists of synthetic models, in llama.cpp's GGUF names and in mlx-lm's HF names.
#include "synth_tensors.h"

#include <cmath>

#include <fmt/format.h>

#include "core/status.h"

namespace tessera::cli {

int64_t SynthTensor::rows() const {
    int64_t r = 1;
    for (size_t d = 0; d + 1 < shape.size(); ++d) r *= shape[d];
    return r;
}

namespace {

// A weight matrix: N(0, 1/cols), in the requested type.
SynthTensor mat(std::string name, std::vector<int64_t> shape, SynthStore store = SynthStore::Matrix) {
    const float sd = 1.f / std::sqrt(float(shape.back()));
    return {std::move(name), std::move(shape), SynthInit::Normal, sd, store};
}
SynthTensor norm(std::string name, int64_t n) { return {std::move(name), {n}, SynthInit::Norm, 0.f, SynthStore::Float}; }
SynthTensor vec(std::string name, int64_t n, SynthInit init) { return {std::move(name), {n}, init, 1.f, SynthStore::Float}; }

void embeddings(std::vector<SynthTensor>& v, const ModelConfig& c, const std::string& embd, const std::string& out_norm,
                const std::string& out) {
    v.push_back({embd, {c.vocab_size, c.hidden}, SynthInit::Normal, 1.f, SynthStore::Matrix});
    v.push_back(norm(out_norm, c.hidden));
    if (!c.tied_embeddings) v.push_back(mat(out, {c.vocab_size, c.hidden}));
}

bool is_hybrid(const ModelConfig& c) { return c.gdn_k_heads > 0; }

}  // namespace

std::vector<SynthTensor> gguf_tensor_plan(const ModelConfig& c) {
    const int64_t H = c.hidden, D = c.head_dim;
    std::vector<SynthTensor> v;
    embeddings(v, c, "token_embd.weight", "output_norm.weight", "output.weight");
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        v.push_back(norm(p + "attn_norm.weight", H));
        if (!is_hybrid(c)) {
            v.push_back(mat(p + "attn_q.weight", {c.n_heads * D, H}));
            v.push_back(mat(p + "attn_k.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(p + "attn_v.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(p + "attn_output.weight", {H, c.n_heads * D}));
            if (c.arch == "qwen3") {
                v.push_back(norm(p + "attn_q_norm.weight", D));
                v.push_back(norm(p + "attn_k_norm.weight", D));
            }
            v.push_back(norm(p + "ffn_norm.weight", H));
            v.push_back(mat(p + "ffn_gate.weight", {c.ffn_hidden, H}));
            v.push_back(mat(p + "ffn_up.weight", {c.ffn_hidden, H}));
            v.push_back(mat(p + "ffn_down.weight", {H, c.ffn_hidden}));
            continue;
        }
        const int64_t nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk, dv = c.gdn_dv;
        const int64_t C = 2 * nk * dk + nv * dv, E = c.n_experts, I = c.expert_ffn, S = c.shared_expert_ffn;
        v.push_back(norm(p + "post_attention_norm.weight", H));
        if (c.is_attention_layer(il)) {
            v.push_back(mat(p + "attn_q.weight", {c.n_heads * D * 2, H}));  // q and gate interleaved per head
            v.push_back(mat(p + "attn_k.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(p + "attn_v.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(p + "attn_output.weight", {H, c.n_heads * D}));
            v.push_back(norm(p + "attn_q_norm.weight", D));
            v.push_back(norm(p + "attn_k_norm.weight", D));
        } else {
            v.push_back(mat(p + "attn_qkv.weight", {C, H}));
            v.push_back(mat(p + "attn_gate.weight", {nv * dv, H}));
            if (c.arch == "qwen3next") {
                v.push_back(mat(p + "ssm_ba.weight", {2 * nv, H}));  // per key head [b (r) | a (r)]
            } else {
                v.push_back(mat(p + "ssm_beta.weight", {nv, H}));
                v.push_back(mat(p + "ssm_alpha.weight", {nv, H}));
            }
            v.push_back(mat(p + "ssm_conv1d.weight", {C, c.conv_kernel}, SynthStore::Float));
            v.push_back(vec(p + "ssm_dt.bias", nv, SynthInit::Normal));
            v.push_back(vec(p + "ssm_a", nv, SynthInit::NegA));
            v.push_back(norm(p + "ssm_norm.weight", dv));
            v.push_back(mat(p + "ssm_out.weight", {H, nv * dv}));
        }
        v.push_back(mat(p + "ffn_gate_inp.weight", {E, H}, SynthStore::Router));
        v.push_back(mat(p + "ffn_gate_exps.weight", {E, I, H}));
        v.push_back(mat(p + "ffn_up_exps.weight", {E, I, H}));
        v.push_back(mat(p + "ffn_down_exps.weight", {E, H, I}));
        v.push_back(mat(p + "ffn_gate_inp_shexp.weight", {1, H}, SynthStore::Router));
        v.push_back(mat(p + "ffn_gate_shexp.weight", {S, H}));
        v.push_back(mat(p + "ffn_up_shexp.weight", {S, H}));
        v.push_back(mat(p + "ffn_down_shexp.weight", {H, S}));
    }
    return v;
}

std::vector<SynthTensor> mlx_tensor_plan(const ModelConfig& c) {
    const int64_t H = c.hidden, D = c.head_dim;
    // mlx-lm saves Qwen3.5's text model under language_model.* (the checkpoint is multimodal).
    const std::string top = c.arch == "qwen35moe" ? "language_model." : "";
    std::vector<SynthTensor> v;
    embeddings(v, c, top + "model.embed_tokens.weight", top + "model.norm.weight", top + "lm_head.weight");
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("{}model.layers.{}.", top, il);
        v.push_back(norm(p + "input_layernorm.weight", H));
        v.push_back(norm(p + "post_attention_layernorm.weight", H));
        const std::string a = p + "self_attn.";
        if (c.is_attention_layer(il)) {
            v.push_back(mat(a + "q_proj.weight", {c.n_heads * D * (c.attn_output_gate ? 2 : 1), H}));
            v.push_back(mat(a + "k_proj.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(a + "v_proj.weight", {c.n_kv_heads * D, H}));
            v.push_back(mat(a + "o_proj.weight", {H, c.n_heads * D}));
            if (c.arch != "llama") {
                v.push_back(norm(a + "q_norm.weight", D));
                v.push_back(norm(a + "k_norm.weight", D));
            }
        }
        if (!is_hybrid(c)) {
            v.push_back(mat(p + "mlp.gate_proj.weight", {c.ffn_hidden, H}));
            v.push_back(mat(p + "mlp.up_proj.weight", {c.ffn_hidden, H}));
            v.push_back(mat(p + "mlp.down_proj.weight", {H, c.ffn_hidden}));
            continue;
        }
        const int64_t nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk, dv = c.gdn_dv;
        const int64_t C = 2 * nk * dk + nv * dv, E = c.n_experts, I = c.expert_ffn, S = c.shared_expert_ffn;
        if (!c.is_attention_layer(il)) {
            const std::string g = p + "linear_attn.";
            if (c.arch == "qwen3next") {
                v.push_back(mat(g + "in_proj_qkvz.weight", {C + nv * dv, H}));  // per key head [q k v z]
                v.push_back(mat(g + "in_proj_ba.weight", {2 * nv, H}));
            } else {
                v.push_back(mat(g + "in_proj_qkv.weight", {C, H}));
                v.push_back(mat(g + "in_proj_z.weight", {nv * dv, H}));
                v.push_back(mat(g + "in_proj_b.weight", {nv, H}));
                v.push_back(mat(g + "in_proj_a.weight", {nv, H}));
            }
            SynthTensor conv = mat(g + "conv1d.weight", {C, c.conv_kernel}, SynthStore::Float);
            conv.shape = {C, c.conv_kernel, 1};  // mlx-lm's Conv1d layout [C, K, 1]
            v.push_back(conv);
            v.push_back(vec(g + "dt_bias", nv, SynthInit::Normal));
            v.push_back(vec(g + "A_log", nv, SynthInit::LogA));
            v.push_back(norm(g + "norm.weight", dv));
            v.push_back(mat(g + "out_proj.weight", {H, nv * dv}));
        }
        v.push_back(mat(p + "mlp.gate.weight", {E, H}, SynthStore::Router));
        v.push_back(mat(p + "mlp.switch_mlp.gate_proj.weight", {E, I, H}));
        v.push_back(mat(p + "mlp.switch_mlp.up_proj.weight", {E, I, H}));
        v.push_back(mat(p + "mlp.switch_mlp.down_proj.weight", {E, H, I}));
        v.push_back(mat(p + "mlp.shared_expert.gate_proj.weight", {S, H}));
        v.push_back(mat(p + "mlp.shared_expert.up_proj.weight", {S, H}));
        v.push_back(mat(p + "mlp.shared_expert.down_proj.weight", {H, S}));
        v.push_back(mat(p + "mlp.shared_expert_gate.weight", {1, H}, SynthStore::Router));
    }
    return v;
}

}  // namespace tessera::cli
