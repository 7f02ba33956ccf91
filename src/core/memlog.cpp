#include "core/memlog.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace tessera {

MemLog::MemLog() {
    const char* v = std::getenv("TESSERA_MEMLOG");
    enabled_ = v && *v && strcmp(v, "0") != 0;
}

MemLog& MemLog::global() {
    static MemLog m;
    return m;
}

void MemLog::set(const std::string& key, int64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    values_[key] = bytes;
}
void MemLog::add(const std::string& key, int64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    values_[key] += bytes;
}
void MemLog::peak(const std::string& key, int64_t bytes) {
    std::lock_guard<std::mutex> lk(mu_);
    auto& v = values_[key];
    if (bytes > v) v = bytes;
}
int64_t MemLog::get(const std::string& key) const {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = values_.find(key);
    return it == values_.end() ? 0 : it->second;
}
std::map<std::string, int64_t> MemLog::values() const {
    std::lock_guard<std::mutex> lk(mu_);
    return values_;
}

std::string MemLog::format(const std::string& event) const {
    std::string s = fmt::format("[memlog {}]", event);
    for (const auto& [k, v] : values()) s += fmt::format(" {}={}", k, format_bytes(v));
    s += fmt::format(" host_rss={}", format_bytes(host_rss_bytes()));
    return s;
}

void MemLog::snapshot(const std::string& event) const {
    if (enabled_) std::fprintf(stderr, "%s\n", format(event).c_str());
}

std::string format_bytes(int64_t b) {
    const double d = double(b);
    if (b >= (int64_t(1) << 30)) return fmt::format("{:.2f} GiB", d / double(1 << 30));
    if (b >= (1 << 20)) return fmt::format("{:.1f} MiB", d / double(1 << 20));
    if (b >= (1 << 10)) return fmt::format("{:.1f} KiB", d / 1024.0);
    return fmt::format("{} B", b);
}

int64_t host_rss_bytes() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    long pages = 0, rss = 0;
    const int n = std::fscanf(f, "%ld %ld", &pages, &rss);
    std::fclose(f);
    return n == 2 ? int64_t(rss) * sysconf(_SC_PAGESIZE) : 0;
}

}  // namespace tessera
