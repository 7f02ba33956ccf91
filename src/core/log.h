// Minimal leveled logging to stderr. TESSERA_LOG=debug|info|warn|error (default info).
#pragma once
#include <fmt/format.h>

namespace tessera {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3, Off = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_write(LogLevel level, const std::string& msg);

template <typename... Args>
void log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
    if (level >= log_level()) log_write(level, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessera

#define TS_LOG_DEBUG(...) ::tessera::log(::tessera::LogLevel::Debug, __VA_ARGS__)
#define TS_LOG_INFO(...) ::tessera::log(::tessera::LogLevel::Info, __VA_ARGS__)
#define TS_LOG_WARN(...) ::tessera::log(::tessera::LogLevel::Warn, __VA_ARGS__)
#define TS_LOG_ERROR(...) ::tessera::log(::tessera::LogLevel::Error, __VA_ARGS__)
