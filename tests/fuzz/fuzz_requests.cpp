// libFuzzer target for the server's text parsers, which take what clients and models send: an
// OpenAI request body (parse_body, then as a chat and as a completion request) and a model's
// tool-call block bodies (Hermes JSON, Qwen3.5 XML, DeepSeek). Each input either parses or is
// refused — tessera::Error for a request, an empty optional for a tool call — and nothing
// crashes, over-reads (ASan) or hits undefined behaviour (UBSan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"
#include "server/request_parse.h"
#include "server/tool_call_parse.h"

namespace {

volatile uint64_t g_sink;

void touch(const tessera::server::GenerationRequest& g) {
    g_sink = g_sink + g.model.size() + uint64_t(g.params.max_tokens) + g.params.stop.size() + g.stream;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace tessera::server;
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const ojson body = parse_body(text);
        try {
            const ChatRequest c = parse_chat_request(body);
            touch(c.gen);
            g_sink = g_sink + c.messages.dump().size() + c.tools.dump().size() + c.template_kwargs.size();
        } catch (const tessera::Error&) {
        }
        try {
            const CompletionRequest c = parse_completion_request(body);
            touch(c.gen);
            g_sink = g_sink + c.prompt_text.size() + c.prompt_tokens.size();
        } catch (const tessera::Error&) {
        }
    } catch (const tessera::Error&) {
    }
    if (const auto call = parse_tool_call_block(text)) g_sink = g_sink + call->name.size() + call->arguments.size();
    if (const auto calls = parse_deepseek_calls(text))
        for (const ToolCall& c : *calls) g_sink = g_sink + c.name.size() + c.arguments.size();
    return 0;
}
