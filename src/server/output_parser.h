// Splits generated chat text into content, reasoning (<think>…</think>) and tool calls, as it
// streams. Text that might still be the start of a tag is held back until decided; a finished
// tool-call block comes out as whole tool calls; a malformed block is returned as content.
// The result never depends on how the text was split into pushes.
//
// Whitespace: reasoning is trimmed at both ends, content right after </think> or a tool-call
// block loses its leading whitespace, and whitespace just before a tag is dropped (so the
// "\n\n" around tags never reaches the client as content).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parse.h"

namespace tessera::server {

struct ParserOptions {
    bool reasoning = true;            // recognise <think> / </think>
    bool tool_calls = false;          // recognise tool-call blocks (the request offered tools)
    bool start_in_reasoning = false;  // the prompt ended inside an opened <think>
};

struct ParsedDelta {
    std::string content;
    std::string reasoning;
    std::vector<ToolCall> tool_calls;
    bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
    void append(ParsedDelta&& d);
};

class OutputParser {
public:
    explicit OutputParser(ParserOptions opts);

    ParsedDelta push(std::string_view text);  // what became certain with this text
    ParsedDelta finish();                     // end of output: everything still held
    int tool_call_count() const { return n_tool_calls_; }

private:
    enum class Mode { Content, Reasoning, ToolCall, DeepSeekCalls };
    void scan(ParsedDelta& out, bool final);
    void emit(ParsedDelta& out, std::string_view text);
    void enter(Mode m);
    std::vector<std::string_view> tags() const;  // the tags that end or switch the current mode
    void on_tag(ParsedDelta& out, std::string_view tag);

    ParserOptions opts_;
    Mode mode_ = Mode::Content;
    std::string buf_;    // undecided text
    std::string block_;  // the body of the open tool-call block
    std::string ws_before_block_;  // whitespace dropped before it, restored if the block is malformed
    bool trim_lead_ = true;  // drop whitespace at the start of the current segment
    int n_tool_calls_ = 0;
};

// True when the rendered prompt ends inside an opened <think> (only whitespace after the last
// "<think>", e.g. Qwen3.5's generation prompt "<|im_start|>assistant\n<think>\n").
bool prompt_opens_reasoning(std::string_view prompt);

}  // namespace tessera::server
