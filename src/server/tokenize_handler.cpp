// POST /tokenize and /detokenize, in the shapes vLLM and llama.cpp accept:
// {"prompt" | "content": text, "add_special_tokens"} or {"messages", "add_generation_prompt",
// "tools", "chat_template_kwargs"} → {"tokens", "count", "max_model_len"};
// {"tokens": [...]} → {"prompt": text, "content": text}.
#include "core/status.h"
#include "server/handlers.h"
#include "server/response_json.h"

namespace tessera::server {
namespace {

bool opt_flag(const ojson& b, const char* key, bool def) {
    auto it = b.find(key);
    if (it == b.end() || it->is_null()) return def;
    TS_CHECK(it->is_boolean(), "'{}' must be a boolean", key);
    return it->get<bool>();
}

}  // namespace

void handle_tokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const ojson b = parse_body(req.body);
    if (b.contains("model") && !b["model"].is_null()) {
        TS_CHECK(b["model"].is_string(), "'model' must be a string");
        check_model(ctx, b["model"].get<std::string>());
    }
    std::vector<int32_t> ids;
    if (b.contains("messages")) {
        const ojson messages = normalize_messages(b["messages"]);
        ojson kwargs = ojson::object();
        if (b.contains("chat_template_kwargs") && !b["chat_template_kwargs"].is_null()) {
            TS_CHECK(b["chat_template_kwargs"].is_object(), "'chat_template_kwargs' must be an object");
            kwargs = b["chat_template_kwargs"];
        }
        const std::string text = render_messages(ctx, messages, parse_tools(b),
                                                 opt_flag(b, "add_generation_prompt", true), kwargs);
        ids = ctx.tokenizer.encode(text, opt_flag(b, "add_special_tokens", false), /*parse_special=*/true);
    } else {
        const char* key = b.contains("prompt") ? "prompt" : "content";
        TS_CHECK(b.contains(key), "give 'prompt' (or 'content') text, or 'messages'");
        TS_CHECK(b[key].is_string(), "'{}' must be a string", key);
        ids = ctx.tokenizer.encode(b[key].get<std::string>(), opt_flag(b, "add_special_tokens", true),
                                   /*parse_special=*/true);
    }
    ojson out;
    out["tokens"] = ids;
    out["count"] = ids.size();
    out["max_model_len"] = ctx.engine.options().max_model_len;
    send_json(res, 200, out);
}

void handle_detokenize(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    const ojson b = parse_body(req.body);
    TS_CHECK(b.contains("tokens") && b["tokens"].is_array(), "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    const int64_t vocab = ctx.tokenizer.vocab_size();
    for (const auto& t : b["tokens"]) {
        TS_CHECK(t.is_number_integer(), "'tokens' must be an array of integer token ids");
        const int64_t id = t.get<int64_t>();
        TS_CHECK(id >= 0 && id < vocab, "token id {} is out of range [0, {})", id, vocab);
        ids.push_back(int32_t(id));
    }
    const std::string text = ctx.tokenizer.decode(ids, opt_flag(b, "skip_special_tokens", false));
    ojson out;
    out["prompt"] = text;
    out["content"] = text;
    send_json(res, 200, out);
}

}  // namespace tessera::server
