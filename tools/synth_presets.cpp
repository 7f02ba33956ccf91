// The preset table of `tessera synth`: published config.json values of real checkpoints, and the
// tiny sizes tessera's tests and demo use.
#include "synth_presets.h"

#include <algorithm>

#include "core/status.h"

namespace tessera::cli {
namespace {

struct Dense {
    int64_t vocab, hidden, layers, heads, kv, head_dim, ffn;
    float theta;
    bool tied;
    int64_t max_ctx;
    float eps;
};

ModelConfig dense(const char* arch, const Dense& d) {
    ModelConfig c;
    c.arch = arch;
    c.vocab_size = d.vocab;
    c.hidden = d.hidden;
    c.n_layers = d.layers;
    c.n_heads = d.heads;
    c.n_kv_heads = d.kv;
    c.head_dim = d.head_dim;
    c.ffn_hidden = d.ffn;
    c.rms_eps = d.eps;
    c.max_ctx = d.max_ctx;
    c.tied_embeddings = d.tied;
    c.rot_dims = d.head_dim;
    c.rope_theta = d.theta;
    return c;
}

struct Hybrid {
    int64_t vocab, hidden, layers, heads, kv, head_dim;
    int64_t nk, nv, dk, dv;                  // Gated DeltaNet key / value heads and their dims
    int64_t experts, used, expert_ffn, shared_ffn;
};

// Qwen3.5/3.6-MoE (qwen35moe) and Qwen3-Next (qwen3next): gated attention with partial rotary
// 0.25 and θ 1e7, Gated DeltaNet with conv kernel 4, MoE with a shared expert in every layer.
ModelConfig hybrid(const char* arch, const Hybrid& h) {
    ModelConfig c = dense(arch, {h.vocab, h.hidden, h.layers, h.heads, h.kv, h.head_dim, 0, 1e7f, false, 262144, 1e-6f});
    c.rot_dims = h.head_dim / 4;
    c.attn_output_gate = true;
    c.gdn_k_heads = h.nk;
    c.gdn_v_heads = h.nv;
    c.gdn_dk = h.dk;
    c.gdn_dv = h.dv;
    c.conv_kernel = 4;
    c.gdn_tiled_heads = std::string(arch) != "qwen3next";  // llama.cpp re-tiles Qwen3.5's value heads only
    c.n_experts = h.experts;
    c.n_experts_used = h.used;
    c.expert_ffn = h.expert_ffn;
    c.shared_expert_ffn = h.shared_ffn;
    c.norm_topk = true;
    return c;
}

}  // namespace

std::vector<SynthPreset> synth_presets(const std::string& arch) {
    if (arch == "qwen3")
        return {
            {"tiny", "tessera's demo and test size", dense("qwen3", {512, 256, 4, 4, 2, 64, 768, 1e6f, false, 4096, 1e-6f})},
            // Qwen/Qwen3-0.6B config.json: hidden 1024, 28 layers, 16 q / 8 kv heads x 128, intermediate
            // 3072, vocab 151936, rope_theta 1e6, tied, max_position_embeddings 40960, rms_norm_eps 1e-6.
            {"qwen3-0.6b", "Qwen/Qwen3-0.6B config.json",
             dense("qwen3", {151936, 1024, 28, 16, 8, 128, 3072, 1e6f, true, 40960, 1e-6f})},
            // Qwen/Qwen3-8B config.json: hidden 4096, 36 layers, 32 q / 8 kv heads x 128, intermediate
            // 12288, vocab 151936, rope_theta 1e6, untied, max_position_embeddings 40960, rms_norm_eps 1e-6.
            {"qwen3-8b", "Qwen/Qwen3-8B config.json",
             dense("qwen3", {151936, 4096, 36, 32, 8, 128, 12288, 1e6f, false, 40960, 1e-6f})},
        };
    if (arch == "llama")
        return {
            {"tiny", "tessera's demo and test size", dense("llama", {512, 256, 4, 4, 2, 64, 768, 5e5f, false, 4096, 1e-5f})},
            // meta-llama/Meta-Llama-3-8B config.json: hidden 4096, 32 layers, 32 q / 8 kv heads x 128,
            // intermediate 14336, vocab 128256, rope_theta 5e5 (no rope scaling), untied,
            // max_position_embeddings 8192, rms_norm_eps 1e-5.
            {"llama-3-8b", "meta-llama/Meta-Llama-3-8B config.json",
             dense("llama", {128256, 4096, 32, 32, 8, 128, 14336, 5e5f, false, 8192, 1e-5f})},
        };
    if (arch == "qwen35moe")
        return {
            {"tiny", "tessera's test size", hybrid("qwen35moe", {512, 256, 4, 4, 2, 64, 2, 4, 64, 64, 8, 2, 256, 256})},
            // Qwen/Qwen3.6-35B-A3B (REFERENCE.md's table): hidden 2048, 40 layers, vocab 248320, 16 q / 2 kv
            // heads x 256, GDN 16 key / 32 value heads x 128, 256 experts top-8 x 512, shared expert 512.
            {"qwen3.6-35b-a3b", "Qwen3.6-35B-A3B config (REFERENCE.md)",
             hybrid("qwen35moe", {248320, 2048, 40, 16, 2, 256, 16, 32, 128, 128, 256, 8, 512, 512})},
        };
    if (arch == "qwen3next")
        return {
            {"tiny", "tessera's test size", hybrid("qwen3next", {512, 256, 4, 4, 2, 64, 2, 4, 64, 64, 8, 2, 256, 256})},
            // Qwen/Qwen3-Next-80B-A3B (REFERENCE.md's table): hidden 2048, 48 layers, vocab 151936, 16 q / 2 kv
            // heads x 256, GDN 16 key / 32 value heads x 128, 512 experts top-10 x 512, shared expert 512.
            {"qwen3-next-80b-a3b", "Qwen3-Next-80B-A3B config (REFERENCE.md)",
             hybrid("qwen3next", {151936, 2048, 48, 16, 2, 256, 16, 32, 128, 128, 512, 10, 512, 512})},
        };
    fail(ErrorKind::Invalid, "--arch {}: synth writes {}", arch, kSynthArchs);
}

SynthPreset synth_preset(const std::string& arch, const std::string& name, std::optional<int64_t> layers) {
    const auto all = synth_presets(arch);
    auto it = std::find_if(all.begin(), all.end(), [&](const SynthPreset& p) { return p.name == name; });
    if (it == all.end()) {
        std::string known;
        for (const auto& p : all) known += (known.empty() ? "" : ", ") + p.name;
        fail(ErrorKind::Invalid, "--preset {}: unknown for {} (known: {})", name, arch, known);
    }
    SynthPreset p = *it;
    ModelConfig& c = p.cfg;
    if (layers) {
        TS_CHECK(*layers >= 1 && *layers <= 1024, "--layers {}: must be between 1 and 1024", *layers);
        c.n_layers = *layers;
    }
    if (c.gdn_k_heads > 0) {
        // Every 4th layer is full attention; a shorter model keeps one attention layer, its last.
        const int64_t every = std::min<int64_t>(4, c.n_layers);
        c.full_attention.assign(size_t(c.n_layers), 0);
        c.moe_layer.assign(size_t(c.n_layers), 1);
        for (int64_t i = 0; i < c.n_layers; ++i) c.full_attention[size_t(i)] = (i + 1) % every == 0;
    }
    return p;
}

}  // namespace tessera::cli
