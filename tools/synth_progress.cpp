// The write progress bar of `tessera synth` (see synth_progress.h).
#include "synth_progress.h"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>

namespace tessera::cli {

namespace {
double secs_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::string gb(uint64_t n) { return fmt::format("{:.2f} GB", double(n) / 1e9); }
}  // namespace

SynthProgress::SynthProgress(std::string label, uint64_t total_bytes)
    : label_(std::move(label)), total_(std::max<uint64_t>(total_bytes, 1)), tty_(isatty(fileno(stderr))),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

double SynthProgress::mb_per_s() const {
    const double s = secs_since(start_);
    return s > 0 ? double(done_) / 1e6 / s : 0;
}

void SynthProgress::add(uint64_t bytes) {
    done_ += bytes;
    if (tty_) {
        if (secs_since(last_draw_) >= 0.1 || done_ >= total_) draw(false);
        return;
    }
    const int quarter = int(std::min<uint64_t>(4, done_ * 4 / total_));
    if (quarter > quarters_shown_ && quarter < 4) {
        quarters_shown_ = quarter;
        draw(false);
    }
}

void SynthProgress::draw(bool final_line) {
    last_draw_ = std::chrono::steady_clock::now();
    const double frac = std::min(1.0, double(done_) / double(total_)), rate = mb_per_s();
    const double eta = rate > 0 ? double(total_ - std::min(done_, total_)) / 1e6 / rate : 0;
    const std::string stats = fmt::format("{} / {}  {:.0f} MB/s  ETA {:.0f}s", gb(done_), gb(total_), rate, eta);
    if (!tty_) {
        std::fprintf(stderr, "%s: %3.0f%%  %s\n", label_.c_str(), frac * 100, stats.c_str());
        return;
    }
    constexpr int kWidth = 30;
    const int filled = int(frac * kWidth);
    std::string bar(size_t(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%s [%s] %3.0f%%  %s   %s", label_.c_str(), bar.c_str(), frac * 100, stats.c_str(),
                 final_line ? "\n" : "");
    std::fflush(stderr);
}

void SynthProgress::finish(const std::string& what) {
    if (tty_) draw(true);
    std::fprintf(stderr, "%s: wrote %s: %s in %.1f s (%.0f MB/s)\n", label_.c_str(), what.c_str(), gb(done_).c_str(),
                 secs_since(start_), mb_per_s());
}

}  // namespace tessera::cli
