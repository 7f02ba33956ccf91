// A generation request's life: submit, events → response or SSE chunks, timeout, cancellation.
#include "server/generation.h"

#include <cmath>
#include <random>

namespace tessera::server {
namespace {

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// JSON has no -inf; vLLM reports -9999 for impossible tokens.
float finite_logprob(float lp) { return std::isfinite(lp) ? std::max(lp, -9999.f) : -9999.f; }

}  // namespace

Generation::Generation(ServerContext& ctx, GenerationSpec spec) : ctx_(ctx), spec_(std::move(spec)) {
    const bool chat = spec_.kind == ApiKind::Chat;
    meta_ = ResponseMeta{new_response_id(chat ? "chatcmpl-" : "cmpl-"), unix_now(), ctx_.model_name};
    if (spec_.parser) parser_.emplace(*spec_.parser);
    if (!spec_.gen.seed_given) spec_.gen.params.sampling.seed = std::random_device{}() * 0x100000001ull ^ std::random_device{}();
}

Generation::~Generation() { abandon(); }

void Generation::submit() {
    const int64_t max_len = ctx_.engine.options().max_model_len;
    const int64_t n_prompt = int64_t(spec_.prompt.size());
    const int64_t max_tokens = spec_.gen.params.max_tokens;
    if (max_len > 0 && max_tokens > 0 && n_prompt + max_tokens > max_len)
        fail(ErrorKind::Invalid,
             "this model's maximum context length is {} tokens, but {} were requested ({} in the prompt, {} for "
             "the completion); reduce the prompt or max_tokens",
             max_len, n_prompt + max_tokens, n_prompt, max_tokens);
    Request r;
    r.prompt = spec_.prompt;
    r.params = spec_.gen.params;
    std::shared_ptr<RequestStream> s = stream_;
    r.on_output = [s](const RequestOutput& o) { s->push(o); };
    submitted_at_ = Clock::now();
    deadline_ = submitted_at_ + std::chrono::microseconds(int64_t(ctx_.opts.request_timeout_s * 1e6));
    id_ = ctx_.engine.submit(std::move(r));
    submitted_ = true;
}

void Generation::abandon() {
    if (!submitted_ || counted_ || stream_->final_pushed()) return;
    cancel_as("cancelled", api_error(499, "the client closed the connection"));
}

void Generation::cancel_as(const char* reason, ApiError err) {
    if (!counted_) ctx_.metrics.count_finish(reason);
    counted_ = true;
    error_ = std::move(err);
    ctx_.engine.cancel(id_);
}

ojson Generation::logprobs_json(const std::vector<TokenLogprobs>& lps) {
    if (spec_.gen.params.logprobs < 0) return nullptr;
    if (spec_.kind == ApiKind::Chat) return chat_logprobs_json(lps);
    ojson j = completion_logprobs_json(lps, text_offset_);
    for (const auto& lp : lps) text_offset_ += int64_t(lp.token.size());
    return j;
}

void Generation::absorb(const TimedOutput& e, Piece& p) {
    const RequestOutput& o = e.out;
    if (o.token >= 0) {
        if (n_tokens_ == 0) ctx_.metrics.ttft.observe(seconds(e.at - submitted_at_));
        else ctx_.metrics.itl.observe(seconds(e.at - last_token_at_));
        last_token_at_ = e.at;
        ++n_tokens_;
        if (spec_.gen.params.logprobs >= 0) {
            TokenLogprobs lp{ctx_.tokenizer.token_to_piece(o.token), finite_logprob(o.logprob), {}};
            for (const TokenLogprob& t : o.top)
                lp.top.emplace_back(ctx_.tokenizer.token_to_piece(t.token), finite_logprob(t.logprob));
            p.lps.push_back(std::move(lp));
        }
    }
    if (!o.text.empty()) {
        if (parser_) p.delta.append(parser_->push(o.text));
        else p.text += o.text;
    }
    if (o.finish != FinishReason::None) {
        if (parser_) p.delta.append(parser_->finish());
        ctx_.metrics.e2e.observe(seconds(e.at - submitted_at_));
        finish_with(o);
    }
}

void Generation::finish_with(const RequestOutput& o) {
    final_ = true;
    usage_ = Usage{o.prompt_tokens, o.completion_tokens, o.cached_tokens};
    switch (o.finish) {
        case FinishReason::Stop:
            finish_reason_ = parser_ && parser_->tool_call_count() > 0 ? "tool_calls" : "stop";
            break;
        case FinishReason::Length: finish_reason_ = "length"; break;
        case FinishReason::Cancelled:
            finish_reason_ = "cancelled";
            if (!error_)
                error_ = ctx_.shutting_down ? api_error(503, "the server is shutting down")
                                            : api_error(503, "the request was cancelled");
            break;
        default:
            finish_reason_ = "error";
            error_ = api_error(500, o.error.empty() ? "generation failed" : "generation failed: " + o.error);
            break;
    }
    if (!counted_) ctx_.metrics.count_finish(finish_reason_);
    counted_ = true;
}

std::pair<int, ojson> Generation::run_to_end() {
    while (!final_) {
        const auto events = stream_->wait(deadline_);
        for (const auto& e : events) absorb(e, all_);
        if (events.empty() && !final_ && Clock::now() >= deadline_) {
            cancel_as("timeout", api_error(504, fmt::format("the request timed out after {} s (--request-timeout)",
                                                            ctx_.opts.request_timeout_s)));
            // The final event (Cancelled) follows promptly; wait for it so the blocks are free.
            const auto until = Clock::now() + std::chrono::seconds(10);
            while (!final_ && Clock::now() < until)
                for (const auto& e : stream_->wait(until)) absorb(e, all_);
            break;
        }
    }
    if (error_) return {error_->status, error_json(*error_)};
    const ojson lps = logprobs_json(all_.lps);
    if (spec_.kind == ApiKind::Chat)
        return {200, chat_response(meta_, all_.delta.content, all_.delta.reasoning, all_.delta.tool_calls,
                                   finish_reason_, lps, usage_)};
    return {200, completion_response(meta_, all_.text, finish_reason_, lps, usage_)};
}

std::string Generation::piece_sse(const Piece& p) {
    const bool include_usage = spec_.gen.include_usage;
    if (spec_.kind == ApiKind::Completion) {
        if (p.text.empty() && p.lps.empty()) return "";
        return sse_event(completion_chunk(meta_, p.text, "", logprobs_json(p.lps), include_usage));
    }
    if (p.delta.empty() && p.lps.empty()) return "";
    ojson delta = ojson::object();
    if (!p.delta.reasoning.empty()) delta["reasoning_content"] = p.delta.reasoning;
    if (!p.delta.content.empty()) delta["content"] = p.delta.content;
    if (!p.delta.tool_calls.empty()) {
        delta["tool_calls"] = tool_calls_json(p.delta.tool_calls, true, tool_index_);
        tool_index_ += int(p.delta.tool_calls.size());
    }
    return sse_event(chat_chunk(meta_, delta, "", logprobs_json(p.lps), include_usage));
}

std::string Generation::tail_sse() {
    done_ = true;
    if (error_) return sse_event(error_json(*error_)) + kSseDone;
    const bool include_usage = spec_.gen.include_usage;
    std::string out;
    if (spec_.kind == ApiKind::Chat) {
        out += sse_event(chat_chunk(meta_, ojson::object(), finish_reason_, nullptr, include_usage));
        if (include_usage) out += sse_event(usage_chunk(meta_, "chat.completion.chunk", usage_));
    } else {
        out += sse_event(completion_chunk(meta_, "", finish_reason_, nullptr, include_usage));
        if (include_usage) out += sse_event(usage_chunk(meta_, "text_completion", usage_));
    }
    return out + kSseDone;
}

std::string Generation::poll_sse(Clock::time_point until) {
    if (done_) return "";
    std::string out;
    if (!started_) {
        started_ = true;
        if (spec_.kind == ApiKind::Chat)
            out += sse_event(chat_chunk(meta_, ojson{{"role", "assistant"}, {"content", ""}}, "", nullptr,
                                        spec_.gen.include_usage));
    }
    const auto events = stream_->wait(std::min(until, deadline_));
    for (const auto& e : events) {
        Piece p;
        absorb(e, p);
        out += piece_sse(p);
        if (final_) return out + tail_sse();
    }
    if (!final_ && !counted_ && Clock::now() >= deadline_) {
        cancel_as("timeout", api_error(504, fmt::format("the request timed out after {} s (--request-timeout)",
                                                        ctx_.opts.request_timeout_s)));
        out += tail_sse();
    }
    return out;
}

}  // namespace tessera::server
