// Hugging Face config.json: the text model's configuration (for multimodal checkpoints the
// `text_config` object merged with the top-level fields it lacks), typed getters with clear
// errors, and the mapping of multimodal tensor names to plain text-model names.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace tessera {

class HfConfig {
public:
    // `dir_or_file`: a checkpoint directory holding config.json, or the JSON file itself.
    static HfConfig load(const std::string& dir_or_file);
    // `source` names the config in errors (usually its path).
    static HfConfig parse(const std::string& text, const std::string& source = "config.json");
    static HfConfig from_json(const nlohmann::json& raw, const std::string& source = "config.json");

    const nlohmann::json& json() const { return *text_; }  // the text model's config (merged)
    const nlohmann::json& raw() const { return *raw_; }    // the file as read
    const std::string& source() const { return source_; }
    bool is_multimodal() const { return multimodal_; }     // the file had a text_config

    // Keys: a top-level name, or a dotted path into nested objects ("quantization.group_size",
    // "rope_scaling.factor") when no key with the dots exists. A null value counts as absent.
    bool has(const std::string& key) const;
    // Required getters throw Error "config.json: KEY: missing" or "...: expected an integer, got
    // string \"32\""; the defaulted ones return `def` only when the key is absent or null.
    int64_t get_int(const std::string& key) const;
    int64_t get_int(const std::string& key, int64_t def) const;
    double get_float(const std::string& key) const;
    double get_float(const std::string& key, double def) const;
    bool get_bool(const std::string& key) const;
    bool get_bool(const std::string& key, bool def) const;
    std::string get_string(const std::string& key) const;
    std::string get_string(const std::string& key, const std::string& def) const;
    std::vector<int64_t> get_int_list(const std::string& key) const;
    std::vector<int64_t> get_int_list(const std::string& key, const std::vector<int64_t>& def) const;
    std::vector<std::string> get_string_list(const std::string& key) const;
    std::vector<std::string> get_string_list(const std::string& key, const std::vector<std::string>& def) const;

    std::string model_type() const { return get_string("model_type", ""); }  // of the text model
    std::vector<std::string> architectures() const { return get_string_list("architectures", {}); }

private:
    const nlohmann::json* find(const std::string& key) const;  // nullptr if absent or null
    const nlohmann::json& require(const std::string& key) const;

    std::shared_ptr<const nlohmann::json> raw_, text_;
    std::string source_;
    bool multimodal_ = false;
};

// Maps multimodal / prefixed HF names to the plain text-model names:
// model.language_model.X -> model.X, language_model.model.X -> model.X,
// language_model.lm_head.weight -> lm_head.weight. Other names are returned unchanged.
std::string canonical_tensor_name(const std::string& name);
// True for vision / audio towers and multimodal projectors (model.visual.*, visual.*,
// vision_tower.*, multi_modal_projector.*, ...), which a text-only model skips.
bool is_non_text_tensor(const std::string& name);

}  // namespace tessera
