// What a request asks of the engine and what the engine sends back. Requests come from any
// thread (server handlers, the C ABI, Python); outputs go back through a callback, one event per
// generated token plus a final event that carries the finish reason and the usage.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"

namespace tessera {

// Everything about how one request generates (OpenAI / vLLM semantics).
struct GenerationParams {
    SamplingParams sampling;                // temperature (<= 0 greedy), top_p, top_k, min_p, seed
    float repetition_penalty = 1.f;         // HF/vLLM: over prompt + output tokens; 1 = off
    float presence_penalty = 0.f;           // OpenAI: over output tokens; 0 = off
    float frequency_penalty = 0.f;          // OpenAI: over output tokens; 0 = off
    std::vector<std::pair<int32_t, float>> logit_bias;  // added to the logits before sampling
    int64_t max_tokens = -1;                // -1: until the context is full
    std::vector<std::string> stop;          // stop strings: generation ends, the string is not returned
    std::vector<int32_t> stop_token_ids;    // in addition to the model's end-of-sequence ids
    bool ignore_eos = false;
    int logprobs = -1;                      // -1 off; 0 the chosen token's logprob; n: also the top n (<= 20)
    bool skip_special_tokens = true;        // in the returned text
    bool return_logits = false;             // copy each step's raw logits into the output (C ABI get_logits)
};

enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* finish_reason_name(FinishReason r);  // "stop", "length", "cancelled", "error"; "" for None

struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0.f;
};

// One event. A token event has token >= 0; the last event of a request has finish != None (it
// may also carry the last token). text is the detokenized text released by this event: text
// that could still turn out to be the start of a stop string is held back until it cannot.
struct RequestOutput {
    uint64_t id = 0;
    int32_t token = -1;
    std::string text;
    float logprob = 0.f;                  // when logprobs >= 0
    std::vector<TokenLogprob> top;        // when logprobs > 0, best first
    std::vector<float> logits;            // when return_logits: raw logits of the step [vocab]
    FinishReason finish = FinishReason::None;
    std::string error;                    // finish == Error: why
    // Usage, on the final event.
    int64_t prompt_tokens = 0;
    int64_t completion_tokens = 0;
    int64_t cached_tokens = 0;            // prompt tokens reused from the prefix cache
};

// Called on the engine's thread for every event of the request; keep it short (queue the event,
// wake a waiter). The final event is always delivered exactly once, whatever the outcome.
using OutputCallback = std::function<void(const RequestOutput&)>;

struct Request {
    uint64_t id = 0;              // 0: EngineCore::add assigns one; else unique and > 0
    std::vector<int32_t> prompt;  // token ids, non-empty
    GenerationParams params;
    OutputCallback on_output;
    // Step mode (the C ABI's prefill / decode_step calls): after each token the request waits
    // until EngineCore::resume(id) allows one more.
    bool step_mode = false;
};

}  // namespace tessera
