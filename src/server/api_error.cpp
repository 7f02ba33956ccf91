// OpenAI-style error bodies and the ErrorKind → HTTP status mapping.
#include "server/api_error.h"

namespace tessera::server {

int http_status_for(ErrorKind kind) {
    switch (kind) {
        case ErrorKind::Invalid:
        case ErrorKind::Unsupported:
        case ErrorKind::TooLarge: return 400;
        case ErrorKind::NotFound: return 404;
        case ErrorKind::Busy: return 429;
        default: return 500;
    }
}

const char* error_type_for(int status) {
    switch (status) {
        case 400:
        case 404:
        case 413: return "invalid_request_error";
        case 401: return "authentication_error";
        case 429: return "rate_limit_error";
        case 503: return "service_unavailable";
        case 504: return "timeout_error";
        default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

ApiError api_error(int status, std::string message, std::string code) {
    return ApiError{status, std::move(message), error_type_for(status), std::move(code)};
}

ApiError api_error_from(const Error& e) {
    const int status = http_status_for(e.kind());
    std::string code;
    if (e.kind() == ErrorKind::Busy) code = "queue_full";
    if (e.kind() == ErrorKind::TooLarge) code = "context_length_exceeded";
    if (e.kind() == ErrorKind::NotFound) code = "model_not_found";
    return api_error(status, e.what(), code);
}

nlohmann::json error_json(const ApiError& e) {
    nlohmann::json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr},
                          {"code", e.code.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.code)}};
    return {{"error", err}};
}

}  // namespace tessera::server
