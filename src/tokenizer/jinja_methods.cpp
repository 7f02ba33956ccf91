// Python methods callable from templates: str (strip, split, startswith, format, ...),
// dict (items, keys, values, get) and list (index, count). Mutating methods raise, as in
// jinja2's ImmutableSandboxedEnvironment that transformers uses.
#include <cmath>
#include <cstdio>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& a);

const std::string* opt_str(const CallArgs& a, size_t pos, const char* name) {
    const Value* v = arg(a, pos, name);
    if (!v || v->is_none()) return nullptr;
    TS_CHECK(v->is_string(), "argument must be str or None, not {}", type_name(*v));
    return &v->str();
}

const std::string& req_str(const CallArgs& a, size_t pos, const char* what) {
    const Value* v = arg(a, pos, nullptr);
    TS_CHECK(v && v->is_string(), "{}: expected a string argument", what);
    return v->str();
}

Value str_list(const std::vector<std::string>& parts) {
    List out;
    for (const auto& p : parts) out.emplace_back(p);
    return Value::list(std::move(out));
}

// startswith/endswith: a str or a tuple of str, optional start/end code-point bounds.
bool affix_match(const Value& self, CallArgs& a, bool prefix) {
    const Value* what = arg(a, 0, nullptr);
    TS_CHECK(what, "{}() takes at least 1 argument", prefix ? "startswith" : "endswith");
    std::string s = self.str();
    if (arg(a, 1, nullptr) || arg(a, 2, nullptr)) {
        Value sub = slice(self, arg(a, 1, nullptr) ? *arg(a, 1, nullptr) : Value::none(),
                          arg(a, 2, nullptr) ? *arg(a, 2, nullptr) : Value::none(), Value::none());
        s = sub.str();
    }
    auto one = [&](const Value& p) {
        TS_CHECK(p.is_string(), "{} first arg must be str or a tuple of str, not {}", prefix ? "startswith" : "endswith",
                 type_name(p));
        const std::string& x = p.str();
        if (x.size() > s.size()) return false;
        return prefix ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
    };
    if (what->is_sequence()) {
        for (const Value& p : what->items())
            if (one(p)) return true;
        return false;
    }
    return one(*what);
}

std::string pad(const std::string& s, int64_t width, char32_t fill, char align) {
    int64_t len = static_cast<int64_t>(text::length(s));
    if (width <= len) return s;
    int64_t total = width - len, left = 0;
    if (align == '>') left = total;
    else if (align == '^') left = total / 2;
    else if (align == 'c') left = total / 2 + (total & width & 1);  // CPython str.center
    std::string f;
    text::append_utf8(f, fill);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += f;
    out += s;
    for (int64_t i = left; i < total; ++i) out += f;
    return out;
}

std::string group_digits(const std::string& digits, char sep) {
    std::string out;
    int n = static_cast<int>(digits.size());
    for (int i = 0; i < n; ++i) {
        out.push_back(digits[static_cast<size_t>(i)]);
        if (sep && (n - 1 - i) % 3 == 0 && i != n - 1) out.push_back(sep);
    }
    return out;
}

// Python's format-spec mini-language: [[fill]align][sign][#][0][width][,_][.precision][type]
std::string format_value(const Value& v, const std::string& spec) {
    if (spec.empty()) return to_str(v);
    std::u32string u = text::decode(spec);
    size_t i = 0;
    char32_t fill = ' ';
    char align = 0;
    auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
    if (u.size() >= 2 && is_align(u[1])) {
        fill = u[0];
        align = static_cast<char>(u[1]);
        i = 2;
    } else if (!u.empty() && is_align(u[0])) {
        align = static_cast<char>(u[0]);
        i = 1;
    }
    char sign = '-';
    if (i < u.size() && (u[i] == '+' || u[i] == '-' || u[i] == ' ')) sign = static_cast<char>(u[i++]);
    if (i < u.size() && u[i] == '#') ++i;  // alternate form: accepted, not applied
    if (i < u.size() && u[i] == '0') {
        if (!align) fill = '0', align = '=';
        ++i;
    }
    int64_t width = 0;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') width = width * 10 + (u[i++] - '0');
    char group = 0;
    if (i < u.size() && (u[i] == ',' || u[i] == '_')) group = static_cast<char>(u[i++]);
    int precision = -1;
    if (i < u.size() && u[i] == '.') {
        ++i;
        precision = 0;
        while (i < u.size() && u[i] >= '0' && u[i] <= '9') precision = precision * 10 + static_cast<int>(u[i++] - '0');
    }
    char type = i < u.size() ? static_cast<char>(u[i++]) : 0;
    TS_CHECK(i == u.size(), "invalid format specifier '{}'", spec);
    if (v.is_string() || (!v.is_number() && (type == 0 || type == 's'))) {
        std::string s = to_str(v);
        if (precision >= 0) s = slice(Value(s), Value::none(), Value(int64_t{precision}), Value::none()).str();
        return pad(s, width, fill, align ? (align == '=' ? '<' : align) : '<');
    }
    TS_CHECK(v.is_number(), "unsupported format string passed to {}.__format__", type_name(v));
    bool neg = false;
    std::string body;
    char buf[512];
    if (type == 0 && !v.is_float() && precision < 0) type = 'd';
    if (type == 'd' || type == 'n' || type == 'x' || type == 'X' || type == 'o' || type == 'b' || type == 'c') {
        TS_CHECK(!v.is_float(), "unknown format code '{}' for object of type 'float'", type);
        int64_t n = v.as_int();
        neg = n < 0;
        uint64_t m = neg ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
        if (type == 'c') return pad(text::encode(std::u32string(1, static_cast<char32_t>(n))), width, fill, align ? align : '<');
        if (type == 'b') {
            do {
                body.insert(body.begin(), static_cast<char>('0' + (m & 1)));
                m >>= 1;
            } while (m);
        } else {
            std::snprintf(buf, sizeof buf, type == 'x' ? "%llx" : type == 'X' ? "%llX" : type == 'o' ? "%llo" : "%llu",
                          static_cast<unsigned long long>(m));
            body = buf;
        }
        if (group && (type == 'd' || type == 'n')) body = group_digits(body, group);
    } else {
        double d = v.as_float();
        neg = std::signbit(d);
        d = std::fabs(d);
        if (type == 0) {
            if (precision < 0) body = float_repr(d);
            else {
                std::snprintf(buf, sizeof buf, "%.*g", precision == 0 ? 1 : precision, d);
                body = buf;
            }
        } else if (type == '%') {
            std::snprintf(buf, sizeof buf, "%.*f", precision < 0 ? 6 : precision, d * 100);
            body = std::string(buf) + "%";
        } else {
            TS_CHECK(std::string_view("fFeEgG").find(type) != std::string_view::npos, "unknown format code '{}'", type);
            char f[8] = {'%', '.', '*', type, 0};
            std::snprintf(buf, sizeof buf, f, precision < 0 ? 6 : precision, d);
            body = buf;
        }
        if (group) {
            size_t dot = body.find_first_not_of("0123456789");
            body = group_digits(body.substr(0, dot), group) + (dot == std::string::npos ? "" : body.substr(dot));
        }
    }
    std::string sgn = neg ? "-" : sign == '+' ? "+" : sign == ' ' ? " " : "";
    if (align == '=') {
        int64_t inner = width - static_cast<int64_t>(sgn.size());
        return sgn + pad(body, inner, fill, '>');
    }
    return pad(sgn + body, width, fill, align ? align : '>');
}

// str.format: {} / {0} / {name}, with !r / !s conversions and format specs.
std::string str_format(Interpreter& in, const std::string& fmt, CallArgs& a) {
    std::string out;
    size_t auto_idx = 0;
    for (size_t i = 0; i < fmt.size(); ++i) {
        char c = fmt[i];
        if (c == '}') {
            TS_CHECK(i + 1 < fmt.size() && fmt[i + 1] == '}', "single '}}' encountered in format string");
            out.push_back('}');
            ++i;
            continue;
        }
        if (c != '{') {
            out.push_back(c);
            continue;
        }
        if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
            out.push_back('{');
            ++i;
            continue;
        }
        size_t close = fmt.find('}', i);
        TS_CHECK(close != std::string::npos, "single '{{' encountered in format string");
        std::string field = fmt.substr(i + 1, close - i - 1);
        i = close;
        std::string spec, conv;
        if (size_t colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field = field.substr(0, colon);
        }
        if (size_t bang = field.find('!'); bang != std::string::npos) {
            conv = field.substr(bang + 1);
            field = field.substr(0, bang);
        }
        std::string name = field.substr(0, field.find_first_of(".["));
        std::string rest = field.substr(name.size());
        Value v;
        if (name.empty()) {
            TS_CHECK(auto_idx < a.args.size(), "Replacement index {} out of range for positional args tuple", auto_idx);
            v = a.args[auto_idx++];
        } else if (name.find_first_not_of("0123456789") == std::string::npos) {
            size_t k = std::stoul(name);
            TS_CHECK(k < a.args.size(), "Replacement index {} out of range for positional args tuple", k);
            v = a.args[k];
        } else {
            const Value* kv = arg(a, SIZE_MAX, name.c_str());
            TS_CHECK(kv, "format: no argument named '{}'", name);
            v = *kv;
        }
        while (!rest.empty()) {  // .attr and [key] lookups
            if (rest[0] == '.') {
                size_t e = rest.find_first_of(".[", 1);
                v = in.getattr(v, rest.substr(1, e == std::string::npos ? std::string::npos : e - 1));
                rest = e == std::string::npos ? "" : rest.substr(e);
            } else {
                size_t e = rest.find(']');
                TS_CHECK(e != std::string::npos, "format: missing ']'");
                std::string key = rest.substr(1, e - 1);
                bool num = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
                v = in.getitem(v, num ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
                rest = rest.substr(e + 1);
            }
        }
        if (conv == "r" || conv == "a") v = Value(repr(v));
        else if (conv == "s") v = Value(to_str(v));
        out += format_value(v, spec);
    }
    return out;
}

Value str_method(Interpreter& in, const Value& self, const std::string& name, CallArgs& a) {
    const std::string& s = self.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip")
        return Value(text::strip(s, opt_str(a, 0, "chars"), name != "rstrip", name != "lstrip"));
    if (name == "split") return str_list(text::split(s, opt_str(a, 0, "sep"), int_arg(a, 1, "maxsplit", -1)));
    if (name == "rsplit") return str_list(text::rsplit(s, opt_str(a, 0, "sep"), int_arg(a, 1, "maxsplit", -1)));
    if (name == "splitlines") return str_list(text::splitlines(s, bool_arg(a, 0, "keepends", false)));
    if (name == "startswith") return Value(affix_match(self, a, true));
    if (name == "endswith") return Value(affix_match(self, a, false));
    if (name == "replace") return Value(text::replace(s, req_str(a, 0, "replace"), req_str(a, 1, "replace"), int_arg(a, 2, "count", -1)));
    if (name == "upper") return Value(text::upper(s));
    if (name == "lower" || name == "casefold") return Value(text::lower(s));
    if (name == "title") return Value(text::title(s));
    if (name == "capitalize") return Value(text::capitalize(s));
    if (name == "swapcase") return Value(text::swapcase(s));
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
        int64_t r = text::find(s, req_str(a, 0, name.c_str()), name[0] == 'r');
        if (r < 0 && (name == "index" || name == "rindex")) fail(ErrorKind::Invalid, "substring not found");
        return Value(r);
    }
    if (name == "count") return Value(text::count(s, req_str(a, 0, "count")));
    if (name == "join") {
        std::string out;
        bool first = true;
        for (const Value& v : iterate(*arg(a, 0, nullptr))) {
            TS_CHECK(v.is_string(), "sequence item: expected str instance, {} found", type_name(v));
            if (!first) out += s;
            first = false;
            out += v.str();
            in.check_size(out.size());
        }
        return Value(out);
    }
    if (name == "format") return Value(str_format(in, s, a));
    if (name == "center" || name == "ljust" || name == "rjust") {
        std::string f = str_arg(a, 1, "fillchar", " ");
        char32_t fill = f.empty() ? U' ' : text::decode(f)[0];
        int64_t w = int_arg(a, 0, "width", 0);
        in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
        return Value(pad(s, w, fill, name == "center" ? 'c' : name == "ljust" ? '<' : '>'));
    }
    if (name == "zfill") {
        int64_t w = int_arg(a, 0, "width", 0);
        in.check_size(static_cast<size_t>(std::max<int64_t>(w, 0)));
        bool sgn = !s.empty() && (s[0] == '-' || s[0] == '+');
        std::string body = sgn ? s.substr(1) : s;
        int64_t len = static_cast<int64_t>(text::length(s));
        if (w <= len) return self;
        return Value((sgn ? s.substr(0, 1) : "") + std::string(static_cast<size_t>(w - len), '0') + body);
    }
    if (name == "partition" || name == "rpartition") {
        const std::string& sep = req_str(a, 0, name.c_str());
        TS_CHECK(!sep.empty(), "empty separator");
        size_t f = name == "partition" ? s.find(sep) : s.rfind(sep);
        if (f == std::string::npos)
            return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")}) : Value::tuple({Value(""), Value(""), Value(s)});
        return Value::tuple({Value(s.substr(0, f)), Value(sep), Value(s.substr(f + sep.size()))});
    }
    if (name == "removeprefix") {
        const std::string& p = req_str(a, 0, "removeprefix");
        return Value(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
    }
    if (name == "removesuffix") {
        const std::string& p = req_str(a, 0, "removesuffix");
        bool has = !p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
        return Value(has ? s.substr(0, s.size() - p.size()) : s);
    }
    std::u32string u = text::decode(s);
    auto all = [&](auto pred) {
        if (u.empty()) return false;
        for (char32_t c : u)
            if (!pred(c)) return false;
        return true;
    };
    if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return Value(all(text::is_digit));
    if (name == "isalpha") return Value(all(text::is_alpha));
    if (name == "isalnum") return Value(all([](char32_t c) { return text::is_alpha(c) || text::is_digit(c); }));
    if (name == "isspace") return Value(all(text::is_space));
    if (name == "isupper" || name == "islower") {
        bool any_cased = false, ok = true;
        for (char32_t c : u) {
            if (text::is_cased_upper(c)) any_cased = true, ok = ok && name == "isupper";
            else if (text::is_cased_lower(c)) any_cased = true, ok = ok && name == "islower";
        }
        return Value(any_cased && ok);
    }
    fail(ErrorKind::Internal, "str method {} not dispatched", name);
}

bool is_str_method(const std::string& n) {
    static const char* kNames[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                   "endswith", "replace", "upper", "lower", "casefold", "title", "capitalize",
                                   "swapcase", "find", "rfind", "index", "rindex", "count", "join", "format",
                                   "center", "ljust", "rjust", "zfill", "partition", "rpartition", "removeprefix",
                                   "removesuffix", "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum",
                                   "isspace", "isupper", "islower"};
    for (const char* k : kNames)
        if (n == k) return true;
    return false;
}

Value unsafe(const Value& self, const std::string& name) {
    std::string type = type_name(self);
    return Value::function(name, [type, name](Interpreter&, CallArgs&) -> Value {
        fail(ErrorKind::Invalid, "access to attribute '{}' of '{}' object is unsafe", name, type);
    });
}

}  // namespace

Value bound_method(const Value& self, const std::string& name) {
    switch (self.kind()) {
        case Value::Kind::String:
            if (!is_str_method(name)) break;
            return Value::function(name, [self, name](Interpreter& in, CallArgs& a) { return str_method(in, self, name, a); });
        case Value::Kind::Dict:
            if (name == "items" || name == "keys" || name == "values") {
                return Value::function(name, [self, name](Interpreter&, CallArgs&) {
                    List out;
                    for (const auto& [k, v] : self.dict().items())
                        out.push_back(name == "items" ? Value::tuple({k, v}) : name == "keys" ? k : v);
                    return Value::list(std::move(out));
                });
            }
            if (name == "get") {
                return Value::function(name, [self](Interpreter&, CallArgs& a) {
                    const Value* key = arg(a, 0, nullptr);
                    TS_CHECK(key, "get expected at least 1 argument");
                    if (const Value* v = self.dict().find(*key)) return *v;
                    const Value* def = arg(a, 1, nullptr);
                    return def ? *def : Value::none();
                });
            }
            if (name == "copy") return Value::function(name, [self](Interpreter&, CallArgs&) { return self; });
            if (name == "pop" || name == "update" || name == "setdefault" || name == "clear" || name == "popitem")
                return unsafe(self, name);
            break;
        case Value::Kind::List:
        case Value::Kind::Tuple:
            if (name == "index" || name == "count") {
                return Value::function(name, [self, name](Interpreter&, CallArgs& a) {
                    const Value* x = arg(a, 0, nullptr);
                    TS_CHECK(x, "{} expected 1 argument", name);
                    int64_t n = 0, i = 0;
                    for (const Value& v : self.items()) {
                        if (equal(v, *x)) {
                            if (name == "index") return Value(i);
                            ++n;
                        }
                        ++i;
                    }
                    if (name == "index") fail(ErrorKind::Invalid, "{} is not in list", repr(*x));
                    return Value(n);
                });
            }
            if (name == "copy" && self.kind() == Value::Kind::List)
                return Value::function(name, [self](Interpreter&, CallArgs&) { return Value::list(self.items()); });
            if (self.kind() == Value::Kind::List &&
                (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
                 name == "reverse" || name == "sort" || name == "clear"))
                return unsafe(self, name);
            break;
        default: break;
    }
    return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(self), name));
}

}  // namespace tessera::jinja
