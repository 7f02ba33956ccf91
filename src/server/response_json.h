// The OpenAI response shapes: chat.completion / text_completion objects, their streaming
// chunks, usage, logprobs in both formats, and Server-Sent-Events framing.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/tool_call_parse.h"

namespace tessera::server {

using ojson = nlohmann::ordered_json;

// Serializes compactly; invalid UTF-8 (a token that is part of a character) becomes U+FFFD.
std::string to_text(const ojson& j);
// "data: <json>\n\n"
std::string sse_event(const ojson& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

struct Usage {
    int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};
ojson usage_json(const Usage& u);

// One generated token's log-probabilities, with the token's raw bytes (the tokenizer's piece).
struct TokenLogprobs {
    std::string token;
    float logprob = 0.f;
    std::vector<std::pair<std::string, float>> top;  // best first
};
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}
ojson chat_logprobs_json(const std::vector<TokenLogprobs>& lps);
// Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"};
// text_offset counts bytes from the start of the completion, starting at `offset`.
ojson completion_logprobs_json(const std::vector<TokenLogprobs>& lps, int64_t offset);

ojson tool_calls_json(const std::vector<ToolCall>& calls, bool with_index, int first_index);

// Identity of one response: id ("chatcmpl-..." / "cmpl-..."), created (unix seconds), model.
struct ResponseMeta {
    std::string id;
    int64_t created = 0;
    std::string model;
};
std::string new_response_id(const char* prefix);  // prefix + 24 random alphanumerics
int64_t unix_now();

// Non-streaming responses. finish_reason: "stop" / "length" / "tool_calls".
ojson chat_response(const ResponseMeta& m, const std::string& content, const std::string& reasoning,
                    const std::vector<ToolCall>& calls, const std::string& finish_reason, const ojson& logprobs,
                    const Usage& u);
ojson completion_response(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                          const ojson& logprobs, const Usage& u);

// Streaming chunks. finish_reason "" → null; logprobs null when absent. include_usage adds
// "usage": null to every choice chunk (OpenAI does, so the last chunk's usage stands out).
ojson chat_chunk(const ResponseMeta& m, const ojson& delta, const std::string& finish_reason, const ojson& logprobs,
                 bool include_usage);
ojson completion_chunk(const ResponseMeta& m, const std::string& text, const std::string& finish_reason,
                       const ojson& logprobs, bool include_usage);
// The last chunk with include_usage: empty choices and the usage.
ojson usage_chunk(const ResponseMeta& m, const char* object, const Usage& u);

}  // namespace tessera::server
