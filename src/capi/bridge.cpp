// Step-mode streams and batched requests over a synchronous EngineCore (bridge.h).
#include "capi/bridge.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/status.h"

namespace tessera::capi {

struct Bridge::Live {
    std::string name;         // the ABI's id; "" for the single stream
    bool stream = false;
    bool step_mode = true;    // false: batched, events go to batch_events_
    uint64_t id = 0;          // the engine's
    bool running = false;     // in the engine: its final event has not arrived yet
    bool awaiting = false;    // step mode: allowed one more token (by add or resume) not yet arrived
    bool done = false;        // step mode: its final event has been handed out
    FinishReason finish = FinishReason::None;
    std::deque<RequestOutput> pending;  // step mode: events not yet handed out
};

tessera_finish_reason to_abi(FinishReason r) {
    switch (r) {
    case FinishReason::None: return TESSERA_FINISH_REASON_NONE;
    case FinishReason::Stop: return TESSERA_FINISH_REASON_STOP;
    case FinishReason::Length: return TESSERA_FINISH_REASON_LENGTH;
    case FinishReason::Cancelled: return TESSERA_FINISH_REASON_CANCELLED;
    case FinishReason::Error: return TESSERA_FINISH_REASON_ERROR;
    }
    return TESSERA_FINISH_REASON_ERROR;
}

Bridge::Bridge(const EngineOptions& opts) : core_(std::make_unique<EngineCore>(opts)) {}

// The core first: its teardown may still deliver final events into inbox_.
Bridge::~Bridge() { core_.reset(); }

std::string Bridge::label(const Live& s) const {
    return s.stream ? std::string("the stream") : "request '" + s.name + "'";
}

Bridge::Live& Bridge::lookup(const std::string& name, const char* fn) {
    auto it = named_.find(name);
    if (it == named_.end()) fail(ErrorKind::NotFound, "{}: unknown request id '{}'", fn, name);
    return *it->second;
}

Bridge::Live& Bridge::start(std::unique_ptr<Live> live, std::span<const int32_t> tokens, GenerationParams params) {
    Request r;
    r.prompt.assign(tokens.begin(), tokens.end());
    r.params = std::move(params);
    r.params.return_logits = live->step_mode;
    r.step_mode = live->step_mode;
    r.on_output = [this](const RequestOutput& o) { inbox_.push_back(o); };
    const std::string what = live->stream ? std::string("the stream") : "request '" + live->name + "'";
    live->id = with_context(what, [&] { return core_->add(std::move(r)); });
    live->running = true;
    live->awaiting = live->step_mode;
    Live& s = *live;
    running_[s.id] = &s;
    if (s.stream) stream_ = std::move(live);
    else named_[s.name] = std::move(live);
    dispatch();
    return s;
}

void Bridge::dispatch() {
    std::vector<RequestOutput> events;
    events.swap(inbox_);
    for (RequestOutput& ev : events) {
        auto it = running_.find(ev.id);
        if (it == running_.end()) continue;  // a request we already dropped
        Live& s = *it->second;
        const bool final = ev.finish != FinishReason::None;
        if (final) {
            s.running = false;
            running_.erase(it);
            if (!s.step_mode) s.finish = ev.finish;  // a step-mode stream's ends when it is handed out
        }
        if (ev.token < 0 && !final) continue;  // text-only events: the ABI deals in tokens
        if (s.step_mode) {
            s.pending.push_back(std::move(ev));
            continue;
        }
        tessera_token_event e{};
        std::memcpy(e.request_id, s.name.data(), std::min(s.name.size(), sizeof(e.request_id) - 1));
        e.token = ev.token;
        e.finished = final ? 1 : 0;
        e.finish_reason = to_abi(ev.finish);
        batch_events_.push_back(e);
    }
}

const RequestOutput& Bridge::next_event(Live& s) {
    while (s.pending.empty()) {
        if (!s.running) fail(ErrorKind::Internal, "{}: no event pending and none to come", label(s));
        if (!core_->step())
            fail(ErrorKind::Busy, "{} cannot make progress: the caches are held by other requests "
                 "(finish some, or give the engine a larger memory budget)", label(s));
        dispatch();
    }
    return s.pending.front();
}

NextToken Bridge::next_token(Live& s) {
    const auto finished = [&] {
        return NextToken{true, -1, fmt::format("{} has finished ({})", label(s), finish_reason_name(s.finish))};
    };
    if (s.done) return finished();
    if (s.pending.empty() && !s.awaiting) {
        TS_ASSERT(s.running);
        core_->resume(s.id);
        s.awaiting = true;
    }
    next_event(s);
    RequestOutput ev = std::move(s.pending.front());
    s.pending.pop_front();
    if (ev.finish != FinishReason::None) {
        s.done = true;
        s.finish = ev.finish;
        if (ev.finish == FinishReason::Error) fail(ErrorKind::Internal, "{} failed: {}", label(s), ev.error);
    }
    if (ev.token < 0) return finished();
    s.awaiting = false;
    have_logits_ = !ev.logits.empty();
    logits_ = std::move(ev.logits);
    return NextToken{false, ev.token, {}};
}

NextToken Bridge::prefill(const std::string* name, std::span<const int32_t> tokens, GenerationParams params) {
    have_logits_ = false;
    auto live = std::make_unique<Live>();
    if (name) {
        if (named_.count(*name)) fail(ErrorKind::Invalid, "request id '{}' is already in use (tessera_finish_req frees it)", *name);
        live->name = *name;
    } else {
        reset_stream();
        live->stream = true;
    }
    Live& s = start(std::move(live), tokens, std::move(params));
    try {
        return next_token(s);
    } catch (...) {
        drop(s);  // a failed prefill leaves nothing behind: the id is free again
        throw;
    }
}

NextToken Bridge::decode_step(const std::string* name) {
    have_logits_ = false;
    Live* s = name ? &lookup(*name, "tessera_decode_step_req") : stream_.get();
    if (!s) fail(ErrorKind::NotFound, "tessera_decode_step: no stream (call tessera_prefill first)");
    if (!s->step_mode)
        fail(ErrorKind::Invalid, "tessera_decode_step_req: request '{}' was added with tessera_add_request; "
             "its tokens come from tessera_step", s->name);
    return next_token(*s);
}

void Bridge::drop(Live& s) {
    if (s.running) {
        core_->cancel(s.id);
        dispatch();
        running_.erase(s.id);  // in case the engine delivered nothing
    }
    if (!s.step_mode)
        std::erase_if(batch_events_, [&](const tessera_token_event& e) { return s.name == e.request_id; });
    if (s.stream) stream_.reset();
    else named_.erase(s.name);  // s is gone from here on
}

void Bridge::reset_stream() {
    have_logits_ = false;
    if (stream_) drop(*stream_);
}

void Bridge::finish(const std::string& name) {
    have_logits_ = false;
    drop(lookup(name, "tessera_finish_req"));
}

FinishReason Bridge::finish_reason(const std::string* name) {
    const Live* s = name ? &lookup(*name, "tessera_get_finish_reason") : stream_.get();
    if (!s) fail(ErrorKind::NotFound, "tessera_get_finish_reason: no stream (call tessera_prefill first)");
    return s->finish;
}

void Bridge::add(const std::string& name, std::span<const int32_t> tokens, GenerationParams params) {
    have_logits_ = false;
    if (named_.count(name)) fail(ErrorKind::Invalid, "request id '{}' is already in use (tessera_finish_req frees it)", name);
    auto live = std::make_unique<Live>();
    live->name = name;
    live->step_mode = false;
    start(std::move(live), tokens, std::move(params));
}

int32_t Bridge::step(tessera_token_event* out, int32_t cap) {
    have_logits_ = false;
    // One engine step whenever there is room, and more while nothing is ready to hand out.
    if (batch_events_.size() < size_t(cap)) {
        do {
            if (!core_->has_work() || !core_->step()) break;
            dispatch();
        } while (batch_events_.empty());
    }
    if (batch_events_.empty()) {
        for (const auto& [name, s] : named_)
            if (!s->step_mode && s->running)
                fail(ErrorKind::Busy, "tessera_step: request '{}' cannot make progress: the caches are held by "
                     "other requests (finish some, or give the engine a larger memory budget)", name);
        return 0;
    }
    const int32_t n = int32_t(std::min(batch_events_.size(), size_t(cap)));
    for (int32_t i = 0; i < n; ++i) {
        out[i] = batch_events_.front();
        batch_events_.pop_front();
        if (out[i].finished) named_.erase(out[i].request_id);  // its id is free again
    }
    return n;
}

}  // namespace tessera::capi
