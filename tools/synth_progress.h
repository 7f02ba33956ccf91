// Progress of a long write on stderr: on a TTY a bar redrawn in place (bytes written / total,
// MB/s, ETA); otherwise a plain line at each quarter, so logs stay short.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::cli {

class SynthProgress {
public:
    SynthProgress(std::string label, uint64_t total_bytes);
    void add(uint64_t bytes);  // call from one thread
    // The closing line: bytes, seconds, MB/s.
    void finish(const std::string& what);
    double mb_per_s() const;

private:
    void draw(bool final_line);

    std::string label_;
    uint64_t total_, done_ = 0;
    bool tty_;
    int quarters_shown_ = 0;
    std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace tessera::cli
