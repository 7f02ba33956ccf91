// Argument checks of the C ABI's functions: each throws Error(Invalid) naming the function and
// the parameter, which guard() turns into TESSERA_STATUS_INVALID_ARGUMENT.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "core/status.h"
#include "tessera/tessera.h"

namespace tessera::capi {

template <typename T>
T& deref(T* p, const char* fn, const char* name) {
    if (!p) fail(ErrorKind::Invalid, "{}: {} is NULL", fn, name);
    return *p;
}

// A request id: 1 to TESSERA_REQUEST_ID_MAX - 1 bytes.
inline std::string request_name(const char* id, const char* fn) {
    if (!id) fail(ErrorKind::Invalid, "{}: request_id is NULL", fn);
    const size_t n = strnlen(id, TESSERA_REQUEST_ID_MAX);
    if (n == 0) fail(ErrorKind::Invalid, "{}: request_id is empty", fn);
    if (n >= TESSERA_REQUEST_ID_MAX)
        fail(ErrorKind::Invalid, "{}: request_id is longer than {} bytes", fn, TESSERA_REQUEST_ID_MAX - 1);
    return std::string(id, n);
}

// A prompt: n >= 1 tokens (the engine checks their range against the vocabulary).
inline std::span<const int32_t> token_span(const int32_t* tokens, int32_t n, const char* fn) {
    if (!tokens) fail(ErrorKind::Invalid, "{}: tokens is NULL", fn);
    if (n <= 0) fail(ErrorKind::Invalid, "{}: n is {} (a prompt needs at least one token)", fn, n);
    return {tokens, size_t(n)};
}

}  // namespace tessera::capi
