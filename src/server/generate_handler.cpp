// POST /v1/completions and /v1/chat/completions: parse, tokenize, submit, and answer with one
// JSON response or an SSE stream. A streaming client that goes away cancels its request.
#include <chrono>

#include "server/generation.h"
#include "core/status.h"
#include "server/handlers.h"

namespace tessera::server {
namespace {

constexpr auto kKeepAlive = std::chrono::seconds(2);  // an idle stream writes an SSE comment this often

// Tags the output parser looks for that the tokenizer treats as special tokens would vanish
// with skip_special_tokens; then the engine must return them.
bool parser_tags_are_special(const Tokenizer& tok, const ParserOptions& po) {
    std::vector<std::string> tags;
    if (po.reasoning) tags = {"<think>", "</think>"};
    if (po.tool_calls)
        for (const char* t : {"<tool_call>", "</tool_call>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"})
            tags.push_back(t);
    for (const auto& t : tags) {
        const int32_t id = tok.token_id(t);
        if (id >= 0 && tok.is_special(id)) return true;
    }
    return false;
}

void respond(ServerContext& ctx, GenerationSpec spec, httplib::Response& res) {
    if (ctx.shutting_down) fail(ErrorKind::Busy, "the server is shutting down");
    const bool stream = spec.gen.stream;
    auto g = std::make_shared<Generation>(ctx, std::move(spec));
    g->submit();
    if (!stream) {
        auto [status, body] = g->run_to_end();
        send_json(res, status, body);
        return;
    }
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    auto last_write = std::make_shared<Clock::time_point>(Clock::now());
    res.set_chunked_content_provider(
        "text/event-stream",
        [g, last_write](size_t, httplib::DataSink& sink) {
            if (g->done()) {
                sink.done();
                return true;
            }
            std::string s = g->poll_sse(Clock::now() + kKeepAlive);
            // Writing is also how a closed connection is noticed while the request is idle.
            if (s.empty() && Clock::now() - *last_write >= kKeepAlive) s = ": keep-alive\n\n";
            if (!s.empty()) {
                if (!sink.is_writable() || !sink.write(s.data(), s.size())) {
                    g->abandon();
                    return false;
                }
                *last_write = Clock::now();
            }
            if (g->done()) sink.done();
            return true;
        },
        [g](bool) { g->abandon(); });
}

}  // namespace

void handle_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    CompletionRequest cr = parse_completion_request(parse_body(req.body));
    check_model(ctx, cr.gen.model);
    GenerationSpec spec;
    spec.kind = ApiKind::Completion;
    spec.prompt = cr.prompt_is_tokens ? cr.prompt_tokens
                                      : ctx.tokenizer.encode(cr.prompt_text, /*add_special=*/true, /*parse_special=*/true);
    TS_CHECK(!spec.prompt.empty(), "the prompt is empty after tokenization");
    spec.gen = std::move(cr.gen);
    respond(ctx, std::move(spec), res);
}

void handle_chat_completions(ServerContext& ctx, const httplib::Request& req, httplib::Response& res) {
    ChatRequest cr = parse_chat_request(parse_body(req.body));
    check_model(ctx, cr.gen.model);
    const std::string prompt = render_messages(ctx, cr.messages, cr.tools, /*add_generation_prompt=*/true,
                                               cr.template_kwargs);
    GenerationSpec spec;
    spec.kind = ApiKind::Chat;
    spec.prompt = ctx.tokenizer.encode(prompt, /*add_special=*/false, /*parse_special=*/true);
    TS_CHECK(!spec.prompt.empty(), "the rendered chat prompt is empty");
    ParserOptions po;
    po.reasoning = true;
    po.tool_calls = cr.parse_tool_calls;
    po.start_in_reasoning = prompt_opens_reasoning(prompt);
    if (parser_tags_are_special(ctx.tokenizer, po)) cr.gen.params.skip_special_tokens = false;
    spec.parser = po;
    spec.gen = std::move(cr.gen);
    respond(ctx, std::move(spec), res);
}

}  // namespace tessera::server
