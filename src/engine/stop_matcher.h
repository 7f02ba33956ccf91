// Stop strings over streamed text: text is pushed as it is detokenized; what can be released is
// everything that cannot be (the start of) a stop string. When a stop string appears, the text
// before it is released and the match is reported; the stop string itself is never released.
#pragma once
#include <string>
#include <vector>

namespace tessera {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored

    // Appends text; returns the text now safe to release. Sets stopped() when a stop string
    // completes (the one that completes first; on a tie the longer); after that, push returns "" and ignores input.
    std::string push(const std::string& text);
    // End of generation: returns all held-back text (nothing after a stop).
    std::string flush();
    bool stopped() const { return stopped_; }
    const std::string& matched() const { return matched_; }  // the stop string that matched

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
    std::string matched_;
};

}  // namespace tessera
