// Global functions of transformers' chat-template environment (range, dict, namespace,
// raise_exception, strftime_now, joiner) and call-argument helpers.
#include <ctime>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"

namespace tessera::jinja {

const Value* arg(const CallArgs& a, size_t pos, const char* name) {
    if (pos < a.args.size()) return &a.args[pos];
    if (name)
        for (const auto& [k, v] : a.kwargs)
            if (k == name) return &v;
    return nullptr;
}

int64_t int_arg(const CallArgs& a, size_t pos, const char* name, int64_t def) {
    const Value* v = arg(a, pos, name);
    if (!v || v->is_none()) return def;
    TS_CHECK(v->is_int() || v->is_bool(), "argument '{}' must be an integer, got {}", name ? name : "?", type_name(*v));
    return v->as_int();
}

bool bool_arg(const CallArgs& a, size_t pos, const char* name, bool def) {
    const Value* v = arg(a, pos, name);
    return v ? truthy(*v) : def;
}

std::string str_arg(const CallArgs& a, size_t pos, const char* name, const std::string& def) {
    const Value* v = arg(a, pos, name);
    if (!v || v->is_none() || v->is_undefined()) return def;
    return to_str(*v);
}

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2 sandbox's MAX_RANGE

Value range_fn(Interpreter&, CallArgs& a) {
    TS_CHECK(!a.args.empty() && a.args.size() <= 3, "range expected 1 to 3 arguments, got {}", a.args.size());
    for (const Value& v : a.args)
        TS_CHECK(v.is_int() || v.is_bool(), "range() arguments must be integers, got {}", type_name(v));
    int64_t start = 0, stop, step = 1;
    if (a.args.size() == 1) {
        stop = a.args[0].as_int();
    } else {
        start = a.args[0].as_int();
        stop = a.args[1].as_int();
        if (a.args.size() == 3) step = a.args[2].as_int();
    }
    TS_CHECK(step != 0, "range() arg 3 must not be zero");
    List out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        TS_CHECK(static_cast<int64_t>(out.size()) < kMaxRange,
                 "range too big: the sandbox blocks ranges larger than {}", kMaxRange);
        out.emplace_back(i);
    }
    return Value::list(std::move(out));
}

Dict dict_from_args(const CallArgs& a, bool check_names) {
    Dict d;
    TS_CHECK(a.args.size() <= 1, "expected at most 1 positional argument, got {}", a.args.size());
    if (!a.args.empty()) {
        const Value& src = a.args[0];
        if (src.is_dict() || src.is_namespace()) {
            for (const auto& [k, v] : src.dict().items()) d.set(k, v);
        } else {
            for (const Value& pair : iterate(src)) {
                TS_CHECK(pair.is_sequence() && pair.items().size() == 2, "dictionary update sequence element must have length 2");
                d.set(pair.items()[0], pair.items()[1]);
            }
        }
    }
    for (const auto& [k, v] : a.kwargs) d.set(Value(k), v);
    if (check_names)
        for (const auto& [k, v] : d.items())
            if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
                fail(ErrorKind::Invalid,
                     "chat templates cannot store underscore-prefixed attributes on a namespace, but got '{}'", k.str());
    return d;
}

}  // namespace

void add_globals(Scope& scope) {
    scope.vars["range"] = Value::function("range", range_fn);
    scope.vars["dict"] = Value::function("dict", [](Interpreter&, CallArgs& a) { return Value::dict(dict_from_args(a, false)); });
    scope.vars["namespace"] =
        Value::function("namespace", [](Interpreter&, CallArgs& a) { return Value::ns(dict_from_args(a, true)); });
    scope.vars["raise_exception"] = Value::function("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
        fail(ErrorKind::Invalid, "{}", a.args.empty() ? std::string() : to_str(a.args[0]));
    });
    scope.vars["strftime_now"] = Value::function("strftime_now", [](Interpreter&, CallArgs& a) {
        std::string f = str_arg(a, 0, "format", "");
        std::time_t t = std::time(nullptr);
        std::tm tm{};
        localtime_r(&t, &tm);
        char buf[512];
        size_t n = f.empty() ? 0 : std::strftime(buf, sizeof buf, f.c_str(), &tm);
        return Value(std::string(buf, n));
    });
    scope.vars["joiner"] = Value::function("joiner", [](Interpreter&, CallArgs& a) {
        std::string sep = str_arg(a, 0, "sep", ", ");
        auto used = std::make_shared<bool>(false);
        return Value::function("joiner", [sep, used](Interpreter&, CallArgs&) {
            if (!*used) {
                *used = true;
                return Value("");
            }
            return Value(sep);
        });
    });
}

}  // namespace tessera::jinja
