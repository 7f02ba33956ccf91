// Tool-call block bodies → OpenAI tool calls, for the formats the output parser recognises:
//   Qwen3 (Hermes):      <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>
//   Qwen3.5/Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
//   DeepSeek-V3:         <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                        (and V3.1's <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>)
// Each parser takes the text between the block's tags and returns nothing when it is malformed
// (the caller then keeps the block as content).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

struct ToolCall {
    std::string id;         // "call_<random>"
    std::string name;
    std::string arguments;  // a JSON object, as text
};

inline constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";

// The body of one <tool_call> block, JSON (Hermes) or XML (<function=...>) style.
std::optional<ToolCall> parse_tool_call_block(std::string_view body);
// The body between <｜tool▁calls▁begin｜> and <｜tool▁calls▁end｜>: one or more calls.
std::optional<std::vector<ToolCall>> parse_deepseek_calls(std::string_view body);

std::string new_tool_call_id();  // "call_" + 24 random alphanumerics

}  // namespace tessera::server
