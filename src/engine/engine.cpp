// Engine: the loop thread around EngineCore, with an inbox so submit/cancel never wait for a step.
#include "engine/engine.h"

#include <chrono>

#include "core/log.h"
#include "core/status.h"

namespace tessera {

Engine::Engine(const EngineOptions& opts) : core_(opts) {
    stats_ = core_.stats();
    thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { shutdown(); }

uint64_t Engine::submit(Request r) {
    core_.validate(r);  // immutable state only: safe while the loop steps
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) fail(ErrorKind::Busy, "the engine is shutting down");
    if (int64_t(inbox_.size()) + stats_.waiting >= core_.options().max_queue)
        fail(ErrorKind::Busy, "the engine's queue is full ({} requests waiting)", int64_t(inbox_.size()) + stats_.waiting);
    r.id = next_id_++;
    const uint64_t id = r.id;
    inbox_.push_back(std::move(r));
    cv_.notify_one();
    return id;
}

void Engine::cancel(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
    cv_.notify_one();
}

void Engine::shutdown() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
        cv_.notify_one();
    }
    std::call_once(joined_, [this] { thread_.join(); });
}

EngineStats Engine::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

void Engine::loop() {
    for (;;) {
        std::deque<Request> adds;
        std::vector<uint64_t> cancels;
        bool stopping;
        {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || core_.has_work(); });
            adds.swap(inbox_);
            cancels.swap(cancels_);
            stopping = stopping_;
        }
        for (Request& r : adds) {
            const uint64_t id = r.id;
            OutputCallback cb = r.on_output;
            try {
                core_.add(std::move(r));
            } catch (const std::exception& e) {  // e.g. the queue filled up meanwhile: the request still ends
                RequestOutput out;
                out.id = id;
                out.finish = FinishReason::Error;
                out.error = e.what();
                try {
                    if (cb) cb(out);
                } catch (...) {
                    TS_LOG_ERROR("request {}: output callback threw", id);
                }
            }
        }
        for (uint64_t id : cancels) core_.cancel(id);
        if (stopping) {  // every request left gets its final event (Cancelled)
            core_.cancel_all();
            std::lock_guard<std::mutex> lock(mu_);
            stats_ = core_.stats();
            return;
        }
        bool progressed = false;
        try {
            progressed = core_.step();
        } catch (const std::exception& e) {
            TS_LOG_ERROR("engine step failed: {}", e.what());
        }
        std::unique_lock<std::mutex> lock(mu_);
        stats_ = core_.stats();
        // Work that cannot be scheduled now (e.g. waiting for memory held by paused requests)
        // must not spin: wait for news or a short while.
        if (!progressed) cv_.wait_for(lock, std::chrono::milliseconds(5), [&] { return stopping_ || !inbox_.empty() || !cancels_.empty(); });
    }
}

}  // namespace tessera
