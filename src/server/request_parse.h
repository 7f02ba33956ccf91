// OpenAI request bodies → what the engine needs. Parses /v1/completions and
// /v1/chat/completions bodies (as ordered_json, so message and tool key order reaches the chat
// template as the client sent it), checks types and ranges, and fills GenerationParams.
// Every problem is an Error(Invalid) naming the field; the server answers it with 400.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/request.h"

namespace tessera::server {

using ojson = nlohmann::ordered_json;

// What both endpoints share.
struct GenerationRequest {
    std::string model;           // "" when absent
    GenerationParams params;     // max_tokens -1 when absent
    bool seed_given = false;     // else the server draws a random seed
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
};

struct CompletionRequest {
    GenerationRequest gen;
    bool prompt_is_tokens = false;
    std::string prompt_text;           // when !prompt_is_tokens
    std::vector<int32_t> prompt_tokens;  // when prompt_is_tokens
};

struct ChatRequest {
    GenerationRequest gen;
    ojson messages;             // normalized: content parts joined into strings, tool-call arguments as objects
    ojson tools;                // null when none
    bool parse_tool_calls = false;  // tools given and tool_choice != "none"
    ojson template_kwargs;      // chat_template_kwargs (an object, maybe empty)
};

// Parses the body text; malformed JSON or a non-object is Error(Invalid).
ojson parse_body(const std::string& body);

CompletionRequest parse_completion_request(const ojson& body);
ChatRequest parse_chat_request(const ojson& body);

// Messages as /tokenize and chat completions take them (validated and normalized).
ojson normalize_messages(const ojson& messages);
// tools: null / absent → null; else an array of {"type": "function", "function": {"name", ...}}.
ojson parse_tools(const ojson& body);

}  // namespace tessera::server
