// Thread-local last error and the status names of the C ABI (errors.h).
#include "capi/errors.h"

#include <utility>

namespace tessera::capi {
namespace {
thread_local std::string g_last_error;
thread_local tessera_status g_last_status = TESSERA_STATUS_OK;
}

void clear_last_error() {
    g_last_error.clear();
    g_last_status = TESSERA_STATUS_OK;
}

tessera_status failure(tessera_status s, std::string msg) {
    g_last_error = std::move(msg);
    g_last_status = s;
    return s;
}

tessera_status status_of(ErrorKind kind) {
    switch (kind) {
    case ErrorKind::Invalid: return TESSERA_STATUS_INVALID_ARGUMENT;
    case ErrorKind::NotFound: return TESSERA_STATUS_NOT_FOUND;
    case ErrorKind::Io: return TESSERA_STATUS_IO;
    case ErrorKind::Unsupported: return TESSERA_STATUS_UNSUPPORTED;
    case ErrorKind::OutOfMemory: return TESSERA_STATUS_OUT_OF_MEMORY;
    case ErrorKind::Busy: return TESSERA_STATUS_BUSY;
    case ErrorKind::TooLarge: return TESSERA_STATUS_TOO_LARGE;
    case ErrorKind::Internal: return TESSERA_STATUS_INTERNAL;
    }
    return TESSERA_STATUS_INTERNAL;
}

}  // namespace tessera::capi

extern "C" {

const char* tessera_last_error(void) { return tessera::capi::g_last_error.c_str(); }

tessera_status tessera_last_status(void) { return tessera::capi::g_last_status; }

const char* tessera_status_name(tessera_status s) {
    switch (s) {
    case TESSERA_STATUS_OK: return "OK";
    case TESSERA_STATUS_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case TESSERA_STATUS_NOT_FOUND: return "NOT_FOUND";
    case TESSERA_STATUS_IO: return "IO";
    case TESSERA_STATUS_UNSUPPORTED: return "UNSUPPORTED";
    case TESSERA_STATUS_OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case TESSERA_STATUS_BUSY: return "BUSY";
    case TESSERA_STATUS_TOO_LARGE: return "TOO_LARGE";
    case TESSERA_STATUS_FINISHED: return "FINISHED";
    case TESSERA_STATUS_INTERNAL: return "INTERNAL";
    }
    return "UNKNOWN_STATUS";
}

const char* tessera_finish_reason_name(tessera_finish_reason r) {
    switch (r) {
    case TESSERA_FINISH_REASON_NONE: return "";
    case TESSERA_FINISH_REASON_STOP: return "stop";
    case TESSERA_FINISH_REASON_LENGTH: return "length";
    case TESSERA_FINISH_REASON_CANCELLED: return "cancelled";
    case TESSERA_FINISH_REASON_ERROR: return "error";
    }
    return "unknown";
}

const char* tessera_version(void) { return "0.1.0"; }

}  // extern "C"
