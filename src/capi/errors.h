// The C ABI's error plumbing: the thread-local last-error message, tessera::ErrorKind →
// tessera_status, and guard(), which runs a call's body so that no exception crosses the ABI.
#pragma once
#include <exception>
#include <new>
#include <string>

#include "core/status.h"
#include "tessera/tessera.h"

namespace tessera::capi {

void clear_last_error();
tessera_status status_of(ErrorKind kind);

// Sets the last error and returns s: `return failure(TESSERA_STATUS_FINISHED, "...")`.
tessera_status failure(tessera_status s, std::string msg);

// Runs fn (returning tessera_status) with the last error cleared first; an exception becomes
// its status and message.
template <typename Fn>
tessera_status guard(Fn&& fn) noexcept {
    try {
        clear_last_error();
        return fn();
    } catch (const Error& e) {
        return failure(status_of(e.kind()), e.what());
    } catch (const std::bad_alloc&) {
        return failure(TESSERA_STATUS_OUT_OF_MEMORY, "out of memory");
    } catch (const std::exception& e) {
        return failure(TESSERA_STATUS_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) {
        return failure(TESSERA_STATUS_INTERNAL, "internal error: unknown exception");
    }
}

}  // namespace tessera::capi
