// Errors with context. Inside tessera errors are exceptions of one type (tessera::Error);
// the C ABI and the CLI turn them into status codes and one clear line.
#pragma once
#include <fmt/format.h>
#include <stdexcept>
#include <string>

namespace tessera {

// Busy: a bounded queue is full (the server answers 429); TooLarge: the input can never fit
// (a prompt longer than the context or than the cache pools hold; the server answers 400/413).
enum class ErrorKind { Invalid, NotFound, Io, Unsupported, OutOfMemory, Busy, TooLarge, Internal };

class Error : public std::runtime_error {
public:
    Error(ErrorKind kind, std::string msg) : std::runtime_error(std::move(msg)), kind_(kind) {}
    ErrorKind kind() const { return kind_; }
    // Returns a copy whose message is prefixed with `ctx: `.
    Error with_context(const std::string& ctx) const { return Error(kind_, ctx + ": " + what()); }
private:
    ErrorKind kind_;
};

template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> f, Args&&... args) {
    throw Error(kind, fmt::format(f, std::forward<Args>(args)...));
}

// Runs fn(); any Error escaping it gets `ctx` prepended (e.g. the file or tensor being read).
template <typename Fn>
auto with_context(const std::string& ctx, Fn&& fn) -> decltype(fn()) {
    try {
        return fn();
    } catch (const Error& e) {
        throw e.with_context(ctx);
    }
}

}  // namespace tessera

// TS_CHECK(cond, "tensor {}: expected {} got {}", name, a, b) — throws Error(Invalid).
#define TS_CHECK(cond, ...)                                                  \
    do {                                                                     \
        if (!(cond)) ::tessera::fail(::tessera::ErrorKind::Invalid, __VA_ARGS__); \
    } while (0)

// Internal invariant: a failure is a bug in tessera, not bad input.
#define TS_ASSERT(cond)                                                              \
    do {                                                                             \
        if (!(cond))                                                                 \
            ::tessera::fail(::tessera::ErrorKind::Internal, "internal error: {} ({}:{})", \
                            #cond, __FILE__, __LINE__);                              \
    } while (0)
