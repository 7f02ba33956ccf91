// config.json loading, text_config merging, typed getters, and HF tensor-name canonicalisation.
#include "formats/hf_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/status.h"

namespace tessera {

using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Sub-configs of other modalities that do not belong in the text model's config.
const char* const kOtherModalities[] = {"text_config", "vision_config", "audio_config", "speech_config"};

std::string describe(const Json& j) {
    const char* type = j.is_null()              ? "null"
                       : j.is_boolean()         ? "bool"
                       : j.is_number_integer()  ? "integer"
                       : j.is_number()          ? "number"
                       : j.is_string()          ? "string"
                       : j.is_array()           ? "array"
                                                : "object";
    std::string v = j.dump();
    if (v.size() > 40) v = v.substr(0, 37) + "...";
    return std::string(type) + " " + v;
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

HfConfig HfConfig::load(const std::string& dir_or_file) {
    fs::path p(dir_or_file);
    std::error_code ec;
    if (fs::is_directory(p, ec)) p /= "config.json";
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(ErrorKind::NotFound, "{}: cannot open config.json", p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return parse(ss.str(), p.string());
}

HfConfig HfConfig::parse(const std::string& text, const std::string& source) {
    Json j;
    try {
        j = Json::parse(text);
    } catch (const Json::exception& e) {
        fail(ErrorKind::Invalid, "{}: bad JSON: {}", source, e.what());
    }
    return from_json(j, source);
}

HfConfig HfConfig::from_json(const Json& raw, const std::string& source) {
    TS_CHECK(raw.is_object(), "{}: expected a JSON object at the top level, got {}", source, describe(raw));
    HfConfig c;
    c.source_ = source;
    c.raw_ = std::make_shared<const Json>(raw);
    auto tc = raw.find("text_config");
    if (tc == raw.end() || tc->is_null()) {
        c.text_ = c.raw_;
        return c;
    }
    TS_CHECK(tc->is_object(), "{}: text_config: expected an object, got {}", source, describe(*tc));
    Json text = *tc;
    for (const auto& [key, value] : raw.items()) {
        bool skip = false;
        for (const char* other : kOtherModalities) skip = skip || key == other;
        if (!skip && !text.contains(key)) text[key] = value;  // e.g. tie_word_embeddings, quantization
    }
    c.text_ = std::make_shared<const Json>(std::move(text));
    c.multimodal_ = true;
    return c;
}

const Json* HfConfig::find(const std::string& key) const {
    const Json& j = *text_;
    auto it = j.find(key);
    if (it != j.end()) return it->is_null() ? nullptr : &*it;
    if (key.find('.') == std::string::npos) return nullptr;
    const Json* cur = &j;
    size_t start = 0;
    while (start <= key.size()) {
        const size_t dot = std::min(key.find('.', start), key.size());
        if (!cur->is_object()) return nullptr;
        auto sub = cur->find(key.substr(start, dot - start));
        if (sub == cur->end()) return nullptr;
        cur = &*sub;
        start = dot + 1;
    }
    return cur->is_null() ? nullptr : cur;
}

const Json& HfConfig::require(const std::string& key) const {
    const Json* v = find(key);
    if (!v) fail(ErrorKind::Invalid, "{}: {}: missing (required)", source_, key);
    return *v;
}

bool HfConfig::has(const std::string& key) const { return find(key) != nullptr; }

namespace {

int64_t to_int(const Json& v, const std::string& source, const std::string& key) {
    if (v.is_number_unsigned()) {
        TS_CHECK(v.get<uint64_t>() <= uint64_t(INT64_MAX), "{}: {}: integer {} is too large", source, key, v.dump());
        return int64_t(v.get<uint64_t>());
    }
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float()) {  // 4096.0 is accepted; 2.5 is not
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return int64_t(d);
    }
    fail(ErrorKind::Invalid, "{}: {}: expected an integer, got {}", source, key, describe(v));
}

double to_float(const Json& v, const std::string& source, const std::string& key) {
    if (!v.is_number()) fail(ErrorKind::Invalid, "{}: {}: expected a number, got {}", source, key, describe(v));
    return v.get<double>();
}

bool to_bool(const Json& v, const std::string& source, const std::string& key) {
    if (!v.is_boolean()) fail(ErrorKind::Invalid, "{}: {}: expected true or false, got {}", source, key, describe(v));
    return v.get<bool>();
}

std::string to_string(const Json& v, const std::string& source, const std::string& key) {
    if (!v.is_string()) fail(ErrorKind::Invalid, "{}: {}: expected a string, got {}", source, key, describe(v));
    return v.get<std::string>();
}

const Json& to_array(const Json& v, const std::string& source, const std::string& key) {
    if (!v.is_array()) fail(ErrorKind::Invalid, "{}: {}: expected a list, got {}", source, key, describe(v));
    return v;
}

}  // namespace

int64_t HfConfig::get_int(const std::string& key) const { return to_int(require(key), source_, key); }
int64_t HfConfig::get_int(const std::string& key, int64_t def) const {
    const Json* v = find(key);
    return v ? to_int(*v, source_, key) : def;
}
double HfConfig::get_float(const std::string& key) const { return to_float(require(key), source_, key); }
double HfConfig::get_float(const std::string& key, double def) const {
    const Json* v = find(key);
    return v ? to_float(*v, source_, key) : def;
}
bool HfConfig::get_bool(const std::string& key) const { return to_bool(require(key), source_, key); }
bool HfConfig::get_bool(const std::string& key, bool def) const {
    const Json* v = find(key);
    return v ? to_bool(*v, source_, key) : def;
}
std::string HfConfig::get_string(const std::string& key) const { return to_string(require(key), source_, key); }
std::string HfConfig::get_string(const std::string& key, const std::string& def) const {
    const Json* v = find(key);
    return v ? to_string(*v, source_, key) : def;
}

std::vector<int64_t> HfConfig::get_int_list(const std::string& key) const {
    const Json& a = to_array(require(key), source_, key);
    std::vector<int64_t> out;
    for (size_t i = 0; i < a.size(); ++i) out.push_back(to_int(a[i], source_, key + "[" + std::to_string(i) + "]"));
    return out;
}
std::vector<int64_t> HfConfig::get_int_list(const std::string& key, const std::vector<int64_t>& def) const {
    return has(key) ? get_int_list(key) : def;
}
std::vector<std::string> HfConfig::get_string_list(const std::string& key) const {
    const Json& a = to_array(require(key), source_, key);
    std::vector<std::string> out;
    for (size_t i = 0; i < a.size(); ++i) out.push_back(to_string(a[i], source_, key + "[" + std::to_string(i) + "]"));
    return out;
}
std::vector<std::string> HfConfig::get_string_list(const std::string& key, const std::vector<std::string>& def) const {
    return has(key) ? get_string_list(key) : def;
}

// ---- tensor names ---------------------------------------------------------------------------

std::string canonical_tensor_name(const std::string& name) {
    if (starts_with(name, "model.language_model.")) return "model." + name.substr(21);
    if (starts_with(name, "language_model.")) {
        const std::string rest = name.substr(15);
        if (starts_with(rest, "model.") || starts_with(rest, "lm_head.")) return rest;
        return "model." + rest;  // language_model.layers.0... (no inner "model.")
    }
    return name;
}

bool is_non_text_tensor(const std::string& name) {
    static const char* const kPrefixes[] = {"visual.", "vision_tower.", "vision_model.", "vision_encoder.",
                                            "multi_modal_projector.", "mm_projector.", "audio_tower.",
                                            "audio_model.", "vision_embed_tokens."};
    const std::string n = starts_with(name, "model.") ? name.substr(6) : name;
    for (const char* p : kPrefixes)
        if (starts_with(n, p)) return true;
    return false;
}

}  // namespace tessera
