// Engine: EngineCore on a thread of its own. submit() and cancel() may be called from any
// thread and never wait for a step: they queue into an inbox the loop drains before each step.
// Events reach each request's callback on the engine thread. The destructor (or shutdown())
// cancels what is left, delivering the final events, and joins the thread.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine_core.h"

namespace tessera {

class Engine {
public:
    explicit Engine(const EngineOptions& opts);  // loads the model (throws Error), starts the loop
    ~Engine();

    // Thread-safe. Validation errors (Invalid / TooLarge / Busy) are thrown here, before the
    // request is queued; once submit returns an id, the request's final event will be delivered.
    uint64_t submit(Request r);
    void cancel(uint64_t id);  // thread-safe; the final event (Cancelled) follows on the engine thread
    // Stops accepting requests (submit throws Busy), cancels the rest, joins. Idempotent.
    void shutdown();

    EngineStats stats() const;  // thread-safe: the snapshot taken after the last step
    // Immutable after construction: safe from any thread.
    const ModelConfig& config() const { return core_.config(); }
    const Tokenizer* tokenizer() const { return core_.tokenizer(); }
    std::string model_name() const { return core_.model_name(); }
    const EngineOptions& options() const { return core_.options(); }

private:
    void loop();

    EngineCore core_;
    mutable std::mutex mu_;  // guards the inbox, the flags and stats_
    std::condition_variable cv_;
    std::deque<Request> inbox_;
    std::vector<uint64_t> cancels_;
    EngineStats stats_;
    bool stopping_ = false;
    std::atomic<uint64_t> next_id_{1};
    std::once_flag joined_;
    std::thread thread_;
};

}  // namespace tessera
