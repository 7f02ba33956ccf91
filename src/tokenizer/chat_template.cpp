// Chat-template loading and rendering with transformers' preprocessing (None-valued message keys
// dropped, reasoning fields aliased, special tokens as variables).
#include "tokenizer/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_parser.h"

namespace tessera {
namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

const char* const kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                          "pad_token", "cls_token", "mask_token"};

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "cannot open {}", p.string());
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

ordered_json read_json(const fs::path& p) {
    try {
        return ordered_json::parse(read_file(p));
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::Invalid, "{}: invalid JSON: {}", p.string(), e.what());
    }
}

// A special token in tokenizer_config.json: a string, or an AddedToken object {"content": ...}.
std::optional<std::string> token_string(const ordered_json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
    return std::nullopt;
}

void set_special(ChatTemplateSource& src, const std::string& name, const std::string& value) {
    for (auto& [k, v] : src.special_tokens)
        if (k == name) {
            v = value;
            return;
        }
    src.special_tokens.emplace_back(name, value);
    if (name == "bos_token") src.bos_token = value;
    if (name == "eos_token") src.eos_token = value;
}

// Returns whether the config lists added_tokens_decoder (then special_tokens_map.json is ignored).
bool load_tokenizer_config(ChatTemplateSource& src, const fs::path& p) {
    ordered_json cfg = read_json(p);
    TS_CHECK(cfg.is_object(), "{}: expected a JSON object", p.string());
    const bool has_added_tokens = cfg.contains("added_tokens_decoder");
    for (const char* name : kSpecialTokenNames)
        if (cfg.contains(name))
            if (auto t = token_string(cfg[name])) set_special(src, name, *t);
    if (!cfg.contains("chat_template") || cfg["chat_template"].is_null()) return has_added_tokens;
    const ordered_json& ct = cfg["chat_template"];
    if (ct.is_string()) {
        src.template_text = ct.get<std::string>();
        return has_added_tokens;
    }
    TS_CHECK(ct.is_array(), "{}: chat_template must be a string or a list of {{name, template}}", p.string());
    for (const auto& item : ct) {
        TS_CHECK(item.is_object() && item.contains("name") && item["name"].is_string() && item.contains("template") &&
                     item["template"].is_string(),
                 "{}: chat_template list entries must be {{\"name\": str, \"template\": str}}", p.string());
        std::string name = item["name"].get<std::string>();
        if (name == "default") src.template_text = item["template"].get<std::string>();
        else src.named_templates.emplace_back(name, item["template"].get<std::string>());
    }
    return has_added_tokens;
}

void load_gguf(ChatTemplateSource& src, const std::string& path) {
    GgufFile f = GgufFile::open(path);
    if (auto t = f.find_string("tokenizer.chat_template")) src.template_text = *t;
    const std::string prefix = "tokenizer.chat_template.";
    for (const auto& kv : f.metadata())
        if (kv.key.rfind(prefix, 0) == 0 && kv.value.type() == GgufType::STRING)
            src.named_templates.emplace_back(kv.key.substr(prefix.size()), kv.value.as_string());
    const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
    auto token = [&](const char* id_key, const char* name) {
        auto id = f.find_u64(id_key);
        if (!id || !tokens || !tokens->is_array() || tokens->elem_type() != GgufType::STRING) return;
        const auto& vocab = tokens->as_string_array();
        TS_CHECK(*id < vocab.size(), "{}: {} = {} is outside the vocabulary ({} tokens)", path, id_key, *id, vocab.size());
        set_special(src, name, vocab[*id]);
    };
    token("tokenizer.ggml.bos_token_id", "bos_token");
    token("tokenizer.ggml.eos_token_id", "eos_token");
    token("tokenizer.ggml.unknown_token_id", "unk_token");
    token("tokenizer.ggml.seperator_token_id", "sep_token");
    token("tokenizer.ggml.padding_token_id", "pad_token");
    token("tokenizer.ggml.mask_token_id", "mask_token");
}

bool has_any_template(const ChatTemplateSource& s) { return !s.template_text.empty() || !s.named_templates.empty(); }

// transformers' _normalize_chat_messages + _alias_reasoning_fields: None-valued keys dropped, and
// the reasoning (reasoning_content / thinking / reasoning) exposed as {"thinking": r, **message,
// "reasoning_content": r}.
jinja::Value prepare_messages(const ordered_json& messages) {
    TS_CHECK(messages.is_array(), "messages must be a JSON array, got {}", messages.type_name());
    TS_CHECK(!messages.empty(), "cannot apply a chat template to an empty conversation");
    jinja::List out;
    for (size_t i = 0; i < messages.size(); ++i) {
        const ordered_json& m = messages[i];
        TS_CHECK(m.is_object(), "messages[{}]: expected an object, got {}", i, m.type_name());
        const ordered_json* reasoning = nullptr;
        for (const char* k : {"reasoning_content", "thinking", "reasoning"})
            if (!reasoning && m.contains(k) && !m[k].is_null()) reasoning = &m[k];
        jinja::Dict d;
        if (reasoning) d.set(jinja::Value("thinking"), jinja::from_json(*reasoning));
        for (auto it = m.begin(); it != m.end(); ++it)
            if (!it.value().is_null()) d.set(jinja::Value(it.key()), jinja::from_json(it.value()));
        if (reasoning) d.set(jinja::Value("reasoning_content"), jinja::from_json(*reasoning));
        out.push_back(jinja::Value::dict(std::move(d)));
    }
    return jinja::Value::list(std::move(out));
}

std::string render_with(const std::string& text, const jinja::Dict& ctx) {
    jinja::Template tpl = jinja::parse(text);
    jinja::Interpreter in(tpl, jinja::RenderLimits{});
    return in.render(ctx);
}

}  // namespace

ChatTemplateSource load_chat_template(const std::string& path, bool require_template) {
    ChatTemplateSource src;
    fs::path p(path);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
        bool has_added_tokens = false;
        if (fs::exists(p / "tokenizer_config.json")) has_added_tokens = load_tokenizer_config(src, p / "tokenizer_config.json");
        // Legacy special_tokens_map.json: transformers merges it when the config has no added_tokens_decoder.
        if (!has_added_tokens && fs::exists(p / "special_tokens_map.json")) {
            ordered_json m = read_json(p / "special_tokens_map.json");
            for (const char* name : kSpecialTokenNames)
                if (m.is_object() && m.contains(name))
                    if (auto t = token_string(m[name])) set_special(src, name, *t);
        }
        // Template files (transformers 5 layout) replace every template of the config.
        std::vector<std::pair<std::string, std::string>> named;
        if (fs::is_directory(p / "additional_chat_templates", ec))
            for (const auto& e : fs::directory_iterator(p / "additional_chat_templates"))
                if (e.path().extension() == ".jinja") named.emplace_back(e.path().stem().string(), read_file(e.path()));
        bool has_file = fs::exists(p / "chat_template.jinja");
        if (has_file || !named.empty()) {
            src.template_text = has_file ? read_file(p / "chat_template.jinja") : std::string();
            src.named_templates = std::move(named);
        }
        // Processor checkpoints (vision-language models) may keep it in chat_template.json only.
        if (!has_any_template(src) && fs::exists(p / "chat_template.json")) {
            ordered_json j = read_json(p / "chat_template.json");
            if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
                src.template_text = j["chat_template"].get<std::string>();
        }
        if (require_template && !has_any_template(src))
            fail(ErrorKind::NotFound, "{}: no chat template (looked for chat_template.jinja, tokenizer_config.json and "
                                      "chat_template.json)", path);
        return src;
    }
    if (!fs::exists(p, ec)) fail(ErrorKind::NotFound, "{}: no such file or directory", path);
    std::string ext = p.extension().string();
    if (ext == ".gguf") {
        load_gguf(src, path);
    } else if (ext == ".jinja") {
        src.template_text = read_file(p);
    } else if (p.filename() != "tokenizer_config.json") {
        // Another file of a checkpoint (tokenizer.json, model.safetensors, config.json): its folder.
        return load_chat_template(p.has_parent_path() ? p.parent_path().string() : ".", require_template);
    } else {
        load_tokenizer_config(src, p);
        if (fs::exists(p.parent_path() / "chat_template.jinja"))
            src.template_text = read_file(p.parent_path() / "chat_template.jinja");
    }
    if (require_template && !has_any_template(src)) fail(ErrorKind::NotFound, "{}: no chat template", path);
    return src;
}

std::string render_chat(const ChatTemplateSource& src, const ordered_json& messages, const ordered_json& tools,
                        bool add_generation_prompt, const ordered_json& extra_kwargs) {
    // transformers' get_chat_template: the "tool_use" template when tools are given, else the default.
    const std::string* text = src.template_text.empty() ? nullptr : &src.template_text;
    for (const auto& [name, t] : src.named_templates)
        if (name == "tool_use" && !tools.is_null()) text = &t;
    if (!text) {
        std::string names;
        for (const auto& [name, t] : src.named_templates) names += (names.empty() ? "" : ", ") + name;
        fail(ErrorKind::Invalid, "the model has several chat templates and none named 'default' ({})", names);
    }
    TS_CHECK(tools.is_null() || tools.is_array(), "tools must be a JSON array, got {}", tools.type_name());
    jinja::check_json_depth(messages, "messages");
    jinja::check_json_depth(tools, "tools");
    jinja::check_json_depth(extra_kwargs, "template kwargs");
    TS_CHECK(extra_kwargs.is_null() || extra_kwargs.is_object(), "template kwargs must be a JSON object, got {}",
             extra_kwargs.type_name());
    jinja::Dict ctx;
    for (const auto& [k, v] : src.special_tokens) ctx.set(jinja::Value(k), jinja::Value(v));
    if (extra_kwargs.is_object())
        for (auto it = extra_kwargs.begin(); it != extra_kwargs.end(); ++it) {
            const std::string& k = it.key();
            TS_CHECK(k != "messages" && k != "tools" && k != "documents" && k != "add_generation_prompt",
                     "template kwarg '{}' is reserved", k);
            ctx.set(jinja::Value(k), jinja::from_json(it.value()));
        }
    ctx.set(jinja::Value("messages"), prepare_messages(messages));
    ctx.set(jinja::Value("tools"), jinja::from_json(tools));
    ctx.set(jinja::Value("documents"), jinja::Value::none());
    ctx.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
    return render_with(*text, ctx);
}

std::string render_chat(const ChatTemplateSource& src, const nlohmann::json& messages, const nlohmann::json& tools,
                        bool add_generation_prompt, const nlohmann::json& extra_kwargs) {
    jinja::check_json_depth(messages, "messages");  // before the (recursive) conversions below
    jinja::check_json_depth(tools, "tools");
    jinja::check_json_depth(extra_kwargs, "template kwargs");
    return render_chat(src, ordered_json(messages), ordered_json(tools), add_generation_prompt,
                       ordered_json(extra_kwargs));
}

std::string render_jinja(const std::string& template_text, const ordered_json& context) {
    TS_CHECK(context.is_object() || context.is_null(), "template context must be a JSON object");
    jinja::check_json_depth(context, "template context");
    jinja::Dict ctx;
    if (context.is_object())
        for (auto it = context.begin(); it != context.end(); ++it) ctx.set(jinja::Value(it.key()), jinja::from_json(it.value()));
    return render_with(template_text, ctx);
}

}  // namespace tessera
