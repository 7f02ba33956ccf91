// The hand-off between the engine thread and an HTTP handler thread for one request: the engine
// callback pushes events (never blocks beyond a short lock), the handler waits on a condition
// variable with a deadline. Each event is stamped when it arrives (for TTFT / ITL metrics).
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

#include "engine/request.h"

namespace tessera::server {

using Clock = std::chrono::steady_clock;

struct TimedOutput {
    RequestOutput out;
    Clock::time_point at;
};

class RequestStream {
public:
    void push(const RequestOutput& o);  // the engine callback
    // Waits until an event is queued or `until` passes; returns (and removes) every queued event.
    std::vector<TimedOutput> wait(Clock::time_point until);
    bool final_pushed() const;  // the request's final event has arrived

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<TimedOutput> events_;
    bool final_ = false;
};

}  // namespace tessera::server
