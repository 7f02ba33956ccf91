// Python operators on Jinja values: arithmetic, `in`, iteration, slicing, %-formatting.
#include <cmath>
#include <cstdio>
#include <optional>

#include "core/status.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    fail(ErrorKind::Invalid, "unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b));
}

// Overflow-checked int64 arithmetic (Python ints are unbounded; tessera reports overflow).
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
    int64_t r = 0;
    TS_CHECK(!op(a, b, &r), "integer overflow in template arithmetic");
    return r;
}
bool add_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_add_overflow(a, b, r); }
bool sub_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_sub_overflow(a, b, r); }
bool mul_ovf(int64_t a, int64_t b, int64_t* r) { return __builtin_mul_overflow(a, b, r); }

Value repeat(const Value& seq, int64_t n, size_t max_bytes) {
    if (n < 0) n = 0;
    if (seq.is_string()) {
        TS_CHECK(n == 0 || seq.str().size() <= max_bytes / static_cast<size_t>(n), "string repetition exceeds the output limit");
        std::string out;
        for (int64_t i = 0; i < n; ++i) out += seq.str();
        return Value(std::move(out));
    }
    TS_CHECK(n == 0 || seq.items().size() <= (max_bytes / 8) / static_cast<size_t>(n), "list repetition too large");
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
    return seq.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

double py_fmod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

// printf-style `fmt % args` (the %s %r %d %i %f %e %g %x %o %c %% conversions).
std::string percent_format(const std::string& fmt, const Value& args) {
    List values = args.kind() == Value::Kind::Tuple ? args.items() : List{args};
    const Dict* mapping = args.is_dict() ? &args.dict() : nullptr;
    size_t next = 0;
    std::string out;
    for (size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out.push_back(fmt[i]);
            continue;
        }
        TS_CHECK(i + 1 < fmt.size(), "incomplete format");
        size_t j = i + 1;
        const Value* named = nullptr;
        if (fmt[j] == '(') {
            size_t close = fmt.find(')', j);
            TS_CHECK(close != std::string::npos && mapping, "format requires a mapping");
            named = mapping->find(std::string_view(fmt).substr(j + 1, close - j - 1));
            TS_CHECK(named, "format key '{}' not found", fmt.substr(j + 1, close - j - 1));
            j = close + 1;
        }
        std::string spec = "%";
        while (j < fmt.size() && std::string_view("-+ #0123456789.").find(fmt[j]) != std::string_view::npos) spec += fmt[j++];
        TS_CHECK(j < fmt.size(), "incomplete format");
        char conv = fmt[j];
        i = j;
        if (conv == '%') {
            out.push_back('%');
            continue;
        }
        Value v;
        if (named) v = *named;
        else {
            TS_CHECK(next < values.size(), "not enough arguments for format string");
            v = values[next++];
        }
        char buf[512];
        switch (conv) {
            case 's':
            case 'r':
            case 'a': {
                std::string s = conv == 's' ? to_str(v) : repr(v);
                if (spec == "%") out += s;
                else {
                    std::snprintf(buf, sizeof buf, (spec + "s").c_str(), s.c_str());
                    out += buf;
                }
                break;
            }
            case 'd':
            case 'i':
            case 'x':
            case 'X':
            case 'o': {
                TS_CHECK(v.is_number(), "%{} format: a number is required, not {}", conv, type_name(v));
                int64_t n = v.is_float() ? static_cast<int64_t>(v.as_float()) : v.as_int();
                std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), static_cast<long long>(n));
                out += buf;
                break;
            }
            case 'f':
            case 'F':
            case 'e':
            case 'E':
            case 'g':
            case 'G': {
                TS_CHECK(v.is_number(), "%{} format: a number is required, not {}", conv, type_name(v));
                std::snprintf(buf, sizeof buf, (spec + conv).c_str(), v.as_float());
                out += buf;
                break;
            }
            case 'c': {
                if (v.is_string()) out += v.str();
                else text::append_utf8(out, static_cast<char32_t>(v.as_int()));
                break;
            }
            default: fail(ErrorKind::Invalid, "unsupported format character '{}'", conv);
        }
    }
    TS_CHECK(mapping || next == values.size() || args.kind() != Value::Kind::Tuple,
             "not all arguments converted during string formatting");
    return out;
}

}  // namespace

List iterate(const Value& v) {
    switch (v.kind()) {
        case Value::Kind::Undefined: return {};
        case Value::Kind::List:
        case Value::Kind::Tuple: return v.items();
        case Value::Kind::Dict: {
            List keys;
            for (const auto& [k, x] : v.dict().items()) keys.push_back(k);
            return keys;
        }
        case Value::Kind::String: {
            List chars;
            for (char32_t c : text::decode(v.str())) {
                std::string s;
                text::append_utf8(s, c);
                chars.emplace_back(std::move(s));
            }
            return chars;
        }
        default: fail(ErrorKind::Invalid, "'{}' object is not iterable", type_name(v));
    }
}

bool contains(const Value& container, const Value& item) {
    switch (container.kind()) {
        case Value::Kind::Undefined: return false;
        case Value::Kind::String:
            if (!item.is_string())
                fail(ErrorKind::Invalid, "'in <string>' requires string as left operand, not {}", type_name(item));
            return container.str().find(item.str()) != std::string::npos;
        case Value::Kind::List:
        case Value::Kind::Tuple:
            for (const Value& v : container.items())
                if (equal(v, item)) return true;
            return false;
        case Value::Kind::Dict: return container.dict().find(item) != nullptr;
        default: fail(ErrorKind::Invalid, "argument of type '{}' is not iterable", type_name(container));
    }
}

Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes) {
    const bool nums = a.is_number() && b.is_number();
    const bool ints = nums && !a.is_float() && !b.is_float();
    if (op == "+") {
        if (ints) return Value(checked(add_ovf, a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() + b.as_float());
        if (a.is_string() && b.is_string()) {
            TS_CHECK(a.str().size() + b.str().size() <= max_bytes, "string exceeds the output limit");
            return Value(a.str() + b.str());
        }
        if (a.is_sequence() && a.kind() == b.kind()) {
            List out = a.items();
            out.insert(out.end(), b.items().begin(), b.items().end());
            return a.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
        }
        unsupported(op, a, b);
    }
    if (op == "-") {
        if (ints) return Value(checked(sub_ovf, a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() - b.as_float());
        unsupported(op, a, b);
    }
    if (op == "*") {
        if (ints) return Value(checked(mul_ovf, a.as_int(), b.as_int()));
        if (nums) return Value(a.as_float() * b.as_float());
        if ((a.is_string() || a.is_sequence()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int(), max_bytes);
        if ((b.is_string() || b.is_sequence()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int(), max_bytes);
        unsupported(op, a, b);
    }
    if (op == "/") {
        if (!nums) unsupported(op, a, b);
        TS_CHECK(b.as_float() != 0.0, "division by zero");
        return Value(a.as_float() / b.as_float());
    }
    if (op == "//") {
        if (!nums) unsupported(op, a, b);
        if (ints) {
            TS_CHECK(b.as_int() != 0, "integer division or modulo by zero");
            int64_t x = a.as_int(), y = b.as_int();
            TS_CHECK(!(x == INT64_MIN && y == -1), "integer overflow in template arithmetic");
            int64_t q = x / y;
            if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
            return Value(q);
        }
        TS_CHECK(b.as_float() != 0.0, "float floor division by zero");
        // Python's float_floor_div.
        double x = a.as_float(), y = b.as_float();
        double mod = std::fmod(x, y), div = (x - mod) / y;
        if (mod != 0 && ((y < 0) != (mod < 0))) div -= 1.0;
        if (div == 0) return Value(std::copysign(0.0, x / y));
        double fd = std::floor(div);
        if (div - fd > 0.5) fd += 1.0;
        return Value(fd);
    }
    if (op == "%") {
        if (a.is_string()) return Value(percent_format(a.str(), b));
        if (!nums) unsupported(op, a, b);
        if (ints) {
            TS_CHECK(b.as_int() != 0, "integer division or modulo by zero");
            int64_t x = a.as_int(), y = b.as_int();
            if (y == -1) return Value(int64_t{0});
            int64_t m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) m += y;
            return Value(m);
        }
        TS_CHECK(b.as_float() != 0.0, "float modulo by zero");
        return Value(py_fmod(a.as_float(), b.as_float()));
    }
    if (op == "**") {
        if (!nums) unsupported(op, a, b);
        if (ints && b.as_int() >= 0) {
            int64_t base = a.as_int(), e = b.as_int(), acc = 1;
            while (e > 0) {
                if (e & 1) acc = checked(mul_ovf, acc, base);
                e >>= 1;
                if (e > 0) base = checked(mul_ovf, base, base);
            }
            return Value(acc);
        }
        TS_CHECK(!(a.as_float() == 0.0 && b.as_float() < 0), "0.0 cannot be raised to a negative power");
        return Value(std::pow(a.as_float(), b.as_float()));
    }
    fail(ErrorKind::Internal, "unknown operator {}", op);
}

Value slice(const Value& v, const Value& start, const Value& stop, const Value& step) {
    auto idx = [](const Value& x, const char* what) -> std::optional<int64_t> {
        if (x.is_none() || x.is_undefined()) return std::nullopt;
        if (!(x.is_int() || x.is_bool())) fail(ErrorKind::Invalid, "slice {} must be an integer or None", what);
        return x.as_int();
    };
    std::optional<int64_t> b = idx(start, "start"), e = idx(stop, "stop"), s = idx(step, "step");
    int64_t st = s.value_or(1);
    TS_CHECK(st != 0, "slice step cannot be zero");
    std::u32string chars;
    int64_t n;
    if (v.is_string()) {
        chars = text::decode(v.str());
        n = static_cast<int64_t>(chars.size());
    } else if (v.is_sequence()) {
        n = static_cast<int64_t>(v.items().size());
    } else {
        fail(ErrorKind::Invalid, "'{}' object is not subscriptable", type_name(v));
    }
    // Python's PySlice_AdjustIndices.
    auto adjust = [&](std::optional<int64_t> x, int64_t def) {
        if (!x) return def;
        int64_t i = *x;
        if (i < 0) {
            i += n;
            if (i < 0) i = st < 0 ? -1 : 0;
        } else if (i >= n) {
            i = st < 0 ? n - 1 : n;
        }
        return i;
    };
    int64_t lo = adjust(b, st < 0 ? n - 1 : 0);
    int64_t hi = adjust(e, st < 0 ? -1 : n);
    std::vector<int64_t> picks;
    if (st > 0)
        for (int64_t i = lo; i < hi; i += st) picks.push_back(i);
    else
        for (int64_t i = lo; i > hi; i += st) picks.push_back(i);
    if (v.is_string()) {
        std::u32string out;
        for (int64_t i : picks) out.push_back(chars[static_cast<size_t>(i)]);
        return Value(text::encode(out));
    }
    List out;
    for (int64_t i : picks) out.push_back(v.items()[static_cast<size_t>(i)]);
    return v.kind() == Value::Kind::Tuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

}  // namespace tessera::jinja
