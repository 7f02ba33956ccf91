// The reasoning / tool-call output parser: every format, malformed blocks, and the same result
// whatever the split of the text into streamed deltas (every byte position, and byte by byte).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "server/output_parser.h"

using namespace tessera::server;

namespace {

struct Result {
    std::string content, reasoning;
    std::vector<ToolCall> calls;
};

Result collect(const ParserOptions& o, const std::vector<std::string>& pieces) {
    OutputParser p(o);
    ParsedDelta all;
    for (const auto& s : pieces) all.append(p.push(s));
    all.append(p.finish());
    return Result{all.content, all.reasoning, all.tool_calls};
}

void expect_same(const Result& a, const Result& b, const std::string& where) {
    EXPECT_EQ(a.content, b.content) << where;
    EXPECT_EQ(a.reasoning, b.reasoning) << where;
    ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
    for (size_t i = 0; i < a.calls.size(); ++i) {
        EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
        EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << where;
    }
}

// Parses `text` whole, split in two at every byte, in three at every pair of bytes (short
// texts), and byte by byte; all must equal `want`.
void check_all_splits(const ParserOptions& o, const std::string& text, const Result& want) {
    expect_same(collect(o, {text}), want, "whole");
    for (size_t i = 0; i <= text.size(); ++i)
        expect_same(collect(o, {text.substr(0, i), text.substr(i)}), want, "split at " + std::to_string(i));
    if (text.size() <= 160)
        for (size_t i = 0; i <= text.size(); ++i)
            for (size_t j = i; j <= text.size(); ++j)
                expect_same(collect(o, {text.substr(0, i), text.substr(i, j - i), text.substr(j)}), want,
                            "split at " + std::to_string(i) + "," + std::to_string(j));
    std::vector<std::string> bytes;
    for (char c : text) bytes.emplace_back(1, c);
    expect_same(collect(o, bytes), want, "byte by byte");
}

ParserOptions with_tools() {
    ParserOptions o;
    o.tool_calls = true;
    return o;
}

ToolCall call(std::string name, std::string args) { return ToolCall{"", std::move(name), std::move(args)}; }

}  // namespace

TEST(OutputParser, PlainContentPassesThrough) {
    check_all_splits(with_tools(), "Hello world, 1 < 2 and <b>bold</b> <thinking> <tool>.",
                     {"Hello world, 1 < 2 and <b>bold</b> <thinking> <tool>.", "", {}});
}

TEST(OutputParser, ContentStreamsBeforeTheEnd) {
    OutputParser p(with_tools());
    EXPECT_EQ(p.push("Hello wor").content, "Hello wor");
    EXPECT_EQ(p.push("ld and <").content, "ld and");  // " <" may start a tag: held with its space
    EXPECT_EQ(p.push(" ").content, " <");  // "< " is no tag; the new space is held
    EXPECT_EQ(p.push("b>").content, " b>");
    EXPECT_EQ(p.finish().content, "");
}

TEST(OutputParser, ReasoningThenContent) {
    check_all_splits({}, "<think>\nLet me think: 2 + 2.\n</think>\n\nThe answer is 4.",
                     {"The answer is 4.", "Let me think: 2 + 2.", {}});
}

TEST(OutputParser, PromptOpenedReasoning) {
    ParserOptions o;
    o.start_in_reasoning = true;
    check_all_splits(o, "Thinking hard…\n</think>\n\nDone.", {"Done.", "Thinking hard…", {}});
    // Output that ends while still thinking is all reasoning.
    check_all_splits(o, "Still thinking <about> it\n", {"", "Still thinking <about> it", {}});
}

TEST(OutputParser, ReasoningOffKeepsTags) {
    ParserOptions o;
    o.reasoning = false;
    check_all_splits(o, "<think>x</think> y", {"<think>x</think> y", "", {}});
}

TEST(OutputParser, Qwen3JsonToolCall) {
    const std::string text =
        "Let me check.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n"
        "</tool_call>";
    check_all_splits(with_tools(), text, {"Let me check.", "", {call("get_weather", R"({"city":"Paris","days":3})")}});
}

TEST(OutputParser, Qwen3ReasoningAndTwoToolCalls) {
    const std::string text =
        "<think>\nNeed two lookups.\n</think>\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"q\": \"x y\"}}\n</tool_call>";
    check_all_splits(with_tools(), text, {"", "Need two lookups.", {call("a", "{}"), call("b", R"({"q":"x y"})")}});
}

TEST(OutputParser, Qwen3CoderXmlToolCall) {
    const std::string text =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco, CA\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"unit\": \"C\"}\n</parameter>\n</function>\n</tool_call>";
    check_all_splits(with_tools(), text,
                     {"", "", {call("get_weather", R"({"city":"San Francisco, CA","days":3,"opts":{"unit":"C"}})")}});
}

TEST(OutputParser, Qwen35ThinkingThenXmlCall) {
    ParserOptions o = with_tools();
    o.start_in_reasoning = true;  // "<think>\n" was in the generation prompt
    const std::string text =
        "The user wants files.\n</think>\n\nListing.\n<tool_call>\n<function=ls>\n<parameter=path>\n/tmp\n"
        "</parameter>\n</function>\n</tool_call>";
    check_all_splits(o, text, {"Listing.", "The user wants files.", {call("ls", R"({"path":"/tmp"})")}});
}

TEST(OutputParser, DeepSeekV3ToolCalls) {
    const std::string text =
        "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": "
        "\"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    check_all_splits(with_tools(), text,
                     {"Sure.", "", {call("get_weather", R"({"city":"Paris"})"), call("get_time", "{}")}});
}

TEST(OutputParser, DeepSeekV31ToolCall) {
    const std::string text =
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>search<｜tool▁sep｜>{\"q\": \"tessera\"}<｜tool▁call▁end｜>"
        "<｜tool▁calls▁end｜>";
    check_all_splits(with_tools(), text, {"", "", {call("search", R"({"q":"tessera"})")}});
}

TEST(OutputParser, MalformedBlocksStayContent) {
    const std::string bad_json = "<tool_call>\n{not json}\n</tool_call>";
    check_all_splits(with_tools(), "A " + bad_json + " B", {"A " + bad_json + " B", "", {}});
    const std::string no_name = "<tool_call>{\"arguments\": {}}</tool_call>";
    check_all_splits(with_tools(), no_name, {no_name, "", {}});
    const std::string bad_xml = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</function>\n</tool_call>";
    check_all_splits(with_tools(), bad_xml, {"", "", {call("f", R"({"x":1})")}});  // a missing </parameter> is tolerated
    const std::string broken_xml = "<tool_call>\n<function=f>\nstray text\n</function>\n</tool_call>";
    check_all_splits(with_tools(), broken_xml, {broken_xml, "", {}});
    const std::string bad_ds = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{oops\n```"
                               "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
    check_all_splits(with_tools(), bad_ds, {bad_ds, "", {}});
}

TEST(OutputParser, UnclosedBlockIsContent) {
    const std::string text = "Calling <tool_call>\n{\"name\": \"f\", \"arguments\": {}}";
    check_all_splits(with_tools(), text, {"Calling <tool_call>\n{\"name\": \"f\", \"arguments\": {}}", "", {}});
}

TEST(OutputParser, ToolTagsAreContentWithoutTools) {
    const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    check_all_splits(ParserOptions{}, text, {text, "", {}});
}

TEST(OutputParser, PartialTagAtTheEndIsContent) {
    check_all_splits(with_tools(), "see <tool_ca", {"see <tool_ca", "", {}});
    check_all_splits(with_tools(), "see <thi", {"see <thi", "", {}});
}

TEST(OutputParser, MultiByteTextAroundTags) {
    check_all_splits(with_tools(), "<think>日本語 ✓</think>émigré — 終", {"émigré — 終", "日本語 ✓", {}});
}

TEST(OutputParser, ToolCallIdsAreUnique) {
    OutputParser p(with_tools());
    auto d = p.push("<tool_call>{\"name\": \"a\"}</tool_call><tool_call>{\"name\": \"b\"}</tool_call>");
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0].id.rfind("call_", 0), 0u);
    EXPECT_EQ(d.tool_calls[0].id.size(), 29u);
    EXPECT_NE(d.tool_calls[0].id, d.tool_calls[1].id);
    EXPECT_EQ(d.tool_calls[0].arguments, "{}");
    EXPECT_EQ(p.tool_call_count(), 2);
}

TEST(OutputParser, PromptOpensReasoning) {
    EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n"));
    EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
}
