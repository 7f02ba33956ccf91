// `tessera synth --dry-run`: what would be written — the preset's config and every tensor's name,
// shape, stored type and size — as JSON, without writing anything (for checking real-size presets
// against their published configs in seconds).
#include <nlohmann/json.hpp>

#include "synth_job.h"

namespace tessera::cli {

namespace {

using ojson = nlohmann::ordered_json;

ojson config_json(const SynthPreset& p) {
    const ModelConfig& c = p.cfg;
    ojson j = {{"arch", c.arch},
               {"vocab_size", c.vocab_size},
               {"hidden", c.hidden},
               {"n_layers", c.n_layers},
               {"n_heads", c.n_heads},
               {"n_kv_heads", c.n_kv_heads},
               {"head_dim", c.head_dim},
               {"ffn_hidden", c.ffn_hidden},
               {"rms_eps", c.rms_eps},
               {"rope_theta", c.rope_theta},
               {"rot_dims", c.rot_dims},
               {"max_ctx", c.max_ctx},
               {"tied_embeddings", c.tied_embeddings}};
    if (c.gdn_k_heads > 0) {
        std::vector<int> attention;
        for (int64_t i = 0; i < c.n_layers; ++i) attention.push_back(c.is_attention_layer(i) ? 1 : 0);
        j["full_attention"] = attention;
        j["gdn_k_heads"] = c.gdn_k_heads;
        j["gdn_v_heads"] = c.gdn_v_heads;
        j["gdn_dk"] = c.gdn_dk;
        j["gdn_dv"] = c.gdn_dv;
        j["conv_kernel"] = c.conv_kernel;
        j["n_experts"] = c.n_experts;
        j["n_experts_used"] = c.n_experts_used;
        j["expert_ffn"] = c.expert_ffn;
        j["shared_expert_ffn"] = c.shared_expert_ffn;
    }
    return j;
}

ojson entry(const std::string& name, const std::vector<int64_t>& shape, const std::string& type, uint64_t bytes) {
    return {{"name", name}, {"shape", shape}, {"type", type}, {"bytes", bytes}};
}

}  // namespace

std::string synth_plan_json(const SynthJob& job) {
    ojson tensors = ojson::array();
    uint64_t bytes = 0, params = 0;
    if (!job.mlx) {
        for (const auto& t : gguf_tensor_plan(job.preset.cfg)) {
            const DType type = synth_gguf_type(t, job.type);
            const uint64_t n = dtype_row_bytes(type, t.cols()) * uint64_t(t.rows());
            tensors.push_back(entry(t.name, t.shape, dtype_name(type), n));
            bytes += n;
            params += uint64_t(t.rows() * t.cols());
        }
    } else {
        for (const auto& t : mlx_tensor_plan(job.preset.cfg)) {
            params += uint64_t(t.rows() * t.cols());
            const int bits = synth_mlx_bits(t);
            if (bits == 0) {
                const uint64_t n = uint64_t(t.rows() * t.cols()) * 2;
                tensors.push_back(entry(t.name, t.shape, "BF16", n));
                bytes += n;
                continue;
            }
            const std::string module = t.name.substr(0, t.name.size() - 7);
            std::vector<int64_t> ws = t.shape, gs = t.shape;
            ws.back() = t.cols() * bits / 32;
            gs.back() = t.cols() / kMlxGroup;
            const uint64_t wn = uint64_t(t.rows() * t.cols() * bits / 8), gn = uint64_t(t.rows() * gs.back()) * 2;
            tensors.push_back(entry(module + ".weight", ws, "U32", wn));
            tensors.push_back(entry(module + ".scales", gs, "BF16", gn));
            tensors.push_back(entry(module + ".biases", gs, "BF16", gn));
            bytes += wn + 2 * gn;
        }
    }
    const ojson plan = {{"arch", job.preset.cfg.arch},
                        {"preset", job.preset.name},
                        {"source", job.preset.source},
                        {"format", job.mlx ? "mlx" : "gguf"},
                        {"type", job.type_name},
                        {"config", config_json(job.preset)},
                        {"parameters", params},
                        {"tensor_bytes", bytes},
                        {"tensors", tensors}};
    return plan.dump(1);
}

}  // namespace tessera::cli
