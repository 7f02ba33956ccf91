// `tessera synth`: writes a random-weight GGUF with a real architecture's tensor names, shapes and
// metadata (llama.cpp's conventions) and a synthetic tokenizer — the demo's default model, and
// (later) real-size models for benchmarks. Weights are scaled so activations stay finite.
#include <cmath>
#include <cstdio>
#include <random>
#include <unistd.h>

#include <fmt/format.h>

#include "cli.h"
#include "core/status.h"
#include "formats/gguf_writer.h"
#include "formats/quants.h"
#include "models/model_config.h"
#include "runtime/gguf_export.h"
#include "synth_tokenizer.h"

namespace tessera::cli {
namespace {

struct Preset {
    const char* name;
    const char* note;  // where the numbers come from
    ModelConfig cfg;
};

ModelConfig dense(const char* arch, int64_t vocab, int64_t hidden, int64_t layers, int64_t heads, int64_t kv,
                  int64_t head_dim, int64_t ffn, float theta, bool tied) {
    ModelConfig c;
    c.arch = arch;
    c.vocab_size = vocab;
    c.hidden = hidden;
    c.n_layers = layers;
    c.n_heads = heads;
    c.n_kv_heads = kv;
    c.head_dim = head_dim;
    c.ffn_hidden = ffn;
    c.rms_eps = 1e-6f;
    c.max_ctx = 4096;
    c.tied_embeddings = tied;
    c.rot_dims = head_dim;
    c.rope_theta = theta;
    return c;
}

std::vector<Preset> presets(const std::string& arch) {
    if (arch == "qwen3")
        return {{"tiny", "tessera's demo size", dense("qwen3", 512, 256, 4, 4, 2, 64, 768, 1e6f, false)},
                // Qwen/Qwen3-0.6B config.json: hidden 1024, 28 layers, 16/8 heads x 128, ffn 3072, tied.
                {"qwen3-0.6b", "Qwen/Qwen3-0.6B config.json",
                 dense("qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 1e6f, true)}};
    if (arch == "llama") return {{"tiny", "tessera's demo size", dense("llama", 512, 256, 4, 4, 2, 64, 768, 5e5f, false)}};
    fail(ErrorKind::Invalid, "--arch {}: synth knows qwen3 and llama", arch);
}

struct TensorSpec {
    std::string name;
    std::vector<int64_t> shape;
    bool norm;  // 1-D norm weight: 1 + noise, f32
};

std::vector<TensorSpec> dense_tensors(const ModelConfig& c) {
    const int64_t H = c.hidden, D = c.head_dim, F = c.ffn_hidden;
    std::vector<TensorSpec> v = {{"token_embd.weight", {c.vocab_size, H}, false}, {"output_norm.weight", {H}, true}};
    if (!c.tied_embeddings) v.push_back({"output.weight", {c.vocab_size, H}, false});
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        v.push_back({p + "attn_norm.weight", {H}, true});
        v.push_back({p + "attn_q.weight", {c.n_heads * D, H}, false});
        v.push_back({p + "attn_k.weight", {c.n_kv_heads * D, H}, false});
        v.push_back({p + "attn_v.weight", {c.n_kv_heads * D, H}, false});
        v.push_back({p + "attn_output.weight", {H, c.n_heads * D}, false});
        if (c.arch == "qwen3") {
            v.push_back({p + "attn_q_norm.weight", {D}, true});
            v.push_back({p + "attn_k_norm.weight", {D}, true});
        }
        v.push_back({p + "ffn_norm.weight", {H}, true});
        v.push_back({p + "ffn_gate.weight", {F, H}, false});
        v.push_back({p + "ffn_up.weight", {F, H}, false});
        v.push_back({p + "ffn_down.weight", {H, F}, false});
    }
    return v;
}

int run_synth(const Args& args) {
    const std::string arch = args.require("arch"), preset_name = args.get("preset", "tiny");
    const std::string out = args.require("out");
    const DType type = dtype_from_name(args.get("type", "f16"));
    TS_CHECK(can_quantize(type), "--type {}: cannot write that type", dtype_name(type));
    const uint64_t seed = uint64_t(args.get_int("seed", 0));
    const Preset* preset = nullptr;
    const auto all = presets(arch);
    for (const auto& p : all)
        if (preset_name == p.name) preset = &p;
    TS_CHECK(preset, "--preset {}: unknown for {}", preset_name, arch);
    ModelConfig cfg = preset->cfg;
    if (args.has("layers")) {
        cfg.n_layers = args.get_int("layers", cfg.n_layers);
        TS_CHECK(cfg.n_layers >= 1, "--layers must be >= 1");
    }

    GgufWriter w;
    add_model_metadata(w, cfg, type, fmt::format("tessera-synth-{}-{}", arch, preset_name));
    const SynthTokenizer tok = make_synth_tokenizer(cfg.vocab_size);
    add_tokenizer_metadata(w, tok);

    const auto specs = dense_tensors(cfg);
    size_t done = 0;
    const bool progress = isatty(fileno(stderr));
    for (size_t i = 0; i < specs.size(); ++i) {
        const TensorSpec& s = specs[i];
        const int64_t cols = s.shape.back(), rows = s.norm ? 1 : s.shape[0];
        const DType t = s.norm ? DType::F32 : export_matrix_type(type, cols);
        w.add_tensor(s.name, t, s.shape, [&, i, rows, cols, t](const GgufWriter::Sink& sink) {
            std::mt19937_64 rng(seed * 1000003u + i);
            const bool norm = specs[i].norm;
            // Embeddings ~ N(0, 1); matrices ~ N(0, 1/cols) so each layer keeps the scale.
            const bool embd = specs[i].name == "token_embd.weight";
            std::normal_distribution<float> nd(0.f, norm ? 0.1f : embd ? 1.f : 1.f / std::sqrt(float(cols)));
            std::vector<float> row(static_cast<size_t>(cols));
            std::vector<uint8_t> q(dtype_row_bytes(t, cols));
            for (int64_t r = 0; r < rows; ++r) {
                for (auto& x : row) x = nd(rng) + (norm ? 1.f : 0.f);
                quantize_row(t, row.data(), q.data(), cols);
                sink(q.data(), q.size());
            }
            ++done;
            if (progress) std::fprintf(stderr, "\rsynth: %zu/%zu tensors", done, specs.size());
        });
    }
    w.write(out);
    std::fprintf(stderr, "%ssynth: wrote %s (%s, %s)\n", progress ? "\n" : "", out.c_str(), cfg.describe().c_str(),
                 dtype_name(type));
    return 0;
}

}  // namespace

TESSERA_VERB("synth", "write a random-weight model with a real architecture's shapes (GGUF)",
             {{"arch", true, "qwen3 | llama"},
              {"preset", true, "size preset (default tiny)"},
              {"layers", true, "override the number of layers"},
              {"type", true, "matrix type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k (default f16)"},
              {"seed", true, "random seed (default 0)"},
              {"out", true, "output .gguf path"}},
             run_synth);

}  // namespace tessera::cli
