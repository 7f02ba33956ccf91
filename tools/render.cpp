// `tessera tokenize --render`: prints a model's chat-template rendering of an OpenAI-style message
// list, byte for byte (no trailing newline is added).
#include "render.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template.h"

namespace tessera::cli {
namespace {

using nlohmann::ordered_json;

std::string read_text(const std::string& path, const char* what) {
    std::ifstream f(path, std::ios::binary);
    if (!f) fail(ErrorKind::Io, "{} {}: cannot open", what, path);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

ordered_json parse_json(const std::string& text, const std::string& what) {
    try {
        return ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail(ErrorKind::Invalid, "{}: invalid JSON: {}", what, e.what());
    }
}

// A JSON file holding a list, or an object carrying the list under `key` (an OpenAI request body).
ordered_json read_list(const std::string& path, const char* key) {
    ordered_json j = parse_json(read_text(path, key), path);
    if (j.is_object() && j.contains(key)) {
        ordered_json inner = std::move(j[key]);  // moved, not copied: hostile nesting stays unrecursed
        j = std::move(inner);
    }
    TS_CHECK(j.is_array(), "{}: expected a JSON array of {} (or an object with \"{}\")", path, key, key);
    return j;
}

}  // namespace

int run_render(const Args& args) {
    const std::string model = args.model_path(false);
    TS_CHECK(!model.empty() || args.has("chat-template"), "--render needs --model PATH or --chat-template FILE");
    ChatTemplateSource src;
    // With --chat-template the model still supplies the special tokens (bos_token, ...).
    if (!model.empty()) src = load_chat_template(model, !args.has("chat-template"));
    if (args.has("chat-template")) {
        src.template_text = read_text(args.get("chat-template"), "chat template");
        src.named_templates.clear();
    }
    ordered_json messages = read_list(args.require("messages"), "messages");
    ordered_json tools = args.has("tools") ? read_list(args.get("tools"), "tools") : ordered_json();
    ordered_json kwargs;
    if (args.has("template-kwargs")) {
        kwargs = parse_json(args.get("template-kwargs"), "--template-kwargs");
        TS_CHECK(kwargs.is_object(), "--template-kwargs: expected a JSON object");
    }
    std::string out = render_chat(src, messages, tools, args.flag("add-generation-prompt"), kwargs);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return 0;
}

}  // namespace tessera::cli
