// JSON conversion for the Jinja interpreter; to_json mirrors Python's json.dumps byte for byte.
#include "tokenizer/jinja_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/status.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {
namespace {

constexpr int kMaxDepth = kMaxJsonDepth;

template <typename J>
void depth_check(const J& root, const char* what) {
    std::vector<std::pair<const J*, int>> stack{{&root, 0}};
    while (!stack.empty()) {
        auto [j, d] = stack.back();
        stack.pop_back();
        TS_CHECK(d < kMaxDepth, "{}: JSON nested deeper than {} levels", what, kMaxDepth);
        if (j->is_array() || j->is_object())
            for (const auto& e : *j) stack.emplace_back(&e, d + 1);
    }
}

template <typename J>
Value convert(const J& j, int depth) {
    TS_CHECK(depth < kMaxDepth, "JSON input nested deeper than {} levels", kMaxDepth);
    switch (j.type()) {
        case nlohmann::json::value_t::null: return Value::none();
        case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
        case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
        case nlohmann::json::value_t::number_unsigned: {
            uint64_t u = j.template get<uint64_t>();
            if (u <= static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<int64_t>(u));
            return Value(static_cast<double>(u));
        }
        case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
        case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
        case nlohmann::json::value_t::array: {
            List items;
            items.reserve(j.size());
            for (const auto& e : j) items.push_back(convert(e, depth + 1));
            return Value::list(std::move(items));
        }
        case nlohmann::json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it) d.set(Value(it.key()), convert(it.value(), depth + 1));
            return Value::dict(std::move(d));
        }
        default: fail(ErrorKind::Invalid, "unsupported JSON value (binary or discarded)");
    }
}

void dump_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out.push_back('"');
    for (char32_t c : text::decode(s)) {
        switch (c) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        char buf[16];
        if (c < 0x20 || (ensure_ascii && c >= 0x80 && c < 0x10000)) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out += buf;
        } else if (ensure_ascii && c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
            out += buf;
        } else {
            text::append_utf8(out, c);
        }
    }
    out.push_back('"');
}

std::string float_json(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return float_repr(d);
}

std::string key_string(const Value& k) {
    switch (k.kind()) {
        case Value::Kind::String: return k.str();
        case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
        case Value::Kind::None: return "null";
        case Value::Kind::Int: return std::to_string(k.as_int());
        case Value::Kind::Float: return float_json(k.as_float());
        default: fail(ErrorKind::Invalid, "keys must be str, int, float, bool or None, not {}", type_name(k));
    }
}

struct Dumper {
    const JsonDumpOptions& opt;
    std::string item_sep, key_sep;
    std::string out;

    void newline(int level) {
        out.push_back('\n');
        for (int i = 0; i < level; ++i) out += *opt.indent;
    }

    void dump(const Value& v, int level) {
        TS_CHECK(level < kMaxDepth, "tojson: value nested deeper than {} levels", kMaxDepth);
        TS_CHECK(out.size() <= kMaxStringBytes, "tojson: output exceeds {} bytes", kMaxStringBytes);
        charge_work();
        switch (v.kind()) {
            case Value::Kind::None: out += "null"; return;
            case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
            case Value::Kind::Int: out += std::to_string(v.as_int()); return;
            case Value::Kind::Float: out += float_json(v.as_float()); return;
            case Value::Kind::String: dump_string(out, v.str(), opt.ensure_ascii); return;
            case Value::Kind::List:
            case Value::Kind::Tuple: {
                const List& items = v.items();
                if (items.empty()) {
                    out += "[]";
                    return;
                }
                out.push_back('[');
                for (size_t i = 0; i < items.size(); ++i) {
                    if (i) out += item_sep;
                    if (opt.indent) newline(level + 1);
                    dump(items[i], level + 1);
                }
                if (opt.indent) newline(level);
                out.push_back(']');
                return;
            }
            case Value::Kind::Dict: {
                std::vector<const std::pair<Value, Value>*> entries;
                for (const auto& e : v.dict().items()) entries.push_back(&e);
                if (entries.empty()) {
                    out += "{}";
                    return;
                }
                if (opt.sort_keys)
                    std::stable_sort(entries.begin(), entries.end(),
                                     [](auto* a, auto* b) { return compare(a->first, b->first) < 0; });
                out.push_back('{');
                for (size_t i = 0; i < entries.size(); ++i) {
                    if (i) out += item_sep;
                    if (opt.indent) newline(level + 1);
                    dump_string(out, key_string(entries[i]->first), opt.ensure_ascii);
                    out += key_sep;
                    dump(entries[i]->second, level + 1);
                }
                if (opt.indent) newline(level);
                out.push_back('}');
                return;
            }
            default:
                fail(ErrorKind::Invalid, "Object of type {} is not JSON serializable", type_name(v));
        }
    }
};

}  // namespace

void check_json_depth(const nlohmann::ordered_json& j, const char* what) { depth_check(j, what); }
void check_json_depth(const nlohmann::json& j, const char* what) { depth_check(j, what); }

Value from_json(const nlohmann::ordered_json& j) { return convert(j, 0); }
Value from_json(const nlohmann::json& j) { return convert(j, 0); }

std::string to_json(const Value& v, const JsonDumpOptions& opt) {
    Dumper d{opt, opt.item_separator.value_or(opt.indent ? "," : ", "), opt.key_separator.value_or(": "), {}};
    d.dump(v, 0);
    return std::move(d.out);
}

}  // namespace tessera::jinja
