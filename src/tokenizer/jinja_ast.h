// Jinja syntax tree: expressions and statements, each with the line/col it came from.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace tessera::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct KwArg {
    std::string name;
    ExprPtr value;
};

struct CallSpec {  // (a, b, k=v, *args, **kwargs)
    std::vector<ExprPtr> args;
    std::vector<KwArg> kwargs;
    ExprPtr dyn_args, dyn_kwargs;
};

struct Expr {
    enum class Kind {
        Const,     // value
        Name,      // name
        List,      // items
        Tuple,     // items
        Dict,      // items (key, value, key, value, ...)
        Getattr,   // a.name
        Getitem,   // a[b]
        Slice,     // items: start, stop, step (null = omitted)
        Call,      // a(call)
        Filter,    // a | name(call); a null inside {% filter %} blocks
        Test,      // a is name(call)
        Not,       // not a
        Neg,       // -a
        Pos,       // +a
        And,       // a and b
        Or,        // a or b
        Binary,    // a op b: + - * / // % **
        Concat,    // items joined with ~
        Compare,   // a ops[i] items[i] ...: == != < <= > >= in notin
        CondExpr,  // a if b else c (c may be null)
    };
    Kind kind;
    int line = 0, col = 0;
    int height = 1;  // of this subtree: bounds evaluator recursion
    Value value;
    std::string name;  // Name/Getattr/Filter/Test name, Binary operator
    ExprPtr a, b, c;
    std::vector<ExprPtr> items;
    std::vector<std::string> ops;  // Compare operators
    CallSpec call;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Assignment target: a name, name.attr (namespace), or a tuple of names.
struct Target {
    std::vector<std::string> names;  // one name, or several for tuple unpacking
    bool is_tuple = false;
    std::string attr;  // non-empty: names[0].attr
};

struct MacroParam {
    std::string name;
    ExprPtr default_value;  // may be null
};

struct Stmt {
    enum class Kind {
        Text,        // text
        Output,      // expr
        If,          // branches: (cond, body)...; else_body
        For,         // target in expr [if cond] [recursive]; body; else_body
        Set,         // target = expr
        SetBlock,    // target | filter = body
        Macro,       // name(params) body
        CallBlock,   // call(params) expr body
        FilterBlock, // expr (filter chain with null base) body
        With,        // targets = values; body
        Break,
        Continue,
        Scope,       // body (block, generation): rendered in place
    };
    Kind kind;
    int line = 0, col = 0;
    std::string text;  // Text; Macro name
    ExprPtr expr, cond;
    Target target;
    std::vector<std::pair<ExprPtr, Body>> branches;
    Body body, else_body;
    bool recursive = false;
    std::vector<MacroParam> params;
    std::vector<Target> with_targets;
    std::vector<ExprPtr> with_values;
};

struct Template {
    Body body;
};

}  // namespace tessera::jinja
