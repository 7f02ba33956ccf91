// Per-request event queue between the engine thread and a handler thread.
#include "server/request_stream.h"

namespace tessera::server {

void RequestStream::push(const RequestOutput& o) {
    const auto now = Clock::now();
    {
        std::lock_guard<std::mutex> lock(mu_);
        events_.push_back(TimedOutput{o, now});
        if (o.finish != FinishReason::None) final_ = true;
    }
    cv_.notify_one();
}

std::vector<TimedOutput> RequestStream::wait(Clock::time_point until) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_until(lock, until, [&] { return !events_.empty(); });
    std::vector<TimedOutput> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
    events_.clear();
    return out;
}

bool RequestStream::final_pushed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return final_;
}

}  // namespace tessera::server
