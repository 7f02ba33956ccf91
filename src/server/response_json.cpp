// Building OpenAI response objects and SSE chunks.
#include "server/response_json.h"

#include <chrono>
#include <random>

namespace tessera::server {
namespace {

ojson bytes_json(const std::string& s) {
    ojson b = ojson::array();
    for (unsigned char c : s) b.push_back(int(c));
    return b;
}

ojson null_or(const std::string& s) { return s.empty() ? ojson(nullptr) : ojson(s); }

}  // namespace

std::string to_text(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string sse_event(const ojson& j) { return "data: " + to_text(j) + "\n\n"; }

ojson usage_json(const Usage& u) {
    ojson j;
    j["prompt_tokens"] = u.prompt_tokens;
    j["completion_tokens"] = u.completion_tokens;
    j["total_tokens"] = u.prompt_tokens + u.completion_tokens;
    j["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
    return j;
}

ojson chat_logprobs_json(const std::vector<TokenLogprobs>& lps) {
    ojson content = ojson::array();
    for (const auto& lp : lps) {
        ojson top = ojson::array();
        for (const auto& [tok, l] : lp.top) {
            ojson t;
            t["token"] = tok;
            t["logprob"] = l;
            t["bytes"] = bytes_json(tok);
            top.push_back(std::move(t));
        }
        ojson e;
        e["token"] = lp.token;
        e["logprob"] = lp.logprob;
        e["bytes"] = bytes_json(lp.token);
        e["top_logprobs"] = std::move(top);
        content.push_back(std::move(e));
    }
    return {{"content", std::move(content)}};
}

ojson completion_logprobs_json(const std::vector<TokenLogprobs>& lps, int64_t offset) {
    ojson tokens = ojson::array(), token_logprobs = ojson::array(), top = ojson::array(), offsets = ojson::array();
    for (const auto& lp : lps) {
        tokens.push_back(lp.token);
        token_logprobs.push_back(lp.logprob);
        ojson t = ojson::object();
        for (const auto& [tok, l] : lp.top)
            if (!t.contains(tok)) t[tok] = l;  // two ids with the same text: the better one
        top.push_back(std::move(t));
        offsets.push_back(offset);
        offset += int64_t(lp.token.size());
    }
    ojson j;
    j["tokens"] = std::move(tokens);
    j["token_logprobs"] = std::move(token_logprobs);
    j["top_logprobs"] = std::move(top);
    j["text_offset"] = std::move(offsets);
    return j;
}

ojson tool_calls_json(const std::vector<ToolCall>& calls, bool with_index, int first_index) {
    ojson a = ojson::array();
    for (size_t i = 0; i < calls.size(); ++i) {
        ojson c;
        if (with_index) c["index"] = first_index + int(i);
        c["id"] = calls[i].id;
        c["type"] = "function";
        c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
        a.push_back(std::move(c));
    }
    return a;
}

std::string new_response_id(const char* prefix) {
    static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = prefix;
    for (int i = 0; i < 24; ++i) id += kAlnum[rng() % 62];
    return id;
}

int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

static ojson head(const ResponseMeta& m, const char* object) {
    ojson j;
    j["id"] = m.id;
    j["object"] = object;
    j["created"] = m.created;
    j["model"] = m.model;
    return j;
}

ojson chat_response(const ResponseMeta& m, const std::string& content, const std::string& reasoning,
                    const std::vector<ToolCall>& calls, const std::string& finish_reason, const ojson& logprobs,
                    const Usage& u) {
    ojson msg;
    msg["role"] = "assistant";
    msg["content"] = content.empty() && !calls.empty() ? ojson(nullptr) : ojson(content);
    if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
    if (!calls.empty()) msg["tool_calls"] = tool_calls_json(calls, false, 0);
    ojson choice;
    choice["index"] = 0;
    choice["message"] = std::move(msg);
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish_reason;
    ojson j = head(m, "chat.completion");
    j["choices"] = ojson::array({std::move(choice)});
    j["usage"] = usage_json(u);
    return j;
}

ojson completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                          const ojson& logprobs, const Usage& u) {
    ojson choice;
    choice["index"] = 0;
    choice["text"] = text;
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = finish_reason;
    ojson j = head(m, "text_completion");
    j["choices"] = ojson::array({std::move(choice)});
    j["usage"] = usage_json(u);
    return j;
}

ojson chat_chunk(const ResponseMeta& m, const ojson& delta, const std::string& finish_reason, const ojson& logprobs,
                 bool include_usage) {
    ojson choice;
    choice["index"] = 0;
    choice["delta"] = delta;
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = null_or(finish_reason);
    ojson j = head(m, "chat.completion.chunk");
    j["choices"] = ojson::array({std::move(choice)});
    if (include_usage) j["usage"] = nullptr;
    return j;
}

ojson completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                       const ojson& logprobs, bool include_usage) {
    ojson choice;
    choice["index"] = 0;
    choice["text"] = text;
    choice["logprobs"] = logprobs;
    choice["finish_reason"] = null_or(finish_reason);
    ojson j = head(m, "text_completion");
    j["choices"] = ojson::array({std::move(choice)});
    if (include_usage) j["usage"] = nullptr;
    return j;
}

ojson usage_chunk(const ResponseMeta& m, const char* object, const Usage& u) {
    ojson j = head(m, object);
    j["choices"] = ojson::array();
    j["usage"] = usage_json(u);
    return j;
}

}  // namespace tessera::server
