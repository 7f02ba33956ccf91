// Stop strings over streamed text, holding back what could still become one.
#include "engine/stop_matcher.h"

#include <algorithm>
#include <utility>

namespace tessera {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops)
        if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopMatcher::push(const std::string& text) {
    if (stopped_) return "";
    held_ += text;
    if (stops_.empty()) return std::exchange(held_, std::string());
    // The stop string that completes first (smallest end; on a tie the longer one, which starts
    // earlier): what streaming the same text byte by byte would have stopped on, so the result
    // does not depend on how the text was split into pushes.
    size_t best_end = std::string::npos, best_at = 0;
    for (const std::string& s : stops_) {
        const size_t at = held_.find(s);
        if (at == std::string::npos) continue;
        const size_t end = at + s.size();
        if (end < best_end || (end == best_end && at < best_at)) {
            best_end = end;
            best_at = at;
            matched_ = s;
        }
    }
    if (best_end != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, best_at);
        held_.clear();
        return out;
    }
    // Hold back the longest suffix that is a prefix of some stop string.
    size_t keep = 0;
    for (const std::string& s : stops_)
        for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
            if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
                keep = k;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    if (stopped_) return "";
    return std::exchange(held_, std::string());
}

}  // namespace tessera
