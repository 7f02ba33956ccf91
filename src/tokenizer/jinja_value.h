// Values of the Jinja subset: Python-like dynamic values (None, bool, int, float, str, list,
// tuple, dict, namespace, callables) with Python's printing, truthiness and comparison rules.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace tessera::jinja {

class Value;
class Interpreter;

// Arguments of a call: positional, then keyword (in call order).
struct CallArgs {
    std::vector<Value> args;
    std::vector<std::pair<std::string, Value>> kwargs;
};

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;

struct Function {
    std::string name;
    NativeFn fn;
};

using List = std::vector<Value>;

// Insertion-ordered mapping, like a Python dict (keys compared with Python ==).
class Dict {
public:
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(const Value& key, Value v);
    size_t size() const;  // (defined below Value: a vector of an incomplete type has no size yet)
    const std::vector<std::pair<Value, Value>>& items() const { return items_; }

private:
    std::vector<std::pair<Value, Value>> items_;
};

class Value {
public:
    enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Tuple, Dict, Namespace, Function };

    Value() = default;  // undefined
    Value(bool b) : kind_(Kind::Bool), data_(b) {}
    Value(int v) : kind_(Kind::Int), data_(int64_t{v}) {}
    Value(int64_t v) : kind_(Kind::Int), data_(v) {}
    Value(double v) : kind_(Kind::Float), data_(v) {}
    Value(std::string s) : kind_(Kind::String), data_(std::move(s)) {}
    Value(const char* s) : kind_(Kind::String), data_(std::string(s)) {}

    // hint: what was undefined, for the error raised when it is used ("'x' is undefined").
    static Value undefined(std::string hint);
    static Value none();
    static Value list(List items);
    static Value tuple(List items);
    static Value dict(Dict d);
    static Value ns(Dict d);  // mutable attributes, shared by reference
    static Value function(std::string name, NativeFn fn);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_sequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_namespace() const { return kind_ == Kind::Namespace; }
    bool is_function() const { return kind_ == Kind::Function; }

    // The accessors below throw tessera::Error (the undefined value's own error, or "expected an
    // integer, got str") on a value of another kind: a template's mistake, never a crash.
    bool as_bool() const { return get<bool>("a boolean"); }
    int64_t as_int() const;    // Int or Bool
    double as_float() const;   // any number
    const std::string& str() const { return get<std::string>("a string"); }  // String (or undefined hint)
    const List& items() const { return *get<std::shared_ptr<List>>("a list"); }  // List/Tuple
    const Dict& dict() const { return *get<std::shared_ptr<Dict>>("a mapping"); }  // Dict/Namespace
    Dict& ns_mut() const { return *get<std::shared_ptr<Dict>>("a namespace"); }   // Namespace
    const Function& fn() const { return *get<std::shared_ptr<Function>>("a callable"); }
    const std::string& undefined_hint() const;  // "" where none was given
    int depth() const { return depth_; }               // container nesting (0 for scalars)
    bool holds_namespace() const { return has_ns_; }   // is or contains a namespace

private:
    template <class T>
    const T& get(const char* expected) const {
        if (const T* p = std::get_if<T>(&data_)) return *p;
        wrong_kind(expected);
    }
    [[noreturn]] void wrong_kind(const char* expected) const;
    void set_nesting(const List& items);
    void set_nesting(const Dict& d);

    Kind kind_ = Kind::Undefined;
    uint16_t depth_ = 0;
    bool has_ns_ = false;
    std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<List>, std::shared_ptr<Dict>,
                 std::shared_ptr<Function>>
        data_;
};

inline size_t Dict::size() const { return items_.size(); }

// Python semantics.
bool truthy(const Value& v);
std::string to_str(const Value& v);   // str(v); undefined prints as ""
std::string repr(const Value& v);     // repr(v), used inside list/dict printing
std::string repr_string(std::string_view s);
std::string float_repr(double d);     // Python float repr: 1.0, 0.1, 1e+16
std::string type_name(const Value& v);  // "str", "int", "list", ...
bool equal(const Value& a, const Value& b);
// <0, 0, >0; throws on values Python cannot order ("'<' not supported between ...").
int compare(const Value& a, const Value& b);
// Raises the error of using an undefined value (jinja2's UndefinedError).
[[noreturn]] void fail_undefined(const Value& v);

constexpr int kMaxValueDepth = 128;              // nested lists/dicts a template may build
constexpr size_t kMaxStringBytes = size_t{64} << 20;  // any one string (str(), tojson)

// Work budget for recursive value operations (==, <, str, tojson) of the render running on this
// thread: each element visited costs one step. Interpreter::render installs it.
struct WorkBudget {
    uint64_t used = 0, limit = 0;  // limit 0: unlimited
};
void set_work_budget(WorkBudget* b);  // nullptr: none
void charge_work();                   // throws when the budget is spent

}  // namespace tessera::jinja
