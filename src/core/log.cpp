#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace tessera {

namespace {
LogLevel level_from_env() {
    const char* v = std::getenv("TESSERA_LOG");
    if (!v) return LogLevel::Info;
    if (!strcmp(v, "debug")) return LogLevel::Debug;
    if (!strcmp(v, "warn")) return LogLevel::Warn;
    if (!strcmp(v, "error")) return LogLevel::Error;
    if (!strcmp(v, "off")) return LogLevel::Off;
    return LogLevel::Info;
}
std::atomic<int> g_level{int(level_from_env())};
std::mutex g_mu;
}  // namespace

LogLevel log_level() { return LogLevel(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { g_level = int(level); }

void log_write(LogLevel level, const std::string& msg) {
    static const char* tags[] = {"debug", "info", "warn", "error"};
    std::lock_guard<std::mutex> lk(g_mu);
    std::fprintf(stderr, "[tessera %s] %s\n", tags[int(level)], msg.c_str());
}

}  // namespace tessera
