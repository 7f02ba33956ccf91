// JSON <-> Jinja values: context input from nlohmann::json, and Python json.dumps output
// (what transformers' `tojson` filter produces).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/jinja_value.h"

namespace tessera::jinja {

// Object key order is kept (ordered_json); nlohmann::json input has sorted keys. Input nested
// deeper than kMaxJsonDepth levels is an error.
constexpr int kMaxJsonDepth = 512;
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);
// Throws when `j` nests deeper than kMaxJsonDepth (checked without recursion, so hostile input
// cannot overflow the stack before any recursive copy or conversion).
void check_json_depth(const nlohmann::ordered_json& j, const char* what);
void check_json_depth(const nlohmann::json& j, const char* what);

struct JsonDumpOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // json.dumps(indent=...): spaces or the given string
    std::optional<std::string> item_separator, key_separator;
    bool sort_keys = false;
};

// Python json.dumps(v, ...): throws for values JSON cannot hold (undefined, namespaces, functions).
std::string to_json(const Value& v, const JsonDumpOptions& opt);

}  // namespace tessera::jinja
