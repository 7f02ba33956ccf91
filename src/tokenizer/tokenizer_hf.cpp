// Tokenizer from Hugging Face files: tokenizer.json (normalizer, pre_tokenizer, BPE model,
// added tokens, post_processor), tokenizer_config.json (BOS/EOS, chat template) and
// generation_config.json (extra EOS ids).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/status.h"
#include "tokenizer/tokenizer_parts.h"

namespace tessera {
namespace {
using json = nlohmann::json;

const json* member(const json& j, const char* key) {
    if (!j.is_object()) return nullptr;
    auto it = j.find(key);
    return (it == j.end() || it->is_null()) ? nullptr : &*it;
}
bool get_bool(const json& j, const char* key, bool def) {
    const json* v = member(j, key);
    if (!v) return def;
    TS_CHECK(v->is_boolean(), "'{}' must be true or false, got {}", key, v->dump());
    return v->get<bool>();
}
std::string get_string(const json& j, const char* key, const std::string& def = "") {
    const json* v = member(j, key);
    if (!v) return def;
    TS_CHECK(v->is_string(), "'{}' must be a string, got {}", key, v->dump().substr(0, 80));
    return v->get<std::string>();
}
std::string type_of(const json& j) { return get_string(j, "type"); }

// Flattens "Sequence" wrappers: {"type": "Sequence", <list_key>: [...]} -> its steps.
void flatten(const json& j, const char* list_key, std::vector<const json*>& out) {
    if (j.is_null()) return;
    if (type_of(j) == "Sequence") {
        const json* list = member(j, list_key);
        TS_CHECK(list && list->is_array(), "Sequence without '{}' list", list_key);
        for (const auto& s : *list) flatten(s, list_key, out);
    } else {
        out.push_back(&j);
    }
}

void read_normalizer(const json& j, Tokenizer::Parts& p) {
    std::vector<const json*> steps;
    flatten(j, "normalizers", steps);
    for (const json* s : steps) {
        const std::string t = type_of(*s);
        if (t == "NFC") p.nfc = true;
        else fail(ErrorKind::Unsupported, "normalizer '{}' is not supported (byte-level BPE with NFC or none)", t);
    }
}

tok::SplitBehavior parse_behavior(const std::string& b) {
    using B = tok::SplitBehavior;
    if (b == "Isolated") return B::Isolated;
    if (b == "Removed") return B::Removed;
    if (b == "MergedWithPrevious") return B::MergedWithPrevious;
    if (b == "MergedWithNext") return B::MergedWithNext;
    if (b == "Contiguous") return B::Contiguous;
    fail(ErrorKind::Invalid, "unknown split behavior '{}'", b);
}

// Returns whether a ByteLevel step was seen (required: this is a byte-level BPE tokenizer).
bool read_pre_tokenizer(const json& j, Tokenizer::Parts& p) {
    std::vector<const json*> steps;
    flatten(j, "pretokenizers", steps);
    bool byte_level = false;
    for (const json* s : steps) {
        const std::string t = type_of(*s);
        if (t == "Split") {
            const json* pat = member(*s, "pattern");
            TS_CHECK(pat && pat->is_object(), "Split without a pattern");
            std::string re;
            if (const json* r = member(*pat, "Regex")) re = r->get<std::string>();
            else if (const json* l = member(*pat, "String")) re = tok::PreTokenizer::escape_literal(l->get<std::string>());
            else fail(ErrorKind::Invalid, "Split pattern must be Regex or String: {}", pat->dump());
            p.pre.add_split(std::make_shared<const tok::Regex>(re),
                            parse_behavior(get_string(*s, "behavior", "Isolated")), get_bool(*s, "invert", false));
        } else if (t == "ByteLevel") {
            byte_level = true;
            p.pre.add_byte_level(get_bool(*s, "add_prefix_space", true), get_bool(*s, "use_regex", true));
        } else if (t == "Digits") {
            p.pre.add_split(std::make_shared<const tok::Regex>(R"(\p{N})"),
                            get_bool(*s, "individual_digits", false) ? tok::SplitBehavior::Isolated
                                                                     : tok::SplitBehavior::Contiguous,
                            false);
        } else if (t == "Whitespace") {
            // Keeps the matches, drops what lies between (HF: split(Invert(re), Removed)).
            p.pre.add_split(std::make_shared<const tok::Regex>(R"(\w+|[^\w\s]+)"), tok::SplitBehavior::Removed, true);
        } else if (t == "WhitespaceSplit") {
            p.pre.add_split(std::make_shared<const tok::Regex>(R"(\s+)"), tok::SplitBehavior::Removed, false);
        } else if (t == "Punctuation") {
            p.pre.add_split(std::make_shared<const tok::Regex>(R"(\p{P}|[!-/:-@\[-`{-~])"),
                            parse_behavior(get_string(*s, "behavior", "Isolated")), false);
        } else {
            fail(ErrorKind::Unsupported, "pre_tokenizer '{}' is not supported", t);
        }
    }
    return byte_level;
}

void read_model(const json& m, Tokenizer::Parts& p) {
    TS_CHECK(type_of(m) == "BPE", "model type '{}' is not supported (only BPE)", type_of(m));
    TS_CHECK(!get_bool(m, "byte_fallback", false), "BPE with byte_fallback (SentencePiece style) is not supported");
    TS_CHECK(get_string(m, "continuing_subword_prefix").empty() && get_string(m, "end_of_word_suffix").empty(),
             "BPE with subword prefixes/suffixes is not supported");
    p.ignore_merges = get_bool(m, "ignore_merges", false);
    const json* vocab = member(m, "vocab");
    TS_CHECK(vocab && vocab->is_object(), "model.vocab must be an object");
    p.vocab.reserve(vocab->size());
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
        TS_CHECK(it.value().is_number_integer(), "model.vocab['{}'] is not an integer id", it.key());
        const int64_t id = it.value().get<int64_t>();
        TS_CHECK(id >= 0 && id <= INT32_MAX, "model.vocab['{}'] id {} out of range", it.key(), id);
        p.vocab.emplace_back(it.key(), static_cast<int32_t>(id));
    }
    const json* merges = member(m, "merges");
    if (!merges) return;
    TS_CHECK(merges->is_array(), "model.merges must be a list");
    p.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
        const json& e = (*merges)[i];
        if (e.is_string()) {
            const std::string& s = e.get_ref<const std::string&>();
            const size_t sp = s.find(' ');
            TS_CHECK(sp != std::string::npos && sp > 0 && sp + 1 < s.size(), "model.merges[{}] '{}' is not 'a b'", i, s);
            p.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else {
            TS_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(),
                     "model.merges[{}] must be 'a b' or [a, b], got {}", i, e.dump());
            p.merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        }
    }
}

void read_added_tokens(const json& list, Tokenizer::Parts& p) {
    TS_CHECK(list.is_array(), "added_tokens must be a list");
    for (const auto& a : list) {
        tok::AddedToken t;
        t.content = get_string(a, "content");
        const json* id = member(a, "id");
        TS_CHECK(id && id->is_number_integer(), "added token '{}' has no integer id", t.content);
        const int64_t v = id->get<int64_t>();
        TS_CHECK(v >= 0 && v <= INT32_MAX, "added token '{}' id {} out of range", t.content, v);
        t.id = static_cast<int32_t>(v);
        t.special = get_bool(a, "special", false);
        t.normalized = get_bool(a, "normalized", !t.special);
        t.lstrip = get_bool(a, "lstrip", false);
        t.rstrip = get_bool(a, "rstrip", false);
        t.single_word = get_bool(a, "single_word", false);
        p.added.push_back(std::move(t));
    }
}

// post_processor -> the ids put around a single sequence when add_special.
void read_post_processor(const json& j, const std::unordered_map<std::string, int32_t>& ids,
                         std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
    std::vector<const json*> steps;
    flatten(j, "processors", steps);
    for (const json* s : steps) {
        const std::string t = type_of(*s);
        if (t == "ByteLevel") continue;
        if (t == "TemplateProcessing") {
            const json* single = member(*s, "single");
            const json* specials = member(*s, "special_tokens");
            TS_CHECK(single && single->is_array(), "TemplateProcessing without 'single'");
            bool after = false;
            for (const auto& item : *single) {
                if (member(item, "Sequence")) {
                    after = true;
                    continue;
                }
                const json* st = member(item, "SpecialToken");
                TS_CHECK(st, "TemplateProcessing item {} is neither Sequence nor SpecialToken", item.dump());
                const std::string name = get_string(*st, "id");
                const json* spec = specials ? member(*specials, name.c_str()) : nullptr;
                std::vector<int32_t> add;
                if (spec && member(*spec, "ids")) {
                    for (const auto& v : (*spec)["ids"]) add.push_back(v.get<int32_t>());
                } else {
                    auto it = ids.find(name);
                    TS_CHECK(it != ids.end(), "TemplateProcessing token '{}' is not in the vocabulary", name);
                    add.push_back(it->second);
                }
                auto& dst = after ? suffix : prefix;
                dst.insert(dst.end(), add.begin(), add.end());
            }
        } else if (t == "BertProcessing" || t == "RobertaProcessing") {
            const json* cls = member(*s, "cls");
            const json* sep = member(*s, "sep");
            TS_CHECK(cls && sep && cls->is_array() && sep->is_array(), "{} without cls/sep", t);
            prefix.push_back((*cls)[1].get<int32_t>());
            suffix.push_back((*sep)[1].get<int32_t>());
        } else {
            fail(ErrorKind::Unsupported, "post_processor '{}' is not supported", t);
        }
    }
}

// bos_token / eos_token in tokenizer_config.json: a string, {"content": ...} or null.
std::optional<std::string> config_token(const json& cfg, const char* key) {
    const json* v = member(cfg, key);
    if (!v) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    if (v->is_object() && member(*v, "content")) return get_string(*v, "content");
    fail(ErrorKind::Invalid, "'{}' must be a string or an object with 'content'", key);
}

std::string read_file(const std::filesystem::path& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "{}: cannot open", path.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

json parse_json(std::string_view text, const char* what) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {
        fail(ErrorKind::Invalid, "{}: invalid JSON: {}", what, e.what());
    }
}
}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_hf_json(std::string_view tokenizer_json, std::string_view config_json,
                                                   std::string_view generation_config_json) {
    Parts p;
    p.source = "tokenizer.json";
    const json tj = parse_json(tokenizer_json, "tokenizer.json");
    TS_CHECK(tj.is_object(), "tokenizer.json: not a JSON object");
    std::unordered_map<std::string, int32_t> ids;  // for resolving token names
    with_context("tokenizer.json", [&] {
        if (const json* n = member(tj, "normalizer")) read_normalizer(*n, p);
        bool byte_level = false;
        if (const json* pre = member(tj, "pre_tokenizer")) byte_level = read_pre_tokenizer(*pre, p);
        if (const json* dec = member(tj, "decoder")) {
            std::vector<const json*> steps;
            flatten(*dec, "decoders", steps);
            for (const json* s : steps) byte_level = byte_level || type_of(*s) == "ByteLevel";
        }
        TS_CHECK(byte_level, "not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer or decoder)");
        const json* model = member(tj, "model");
        TS_CHECK(model, "no model");
        read_model(*model, p);
        if (const json* added = member(tj, "added_tokens")) read_added_tokens(*added, p);
        for (const auto& [t, id] : p.vocab) ids[t] = id;
        for (const auto& t : p.added) ids[t.content] = t.id;
        if (const json* post = member(tj, "post_processor")) read_post_processor(*post, ids, p.prefix_ids, p.suffix_ids);
    });
    // A named token missing from the vocabulary leaves the id unset (as transformers does).
    auto lookup = [&](const std::string& name) -> std::optional<int32_t> {
        auto it = ids.find(name);
        if (it == ids.end()) return std::nullopt;
        return it->second;
    };
    if (!config_json.empty()) {
        const json cfg = parse_json(config_json, "tokenizer_config.json");
        with_context("tokenizer_config.json", [&] {
            if (auto b = config_token(cfg, "bos_token")) p.bos = lookup(*b);
            if (auto e = config_token(cfg, "eos_token")) p.eos = lookup(*e);
            if (auto pad = config_token(cfg, "pad_token")) p.pad = lookup(*pad);
            // Explicit add_bos_token / add_eos_token replace the post_processor's template.
            if (member(cfg, "add_bos_token") || member(cfg, "add_eos_token")) {
                p.prefix_ids.clear(), p.suffix_ids.clear();
                if (get_bool(cfg, "add_bos_token", false) && p.bos) p.prefix_ids.push_back(*p.bos);
                if (get_bool(cfg, "add_eos_token", false) && p.eos) p.suffix_ids.push_back(*p.eos);
            }
            if (const json* ct = member(cfg, "chat_template")) {
                if (ct->is_string()) {
                    p.chat_template = ct->get<std::string>();
                } else if (ct->is_array()) {  // [{"name": ..., "template": ...}]: the default one
                    for (const auto& e : *ct)
                        if (p.chat_template.empty() || get_string(e, "name") == "default")
                            p.chat_template = get_string(e, "template");
                }
            }
        });
    }
    if (!generation_config_json.empty()) {
        const json gen = parse_json(generation_config_json, "generation_config.json");
        if (const json* e = member(gen, "eos_token_id")) {
            if (e->is_number_integer()) p.extra_eos.push_back(e->get<int32_t>());
            else if (e->is_array())
                for (const auto& v : *e)
                    if (v.is_number_integer()) p.extra_eos.push_back(v.get<int32_t>());
        }
    }
    return from_parts(std::move(p));
}

std::unique_ptr<Tokenizer> Tokenizer::from_hf_dir(const std::string& dir) {
    namespace fs = std::filesystem;
    const fs::path d(dir);
    const fs::path tj = d / "tokenizer.json";
    if (!fs::is_regular_file(tj)) fail(ErrorKind::NotFound, "{}: no tokenizer.json", dir);
    auto maybe = [&](const char* name) {
        const fs::path f = d / name;
        return fs::is_regular_file(f) ? read_file(f) : std::string();
    };
    return with_context(dir, [&] {
        auto tok = from_hf_json(read_file(tj), maybe("tokenizer_config.json"), maybe("generation_config.json"));
        // Newer checkpoints keep the template beside the config: chat_template.jinja, or
        // chat_template.json {"chat_template": "..."}.
        const std::string jinja = maybe("chat_template.jinja");
        if (!jinja.empty()) {
            tok->p_->chat_template = jinja;
        } else if (tok->p_->chat_template.empty()) {
            const std::string cj = maybe("chat_template.json");
            if (!cj.empty()) {
                const json j = parse_json(cj, "chat_template.json");
                tok->p_->chat_template = get_string(j, "chat_template");
            }
        }
        return tok;
    });
}

}  // namespace tessera
