// The C ABI's engine: EngineCore driven synchronously under one mutex, with the ABI's request
// model on top — the single stream and per-request streams (step-mode requests: one token per
// call, raw logits kept), batched requests whose events wait in a queue for tessera_step, and
// the mapping between the ABI's string request ids and the engine's numeric ones.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_core.h"
#include "tessera/tessera.h"

namespace tessera::capi {

// A step-mode call's outcome: a token, or the end of the stream.
struct NextToken {
    bool finished = false;
    int32_t token = -1;
    std::string why;  // finished: "request 'x' has finished (length)"
};

tessera_finish_reason to_abi(FinishReason r);

class Bridge {
public:
    explicit Bridge(const EngineOptions& opts);
    ~Bridge();

    std::mutex& mutex() { return mu_; }  // every call below runs under it (the C functions lock)
    EngineCore& core() { return *core_; }
    const EngineCore& core() const { return *core_; }

    // Step mode. name == nullptr is the single stream (prefill starts it over).
    NextToken prefill(const std::string* name, std::span<const int32_t> tokens, GenerationParams params);
    NextToken decode_step(const std::string* name);
    void reset_stream();
    void finish(const std::string& name);
    FinishReason finish_reason(const std::string* name);  // None while it goes on

    // Batched.
    void add(const std::string& name, std::span<const int32_t> tokens, GenerationParams params);
    int32_t step(tessera_token_event* out, int32_t cap);

    // Raw logits of the token the last prefill / decode_step returned; null if none.
    const std::vector<float>* last_logits() const { return have_logits_ ? &logits_ : nullptr; }

private:
    struct Live;  // one request the ABI knows

    Live& lookup(const std::string& name, const char* fn);
    Live& start(std::unique_ptr<Live> live, std::span<const int32_t> tokens, GenerationParams params);
    NextToken next_token(Live& s);
    const RequestOutput& next_event(Live& s);
    void dispatch();               // routes the events the callbacks queued in inbox_
    void drop(Live& s);            // cancels (if still running) and forgets a request
    std::string label(const Live& s) const;

    std::mutex mu_;
    std::unique_ptr<EngineCore> core_;
    std::unique_ptr<Live> stream_;                        // the single stream
    std::map<std::string, std::unique_ptr<Live>> named_;  // per-request and batched, by ABI id
    std::unordered_map<uint64_t, Live*> running_;         // engine id -> request, until its final event
    std::vector<RequestOutput> inbox_;                    // filled by the output callbacks
    std::deque<tessera_token_event> batch_events_;        // waiting for tessera_step
    std::vector<float> logits_;
    bool have_logits_ = false;
};

}  // namespace tessera::capi

// The opaque handle of the C ABI.
struct tessera_engine {
    explicit tessera_engine(const tessera::EngineOptions& opts) : bridge(opts) {}
    tessera::capi::Bridge bridge;
};
