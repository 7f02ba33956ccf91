// Python semantics of Jinja values: str/repr, truthiness, ==, ordering.
#include "tokenizer/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/status.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {

const Value* Dict::find(const Value& key) const {
    for (const auto& [k, v] : items_)
        if (equal(k, key)) return &v;
    return nullptr;
}

const Value* Dict::find(std::string_view key) const {
    for (const auto& [k, v] : items_)
        if (k.is_string() && k.str() == key) return &v;
    return nullptr;
}

void Dict::set(const Value& key, Value v) {
    for (auto& [k, old] : items_)
        if (equal(k, key)) {
            old = std::move(v);
            return;
        }
    items_.emplace_back(key, std::move(v));
}

namespace {
thread_local WorkBudget* t_budget = nullptr;
}

void set_work_budget(WorkBudget* b) { t_budget = b; }

void charge_work() {
    if (t_budget && t_budget->limit && ++t_budget->used > t_budget->limit)
        fail(ErrorKind::Invalid, "template exceeded {} evaluation steps (runaway loop?)", t_budget->limit);
}

void Value::set_nesting(const List& items) {
    int d = 0;
    for (const Value& v : items) {
        d = std::max(d, int{v.depth_});
        has_ns_ = has_ns_ || v.has_ns_;
    }
    TS_CHECK(d + 1 <= kMaxValueDepth, "value nested deeper than {} levels", kMaxValueDepth);
    depth_ = static_cast<uint16_t>(d + 1);
}

void Value::set_nesting(const Dict& dict) {
    int d = 0;
    for (const auto& [k, v] : dict.items()) {
        d = std::max(d, int{v.depth_});
        has_ns_ = has_ns_ || v.has_ns_;
    }
    TS_CHECK(d + 1 <= kMaxValueDepth, "value nested deeper than {} levels", kMaxValueDepth);
    depth_ = static_cast<uint16_t>(d + 1);
}

Value Value::undefined(std::string hint) {
    Value v;
    v.data_ = std::move(hint);
    return v;
}
Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}
Value Value::list(List items) {
    Value v;
    v.kind_ = Kind::List;
    v.set_nesting(items);
    v.data_ = std::make_shared<List>(std::move(items));
    return v;
}
Value Value::tuple(List items) {
    Value v = list(std::move(items));
    v.kind_ = Kind::Tuple;
    return v;
}
Value Value::dict(Dict d) {
    Value v;
    v.kind_ = Kind::Dict;
    v.set_nesting(d);
    v.data_ = std::make_shared<Dict>(std::move(d));
    return v;
}
Value Value::ns(Dict d) {
    Value v = dict(std::move(d));
    v.kind_ = Kind::Namespace;
    v.has_ns_ = true;
    return v;
}
Value Value::function(std::string name, NativeFn fn) {
    Value v;
    v.kind_ = Kind::Function;
    v.data_ = std::make_shared<Function>(Function{std::move(name), std::move(fn)});
    return v;
}

int64_t Value::as_int() const {
    if (kind_ == Kind::Bool) return get<bool>("an integer") ? 1 : 0;
    return get<int64_t>("an integer");
}
double Value::as_float() const {
    if (kind_ == Kind::Float) return get<double>("a number");
    if (kind_ == Kind::Int || kind_ == Kind::Bool) return static_cast<double>(as_int());
    wrong_kind("a number");
}
const std::string& Value::undefined_hint() const {
    static const std::string none;
    const std::string* s = std::get_if<std::string>(&data_);
    return s ? *s : none;
}
void Value::wrong_kind(const char* expected) const {
    if (kind_ == Kind::Undefined) fail_undefined(*this);
    fail(ErrorKind::Invalid, "expected {}, got {}", expected, type_name(*this));
}

void fail_undefined(const Value& v) {
    const std::string& hint = v.is_undefined() ? v.undefined_hint() : std::string();
    fail(ErrorKind::Invalid, "{}", hint.empty() ? std::string("value is undefined") : hint);
}

bool truthy(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None: return false;
        case Value::Kind::Bool: return v.as_bool();
        case Value::Kind::Int: return v.as_int() != 0;
        case Value::Kind::Float: return v.as_float() != 0.0;
        case Value::Kind::String: return !v.str().empty();
        case Value::Kind::List:
        case Value::Kind::Tuple: return !v.items().empty();
        case Value::Kind::Dict: return v.dict().size() > 0;
        case Value::Kind::Namespace:
        case Value::Kind::Function: return true;
    }
    return false;
}

std::string float_repr(double d) {
    if (std::isnan(d)) return "nan";
    if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
    if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
    // Shortest round-trip digits, then Python's layout: fixed for 1e-4 <= |d| < 1e16.
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
    std::string sci(buf, r.ptr);
    bool neg = sci[0] == '-';
    if (neg) sci.erase(0, 1);
    size_t epos = sci.find('e');
    int exp = std::stoi(sci.substr(epos + 1));
    std::string digits;
    for (size_t i = 0; i < epos; ++i)
        if (sci[i] != '.') digits.push_back(sci[i]);
    std::string out = neg ? "-" : "";
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
        } else if (static_cast<int>(digits.size()) <= exp + 1) {
            out.append(digits).append(static_cast<size_t>(exp + 1) - digits.size(), '0').append(".0");
        } else {
            out.append(digits, 0, static_cast<size_t>(exp + 1)).append(".").append(digits, static_cast<size_t>(exp + 1));
        }
        return out;
    }
    out += digits.substr(0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    return out + e;
}

std::string repr_string(std::string_view s) {
    bool has_single = s.find('\'') != std::string_view::npos;
    bool has_double = s.find('"') != std::string_view::npos;
    char q = (has_single && !has_double) ? '"' : '\'';
    std::string out(1, q);
    for (char32_t c : text::decode(s)) {
        if (c == static_cast<char32_t>(q) || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c == '\t') {
            out += "\\t";
        } else if (!text::is_printable(c)) {
            char buf[16];
            if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
            else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
            out += buf;
        } else {
            text::append_utf8(out, c);
        }
    }
    out.push_back(q);
    return out;
}

std::string repr(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::String: return repr_string(v.str());
        case Value::Kind::Undefined: return "Undefined";
        default: return to_str(v);
    }
}

std::string to_str(const Value& v) {
    charge_work();
    switch (v.kind()) {
        case Value::Kind::Undefined: return "";
        case Value::Kind::None: return "None";
        case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
        case Value::Kind::Int: return std::to_string(v.as_int());
        case Value::Kind::Float: return float_repr(v.as_float());
        case Value::Kind::String: return v.str();
        case Value::Kind::List:
        case Value::Kind::Tuple: {
            bool tup = v.kind() == Value::Kind::Tuple;
            std::string out = tup ? "(" : "[";
            const List& items = v.items();
            for (size_t i = 0; i < items.size(); ++i) {
                if (i) out += ", ";
                out += repr(items[i]);
                TS_CHECK(out.size() <= kMaxStringBytes, "string exceeds {} bytes", kMaxStringBytes);
            }
            if (tup && items.size() == 1) out += ",";
            return out + (tup ? ")" : "]");
        }
        case Value::Kind::Dict:
        case Value::Kind::Namespace: {
            std::string out = "{";
            bool first = true;
            for (const auto& [k, val] : v.dict().items()) {
                if (!first) out += ", ";
                first = false;
                out += repr(k) + ": " + repr(val);
                TS_CHECK(out.size() <= kMaxStringBytes, "string exceeds {} bytes", kMaxStringBytes);
            }
            out += "}";
            return v.is_namespace() ? "<Namespace " + out + ">" : out;
        }
        case Value::Kind::Function: return "<function " + v.fn().name + ">";
    }
    return "";
}

std::string type_name(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined: return "Undefined";
        case Value::Kind::None: return "NoneType";
        case Value::Kind::Bool: return "bool";
        case Value::Kind::Int: return "int";
        case Value::Kind::Float: return "float";
        case Value::Kind::String: return "str";
        case Value::Kind::List: return "list";
        case Value::Kind::Tuple: return "tuple";
        case Value::Kind::Dict: return "dict";
        case Value::Kind::Namespace: return "Namespace";
        case Value::Kind::Function: return "function";
    }
    return "?";
}

bool equal(const Value& a, const Value& b) {
    charge_work();
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
        return a.as_int() == b.as_int();
    }
    if (a.is_sequence() && b.is_sequence()) {
        if (a.kind() != b.kind()) return false;
        const List &x = a.items(), &y = b.items();
        if (&x == &y) return true;  // same object (Python compares identity first too)
        if (x.size() != y.size()) return false;
        for (size_t i = 0; i < x.size(); ++i)
            if (!equal(x[i], y[i])) return false;
        return true;
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Value::Kind::Undefined:
        case Value::Kind::None: return true;
        case Value::Kind::String: return a.str() == b.str();
        case Value::Kind::Dict: {
            if (a.dict().size() != b.dict().size()) return false;
            for (const auto& [k, v] : a.dict().items()) {
                const Value* o = b.dict().find(k);
                if (!o || !equal(v, *o)) return false;
            }
            return true;
        }
        case Value::Kind::Namespace: return &a.dict() == &b.dict();
        case Value::Kind::Function: return &a.fn() == &b.fn();
        default: return false;
    }
}

int compare(const Value& a, const Value& b) {
    charge_work();
    if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
            double x = a.as_float(), y = b.as_float();
            return x < y ? -1 : x > y ? 1 : 0;
        }
        int64_t x = a.as_int(), y = b.as_int();
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) {
        int c = a.str().compare(b.str());  // UTF-8 byte order is code-point order
        return c < 0 ? -1 : c > 0 ? 1 : 0;
    }
    if (a.is_sequence() && b.is_sequence() && a.kind() == b.kind()) {
        const List &x = a.items(), &y = b.items();
        for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equal(x[i], y[i])) continue;
            return compare(x[i], y[i]);
        }
        return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
    }
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    fail(ErrorKind::Invalid, "'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b));
}

}  // namespace tessera::jinja
