// Jinja interpreter: statements, expressions, scoping and limits.
#include "tokenizer/jinja_interp.h"

#include <algorithm>
#include <optional>

#include "core/status.h"
#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_lexer.h"

namespace tessera::jinja {

const Value* Scope::find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
        auto it = s->vars.find(name);
        if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
}

namespace {

// Whether `v` is or (through lists, dicts, namespaces) holds the namespace whose attributes are `target`.
bool contains_namespace(const Value& v, const Dict& target) {
    std::vector<const Value*> stack{&v};
    std::vector<const Dict*> seen;
    while (!stack.empty()) {
        const Value* x = stack.back();
        stack.pop_back();
        if (!x->holds_namespace()) continue;
        if (x->is_sequence()) {
            for (const Value& e : x->items()) stack.push_back(&e);
        } else if (x->is_dict() || x->is_namespace()) {
            const Dict* d = &x->dict();
            if (d == &target) return true;
            if (std::find(seen.begin(), seen.end(), d) != seen.end()) continue;
            seen.push_back(d);
            for (const auto& [k, e] : d->items()) stack.push_back(&e);
        }
    }
    return false;
}

// Swaps the interpreter's current scope for the duration of a block.
template <typename T>
struct Restore {
    T& ref;
    T saved;
    Restore(T& r, T v) : ref(r), saved(std::move(r)) { ref = std::move(v); }
    ~Restore() { ref = std::move(saved); }
};

}  // namespace

std::string Interpreter::render(const Dict& context) {
    auto root = std::make_shared<Scope>();
    add_globals(*root);
    for (const auto& [k, v] : context.items())
        if (k.is_string()) root->vars[k.str()] = v;
    scope_ = root;
    closures_.push_back(root);
    WorkBudget budget{0, limits_.max_steps};
    set_work_budget(&budget);
    struct BreakCycles {
        Interpreter& in;
        ~BreakCycles() {
            set_work_budget(nullptr);
            for (auto& w : in.closures_)
                if (auto s = w.lock()) s->vars.clear();
            in.closures_.clear();
            in.scope_.reset();
        }
    } break_cycles{*this};
    std::string out;
    out_ = &out;
    try {
        exec_body(tpl_.body);
    } catch (const Error& e) {
        std::string msg = e.what();
        if (msg.rfind("chat template:", 0) == 0) throw;
        throw Error(e.kind(), fmt::format("chat template: line {} col {}: {}", line_, col_, msg));
    }
    return out;
}

void Interpreter::step() {
    if (++steps_ > limits_.max_steps)
        fail(ErrorKind::Invalid, "template exceeded {} evaluation steps (runaway loop?)", limits_.max_steps);
}

void Interpreter::check_size(size_t bytes) const {
    if (bytes > limits_.max_output_bytes)
        fail(ErrorKind::Invalid, "template output exceeds the limit of {} bytes", limits_.max_output_bytes);
}

void Interpreter::emit(std::string_view s) {
    check_size(out_->size() + s.size());
    out_->append(s);
}

std::string Interpreter::capture(const Body& body) {
    std::string buf;
    Restore<std::string*> r(out_, &buf);
    exec_body(body);
    return buf;
}

// ---- statements -------------------------------------------------------------------------------

Interpreter::Flow Interpreter::exec_body(const Body& body) {
    for (const auto& s : body) {
        Flow f = exec(*s);
        if (f != Flow::Normal) return f;
    }
    return Flow::Normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
    step();
    line_ = s.line;
    col_ = s.col;
    switch (s.kind) {
        case Stmt::Kind::Text: emit(s.text); return Flow::Normal;
        case Stmt::Kind::Output: {
            Value v = eval(*s.expr);
            emit(to_str(v));
            return Flow::Normal;
        }
        case Stmt::Kind::If:
            for (const auto& [cond, body] : s.branches)
                if (truthy(eval(*cond))) return exec_body(body);
            return exec_body(s.else_body);
        case Stmt::Kind::For: return exec_for(s);
        case Stmt::Kind::Set: assign(s.target, eval(*s.expr)); return Flow::Normal;
        case Stmt::Kind::SetBlock: {
            Value v(capture(s.body));
            if (s.expr) v = eval_filter(*s.expr, &v);
            assign(s.target, v);
            return Flow::Normal;
        }
        case Stmt::Kind::Macro: define_macro(s); return Flow::Normal;
        case Stmt::Kind::CallBlock: {
            Value caller = make_macro(s, "caller");
            CallArgs args = eval_args(s.expr->call);
            args.kwargs.emplace_back("caller", caller);
            Value fn = eval(*s.expr->a);
            emit(to_str(call(fn, args)));
            return Flow::Normal;
        }
        case Stmt::Kind::FilterBlock: {
            Value v(capture(s.body));
            emit(to_str(eval_filter(*s.expr, &v)));
            return Flow::Normal;
        }
        case Stmt::Kind::With: {
            auto inner = std::make_shared<Scope>();
            inner->parent = scope_;
            std::vector<Value> values;
            for (const auto& e : s.with_values) values.push_back(eval(*e));
            Restore<ScopePtr> r(scope_, inner);
            for (size_t i = 0; i < values.size(); ++i) assign(s.with_targets[i], values[i]);
            return exec_body(s.body);
        }
        case Stmt::Kind::Scope: return exec_body(s.body);
        case Stmt::Kind::Break: return Flow::Break;
        case Stmt::Kind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
}

void Interpreter::assign(const Target& t, const Value& v) {
    if (!t.attr.empty()) {
        Value ns = lookup(t.names[0]);
        if (!ns.is_namespace()) fail(ErrorKind::Invalid, "cannot assign attribute on non-namespace object");
        if (!t.attr.empty() && t.attr[0] == '_')
            fail(ErrorKind::Invalid, "chat templates cannot store underscore-prefixed attributes on a namespace, "
                                     "but got '{}'", t.attr);
        if (v.holds_namespace() && contains_namespace(v, ns.dict()))
            fail(ErrorKind::Invalid, "cannot store a namespace inside itself");
        TS_CHECK(v.depth() + 1 <= kMaxValueDepth, "value nested deeper than {} levels", kMaxValueDepth);
        ns.ns_mut().set(Value(t.attr), v);
        return;
    }
    if (!t.is_tuple) {
        scope_->vars[t.names[0]] = v;
        return;
    }
    if (v.is_undefined()) fail_undefined(v);
    List items = iterate(v);
    if (items.size() != t.names.size())
        fail(ErrorKind::Invalid, "cannot unpack {} values into {} names", items.size(), t.names.size());
    for (size_t i = 0; i < items.size(); ++i) scope_->vars[t.names[i]] = items[i];
}

Interpreter::Flow Interpreter::exec_for(const Stmt& s) {
    Value iterable = eval(*s.expr);
    return run_loop(s, iterable, 1);
}

std::string Interpreter::render_loop(const Stmt& s, const Value& iterable, int depth) {
    std::string buf;
    Restore<std::string*> r(out_, &buf);
    run_loop(s, iterable, depth);
    return buf;
}

Interpreter::Flow Interpreter::run_loop(const Stmt& s, const Value& iterable, int depth) {
    if (iterable.is_none() || iterable.is_number() || iterable.is_function())
        fail(ErrorKind::Invalid, "'{}' object is not iterable", type_name(iterable));
    if (iterable.is_namespace()) fail(ErrorKind::Invalid, "'Namespace' object is not iterable");
    List all = iterate(iterable);
    ScopePtr outer = scope_;
    List items;
    if (s.cond) {  // `for x in xs if cond`: filtered before the loop, so loop.length counts matches
        for (const Value& v : all) {
            step();
            auto probe = std::make_shared<Scope>();
            probe->parent = outer;
            Restore<ScopePtr> r(scope_, probe);
            assign(s.target, v);
            if (truthy(eval(*s.cond))) items.push_back(v);
        }
    } else {
        items = std::move(all);
    }
    if (items.empty()) {
        auto inner = std::make_shared<Scope>();
        inner->parent = outer;
        Restore<ScopePtr> r(scope_, inner);
        exec_body(s.else_body);
        return Flow::Normal;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    Value recurse;
    if (s.recursive) {
        recurse = Value::function("loop", [this, &s, depth](Interpreter&, CallArgs& a) {
            TS_CHECK(a.args.size() == 1, "loop() takes exactly one argument");
            if (++call_depth_ > limits_.max_call_depth) {
                --call_depth_;
                fail(ErrorKind::Invalid, "recursive loop nested deeper than {}", limits_.max_call_depth);
            }
            std::string r = render_loop(s, a.args[0], depth + 1);
            --call_depth_;
            return Value(std::move(r));
        });
    }
    // loop.changed(*values): true when the values differ from the previous call's (state per loop).
    auto last_changed = std::make_shared<std::optional<List>>();
    Value changed = Value::function("changed", [last_changed](Interpreter&, CallArgs& a) {
        bool differs = !*last_changed || !equal(Value::list(**last_changed), Value::list(a.args));
        if (differs) *last_changed = a.args;
        return Value(differs);
    });
    for (int64_t i = 0; i < n; ++i) {
        step();
        Dict loop;
        loop.set("changed", changed);
        loop.set("index", Value(i + 1));
        loop.set("index0", Value(i));
        loop.set("revindex", Value(n - i));
        loop.set("revindex0", Value(n - i - 1));
        loop.set("first", Value(i == 0));
        loop.set("last", Value(i == n - 1));
        loop.set("length", Value(n));
        loop.set("depth", Value(int64_t{depth}));
        loop.set("depth0", Value(int64_t{depth - 1}));
        loop.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
        loop.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
        loop.set("cycle", Value::function("cycle", [i](Interpreter&, CallArgs& a) {
            TS_CHECK(!a.args.empty(), "no items for cycling given");
            return a.args[static_cast<size_t>(i) % a.args.size()];
        }));
        if (s.recursive) loop.set("__call__", recurse);
        auto inner = std::make_shared<Scope>();
        inner->parent = outer;
        inner->vars["loop"] = Value::ns(std::move(loop));
        Restore<ScopePtr> r(scope_, inner);
        assign(s.target, items[static_cast<size_t>(i)]);
        if (exec_body(s.body) == Flow::Break) break;
    }
    return Flow::Normal;
}

void Interpreter::define_macro(const Stmt& s) { scope_->vars[s.text] = make_macro(s, s.text); }

Value Interpreter::make_macro(const Stmt& s, const std::string& name) {
    ScopePtr closure = scope_;
    closures_.push_back(closure);
    const Stmt* def = &s;
    return Value::function(name, [this, def, closure, name](Interpreter&, CallArgs& a) {
        if (++call_depth_ > limits_.max_call_depth) {
            --call_depth_;
            fail(ErrorKind::Invalid, "macro calls nested deeper than {} (infinite recursion?)", limits_.max_call_depth);
        }
        auto inner = std::make_shared<Scope>();
        inner->parent = closure;
        Restore<ScopePtr> r(scope_, inner);
        const auto& params = def->params;
        List varargs;
        for (size_t i = 0; i < a.args.size(); ++i) {
            if (i < params.size()) inner->vars[params[i].name] = a.args[i];
            else varargs.push_back(a.args[i]);
        }
        Dict kwargs;
        for (auto& [k, v] : a.kwargs) {
            bool is_param = false;
            for (const auto& p : params) is_param = is_param || p.name == k;
            if (is_param) {
                if (inner->vars.count(k)) fail(ErrorKind::Invalid, "macro '{}' got multiple values for argument '{}'", name, k);
                inner->vars[k] = v;
            } else if (k == "caller") {
                inner->vars["caller"] = v;
            } else {
                kwargs.set(Value(k), v);
            }
        }
        for (const auto& p : params) {
            if (inner->vars.count(p.name)) continue;
            inner->vars[p.name] = p.default_value ? eval(*p.default_value)
                                                  : Value::undefined(fmt::format("parameter '{}' was not provided", p.name));
        }
        inner->vars["varargs"] = Value::tuple(std::move(varargs));
        inner->vars["kwargs"] = Value::dict(std::move(kwargs));
        std::string out = capture(def->body);
        --call_depth_;
        return Value(std::move(out));
    });
}

// ---- expressions ------------------------------------------------------------------------------

Value Interpreter::lookup(const std::string& name) {
    if (const Value* v = scope_->find(name)) return *v;
    return Value::undefined(fmt::format("'{}' is undefined", name));
}

Value Interpreter::eval(const Expr& e) {
    step();
    switch (e.kind) {
        case Expr::Kind::Const: return e.value;
        case Expr::Kind::Name: return lookup(e.name);
        case Expr::Kind::List:
        case Expr::Kind::Tuple: {
            List items;
            items.reserve(e.items.size());
            for (const auto& i : e.items) items.push_back(eval(*i));
            return e.kind == Expr::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
        }
        case Expr::Kind::Dict: {
            Dict d;
            for (size_t i = 0; i + 1 < e.items.size(); i += 2) {
                Value k = eval(*e.items[i]);
                if (k.is_sequence() && k.kind() == Value::Kind::List) fail(ErrorKind::Invalid, "unhashable type: 'list'");
                if (k.is_dict()) fail(ErrorKind::Invalid, "unhashable type: 'dict'");
                d.set(k, eval(*e.items[i + 1]));
            }
            return Value::dict(std::move(d));
        }
        case Expr::Kind::Getattr: {
            Value obj = eval(*e.a);
            line_ = e.line, col_ = e.col;
            return getattr(obj, e.name);
        }
        case Expr::Kind::Getitem: return eval_getitem(e);
        case Expr::Kind::Slice: fail(ErrorKind::Invalid, "slice outside of a subscript");
        case Expr::Kind::Call: return eval_call(e);
        case Expr::Kind::Filter: return eval_filter(e, nullptr);
        case Expr::Kind::Test: {
            Value v = eval(*e.a);
            CallArgs args = eval_args(e.call);
            line_ = e.line, col_ = e.col;
            return Value(test(e.name, v, args));
        }
        case Expr::Kind::Not: return Value(!truthy(eval(*e.a)));
        case Expr::Kind::Neg:
        case Expr::Kind::Pos: {
            Value v = eval(*e.a);
            if (v.is_undefined()) fail_undefined(v);
            if (!v.is_number()) fail(ErrorKind::Invalid, "bad operand type for unary {}: '{}'", e.kind == Expr::Kind::Neg ? "-" : "+", type_name(v));
            if (e.kind == Expr::Kind::Pos) return v.is_bool() ? Value(v.as_int()) : v;
            if (v.is_float()) return Value(-v.as_float());
            TS_CHECK(v.as_int() != INT64_MIN, "integer overflow");
            return Value(-v.as_int());
        }
        case Expr::Kind::And: {
            Value l = eval(*e.a);
            return truthy(l) ? eval(*e.b) : l;
        }
        case Expr::Kind::Or: {
            Value l = eval(*e.a);
            return truthy(l) ? l : eval(*e.b);
        }
        case Expr::Kind::Binary: {
            Value l = eval(*e.a);
            Value r = eval(*e.b);
            line_ = e.line, col_ = e.col;
            return binary_op(e.name, l, r, limits_.max_output_bytes);
        }
        case Expr::Kind::Concat: {
            std::string s;
            for (const auto& i : e.items) {
                s += to_str(eval(*i));
                check_size(s.size());
            }
            return Value(std::move(s));
        }
        case Expr::Kind::Compare: return eval_compare(e);
        case Expr::Kind::CondExpr:
            if (truthy(eval(*e.b))) return eval(*e.a);
            if (e.c) return eval(*e.c);
            return Value::undefined(fmt::format("the inline if-expression on line {} evaluated to false and no else "
                                                "section was defined", e.line));
    }
    return Value();
}

Value Interpreter::eval_getitem(const Expr& e) {
    Value obj = eval(*e.a);
    if (e.b->kind == Expr::Kind::Slice) {
        const Expr& s = *e.b;
        Value start = s.a ? eval(*s.a) : Value::none();
        Value stop = s.b ? eval(*s.b) : Value::none();
        Value stp = s.c ? eval(*s.c) : Value::none();
        line_ = e.line, col_ = e.col;
        if (obj.is_undefined()) fail_undefined(obj);
        return slice(obj, start, stop, stp);
    }
    Value key = eval(*e.b);
    line_ = e.line, col_ = e.col;
    return getitem(obj, key);
}

Value Interpreter::eval_compare(const Expr& e) {
    Value left = eval(*e.a);
    for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.items[i]);
        line_ = e.line, col_ = e.col;
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==") ok = equal(left, right);
        else if (op == "!=") ok = !equal(left, right);
        else if (op == "in") ok = contains(right, left);
        else if (op == "notin") ok = !contains(right, left);
        else {
            int c = compare(left, right);
            ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value(false);
        left = std::move(right);
    }
    return Value(true);
}

CallArgs Interpreter::eval_args(const CallSpec& spec) {
    CallArgs a;
    for (const auto& e : spec.args) a.args.push_back(eval(*e));
    for (const auto& kw : spec.kwargs) a.kwargs.emplace_back(kw.name, eval(*kw.value));
    if (spec.dyn_args) {
        Value v = eval(*spec.dyn_args);
        for (auto& x : iterate(v)) a.args.push_back(x);
    }
    if (spec.dyn_kwargs) {
        Value v = eval(*spec.dyn_kwargs);
        if (!v.is_dict()) fail(ErrorKind::Invalid, "argument after ** must be a mapping, not {}", type_name(v));
        for (const auto& [k, x] : v.dict().items()) {
            if (!k.is_string()) fail(ErrorKind::Invalid, "keywords must be strings");
            a.kwargs.emplace_back(k.str(), x);
        }
    }
    return a;
}

Value Interpreter::eval_call(const Expr& e) {
    Value fn = eval(*e.a);
    CallArgs args = eval_args(e.call);
    line_ = e.line, col_ = e.col;
    return call(fn, args);
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
    if (fn.is_function()) return fn.fn().fn(*this, args);
    if (fn.is_undefined()) fail_undefined(fn);
    if (fn.is_namespace())
        if (const Value* c = fn.dict().find(std::string_view("__call__")); c && c->is_function()) return call(*c, args);
    fail(ErrorKind::Invalid, "'{}' object is not callable", type_name(fn));
}

Value Interpreter::eval_filter(const Expr& e, const Value* block_input) {
    // In {% filter %} / {% set x | f %} blocks the chain bottoms out at the block's text.
    Value input = !e.a ? (block_input ? *block_input : Value())
                  : (block_input && e.a->kind == Expr::Kind::Filter) ? eval_filter(*e.a, block_input)
                                                                     : eval(*e.a);
    CallArgs args = eval_args(e.call);
    line_ = e.line, col_ = e.col;
    return filter(e.name, input, args);
}

Value Interpreter::filter(const std::string& name, const Value& v, CallArgs& args) {
    FilterFn f = find_filter(name);
    if (!f) fail(ErrorKind::Invalid, "no filter named '{}'", name);
    return f(*this, v, args);
}

bool Interpreter::test(const std::string& name, const Value& v, CallArgs& args) {
    TestFn t = find_test(name);
    if (!t) fail(ErrorKind::Invalid, "no test named '{}'", name);
    return t(*this, v, args);
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
    switch (obj.kind()) {
        case Value::Kind::Undefined: fail_undefined(obj);
        case Value::Kind::Namespace: {
            if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
            return Value::undefined(fmt::format("'Namespace' object has no attribute '{}'", name));
        }
        case Value::Kind::Dict: {
            // jinja2 tries Python attributes first: d.items is the method, not d['items'].
            Value m = bound_method(obj, name);
            if (!m.is_undefined()) return m;
            if (const Value* v = obj.dict().find(std::string_view(name))) return *v;
            return Value::undefined(fmt::format("'dict object' has no attribute '{}'", name));
        }
        default: {
            Value m = bound_method(obj, name);
            if (!m.is_undefined()) return m;
            return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(obj), name));
        }
    }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
    switch (obj.kind()) {
        case Value::Kind::Undefined: fail_undefined(obj);
        case Value::Kind::List:
        case Value::Kind::Tuple:
        case Value::Kind::String: {
            if (key.is_int() || key.is_bool()) {
                int64_t i = key.as_int();
                if (obj.is_string()) {
                    Value r = slice(obj, Value(i), i == -1 ? Value::none() : Value(i + 1), Value::none());
                    if (!r.str().empty()) return r;
                    return Value::undefined(fmt::format("'str object' has no element {}", i));
                }
                const List& items = obj.items();
                int64_t n = static_cast<int64_t>(items.size());
                if (i < 0) i += n;
                if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
                return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), key.as_int()));
            }
            if (key.is_string()) return getattr(obj, key.str());
            return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), repr(key)));
        }
        case Value::Kind::Dict:
        case Value::Kind::Namespace: {
            if (const Value* v = obj.dict().find(key)) return *v;
            if (key.is_string() && obj.is_dict()) return getattr(obj, key.str());
            return Value::undefined(fmt::format("'dict object' has no attribute {}", repr(key)));
        }
        default:
            if (key.is_string()) return getattr(obj, key.str());
            return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), repr(key)));
    }
}

}  // namespace tessera::jinja
