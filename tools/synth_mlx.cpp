// `tessera synth --type mlx4`: an mlx-community style checkpoint directory — config.json with
// "quantization" {group_size 64, bits 4} (routers 8-bit, as mlx-lm converts), safetensors shards
// of u32-packed codes with bf16 scales and biases under mlx-lm's HF names, the index, and the
// tokenizer files.
#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/status.h"
#include "synth_fill.h"
#include "synth_job.h"
#include "synth_progress.h"
#include "synth_safetensors.h"
#include "synth_stream.h"
#include "synth_tokenizer.h"

namespace tessera::cli {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

int synth_mlx_bits(const SynthTensor& t) {
    switch (t.store) {
        case SynthStore::Float: return 0;
        case SynthStore::Matrix: return 4;
        case SynthStore::Router: return 8;
    }
    return 0;
}

namespace {

constexpr uint64_t kShardBytes = uint64_t(5) << 30;  // mlx-lm's default max_file_size_gb

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream f(p, std::ios::binary);
    f << text;
    if (!f) fail(ErrorKind::Io, "{}: cannot write", p.string());
}

// The text model's config.json fields, as transformers / mlx-lm name them.
ojson text_config(const ModelConfig& c) {
    ojson j;
    j["hidden_size"] = c.hidden;
    j["num_hidden_layers"] = c.n_layers;
    j["num_attention_heads"] = c.n_heads;
    j["num_key_value_heads"] = c.n_kv_heads;
    j["head_dim"] = c.head_dim;
    if (c.ffn_hidden > 0) j["intermediate_size"] = c.ffn_hidden;
    j["vocab_size"] = c.vocab_size;
    j["rms_norm_eps"] = c.rms_eps;
    j["max_position_embeddings"] = c.max_ctx;
    j["tie_word_embeddings"] = c.tied_embeddings;
    j["hidden_act"] = "silu";
    j["attention_bias"] = false;
    if (c.gdn_k_heads == 0) {
        j["rope_theta"] = c.rope_theta;
        return j;
    }
    std::vector<std::string> types;
    for (int64_t i = 0; i < c.n_layers; ++i) types.push_back(c.is_attention_layer(i) ? "full_attention" : "linear_attention");
    int64_t every = 0;
    for (int64_t i = 0; i < c.n_layers && !every; ++i)
        if (c.is_attention_layer(i)) every = i + 1;
    j["full_attention_interval"] = every;
    j["layer_types"] = types;
    j["linear_conv_kernel_dim"] = c.conv_kernel;
    j["linear_key_head_dim"] = c.gdn_dk;
    j["linear_value_head_dim"] = c.gdn_dv;
    j["linear_num_key_heads"] = c.gdn_k_heads;
    j["linear_num_value_heads"] = c.gdn_v_heads;
    j["num_experts"] = c.n_experts;
    j["num_experts_per_tok"] = c.n_experts_used;
    j["moe_intermediate_size"] = c.expert_ffn;
    j["shared_expert_intermediate_size"] = c.shared_expert_ffn;
    const double partial = double(c.rot_dims) / double(c.head_dim);
    if (c.arch == "qwen3next") {
        j["norm_topk_prob"] = c.norm_topk;
        j["decoder_sparse_step"] = 1;
        j["mlp_only_layers"] = ojson::array();
        j["partial_rotary_factor"] = partial;
        j["rope_theta"] = c.rope_theta;
    } else {  // Qwen3.5: rope in rope_parameters, MRoPE sections that reduce to 1-D RoPE for text
        const int64_t pairs = c.rot_dims / 2, s = (pairs * 11 + 16) / 32;
        j["rope_parameters"] = {{"mrope_interleaved", true},
                                {"mrope_section", {s, s, pairs - 2 * s}},
                                {"partial_rotary_factor", partial},
                                {"rope_theta", c.rope_theta},
                                {"type", "default"}};
    }
    return j;
}

ojson model_config(const ModelConfig& c, const std::vector<SynthTensor>& plan) {
    ojson q = {{"group_size", kMlxGroup}, {"bits", 4}, {"mode", "affine"}};
    for (const auto& t : plan)
        if (synth_mlx_bits(t) == 8) q[t.name.substr(0, t.name.size() - 7)] = {{"group_size", kMlxGroup}, {"bits", 8}};
    ojson j;
    if (c.arch == "qwen35moe") {
        j["architectures"] = {"Qwen3_5MoeForConditionalGeneration"};
        j["model_type"] = "qwen3_5_moe";
        ojson t = text_config(c);
        t["model_type"] = "qwen3_5_moe_text";
        j["text_config"] = t;
        j["tie_word_embeddings"] = c.tied_embeddings;
    } else {
        const char* arch = c.arch == "qwen3" ? "Qwen3ForCausalLM" : c.arch == "llama" ? "LlamaForCausalLM" : "Qwen3NextForCausalLM";
        j["architectures"] = {arch};
        j["model_type"] = c.arch == "qwen3next" ? "qwen3_next" : c.arch;
        j.update(text_config(c));
    }
    j["torch_dtype"] = "bfloat16";
    j["quantization"] = q;
    j["quantization_config"] = q;
    return j;
}

// Adds t's safetensors entries (weight, and scales + biases when quantized) to `w`.
void add_entries(SafetensorsWriter& w, const SynthTensor& t, uint64_t seed) {
    const uint64_t key = synth_tensor_key(seed, t);
    const int bits = synth_mlx_bits(t);
    const int64_t rows = t.rows(), cols = t.cols();
    if (bits == 0) {
        w.add(t.name, "BF16", t.shape, [&t, key, rows, cols](const SafetensorsWriter::Sink& sink) {
            SynthTensor flat = t;
            flat.shape = {rows, cols};
            synth_stream_rows(
                rows, size_t(cols) * 2, [&](int64_t r0, int64_t n, void* dst) { synth_rows(flat, DType::BF16, key, r0, n, dst); },
                sink);
        });
        return;
    }
    TS_CHECK(cols % kMlxGroup == 0, "tensor {}: {} columns are not whole groups of {}", t.name, cols, kMlxGroup);
    const std::string module = t.name.substr(0, t.name.size() - 7);  // without ".weight"
    std::vector<int64_t> wshape = t.shape, gshape = t.shape;
    wshape.back() = cols * bits / 32;
    gshape.back() = cols / kMlxGroup;
    w.add(module + ".weight", "U32", wshape, [key, bits, rows, cols](const SafetensorsWriter::Sink& sink) {
        synth_stream_rows(
            rows, size_t(cols * bits / 8),
            [&](int64_t r0, int64_t n, void* dst) { synth_mlx_codes(key, bits, r0, n, cols, static_cast<uint32_t*>(dst)); },
            sink);
    });
    const SynthAffine a = synth_mlx_affine(t, bits);
    const int64_t groups = rows * (cols / kMlxGroup);
    for (const char* part : {".scales", ".biases"}) {
        const uint16_t value = std::string(part) == ".scales" ? a.scale : a.bias;
        w.add(module + part, "BF16", gshape, [value, groups](const SafetensorsWriter::Sink& sink) {
            const std::vector<uint16_t> chunk(size_t(std::min<int64_t>(groups, 1 << 20)), value);
            for (int64_t done = 0; done < groups;) {
                const int64_t n = std::min<int64_t>(groups - done, int64_t(chunk.size()));
                sink(chunk.data(), size_t(n) * 2);
                done += n;
            }
        });
    }
}

// The tokenizer files: copies of --tokenizer's tokenizer.json (+ tokenizer_config.json beside
// it), or the synthetic tokenizer written as tokenizer.json + tokenizer_config.json.
void write_tokenizer(const SynthJob& job, const fs::path& dir) {
    const ModelConfig& c = job.preset.cfg;
    if (!job.tok) {
        write_synth_tokenizer_files(make_synth_tokenizer(c.vocab_size), dir.string());
        return;
    }
    const fs::path src(job.tokenizer);
    TS_CHECK(src.filename() == "tokenizer.json", "--tokenizer {}: pass a tokenizer.json for an MLX checkpoint", job.tokenizer);
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"}) {
        const fs::path from = src.parent_path() / name;
        if (fs::exists(from)) fs::copy_file(from, dir / name, fs::copy_options::overwrite_existing);
    }
}

}  // namespace

void write_synth_mlx(const SynthJob& job) {
    const ModelConfig& c = job.preset.cfg;
    const fs::path dir(job.out);
    TS_CHECK(!fs::exists(dir) || fs::is_directory(dir), "--out {}: an MLX checkpoint is a directory", job.out);
    fs::create_directories(dir);
    const auto plan = mlx_tensor_plan(c);

    // Shards of at most kShardBytes, tensors in name order (as mlx-lm saves them).
    std::vector<const SynthTensor*> order;
    for (const auto& t : plan) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
    const std::map<std::string, std::string> meta = {{"format", "mlx"}};
    std::vector<SafetensorsWriter> shards(1, SafetensorsWriter(meta));
    for (const SynthTensor* t : order) {
        SafetensorsWriter probe;
        add_entries(probe, *t, job.seed);
        if (shards.back().size() > 0 && shards.back().data_bytes() + probe.data_bytes() > kShardBytes)
            shards.emplace_back(meta);
        add_entries(shards.back(), *t, job.seed);
    }
    uint64_t total = 0, params = 0;
    for (const auto& s : shards) total += s.data_bytes();
    for (const auto& t : plan) params += uint64_t(t.rows() * t.cols());

    write_text(dir / "config.json", model_config(c, plan).dump(4));
    write_tokenizer(job, dir);
    SynthProgress progress("synth", total);
    ojson weight_map = ojson::object();
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string file = shards.size() == 1 ? "model.safetensors"
                                                    : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
        shards[i].write((dir / file).string(), [&](uint64_t n) { progress.add(n); });
    }
    // The index: which shard holds each entry.
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string file = shards.size() == 1 ? "model.safetensors"
                                                    : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
        for (const auto& name : shards[i].names()) weight_map[name] = file;
    }
    ojson index = {{"metadata", {{"total_size", total}, {"total_parameters", params}}}, {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(4));
    progress.finish(fmt::format("{} ({}, mlx 4-bit)", job.out, c.describe()));
}

}  // namespace tessera::cli
