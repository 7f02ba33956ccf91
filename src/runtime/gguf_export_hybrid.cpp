#include "runtime/gguf_export_hybrid.h"

#include <numeric>

#include "core/status.h"

namespace tessera {

void add_hybrid_metadata(GgufWriter& w, const ModelConfig& c) {
    const std::string a = c.arch + ".";
    // llama.cpp knows only a fixed interval of full-attention layers.
    int64_t every = 0;
    for (int64_t i = 0; i < c.n_layers && !every; ++i)
        if (c.is_attention_layer(i)) every = i + 1;
    TS_CHECK(every > 0, "{}: no full-attention layer", c.arch);
    for (int64_t i = 0; i < c.n_layers; ++i)
        TS_CHECK(c.is_attention_layer(i) == ((i + 1) % every == 0),
                 "{}: layer {}'s type breaks the every-{} attention pattern GGUF can express", c.arch, i, every);
    w.set(a + "full_attention_interval", GgufValue::u32(uint32_t(every)));
    w.set(a + "ssm.conv_kernel", GgufValue::u32(uint32_t(c.conv_kernel)));
    w.set(a + "ssm.state_size", GgufValue::u32(uint32_t(c.gdn_dk)));
    w.set(a + "ssm.group_count", GgufValue::u32(uint32_t(c.gdn_k_heads)));
    w.set(a + "ssm.time_step_rank", GgufValue::u32(uint32_t(c.gdn_v_heads)));
    w.set(a + "ssm.inner_size", GgufValue::u32(uint32_t(c.gdn_v_heads * c.gdn_dv)));
    if (c.n_experts > 0) {
        w.set(a + "expert_count", GgufValue::u32(uint32_t(c.n_experts)));
        w.set(a + "expert_used_count", GgufValue::u32(uint32_t(c.n_experts_used)));
        w.set(a + "expert_feed_forward_length", GgufValue::u32(uint32_t(c.expert_ffn)));
        if (c.shared_expert_ffn > 0)
            w.set(a + "expert_shared_feed_forward_length", GgufValue::u32(uint32_t(c.shared_expert_ffn)));
        w.set(a + "expert_weights_norm", GgufValue::boolean(c.norm_topk));
        for (int64_t i = 0; i < c.n_layers; ++i)
            TS_CHECK(c.is_moe_layer(i), "{}: layer {} has a dense MLP among MoE layers; GGUF export does not support that",
                     c.arch, i);
    }
}

namespace {
bool ends_with(const std::string& s, const char* suffix) {
    const std::string t(suffix);
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
}  // namespace

TensorRemap hybrid_remap(const std::string& name, int64_t rows, int64_t cols, const ModelConfig& c) {
    TensorRemap m;
    if (c.gdn_tiled_heads || c.arch == "qwen3next") return m;  // already tiled, or llama.cpp keeps HF's order
    const int64_t nk = c.gdn_k_heads, nv = c.gdn_v_heads, r = nv / nk, dv = c.gdn_dv;
    const int64_t v0 = 2 * nk * c.gdn_dk;  // first v channel of the fused q|k|v
    // Tiled head h' holds grouped head h = (h' % nk) * r + h' / nk.
    auto grouped = [&](int64_t tiled) { return (tiled % nk) * r + tiled / nk; };
    auto heads = [&](int64_t base, int64_t n_total, int64_t block) {
        std::vector<int64_t> v(static_cast<size_t>(n_total));
        std::iota(v.begin(), v.end(), 0);
        for (int64_t h = 0; h < nv; ++h)
            for (int64_t i = 0; i < block; ++i) v[size_t(base + h * block + i)] = base + grouped(h) * block + i;
        return v;
    };
    if (ends_with(name, ".attn_qkv.weight") || ends_with(name, ".ssm_conv1d.weight")) {
        m.rows = heads(v0, rows, dv);
    } else if (ends_with(name, ".attn_gate.weight")) {
        m.rows = heads(0, rows, dv);
    } else if (ends_with(name, ".ssm_beta.weight") || ends_with(name, ".ssm_alpha.weight")) {
        m.rows = heads(0, rows, 1);
    } else if (ends_with(name, ".ssm_dt.bias") || ends_with(name, ".ssm_a")) {
        m.cols = heads(0, cols, 1);
    } else if (ends_with(name, ".ssm_out.weight")) {
        m.cols = heads(0, cols, dv);
    }
    return m;
}

}  // namespace tessera
