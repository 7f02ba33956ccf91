// Request bodies → GenerationParams, and the 400-class errors for bad ones.
#include <gtest/gtest.h>

#include "core/status.h"
#include "server/api_error.h"
#include "server/request_parse.h"

using namespace tessera;
using namespace tessera::server;

namespace {

ChatRequest chat(const std::string& body) { return parse_chat_request(parse_body(body)); }
CompletionRequest completion(const std::string& body) { return parse_completion_request(parse_body(body)); }

// The Error(Invalid) message a body produces, or "" when it parses.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(http_status_for(e.kind()), 400) << e.what();
        return e.what();
    }
    return "";
}

const char* kMsg = R"("messages": [{"role": "user", "content": "hi"}])";

}  // namespace

TEST(RequestParse, OpenAiDefaults) {
    const ChatRequest r = chat(std::string("{") + kMsg + "}");
    const GenerationParams& p = r.gen.params;
    EXPECT_EQ(p.sampling.temperature, 1.f);
    EXPECT_EQ(p.sampling.top_p, 1.f);
    EXPECT_EQ(p.sampling.top_k, 0);
    EXPECT_EQ(p.sampling.min_p, 0.f);
    EXPECT_EQ(p.max_tokens, -1);
    EXPECT_EQ(p.logprobs, -1);
    EXPECT_TRUE(p.skip_special_tokens);
    EXPECT_FALSE(r.gen.stream);
    EXPECT_FALSE(r.gen.seed_given);
    EXPECT_TRUE(r.tools.is_null());
    EXPECT_FALSE(r.parse_tool_calls);
    EXPECT_TRUE(r.template_kwargs.is_object() && r.template_kwargs.empty());
}

TEST(RequestParse, ChatFieldsReachTheParams) {
    const ChatRequest r = chat(std::string("{") + kMsg + R"(, "model": "m", "temperature": 0, "top_p": 0.5,
        "top_k": 40, "min_p": 0.1, "seed": 7, "max_tokens": 5, "max_completion_tokens": 9, "stop": "END",
        "stop_token_ids": [3, 4], "ignore_eos": true, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "repetition_penalty": 1.1, "logit_bias": {"12": 5, "7": -100}, "logprobs": true, "top_logprobs": 3,
        "skip_special_tokens": false, "stream": true, "stream_options": {"include_usage": true},
        "chat_template_kwargs": {"enable_thinking": false}})");
    const GenerationParams& p = r.gen.params;
    EXPECT_EQ(r.gen.model, "m");
    EXPECT_EQ(p.sampling.temperature, 0.f);
    EXPECT_EQ(p.sampling.top_p, 0.5f);
    EXPECT_EQ(p.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(p.sampling.min_p, 0.1f);
    EXPECT_EQ(p.sampling.seed, 7u);
    EXPECT_TRUE(r.gen.seed_given);
    EXPECT_EQ(p.max_tokens, 9);  // max_completion_tokens wins
    EXPECT_EQ(p.stop, std::vector<std::string>{"END"});
    EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{3, 4}));
    EXPECT_TRUE(p.ignore_eos);
    EXPECT_EQ(p.presence_penalty, 0.5f);
    EXPECT_EQ(p.frequency_penalty, -0.5f);
    EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
    ASSERT_EQ(p.logit_bias.size(), 2u);
    EXPECT_EQ(p.logit_bias[0], (std::pair<int32_t, float>{12, 5.f}));
    EXPECT_EQ(p.logit_bias[1], (std::pair<int32_t, float>{7, -100.f}));
    EXPECT_EQ(p.logprobs, 3);
    EXPECT_FALSE(p.skip_special_tokens);
    EXPECT_TRUE(r.gen.stream);
    EXPECT_TRUE(r.gen.include_usage);
    EXPECT_EQ(r.template_kwargs.dump(), R"({"enable_thinking":false})");
}

TEST(RequestParse, ChatLogprobsWithoutTop) {
    EXPECT_EQ(chat(std::string("{") + kMsg + R"(, "logprobs": true})").gen.params.logprobs, 0);
    EXPECT_EQ(chat(std::string("{") + kMsg + R"(, "logprobs": false})").gen.params.logprobs, -1);
    EXPECT_EQ(chat(std::string("{") + kMsg + R"(, "top_k": -1})").gen.params.sampling.top_k, 0);
}

TEST(RequestParse, StopArrayAndNulls) {
    const ChatRequest r = chat(std::string("{") + kMsg + R"(, "stop": ["a", "bc"], "temperature": null, "seed": null})");
    EXPECT_EQ(r.gen.params.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_EQ(r.gen.params.sampling.temperature, 1.f);
    EXPECT_FALSE(r.gen.seed_given);
}

TEST(RequestParse, MessagesAreNormalized) {
    const ChatRequest r = chat(R"({"messages": [
        {"role": "system", "content": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "really"}]},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "f", "arguments": "{\"b\": 1, \"a\": 2}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]})");
    EXPECT_EQ(r.messages[0]["content"], "be brief\nreally");
    EXPECT_TRUE(r.messages[1]["content"].is_null());
    // The arguments became an object, keys in the client's order.
    EXPECT_EQ(r.messages[1]["tool_calls"][0]["function"]["arguments"].dump(), R"({"b":1,"a":2})");
    EXPECT_EQ(r.tools.size(), 1u);
    EXPECT_TRUE(r.parse_tool_calls);
    const ChatRequest none = chat(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "none",
        "tools": [{"type": "function", "function": {"name": "f"}}]})");
    EXPECT_FALSE(none.parse_tool_calls);
    EXPECT_FALSE(none.tools.is_null());  // the template still sees them
}

TEST(RequestParse, CompletionPrompts) {
    EXPECT_EQ(completion(R"({"prompt": "hello"})").prompt_text, "hello");
    EXPECT_EQ(completion(R"({"prompt": ["hello"]})").prompt_text, "hello");
    const CompletionRequest ids = completion(R"({"prompt": [1, 2, 3], "logprobs": 2, "max_tokens": 4})");
    EXPECT_TRUE(ids.prompt_is_tokens);
    EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(ids.gen.params.logprobs, 2);
    EXPECT_EQ(ids.gen.params.max_tokens, 4);
    EXPECT_EQ(completion(R"({"prompt": [[5, 6]]})").prompt_tokens, (std::vector<int32_t>{5, 6}));
}

TEST(RequestParse, MalformedBodies) {
    EXPECT_NE(error_of([] { parse_body("{not json"); }).find("not valid JSON"), std::string::npos);
    EXPECT_NE(error_of([] { parse_body("[1, 2]"); }).find("JSON object"), std::string::npos);
    EXPECT_NE(error_of([] { parse_body(""); }).find("not valid JSON"), std::string::npos);
}

TEST(RequestParse, WrongTypesNameTheField) {
    auto chat_err = [](const std::string& extra) {
        return error_of([&] { chat(std::string("{") + kMsg + ", " + extra + "}"); });
    };
    EXPECT_NE(chat_err(R"("temperature": "hot")").find("'temperature' must be a number"), std::string::npos);
    EXPECT_NE(chat_err(R"("max_tokens": 1.5)").find("'max_tokens' must be an integer"), std::string::npos);
    EXPECT_NE(chat_err(R"("max_tokens": 0)").find("'max_tokens' must be >= 1"), std::string::npos);
    EXPECT_NE(chat_err(R"("stream": "yes")").find("'stream' must be a boolean"), std::string::npos);
    EXPECT_NE(chat_err(R"("stop": 5)").find("'stop'"), std::string::npos);
    EXPECT_NE(chat_err(R"("stop": ["a", 1])").find("'stop'"), std::string::npos);
    EXPECT_NE(chat_err(R"("top_p": 0)").find("'top_p'"), std::string::npos);
    EXPECT_NE(chat_err(R"("temperature": -1)").find("'temperature'"), std::string::npos);
    EXPECT_NE(chat_err(R"("presence_penalty": 3)").find("'presence_penalty'"), std::string::npos);
    EXPECT_NE(chat_err(R"("logit_bias": {"abc": 1})").find("'logit_bias'"), std::string::npos);
    EXPECT_NE(chat_err(R"("logit_bias": {"5": 200})").find("'logit_bias'"), std::string::npos);
    EXPECT_NE(chat_err(R"("top_logprobs": 2)").find("needs 'logprobs'"), std::string::npos);
    EXPECT_NE(chat_err(R"("logprobs": true, "top_logprobs": 21)").find("'top_logprobs'"), std::string::npos);
    EXPECT_NE(chat_err(R"("n": 2)").find("'n'"), std::string::npos);
    EXPECT_NE(chat_err(R"("model": 5)").find("'model'"), std::string::npos);
    EXPECT_NE(chat_err(R"("stop_token_ids": [-1])").find("'stop_token_ids'"), std::string::npos);
    EXPECT_NE(chat_err(R"("tool_choice": "required")").find("'tool_choice'"), std::string::npos);
    EXPECT_NE(chat_err(R"("response_format": {"type": "json_object"})").find("'response_format'"), std::string::npos);
    EXPECT_NE(chat_err(R"("tools": [{"type": "function"}])").find("tools[0].function"), std::string::npos);
    EXPECT_NE(chat_err(R"("chat_template_kwargs": [1])").find("'chat_template_kwargs'"), std::string::npos);
}

TEST(RequestParse, BadMessages) {
    EXPECT_NE(error_of([] { chat("{}"); }).find("'messages' is required"), std::string::npos);
    EXPECT_NE(error_of([] { chat(R"({"messages": []})"); }).find("must not be empty"), std::string::npos);
    EXPECT_NE(error_of([] { chat(R"({"messages": "hi"})"); }).find("'messages' must be an array"), std::string::npos);
    EXPECT_NE(error_of([] { chat(R"({"messages": [{"content": "x"}]})"); }).find("messages[0].role"), std::string::npos);
    EXPECT_NE(error_of([] { chat(R"({"messages": [{"role": "user", "content": 5}]})"); }).find("messages[0].content"),
              std::string::npos);
    const std::string image = error_of([] {
        chat(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "what is this"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]})");
    });
    EXPECT_NE(image.find("'image_url' are not supported"), std::string::npos) << image;
    const std::string audio = error_of([] {
        chat(R"({"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]})");
    });
    EXPECT_NE(audio.find("'input_audio'"), std::string::npos) << audio;
}

TEST(RequestParse, BadCompletions) {
    EXPECT_NE(error_of([] { completion("{}"); }).find("'prompt' is required"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": ""})"); }).find("must not be empty"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": []})"); }).find("must not be empty"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": [1, -2]})"); }).find("out of range"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": ["a", "b"]})"); }).find("batched"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": 5})"); }).find("'prompt'"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": "x", "logprobs": 21})"); }).find("'logprobs'"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": "x", "echo": true})"); }).find("'echo'"), std::string::npos);
    EXPECT_NE(error_of([] { completion(R"({"prompt": "x", "best_of": 3})"); }).find("'best_of'"), std::string::npos);
}

TEST(ApiError, StatusAndShape) {
    EXPECT_EQ(http_status_for(ErrorKind::Invalid), 400);
    EXPECT_EQ(http_status_for(ErrorKind::TooLarge), 400);
    EXPECT_EQ(http_status_for(ErrorKind::Unsupported), 400);
    EXPECT_EQ(http_status_for(ErrorKind::NotFound), 404);
    EXPECT_EQ(http_status_for(ErrorKind::Busy), 429);
    EXPECT_EQ(http_status_for(ErrorKind::Internal), 500);
    EXPECT_EQ(http_status_for(ErrorKind::Io), 500);
    const auto j = error_json(api_error_from(Error(ErrorKind::Busy, "queue full")));
    EXPECT_EQ(j["error"]["message"], "queue full");
    EXPECT_EQ(j["error"]["type"], "rate_limit_error");
    EXPECT_TRUE(j["error"]["param"].is_null());
    EXPECT_EQ(j["error"]["code"], "queue_full");
    EXPECT_TRUE(error_json(api_error(500, "x"))["error"]["code"].is_null());
    EXPECT_EQ(error_json(api_error(401, "x"))["error"]["type"], "authentication_error");
}
