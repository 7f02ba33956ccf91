// One generation request from submit to its final event, for /v1/completions and
// /v1/chat/completions: events from the engine are turned into the OpenAI response (non-streaming)
// or into SSE chunks (streaming), with the output parser for chat, logprobs, usage, timeouts,
// cancellation and the latency metrics.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/api_error.h"
#include "server/output_parser.h"
#include "server/request_parse.h"
#include "server/request_stream.h"
#include "server/response_json.h"
#include "server/server_context.h"

namespace tessera::server {

enum class ApiKind { Chat, Completion };

struct GenerationSpec {
    ApiKind kind = ApiKind::Completion;
    GenerationRequest gen;
    std::vector<int32_t> prompt;
    std::optional<ParserOptions> parser;  // chat: how to split the output
};

class Generation {
public:
    Generation(ServerContext& ctx, GenerationSpec spec);
    ~Generation();  // cancels the request if it is still running
    Generation(const Generation&) = delete;
    Generation& operator=(const Generation&) = delete;

    void submit();  // throws Error: Invalid / TooLarge (400), Busy (429)

    // Non-streaming: waits for the final event or the timeout; the HTTP status and body.
    std::pair<int, ojson> run_to_end();

    // Streaming: waits for events until `until` and returns their SSE text (maybe empty). After
    // the final event (or the timeout) the text ends with "data: [DONE]" and done() is true.
    std::string poll_sse(Clock::time_point until);
    bool done() const { return done_; }

    void abandon();  // the client went away: cancel the request (no-op once it finished)
    Clock::time_point deadline() const { return deadline_; }

private:
    struct Piece {  // what one event contributes
        std::string text;  // completions
        ParsedDelta delta; // chat
        std::vector<TokenLogprobs> lps;
    };
    void absorb(const TimedOutput& e, Piece& p);
    void finish_with(const RequestOutput& o);
    void cancel_as(const char* reason, ApiError err);
    std::string piece_sse(const Piece& p);
    std::string tail_sse();
    ojson logprobs_json(const std::vector<TokenLogprobs>& lps);

    ServerContext& ctx_;
    GenerationSpec spec_;
    ResponseMeta meta_;
    std::shared_ptr<RequestStream> stream_ = std::make_shared<RequestStream>();
    std::optional<OutputParser> parser_;
    uint64_t id_ = 0;
    bool submitted_ = false, final_ = false, counted_ = false, started_ = false, done_ = false;
    Clock::time_point submitted_at_, last_token_at_, deadline_;
    int64_t n_tokens_ = 0;
    int64_t text_offset_ = 0;  // completions logprobs: bytes of text so far
    int tool_index_ = 0;       // streaming: index of the next tool call
    std::string finish_reason_;
    std::optional<ApiError> error_;
    Usage usage_;
    // Non-streaming accumulation.
    Piece all_;
};

}  // namespace tessera::server
