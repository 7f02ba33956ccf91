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
#include "core/thread_pool.h"
#include "runtime/gguf_export.h"
#include "runtime/gguf_export_hybrid.h"
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

// A Qwen3.5/3.6-MoE-shaped hybrid: every 4th layer gated attention, the rest Gated DeltaNet, MoE
// with a shared expert everywhere (REFERENCE.md's table).
ModelConfig qwen35moe(int64_t vocab, int64_t hidden, int64_t layers, int64_t heads, int64_t kv, int64_t head_dim,
                      int64_t nk, int64_t nv, int64_t dk, int64_t dv, int64_t experts, int64_t used, int64_t ffn,
                      int64_t shared) {
    ModelConfig c = dense("qwen35moe", vocab, hidden, layers, heads, kv, head_dim, 0, 1e7f, false);
    c.max_ctx = 262144;
    c.rot_dims = head_dim / 4;  // partial rotary 0.25
    c.attn_output_gate = true;
    c.gdn_k_heads = nk;
    c.gdn_v_heads = nv;
    c.gdn_dk = dk;
    c.gdn_dv = dv;
    c.conv_kernel = 4;
    c.gdn_tiled_heads = true;
    c.n_experts = experts;
    c.n_experts_used = used;
    c.expert_ffn = ffn;
    c.shared_expert_ffn = shared;
    return c;
}

// Layer types and MoE flags for the configured layer count (attention every 4th layer).
void set_hybrid_layers(ModelConfig& c) {
    if (c.gdn_k_heads == 0) return;
    c.full_attention.assign(size_t(c.n_layers), 0);
    c.moe_layer.assign(size_t(c.n_layers), 1);
    for (int64_t i = 0; i < c.n_layers; ++i) c.full_attention[size_t(i)] = (i + 1) % 4 == 0;
}

std::vector<Preset> presets(const std::string& arch) {
    if (arch == "qwen35moe")
        return {{"tiny", "tessera's test size", qwen35moe(512, 256, 4, 4, 2, 64, 2, 4, 64, 64, 8, 2, 256, 256)},
                // Qwen/Qwen3.6-35B-A3B (REFERENCE.md): 40 layers, 16/2 heads x 256, GDN 16/32 x 128,
                // 256 experts top-8 x 512 + a 512 shared expert, vocab 248320.
                {"qwen3.6-35b-a3b", "Qwen3.6-35B-A3B config (REFERENCE.md)",
                 qwen35moe(248320, 2048, 40, 16, 2, 256, 16, 32, 128, 128, 256, 8, 512, 512)}};
    if (arch == "qwen3")
        return {{"tiny", "tessera's demo size", dense("qwen3", 512, 256, 4, 4, 2, 64, 768, 1e6f, false)},
                // Qwen/Qwen3-0.6B config.json: hidden 1024, 28 layers, 16/8 heads x 128, ffn 3072, tied.
                {"qwen3-0.6b", "Qwen/Qwen3-0.6B config.json",
                 dense("qwen3", 151936, 1024, 28, 16, 8, 128, 3072, 1e6f, true)}};
    if (arch == "llama") return {{"tiny", "tessera's demo size", dense("llama", 512, 256, 4, 4, 2, 64, 768, 5e5f, false)}};
    fail(ErrorKind::Invalid, "--arch {}: synth knows qwen3, llama and qwen35moe", arch);
}

// How a tensor's random values are drawn.
enum class Fill {
    Matrix,    // N(0, 1/cols) (embeddings N(0, 1)), in the requested type
    Norm,      // 1 + N(0, 0.1²), f32
    Small,     // N(0, 1) f32 vectors and small matrices (dt_bias, router, conv, beta/alpha rows)
    Negative,  // -U(0.5, 8), f32: ssm_a = -exp(A_log)
};

struct TensorSpec {
    std::string name;
    std::vector<int64_t> shape;
    Fill fill = Fill::Matrix;
};

TensorSpec norm_spec(const std::string& name, int64_t n) { return {name, {n}, Fill::Norm}; }

std::vector<TensorSpec> dense_tensors(const ModelConfig& c) {
    const int64_t H = c.hidden, D = c.head_dim, F = c.ffn_hidden;
    std::vector<TensorSpec> v = {{"token_embd.weight", {c.vocab_size, H}}, norm_spec("output_norm.weight", H)};
    if (!c.tied_embeddings) v.push_back({"output.weight", {c.vocab_size, H}});
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        v.push_back(norm_spec(p + "attn_norm.weight", H));
        v.push_back({p + "attn_q.weight", {c.n_heads * D, H}});
        v.push_back({p + "attn_k.weight", {c.n_kv_heads * D, H}});
        v.push_back({p + "attn_v.weight", {c.n_kv_heads * D, H}});
        v.push_back({p + "attn_output.weight", {H, c.n_heads * D}});
        if (c.arch == "qwen3") {
            v.push_back(norm_spec(p + "attn_q_norm.weight", D));
            v.push_back(norm_spec(p + "attn_k_norm.weight", D));
        }
        v.push_back(norm_spec(p + "ffn_norm.weight", H));
        v.push_back({p + "ffn_gate.weight", {F, H}});
        v.push_back({p + "ffn_up.weight", {F, H}});
        v.push_back({p + "ffn_down.weight", {H, F}});
    }
    return v;
}

// llama.cpp's qwen35moe tensors (norms stored as 1 + w, ssm_a = -exp(A_log)).
std::vector<TensorSpec> hybrid_tensors(const ModelConfig& c) {
    const int64_t H = c.hidden, D = c.head_dim, nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk,
                  dv = c.gdn_dv, E = c.n_experts, I = c.expert_ffn, S = c.shared_expert_ffn;
    const int64_t C = 2 * nk * dk + nv * dv;
    std::vector<TensorSpec> v = {{"token_embd.weight", {c.vocab_size, H}}, norm_spec("output_norm.weight", H)};
    if (!c.tied_embeddings) v.push_back({"output.weight", {c.vocab_size, H}});
    for (int64_t il = 0; il < c.n_layers; ++il) {
        const std::string p = fmt::format("blk.{}.", il);
        v.push_back(norm_spec(p + "attn_norm.weight", H));
        v.push_back(norm_spec(p + "post_attention_norm.weight", H));
        if (c.is_attention_layer(il)) {
            v.push_back({p + "attn_q.weight", {c.n_heads * D * 2, H}});
            v.push_back({p + "attn_k.weight", {c.n_kv_heads * D, H}});
            v.push_back({p + "attn_v.weight", {c.n_kv_heads * D, H}});
            v.push_back({p + "attn_output.weight", {H, c.n_heads * D}});
            v.push_back(norm_spec(p + "attn_q_norm.weight", D));
            v.push_back(norm_spec(p + "attn_k_norm.weight", D));
        } else {
            v.push_back({p + "attn_qkv.weight", {C, H}});
            v.push_back({p + "attn_gate.weight", {nv * dv, H}});
            v.push_back({p + "ssm_beta.weight", {nv, H}, Fill::Small});
            v.push_back({p + "ssm_alpha.weight", {nv, H}, Fill::Small});
            v.push_back({p + "ssm_conv1d.weight", {C, c.conv_kernel}, Fill::Small});
            v.push_back({p + "ssm_dt.bias", {nv}, Fill::Small});
            v.push_back({p + "ssm_a", {nv}, Fill::Negative});
            v.push_back(norm_spec(p + "ssm_norm.weight", dv));
            v.push_back({p + "ssm_out.weight", {H, nv * dv}});
        }
        v.push_back({p + "ffn_gate_inp.weight", {E, H}, Fill::Small});
        v.push_back({p + "ffn_gate_exps.weight", {E, I, H}});
        v.push_back({p + "ffn_up_exps.weight", {E, I, H}});
        v.push_back({p + "ffn_down_exps.weight", {E, H, I}});
        v.push_back({p + "ffn_gate_inp_shexp.weight", {1, H}, Fill::Small});
        v.push_back({p + "ffn_gate_shexp.weight", {S, H}});
        v.push_back({p + "ffn_up_shexp.weight", {S, H}});
        v.push_back({p + "ffn_down_shexp.weight", {H, S}});
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
    set_hybrid_layers(cfg);

    GgufWriter w;
    add_model_metadata(w, cfg, type, fmt::format("tessera-synth-{}-{}", arch, preset_name));
    const SynthTokenizer tok = make_synth_tokenizer(cfg.vocab_size);
    add_tokenizer_metadata(w, tok);

    const bool hybrid = cfg.n_recurrent_layers() > 0;
    if (hybrid) add_hybrid_metadata(w, cfg);
    const auto specs = hybrid ? hybrid_tensors(cfg) : dense_tensors(cfg);
    size_t done = 0;
    const bool progress = isatty(fileno(stderr));
    for (size_t i = 0; i < specs.size(); ++i) {
        const TensorSpec& s = specs[i];
        const int64_t cols = s.shape.back();
        int64_t rows = 1;
        for (size_t d = 0; d + 1 < s.shape.size(); ++d) rows *= s.shape[d];
        const DType t = s.fill == Fill::Matrix ? export_matrix_type(type, cols) : DType::F32;
        w.add_tensor(s.name, t, s.shape, [&, i, rows, cols, t](const GgufWriter::Sink& sink) {
            const TensorSpec& spec = specs[i];
            const uint64_t tensor_seed = seed * 1000003u + i;
            const bool embd = spec.name == "token_embd.weight";
            const float sd = spec.fill == Fill::Norm ? 0.1f
                             : spec.fill == Fill::Matrix && !embd ? 1.f / std::sqrt(float(cols))
                                                                  : 1.f;
            std::normal_distribution<float> nd(0.f, sd);
            std::uniform_real_distribution<float> ud(0.5f, 8.f);
            // Rows are drawn and encoded in parallel blocks; each block has its own seeded stream.
            const int64_t block = 256;
            const size_t row_bytes = dtype_row_bytes(t, cols);
            std::vector<uint8_t> q(size_t(block) * row_bytes);
            for (int64_t r0 = 0; r0 < rows; r0 += block) {
                const int64_t n = std::min(block, rows - r0);
                ThreadPool::global().parallel_for(n, [&](int64_t b, int64_t e) {
                    std::vector<float> row(static_cast<size_t>(cols));
                    for (int64_t r = b; r < e; ++r) {
                        std::mt19937_64 g(tensor_seed ^ uint64_t((r0 + r + 1) * 0x9E3779B97F4A7C15ull));
                        auto nd_r = nd;
                        for (auto& x : row)
                            x = spec.fill == Fill::Negative ? -ud(g) : nd_r(g) + (spec.fill == Fill::Norm ? 1.f : 0.f);
                        quantize_row(t, row.data(), q.data() + size_t(r) * row_bytes, cols);
                    }
                });
                sink(q.data(), size_t(n) * row_bytes);
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
             {{"arch", true, "qwen3 | llama | qwen35moe"},
              {"preset", true, "size preset (default tiny)"},
              {"layers", true, "override the number of layers"},
              {"type", true, "matrix type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k (default f16)"},
              {"seed", true, "random seed (default 0)"},
              {"out", true, "output .gguf path"}},
             run_synth);

}  // namespace tessera::cli
