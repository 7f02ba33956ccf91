// Jinja tests (`x is defined`, `n is divisibleby 3`, ...), as jinja2's tests.py defines them.
#include <cstring>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {
namespace {

const Value& other(const CallArgs& a, const char* name) {
    const Value* v = arg(a, 0, name);
    TS_CHECK(v, "test requires an argument");
    return *v;
}

bool number_mod(const Value& v, int64_t m, const char* test) {
    if (v.is_undefined()) fail_undefined(v);
    TS_CHECK(v.is_number(), "test '{}' needs a number, got {}", test, type_name(v));
    if (v.is_float()) return binary_op("%", v, Value(m), SIZE_MAX).as_float() == 0.0;
    return v.as_int() % m == 0;
}

bool t_defined(Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }
bool t_true(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_string(Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }
bool t_number(Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }
bool t_integer(Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }
bool t_float(Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs&) { return v.is_dict(); }
bool t_callable(Interpreter&, const Value& v, CallArgs&) { return v.is_function(); }
bool t_iterable(Interpreter&, const Value& v, CallArgs&) {
    return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
}
bool t_sequence(Interpreter&, const Value& v, CallArgs&) { return v.is_string() || v.is_sequence() || v.is_dict(); }
bool t_escaped(Interpreter&, const Value&, CallArgs&) { return false; }
bool t_odd(Interpreter&, const Value& v, CallArgs&) { return !number_mod(v, 2, "odd"); }
bool t_even(Interpreter&, const Value& v, CallArgs&) { return number_mod(v, 2, "even"); }
bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
    const Value& n = other(a, "num");
    TS_CHECK(n.is_number(), "divisibleby needs a number");
    if (v.is_undefined()) fail_undefined(v);
    Value r = binary_op("%", v, n, SIZE_MAX);
    return r.as_float() == 0.0;
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) { return equal(v, other(a, "other")); }
bool t_ne(Interpreter&, const Value& v, CallArgs& a) { return !equal(v, other(a, "other")); }
bool t_lt(Interpreter&, const Value& v, CallArgs& a) { return compare(v, other(a, "other")) < 0; }
bool t_le(Interpreter&, const Value& v, CallArgs& a) { return compare(v, other(a, "other")) <= 0; }
bool t_gt(Interpreter&, const Value& v, CallArgs& a) { return compare(v, other(a, "other")) > 0; }
bool t_ge(Interpreter&, const Value& v, CallArgs& a) { return compare(v, other(a, "other")) >= 0; }
bool t_in(Interpreter&, const Value& v, CallArgs& a) { return contains(other(a, "seq"), v); }
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
    const Value& o = other(a, "other");
    if (v.kind() != o.kind()) return false;
    switch (v.kind()) {
        case Value::Kind::None:
        case Value::Kind::Undefined: return true;
        case Value::Kind::Bool:
        case Value::Kind::Int:
        case Value::Kind::Float:
        case Value::Kind::String: return equal(v, o);
        case Value::Kind::List:
        case Value::Kind::Tuple: return &v.items() == &o.items();
        case Value::Kind::Dict:
        case Value::Kind::Namespace: return &v.dict() == &o.dict();
        case Value::Kind::Function: return &v.fn() == &o.fn();
    }
    return false;
}
bool t_lower(Interpreter&, const Value& v, CallArgs&) {
    std::string s = to_str(v);
    return text::lower(s) == s && text::upper(s) != s;
}
bool t_upper(Interpreter&, const Value& v, CallArgs&) {
    std::string s = to_str(v);
    return text::upper(s) == s && text::lower(s) != s;
}
bool t_filter(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_filter(v.str()) != nullptr; }
bool t_test(Interpreter&, const Value& v, CallArgs&) { return v.is_string() && find_test(v.str()) != nullptr; }

struct Entry {
    const char* name;
    TestFn fn;
};
const Entry kTests[] = {
    {"defined", t_defined},     {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
    {"true", t_true},           {"false", t_false},         {"string", t_string},     {"number", t_number},
    {"integer", t_integer},     {"float", t_float},         {"mapping", t_mapping},   {"callable", t_callable},
    {"iterable", t_iterable},   {"sequence", t_sequence},   {"escaped", t_escaped},   {"odd", t_odd},
    {"even", t_even},           {"divisibleby", t_divisibleby}, {"eq", t_eq},         {"equalto", t_eq},
    {"==", t_eq},               {"ne", t_ne},               {"!=", t_ne},             {"lt", t_lt},
    {"lessthan", t_lt},         {"<", t_lt},                {"le", t_le},             {"<=", t_le},
    {"gt", t_gt},               {"greaterthan", t_gt},      {">", t_gt},              {"ge", t_ge},
    {">=", t_ge},               {"in", t_in},               {"sameas", t_sameas},     {"lower", t_lower},
    {"upper", t_upper},         {"filter", t_filter},       {"test", t_test},
};

}  // namespace

TestFn find_test(std::string_view name) {
    for (const Entry& e : kTests)
        if (name == e.name) return e.fn;
    return nullptr;
}

}  // namespace tessera::jinja
