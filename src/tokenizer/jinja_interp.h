// Jinja interpreter: renders a parsed template against a context, with jinja2 semantics
// (scoping, undefined values, loops, macros) and limits against runaway templates.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>

#include "tokenizer/jinja_ast.h"
#include "tokenizer/jinja_value.h"

namespace tessera::jinja {

struct RenderLimits {
    size_t max_output_bytes = size_t{64} << 20;  // also bounds every intermediate string
    int max_call_depth = 200;                     // nested macro calls
    uint64_t max_steps = 100'000'000;             // evaluated nodes + loop iterations
};

struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
    const Value* find(const std::string& name) const;
};

class Interpreter {
public:
    Interpreter(const Template& tpl, RenderLimits limits) : tpl_(tpl), limits_(limits) {}

    // Renders with `context` (plus the built-in globals). Errors carry "chat template: line L col C".
    std::string render(const Dict& context);

    // Used by filters, tests and methods.
    Value call(const Value& fn, CallArgs& args);
    Value filter(const std::string& name, const Value& v, CallArgs& args);
    bool test(const std::string& name, const Value& v, CallArgs& args);
    Value getattr(const Value& obj, const std::string& name);
    Value getitem(const Value& obj, const Value& key);
    void check_size(size_t bytes) const;  // throws when a string would exceed the output limit
    void step();

private:
    enum class Flow { Normal, Break, Continue };
    using ScopePtr = std::shared_ptr<Scope>;

    const Template& tpl_;
    RenderLimits limits_;
    std::string* out_ = nullptr;
    ScopePtr scope_;
    uint64_t steps_ = 0;
    int call_depth_ = 0;
    int line_ = 0, col_ = 0;
    // Scopes captured by macros: a macro stored in its own scope is a reference cycle, broken
    // by clearing these scopes when render() ends.
    std::vector<std::weak_ptr<Scope>> closures_;

    Flow exec_body(const Body& body);
    Flow exec(const Stmt& s);
    Flow exec_for(const Stmt& s);
    std::string render_loop(const Stmt& s, const Value& iterable, int depth);
    Flow run_loop(const Stmt& s, const Value& iterable, int depth);
    void assign(const Target& t, const Value& v);
    void define_macro(const Stmt& s);
    Value make_macro(const Stmt& s, const std::string& name);
    std::string capture(const Body& body);
    void emit(std::string_view s);

    Value eval(const Expr& e);
    Value eval_call(const Expr& e);
    CallArgs eval_args(const CallSpec& spec);
    Value eval_filter(const Expr& e, const Value* block_input);
    Value eval_compare(const Expr& e);
    Value eval_getitem(const Expr& e);
    Value lookup(const std::string& name);
};

// Python-like helpers shared by the interpreter and the builtins.
List iterate(const Value& v);                   // for-loop iteration (undefined -> empty)
bool contains(const Value& container, const Value& item);  // `item in container`
Value binary_op(const std::string& op, const Value& a, const Value& b, size_t max_bytes);
Value slice(const Value& v, const Value& start, const Value& stop, const Value& step);

}  // namespace tessera::jinja
