// OpenAI response objects, streaming chunks, logprobs in both formats, and SSE framing.
#include <gtest/gtest.h>

#include "server/response_json.h"

using namespace tessera::server;
using nlohmann::json;

namespace {
ResponseMeta meta() { return ResponseMeta{"chatcmpl-abc", 1700000000, "tiny"}; }
json reparse(const std::string& sse) {
    EXPECT_EQ(sse.rfind("data: ", 0), 0u);
    EXPECT_EQ(sse.substr(sse.size() - 2), "\n\n");
    EXPECT_EQ(sse.find('\n'), sse.size() - 2);  // one line: the JSON has no raw newline
    return json::parse(sse.substr(6, sse.size() - 8));
}
}  // namespace

TEST(ResponseJson, SseFraming) {
    EXPECT_EQ(sse_event(ojson{{"a", "x\ny"}}), "data: {\"a\":\"x\\ny\"}\n\n");
    EXPECT_STREQ(kSseDone, "data: [DONE]\n\n");
}

TEST(ResponseJson, ChatChunk) {
    const json j = reparse(sse_event(chat_chunk(meta(), ojson{{"content", "Hi"}}, "", nullptr, false)));
    EXPECT_EQ(j["id"], "chatcmpl-abc");
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    EXPECT_EQ(j["created"], 1700000000);
    EXPECT_EQ(j["model"], "tiny");
    ASSERT_EQ(j["choices"].size(), 1u);
    EXPECT_EQ(j["choices"][0]["index"], 0);
    EXPECT_EQ(j["choices"][0]["delta"]["content"], "Hi");
    EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
    EXPECT_TRUE(j["choices"][0]["logprobs"].is_null());
    EXPECT_FALSE(j.contains("usage"));
    const json last = reparse(sse_event(chat_chunk(meta(), ojson::object(), "length", nullptr, true)));
    EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
    EXPECT_TRUE(last["choices"][0]["delta"].is_object() && last["choices"][0]["delta"].empty());
    EXPECT_TRUE(last.contains("usage") && last["usage"].is_null());
}

TEST(ResponseJson, UsageChunkAndUsage) {
    const json j = reparse(sse_event(usage_chunk(meta(), "chat.completion.chunk", Usage{10, 4, 8})));
    EXPECT_TRUE(j["choices"].is_array() && j["choices"].empty());
    EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
    EXPECT_EQ(j["usage"]["completion_tokens"], 4);
    EXPECT_EQ(j["usage"]["total_tokens"], 14);
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 8);
}

TEST(ResponseJson, ChatResponseWithToolCalls) {
    const std::vector<ToolCall> calls{{"call_1", "f", R"({"x":1})"}};
    const ojson r = chat_response(meta(), "", "because", calls, "tool_calls", nullptr, Usage{3, 2, 0});
    EXPECT_EQ(r["object"], "chat.completion");
    const auto& m = r["choices"][0]["message"];
    EXPECT_EQ(m["role"], "assistant");
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["reasoning_content"], "because");
    EXPECT_EQ(m["tool_calls"][0]["id"], "call_1");
    EXPECT_EQ(m["tool_calls"][0]["type"], "function");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(m["tool_calls"][0]["function"]["arguments"], R"({"x":1})");
    EXPECT_FALSE(m["tool_calls"][0].contains("index"));
    EXPECT_EQ(r["choices"][0]["finish_reason"], "tool_calls");
    const ojson plain = chat_response(meta(), "", "", {}, "stop", nullptr, Usage{});
    EXPECT_EQ(plain["choices"][0]["message"]["content"], "");  // no calls: content stays a string
    EXPECT_FALSE(plain["choices"][0]["message"].contains("reasoning_content"));
    // Streaming deltas carry the index.
    EXPECT_EQ(tool_calls_json(calls, true, 2)[0]["index"], 2);
}

TEST(ResponseJson, ChatLogprobs) {
    const std::vector<TokenLogprobs> lps{{"Hi", -0.5f, {{"Hi", -0.5f}, {"Ho", -1.5f}}}, {"\xe6\x97", -0.25f, {}}};
    const json j = reparse(sse_event(chat_logprobs_json(lps)));
    ASSERT_EQ(j["content"].size(), 2u);
    EXPECT_EQ(j["content"][0]["token"], "Hi");
    EXPECT_EQ(j["content"][0]["logprob"], -0.5);
    EXPECT_EQ(j["content"][0]["bytes"], json::parse("[72, 105]"));
    ASSERT_EQ(j["content"][0]["top_logprobs"].size(), 2u);
    EXPECT_EQ(j["content"][0]["top_logprobs"][1]["token"], "Ho");
    EXPECT_EQ(j["content"][0]["top_logprobs"][1]["logprob"], -1.5);
    // Half a character: the text is replaced, the bytes are exact.
    EXPECT_EQ(j["content"][1]["token"], "\xef\xbf\xbd");
    EXPECT_EQ(j["content"][1]["bytes"], json::parse("[230, 151]"));
}

TEST(ResponseJson, CompletionLogprobs) {
    const std::vector<TokenLogprobs> lps{{" a", -1.f, {{" a", -1.f}, {" b", -2.f}, {" a", -3.f}}}, {"bc", -0.5f, {}}};
    const json j = reparse(sse_event(completion_logprobs_json(lps, 10)));
    EXPECT_EQ(j["tokens"], json::parse(R"([" a", "bc"])"));
    EXPECT_EQ(j["token_logprobs"], json::parse("[-1.0, -0.5]"));
    EXPECT_EQ(j["top_logprobs"][0], json::parse(R"({" a": -1.0, " b": -2.0})"));
    EXPECT_TRUE(j["top_logprobs"][1].empty());
    EXPECT_EQ(j["text_offset"], json::parse("[10, 12]"));
}

TEST(ResponseJson, CompletionShapes) {
    ResponseMeta m{"cmpl-x", 1, "tiny"};
    const json c = reparse(sse_event(completion_chunk(m, "abc", "", nullptr, false)));
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["choices"][0]["text"], "abc");
    EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
    const ojson r = completion_response(m, "abc", "stop", nullptr, Usage{2, 3, 1});
    EXPECT_EQ(r["choices"][0]["finish_reason"], "stop");
    EXPECT_EQ(r["usage"]["total_tokens"], 5);
}

TEST(ResponseJson, Ids) {
    const std::string a = new_response_id("cmpl-"), b = new_response_id("cmpl-");
    EXPECT_EQ(a.size(), 29u);
    EXPECT_EQ(a.rfind("cmpl-", 0), 0u);
    EXPECT_NE(a, b);
    EXPECT_GT(unix_now(), 1600000000);
}
