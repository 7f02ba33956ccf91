// Parsers for the bodies of tool-call blocks (Hermes JSON, Qwen3-Coder XML, DeepSeek-V3).
#include "server/tool_call_parse.h"

#include <random>

#include <nlohmann/json.hpp>

namespace tessera::server {
namespace {

using ojson = nlohmann::ordered_json;

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::optional<ojson> parse_json(std::string_view s) {
    ojson j = ojson::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return std::nullopt;
    return j;
}

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ToolCall make_call(std::string name, std::string arguments) {
    return ToolCall{new_tool_call_id(), std::move(name), std::move(arguments)};
}

// {"name": "f", "arguments": {...}} (arguments may also be a JSON string holding an object).
std::optional<ToolCall> parse_hermes(std::string_view body) {
    auto j = parse_json(body);
    if (!j || !j->is_object()) return std::nullopt;
    auto name = j->find("name");
    if (name == j->end() || !name->is_string() || name->get<std::string>().empty()) return std::nullopt;
    auto args = j->find("arguments");
    if (args == j->end()) args = j->find("parameters");
    std::string arguments = "{}";
    if (args != j->end()) {
        if (args->is_object()) {
            arguments = dump(*args);
        } else if (args->is_string()) {
            auto inner = parse_json(args->get<std::string>());
            if (!inner || !inner->is_object()) return std::nullopt;
            arguments = dump(*inner);
        } else if (!args->is_null()) {
            return std::nullopt;
        }
    }
    return make_call(name->get<std::string>(), std::move(arguments));
}

// <function=NAME> (<parameter=P>VALUE</parameter>)* </function>; a value is JSON when it parses.
std::optional<ToolCall> parse_xml(std::string_view s) {
    constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kPar = "<parameter=", kParEnd = "</parameter>";
    if (!starts_with(s, kFn)) return std::nullopt;
    s.remove_prefix(kFn.size());
    const size_t gt = s.find('>');
    if (gt == std::string_view::npos) return std::nullopt;
    const std::string name(trim(s.substr(0, gt)));
    if (name.empty() || name.find_first_of("<\n") != std::string::npos) return std::nullopt;
    s.remove_prefix(gt + 1);
    ojson args = ojson::object();
    for (;;) {
        s = trim(s);
        if (starts_with(s, kFnEnd)) {
            s.remove_prefix(kFnEnd.size());
            break;
        }
        if (!starts_with(s, kPar)) return std::nullopt;
        s.remove_prefix(kPar.size());
        const size_t pgt = s.find('>');
        if (pgt == std::string_view::npos) return std::nullopt;
        const std::string pname(trim(s.substr(0, pgt)));
        if (pname.empty() || pname.find_first_of("<\n") != std::string::npos) return std::nullopt;
        s.remove_prefix(pgt + 1);
        // The value runs to </parameter>; models sometimes omit it before the next parameter.
        size_t end = s.find(kParEnd);
        size_t skip = kParEnd.size();
        const size_t next = std::min(s.find(kPar), s.find(kFnEnd));
        if (end == std::string_view::npos || next < end) {
            if (next == std::string_view::npos) return std::nullopt;
            end = next;
            skip = 0;
        }
        std::string_view value = s.substr(0, end);
        if (starts_with(value, "\n")) value.remove_prefix(1);
        if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
        auto j = parse_json(value);
        args[pname] = j ? *j : ojson(std::string(value));
        s.remove_prefix(end + skip);
    }
    if (!trim(s).empty()) return std::nullopt;
    return make_call(name, dump(args));
}

// One DeepSeek call: "function<｜tool▁sep｜>NAME\n```json\nARGS\n```" (V3) or "NAME<｜tool▁sep｜>ARGS" (V3.1).
std::optional<ToolCall> parse_deepseek_call(std::string_view s) {
    const size_t sep = s.find(kDeepSeekSep);
    if (sep == std::string_view::npos) return std::nullopt;
    const std::string_view head = trim(s.substr(0, sep));
    std::string_view rest = s.substr(sep + kDeepSeekSep.size());
    std::string name;
    std::string_view args;
    const size_t fence = rest.find("```json");
    if (head == "function" && fence != std::string_view::npos) {
        name = std::string(trim(rest.substr(0, fence)));
        rest.remove_prefix(fence + 7);
        const size_t close = rest.rfind("```");
        if (close == std::string_view::npos) return std::nullopt;
        if (!trim(rest.substr(close + 3)).empty()) return std::nullopt;
        args = rest.substr(0, close);
    } else {
        name = std::string(head);
        args = rest;
    }
    if (name.empty() || name.find_first_of("\n<") != std::string::npos) return std::nullopt;
    auto j = parse_json(trim(args));
    if (!j || !j->is_object()) return std::nullopt;
    return make_call(std::move(name), dump(*j));
}

}  // namespace

std::optional<ToolCall> parse_tool_call_block(std::string_view body) {
    body = trim(body);
    if (starts_with(body, "<function=")) return parse_xml(body);
    return parse_hermes(body);
}

std::optional<std::vector<ToolCall>> parse_deepseek_calls(std::string_view s) {
    std::vector<ToolCall> calls;
    for (;;) {
        s = trim(s);
        if (s.empty()) break;
        if (!starts_with(s, kDeepSeekCallBegin)) return std::nullopt;
        s.remove_prefix(kDeepSeekCallBegin.size());
        const size_t end = s.find(kDeepSeekCallEnd);
        if (end == std::string_view::npos) return std::nullopt;
        auto call = parse_deepseek_call(s.substr(0, end));
        if (!call) return std::nullopt;
        calls.push_back(std::move(*call));
        s.remove_prefix(end + kDeepSeekCallEnd.size());
    }
    if (calls.empty()) return std::nullopt;
    return calls;
}

std::string new_tool_call_id() {
    static constexpr char kAlnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    thread_local std::mt19937_64 rng{std::random_device{}()};
    std::string id = "call_";
    for (int i = 0; i < 24; ++i) id += kAlnum[rng() % 62];
    return id;
}

}  // namespace tessera::server
