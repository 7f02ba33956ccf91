#include "runtime/hf_source.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/status.h"
#include "formats/hf_config.h"
#include "runtime/hf_names.h"

namespace tessera {

namespace {

// model_type -> tessera architecture key.
std::string hf_arch(const HfConfig& c) {
    const std::string mt = c.model_type();
    if (mt == "llama" || mt == "mistral") return "llama";
    if (mt == "qwen2") return "qwen2";
    if (mt == "qwen3") return "qwen3";
    if (mt == "qwen3_5" || mt == "qwen3_5_text") return "qwen35";
    if (mt == "qwen3_5_moe" || mt == "qwen3_5_moe_text") return "qwen35moe";
    if (mt == "qwen3_next") return "qwen3next";
    std::string archs;
    for (const auto& a : c.architectures()) archs += (archs.empty() ? "" : ", ") + a;
    fail(ErrorKind::Unsupported, "{}: model_type '{}' (architectures: {}) is not supported", c.source(), mt, archs);
}

// A rope setting: transformers 5 keeps them in rope_parameters, older configs in rope_theta +
// rope_scaling.
double rope_float(const HfConfig& c, const std::string& key, double def) {
    for (const char* obj : {"rope_parameters.", "rope_scaling."})
        if (c.has(obj + key)) return c.get_float(obj + key);
    return c.get_float(key, def);
}

}  // namespace

ModelConfig hf_model_config(const HfConfig& c) {
    ModelConfig m;
    m.arch = hf_arch(c);
    m.vocab_size = c.get_int("vocab_size");
    m.hidden = c.get_int("hidden_size");
    m.n_layers = c.get_int("num_hidden_layers");
    m.n_heads = c.get_int("num_attention_heads");
    m.n_kv_heads = c.get_int("num_key_value_heads", m.n_heads);
    TS_CHECK(m.vocab_size > 0 && m.hidden > 0 && m.n_layers > 0 && m.n_heads > 0 && m.n_kv_heads > 0,
             "{}: non-positive model dimensions", c.source());
    m.head_dim = c.get_int("head_dim", m.hidden / m.n_heads);
    m.ffn_hidden = c.get_int("intermediate_size", 0);  // absent in all-MoE models
    m.max_ctx = c.get_int("max_position_embeddings", 0);
    m.check(c.source());  // before anything is sized from them
    TS_CHECK(m.ffn_hidden > 0 || is_hybrid_arch(m.arch), "{}: intermediate_size: missing (required)", c.source());
    m.rms_eps = float(c.get_float("rms_norm_eps", 1e-6));
    m.tied_embeddings = c.get_bool("tie_word_embeddings", false);
    m.rope_theta = float(rope_float(c, "rope_theta", 10000.0));
    const double partial = rope_float(c, "partial_rotary_factor", 1.0);
    TS_CHECK(partial > 0.0 && partial <= 1.0, "{}: partial_rotary_factor {} is not in (0, 1]", c.source(), partial);
    m.rot_dims = int64_t(double(m.head_dim) * partial);
    TS_CHECK(m.rot_dims > 0 && m.rot_dims % 2 == 0 && m.rot_dims <= m.head_dim, "{}: rotary dims {} invalid",
             c.source(), m.rot_dims);
    m.rope_style = RopeStyle::NeoX;
    m.inv_freq = rope_default_inv_freq(m.rot_dims, m.rope_theta);
    std::string type = "default";
    if (is_hybrid_arch(m.arch)) hf_hybrid_config(c, m);
    for (const char* key : {"rope_parameters.rope_type", "rope_scaling.rope_type", "rope_scaling.type"})
        if (c.has(key)) {
            type = c.get_string(key);
            break;
        }
    if (type == "llama3") {
        const double orig_ctx = rope_float(c, "original_max_position_embeddings", 8192);
        TS_CHECK(orig_ctx >= 1.0 && orig_ctx <= 1e12, "{}: original_max_position_embeddings {} invalid", c.source(),
                 orig_ctx);
        const int64_t orig = int64_t(orig_ctx);
        rope_apply_llama3(m.inv_freq, float(rope_float(c, "factor", 8.0)), float(rope_float(c, "low_freq_factor", 1.0)),
                          float(rope_float(c, "high_freq_factor", 4.0)), orig);
    } else if (type == "linear") {
        for (float& f : m.inv_freq) f /= float(rope_float(c, "factor", 1.0));
    } else if (type != "default" && type != "mrope") {  // Qwen3.5's MRoPE is 1-D RoPE for text
        fail(ErrorKind::Unsupported, "{}: rope type '{}' is not supported", c.source(), type);
    }
    m.check(c.source());
    return m;
}

HfSource::HfSource(const std::string& dir) : dir_(dir), ckpt_(SafetensorsCheckpoint::open(dir)) {
    const HfConfig hc = HfConfig::load(dir);
    config_ = hf_model_config(hc);
    mlx_ = hc.raw().contains("quantization");
    for (const std::string& file_name : ckpt_.names()) {
        const std::string canon = canonical_tensor_name(file_name);
        if (is_non_text_tensor(canon)) continue;
        if (mlx_ && (canon.size() > 7 && (canon.compare(canon.size() - 7, 7, ".scales") == 0 ||
                                          canon.compare(canon.size() - 7, 7, ".biases") == 0)))
            continue;  // MLX quantization parameters, read with their weight

        // Multi-token-prediction layers: kept under their own names for speculative decoding later.
        auto g = canon.compare(0, 4, "mtp.") == 0 ? std::optional<std::string>(canon) : hf_to_gguf_name(canon, config_.arch);
        if (!g) {
            TS_LOG_DEBUG("{}: ignoring tensor {}", dir, file_name);
            continue;
        }
        TS_CHECK(map_.emplace(*g, file_name).second, "{}: tensors {} and {} both map to {}", dir, map_[*g], file_name, *g);
    }
    if (config_.tied_embeddings) map_.erase("output.weight");
    if (mlx_) dequantize_mlx(hc);
    if (is_hybrid_arch(config_.arch)) derive_hybrid_tensors();
}

Tensor HfSource::get(const std::string& name) const {
    if (auto d = derived_.find(name); d != derived_.end()) return d->second.view;
    auto it = map_.find(name);
    if (it == map_.end()) fail(ErrorKind::NotFound, "{}: no tensor {}", dir_, name);
    return ckpt_.tensor(it->second);
}

std::vector<std::string> HfSource::names() const {
    std::vector<std::string> v;
    for (const auto& [g, f] : map_) v.push_back(g);
    for (const auto& [g, d] : derived_) v.push_back(g);
    std::sort(v.begin(), v.end());
    return v;
}

Tensor HfSource::derive(const std::string& name, DType dtype, std::vector<int64_t> shape) {
    auto& d = derived_[name];
    d.bytes.assign(dtype_row_bytes(dtype, shape.back()) * size_t(Tensor::contiguous(nullptr, dtype, shape.data(), int(shape.size())).rows()), 0);
    d.view = Tensor::contiguous(d.bytes.data(), dtype, shape.data(), int(shape.size()));
    map_.erase(name);
    return d.view;
}

}  // namespace tessera
