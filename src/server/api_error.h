// OpenAI-style error responses: {"error": {"message", "type", "param", "code"}} with the HTTP
// status that matches a tessera ErrorKind (Invalid → 400, Busy → 429, ...).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera::server {

struct ApiError {
    int status = 500;
    std::string message;
    std::string type;  // "invalid_request_error", "authentication_error", ...
    std::string code;  // "" → null
};

// The HTTP status for an error of this kind: Invalid / Unsupported / TooLarge → 400,
// NotFound → 404, Busy → 429, everything else → 500.
int http_status_for(ErrorKind kind);
// The OpenAI error type for an HTTP status (400 → "invalid_request_error", 401 →
// "authentication_error", 429 → "rate_limit_error", 5xx → "server_error", ...).
const char* error_type_for(int status);

ApiError api_error(int status, std::string message, std::string code = "");
ApiError api_error_from(const Error& e);

nlohmann::json error_json(const ApiError& e);

}  // namespace tessera::server
