// The streaming reasoning / tool-call splitter (see output_parser.h for the rules).
#include "server/output_parser.h"

#include <algorithm>

namespace tessera::server {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

size_t trailing_space(std::string_view s) {
    size_t n = 0;
    while (n < s.size() && is_space(s[s.size() - 1 - n])) ++n;
    return n;
}

// Length of the longest suffix of s that is a proper prefix of one of the tags.
size_t partial_tag_suffix(std::string_view s, const std::vector<std::string_view>& tags) {
    size_t best = 0;
    for (std::string_view t : tags)
        for (size_t n = std::min(s.size(), t.size() - 1); n > best; --n)
            if (s.substr(s.size() - n) == t.substr(0, n)) {
                best = n;
                break;
            }
    return best;
}

}  // namespace

void ParsedDelta::append(ParsedDelta&& d) {
    content += d.content;
    reasoning += d.reasoning;
    for (auto& c : d.tool_calls) tool_calls.push_back(std::move(c));
}

OutputParser::OutputParser(ParserOptions opts) : opts_(opts) {
    if (opts_.reasoning && opts_.start_in_reasoning) mode_ = Mode::Reasoning;
}

std::vector<std::string_view> OutputParser::tags() const {
    switch (mode_) {
        case Mode::Content: {
            std::vector<std::string_view> t;
            if (opts_.reasoning) t.push_back(kThinkOpen);
            if (opts_.tool_calls) {
                t.push_back(kToolOpen);
                t.push_back(kDeepSeekCallsBegin);
            }
            return t;
        }
        case Mode::Reasoning: return {kThinkClose};
        case Mode::ToolCall: return {kToolClose};
        case Mode::DeepSeekCalls: return {kDeepSeekCallsEnd};
    }
    return {};
}

void OutputParser::enter(Mode m) {
    mode_ = m;
    trim_lead_ = true;
    block_.clear();
}

// Decided text of the current mode: to the client (content / reasoning) or into the block.
void OutputParser::emit(ParsedDelta& out, std::string_view text) {
    if (mode_ == Mode::ToolCall || mode_ == Mode::DeepSeekCalls) {
        block_ += text;
        return;
    }
    if (trim_lead_) {
        while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
        if (text.empty()) return;
        trim_lead_ = false;
    }
    (mode_ == Mode::Reasoning ? out.reasoning : out.content) += text;
}

void OutputParser::on_tag(ParsedDelta& out, std::string_view tag) {
    if (tag == kThinkOpen) {
        enter(Mode::Reasoning);
    } else if (tag == kThinkClose) {
        enter(Mode::Content);
    } else if (tag == kToolOpen || tag == kDeepSeekCallsBegin) {
        enter(tag == kToolOpen ? Mode::ToolCall : Mode::DeepSeekCalls);
    } else {  // the end of a tool-call block: whole calls, or the raw block as content
        const bool hermes = mode_ == Mode::ToolCall;
        std::vector<ToolCall> calls;
        if (hermes) {
            if (auto c = parse_tool_call_block(block_)) calls.push_back(std::move(*c));
        } else if (auto cs = parse_deepseek_calls(block_)) {
            calls = std::move(*cs);
        }
        const std::string raw = std::string(hermes ? kToolOpen : kDeepSeekCallsBegin) + block_ + std::string(tag);
        enter(Mode::Content);
        if (calls.empty()) {
            trim_lead_ = false;
            out.content += ws_before_block_ + raw;
        }
        n_tool_calls_ += int(calls.size());
        for (auto& c : calls) out.tool_calls.push_back(std::move(c));
    }
}

void OutputParser::scan(ParsedDelta& out, bool final) {
    for (;;) {
        const auto ts = tags();
        size_t pos = std::string::npos;
        std::string_view tag;
        for (std::string_view t : ts) {
            const size_t p = buf_.find(t);
            if (p < pos) {
                pos = p;
                tag = t;
            }
        }
        const bool text_mode = mode_ == Mode::Content || mode_ == Mode::Reasoning;
        if (pos != std::string::npos) {
            std::string_view before(buf_.data(), pos);
            const size_t ws = text_mode ? trailing_space(before) : 0;
            // Whitespace before a tag is dropped (kept aside in case a tool-call block is malformed).
            if (text_mode) ws_before_block_ = std::string(before.substr(before.size() - ws));
            before.remove_suffix(ws);
            emit(out, before);
            const std::string tag_copy(tag);
            buf_.erase(0, pos + tag.size());
            on_tag(out, tag_copy);
            continue;
        }
        if (final) {
            std::string_view rest(buf_);
            if (mode_ == Mode::Reasoning) rest.remove_suffix(trailing_space(rest));
            if (text_mode) {
                emit(out, rest);
            } else {  // an unclosed tool-call block is not a call
                const std::string raw =
                    std::string(mode_ == Mode::ToolCall ? kToolOpen : kDeepSeekCallsBegin) + block_ + buf_;
                enter(Mode::Content);
                trim_lead_ = false;
                out.content += ws_before_block_ + raw;
            }
            buf_.clear();
            return;
        }
        // Hold back a possible tag start and (in text modes) the whitespace before it.
        size_t hold = partial_tag_suffix(buf_, ts);
        if (text_mode) hold += trailing_space(std::string_view(buf_).substr(0, buf_.size() - hold));
        emit(out, std::string_view(buf_).substr(0, buf_.size() - hold));
        buf_.erase(0, buf_.size() - hold);
        return;
    }
}

ParsedDelta OutputParser::push(std::string_view text) {
    ParsedDelta out;
    buf_ += text;
    scan(out, false);
    return out;
}

ParsedDelta OutputParser::finish() {
    ParsedDelta out;
    scan(out, true);
    return out;
}

bool prompt_opens_reasoning(std::string_view prompt) {
    const size_t open = prompt.rfind(kThinkOpen);
    if (open == std::string_view::npos) return false;
    for (char c : prompt.substr(open + kThinkOpen.size()))
        if (!is_space(c)) return false;
    return true;
}

}  // namespace tessera::server
