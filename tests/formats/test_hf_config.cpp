// HF config.json: flat and multimodal (text_config) variants, typed getters and their errors,
// and tensor-name canonicalisation. The configs are hand-written, shaped like real checkpoints.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "core/status.h"
#include "formats/hf_config.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

const char* kLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 500000.0, "max_position_embeddings": 131072,
  "tie_word_embeddings": false, "sliding_window": null, "torch_dtype": "bfloat16",
  "rope_scaling": {"factor": 8.0, "rope_type": "llama3"}, "eos_token_id": [128001, 128008, 128009]
})";

// Shaped like Qwen3.5-MoE: text_config nested, tie_word_embeddings and quantization on top.
const char* kQwen35Moe = R"({
  "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
  "tie_word_embeddings": false, "vocab_size": 1,
  "quantization": {"group_size": 64, "bits": 4, "model.language_model.layers.0.mlp.gate": {"group_size": 64, "bits": 8}},
  "text_config": {
    "model_type": "qwen3_5_moe_text", "hidden_size": 2048, "num_hidden_layers": 4, "vocab_size": 248320,
    "num_experts": 256, "num_experts_per_tok": 8, "partial_rotary_factor": 0.25,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]
  },
  "vision_config": {"hidden_size": 1152, "depth": 27}
})";

std::string error_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

}  // namespace

TEST(HfConfig, FlatConfigTypedGetters) {
    const auto c = HfConfig::parse(kLlama, "llama/config.json");
    EXPECT_FALSE(c.is_multimodal());
    EXPECT_EQ(c.model_type(), "llama");
    EXPECT_EQ(c.architectures(), std::vector<std::string>{"LlamaForCausalLM"});
    EXPECT_EQ(c.get_int("hidden_size"), 4096);
    EXPECT_EQ(c.get_int("num_key_value_heads", 32), 8);
    EXPECT_EQ(c.get_int("head_dim", 4096 / 32), 128);  // absent -> default
    EXPECT_DOUBLE_EQ(c.get_float("rms_norm_eps"), 1e-5);
    EXPECT_DOUBLE_EQ(c.get_float("rope_theta"), 500000.0);
    EXPECT_EQ(c.get_int("rope_theta"), 500000);  // an integral float is an integer
    EXPECT_DOUBLE_EQ(c.get_float("hidden_size"), 4096.0);  // an integer is a number
    EXPECT_FALSE(c.get_bool("tie_word_embeddings", true));
    EXPECT_FALSE(c.has("sliding_window"));  // null counts as absent
    EXPECT_EQ(c.get_int("sliding_window", 0), 0);
    EXPECT_DOUBLE_EQ(c.get_float("rope_scaling.factor"), 8.0);  // dotted path
    EXPECT_EQ(c.get_string("rope_scaling.rope_type"), "llama3");
    EXPECT_FALSE(c.has("rope_scaling.missing"));
    EXPECT_FALSE(c.has("hidden_size.x"));
    EXPECT_EQ(c.get_int_list("eos_token_id"), (std::vector<int64_t>{128001, 128008, 128009}));
    EXPECT_EQ(c.get_string("torch_dtype"), "bfloat16");
    EXPECT_EQ(&c.json(), &c.raw());
}

TEST(HfConfig, TextConfigIsMergedWithTopLevelFields) {
    const auto c = HfConfig::parse(kQwen35Moe);
    EXPECT_TRUE(c.is_multimodal());
    EXPECT_EQ(c.model_type(), "qwen3_5_moe_text");
    EXPECT_EQ(c.raw()["model_type"], "qwen3_5_moe");
    EXPECT_EQ(c.get_int("hidden_size"), 2048);        // the text tower's, not the vision tower's
    EXPECT_EQ(c.get_int("vocab_size"), 248320);       // text_config wins over the top level
    EXPECT_FALSE(c.get_bool("tie_word_embeddings"));  // inherited from the top level
    EXPECT_EQ(c.get_int("quantization.group_size"), 64);
    EXPECT_EQ(c.get_int("quantization.bits"), 4);
    EXPECT_EQ(c.json()["quantization"]["model.language_model.layers.0.mlp.gate"]["bits"], 8);
    EXPECT_EQ(c.architectures(), std::vector<std::string>{"Qwen3_5MoeForConditionalGeneration"});
    EXPECT_FALSE(c.has("vision_config"));
    EXPECT_FALSE(c.has("text_config"));
    EXPECT_DOUBLE_EQ(c.get_float("partial_rotary_factor"), 0.25);
    const auto types = c.get_string_list("layer_types");
    ASSERT_EQ(types.size(), 4u);
    EXPECT_EQ(types[3], "full_attention");
}

TEST(HfConfig, ErrorsNameTheFileTheKeyAndTheType) {
    const auto c = HfConfig::parse(
        R"({"num_attention_heads": "32", "hidden_size": 2.5, "flag": 1, "name": 5, "list": [1, "x"], "big": 18446744073709551615})",
        "ckpt/config.json");
    auto msg = error_of([&] { c.get_int("num_attention_heads"); });
    EXPECT_TRUE(contains(msg, "ckpt/config.json: num_attention_heads: expected an integer, got string")) << msg;
    msg = error_of([&] { c.get_int("num_attention_heads", 8); });  // a default does not hide a wrong type
    EXPECT_TRUE(contains(msg, "expected an integer")) << msg;
    msg = error_of([&] { c.get_int("hidden_size"); });
    EXPECT_TRUE(contains(msg, "hidden_size: expected an integer, got number 2.5")) << msg;
    msg = error_of([&] { c.get_bool("flag"); });
    EXPECT_TRUE(contains(msg, "flag: expected true or false, got integer 1")) << msg;
    msg = error_of([&] { c.get_string("name"); });
    EXPECT_TRUE(contains(msg, "name: expected a string")) << msg;
    msg = error_of([&] { c.get_float("list", 1.0); });
    EXPECT_TRUE(contains(msg, "list: expected a number, got array")) << msg;
    msg = error_of([&] { c.get_int_list("list"); });
    EXPECT_TRUE(contains(msg, "list[1]: expected an integer, got string")) << msg;
    msg = error_of([&] { c.get_int_list("name"); });
    EXPECT_TRUE(contains(msg, "name: expected a list")) << msg;
    msg = error_of([&] { c.get_int("big"); });
    EXPECT_TRUE(contains(msg, "too large")) << msg;
    msg = error_of([&] { c.get_int("num_hidden_layers"); });
    EXPECT_TRUE(contains(msg, "ckpt/config.json: num_hidden_layers: missing")) << msg;
}

TEST(HfConfig, BadFilesAreClearErrors) {
    EXPECT_TRUE(contains(error_of([] { HfConfig::parse("{\"a\": ", "x.json"); }), "x.json: bad JSON"));
    EXPECT_TRUE(contains(error_of([] { HfConfig::parse("[1, 2]", "x.json"); }), "expected a JSON object"));
    EXPECT_TRUE(contains(error_of([] { HfConfig::parse(R"({"text_config": 3})", "x.json"); }),
                         "text_config: expected an object"));
    EXPECT_FALSE(HfConfig::parse(R"({"text_config": null, "a": 1})").is_multimodal());

    const fs::path dir = fs::temp_directory_path() / ("tessera_cfg_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    try {
        HfConfig::load(dir.string());
        ADD_FAILURE() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_TRUE(contains(e.what(), "config.json"));
    }
    std::ofstream(dir / "config.json") << kQwen35Moe;
    const auto c = HfConfig::load(dir.string());
    EXPECT_EQ(c.get_int("num_experts"), 256);
    EXPECT_EQ(c.source(), (dir / "config.json").string());
    EXPECT_EQ(HfConfig::load((dir / "config.json").string()).get_int("num_experts"), 256);
    fs::remove_all(dir);
}

TEST(HfConfig, CanonicalTensorNames) {
    EXPECT_EQ(canonical_tensor_name("model.language_model.layers.3.self_attn.q_proj.weight"),
              "model.layers.3.self_attn.q_proj.weight");
    EXPECT_EQ(canonical_tensor_name("model.language_model.embed_tokens.weight"), "model.embed_tokens.weight");
    EXPECT_EQ(canonical_tensor_name("language_model.model.norm.weight"), "model.norm.weight");
    EXPECT_EQ(canonical_tensor_name("language_model.lm_head.weight"), "lm_head.weight");
    EXPECT_EQ(canonical_tensor_name("model.layers.0.mlp.gate.weight"), "model.layers.0.mlp.gate.weight");
    EXPECT_EQ(canonical_tensor_name("lm_head.weight"), "lm_head.weight");
    EXPECT_EQ(canonical_tensor_name("mtp.layers.0.input_layernorm.weight"), "mtp.layers.0.input_layernorm.weight");

    EXPECT_TRUE(is_non_text_tensor("model.visual.blocks.0.attn.qkv.weight"));
    EXPECT_TRUE(is_non_text_tensor("visual.merger.mlp.0.weight"));
    EXPECT_TRUE(is_non_text_tensor("vision_tower.encoder.layers.0.weight"));
    EXPECT_TRUE(is_non_text_tensor("multi_modal_projector.linear_1.weight"));
    EXPECT_TRUE(is_non_text_tensor("model.multi_modal_projector.linear_1.weight"));
    EXPECT_FALSE(is_non_text_tensor("model.language_model.layers.0.mlp.experts.gate_up_proj"));
    EXPECT_FALSE(is_non_text_tensor("model.layers.0.self_attn.visual_gate.weight"));
    EXPECT_FALSE(is_non_text_tensor("lm_head.weight"));
    EXPECT_FALSE(is_non_text_tensor("visualizer"));
}
