// JSON <-> Jinja values: context input from nlohmann::json, and Python json.dumps output
// (what transformers' `tojson` filter produces).
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "tokenizer/jinja_value.h"

namespace tessera::jinja {

// Object key order is kept (ordered_json); nlohmann::json input has sorted keys.
Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);

struct JsonDumpOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // json.dumps(indent=...): spaces or the given string
    std::optional<std::string> item_separator, key_separator;
    bool sort_keys = false;
};

// Python json.dumps(v, ...): throws for values JSON cannot hold (undefined, namespaces, functions).
std::string to_json(const Value& v, const JsonDumpOptions& opt);

}  // namespace tessera::jinja
