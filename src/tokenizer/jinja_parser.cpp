// Recursive-descent Jinja parser (grammar of jinja2/parser.py, including the loopcontrols
// extension and transformers' {% generation %} tag).
#include "tokenizer/jinja_parser.h"

#include <charconv>
#include <cstdlib>

#include "core/status.h"

namespace tessera::jinja {
namespace {

constexpr int kMaxNesting = 200;  // parser recursion
constexpr int kMaxHeight = 300;   // expression tree height (left-deep chains like 1+1+1+... count too)

const char* tok_name(Tok t) {
    switch (t) {
        case Tok::Data: return "template data";
        case Tok::BlockBegin: return "begin of statement block";
        case Tok::BlockEnd: return "end of statement block";
        case Tok::VarBegin: return "begin of print statement";
        case Tok::VarEnd: return "end of print statement";
        case Tok::Name: return "name";
        case Tok::String: return "string";
        case Tok::Int: return "integer";
        case Tok::Float: return "float";
        case Tok::Op: return "operator";
        case Tok::Eof: return "end of template";
    }
    return "token";
}

class Parser {
public:
    explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

    Template run() {
        Template tpl;
        tpl.body = subparse({});
        if (cur().type != Tok::Eof) fail_here("unexpected '" + cur().value + "'");
        return tpl;
    }

private:
    std::vector<Token> t_;
    size_t i_ = 0;
    int depth_ = 0;
    int loop_depth_ = 0;
    std::vector<std::string> tag_stack_;

    const Token& cur() const { return t_[i_]; }
    const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
    const Token& next() {
        const Token& t = t_[i_];
        if (i_ + 1 < t_.size()) ++i_;
        return t;
    }
    bool is_op(const char* op) const { return cur().type == Tok::Op && cur().value == op; }
    bool is_name(const char* n) const { return cur().type == Tok::Name && cur().value == n; }
    bool skip_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool skip_name(const char* n) {
        if (!is_name(n)) return false;
        next();
        return true;
    }

    std::string describe(const Token& t) const {
        if (t.type == Tok::Name || t.type == Tok::Op) return "'" + t.value + "'";
        return tok_name(t.type);
    }

    [[noreturn]] void fail_here(const std::string& msg) const { fail_at(cur().line, cur().col, msg); }
    void expect_op(const char* op) {
        if (!skip_op(op)) fail_here(std::string("expected '") + op + "', got " + describe(cur()));
    }
    void expect(Tok t) {
        if (cur().type != t) fail_here(std::string("expected ") + tok_name(t) + ", got " + describe(cur()));
        next();
    }
    std::string expect_name() {
        if (cur().type != Tok::Name) fail_here("expected a name, got " + describe(cur()));
        return next().value;
    }

    struct DepthGuard {
        Parser& p;
        explicit DepthGuard(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting) p.fail_here("template nested too deeply");
        }
        ~DepthGuard() { --p.depth_; }
    };

    // Records e's subtree height; a tree too tall to evaluate without deep recursion is an error.
    ExprPtr fin(ExprPtr e) {
        int h = 0;
        auto take = [&h](const ExprPtr& c) {
            if (c) h = std::max(h, c->height);
        };
        take(e->a), take(e->b), take(e->c);
        for (const auto& i : e->items) take(i);
        for (const auto& i : e->call.args) take(i);
        for (const auto& k : e->call.kwargs) take(k.value);
        take(e->call.dyn_args), take(e->call.dyn_kwargs);
        e->height = h + 1;
        if (e->height > kMaxHeight) fail_at(e->line, e->col, "expression nested too deeply");
        return e;
    }

    ExprPtr node(Expr::Kind k, const Token& at) {
        auto e = std::make_unique<Expr>();
        e->kind = k;
        e->line = at.line;
        e->col = at.col;
        return e;
    }

    // ---- statements -----------------------------------------------------------------------
    bool at_end_tag(const std::vector<const char*>& ends) const {
        if (cur().type != Tok::Name) return false;
        for (const char* e : ends)
            if (cur().value == e) return true;
        return false;
    }

    Body subparse(const std::vector<const char*>& ends) {
        Body body;
        while (cur().type != Tok::Eof) {
            const Token& tok = cur();
            if (tok.type == Tok::Data) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Text;
                s->line = tok.line, s->col = tok.col;
                s->text = tok.value;
                next();
                body.push_back(std::move(s));
            } else if (tok.type == Tok::VarBegin) {
                auto s = std::make_unique<Stmt>();
                s->kind = Stmt::Kind::Output;
                s->line = tok.line, s->col = tok.col;
                next();
                s->expr = parse_tuple(true, {}, false);
                expect(Tok::VarEnd);
                body.push_back(std::move(s));
            } else if (tok.type == Tok::BlockBegin) {
                next();
                if (!ends.empty() && at_end_tag(ends)) return body;
                parse_statement(body);
                expect(Tok::BlockEnd);
            } else {
                fail_here("unexpected " + describe(tok));
            }
        }
        return body;
    }

    // `{% ... %}` body up to one of `ends`; leaves the current token on the end tag's name.
    Body parse_statements(const std::vector<const char*>& ends, bool drop_needle) {
        DepthGuard g(*this);
        skip_op(":");
        expect(Tok::BlockEnd);
        Body b = subparse(ends);
        if (cur().type == Tok::Eof) {
            std::string want;
            for (const char* e : ends) want += (want.empty() ? "'" : " or '") + std::string(e) + "'";
            fail_here("unexpected end of template; looking for " + want +
                      (tag_stack_.empty() ? "" : "; the innermost open block is '" + tag_stack_.back() + "'"));
        }
        if (drop_needle) next();
        return b;
    }

    std::unique_ptr<Stmt> stmt(Stmt::Kind k, const Token& at) {
        auto s = std::make_unique<Stmt>();
        s->kind = k;
        s->line = at.line;
        s->col = at.col;
        return s;
    }

    void parse_statement(Body& out) {
        const Token& tok = cur();
        if (tok.type != Tok::Name) fail_here("tag name expected");
        std::string name = tok.value;
        tag_stack_.push_back(name);
        if (name == "if") out.push_back(parse_if());
        else if (name == "for") out.push_back(parse_for());
        else if (name == "set") out.push_back(parse_set());
        else if (name == "macro") out.push_back(parse_macro());
        else if (name == "call") out.push_back(parse_call_block());
        else if (name == "filter") out.push_back(parse_filter_block());
        else if (name == "with") out.push_back(parse_with());
        else if (name == "print") parse_print(out);
        else if (name == "break" || name == "continue") {
            if (loop_depth_ == 0) fail_here("'" + name + "' outside of a loop");
            out.push_back(stmt(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, next()));
        } else if (name == "block" || name == "generation") {
            const Token& at = next();
            auto s = stmt(Stmt::Kind::Scope, at);
            std::string bname;
            if (name == "block") {
                bname = expect_name();
                skip_name("scoped");
                skip_name("required");
            }
            const char* end = name == "block" ? "endblock" : "endgeneration";
            s->body = parse_statements({end}, true);
            if (name == "block" && cur().type == Tok::Name && cur().value == bname) next();
            out.push_back(std::move(s));
        } else if (name == "extends" || name == "include" || name == "import" || name == "from") {
            fail_here("'" + name + "' is not supported: a chat template cannot load other templates");
        } else {
            fail_here("unknown tag '" + name + "'");
        }
        tag_stack_.pop_back();
    }

    StmtPtr parse_if() {
        auto s = stmt(Stmt::Kind::If, next());
        while (true) {
            ExprPtr cond = parse_tuple(false, {}, false);
            Body body = parse_statements({"elif", "else", "endif"}, false);
            s->branches.emplace_back(std::move(cond), std::move(body));
            std::string t = next().value;
            if (t == "elif") continue;
            if (t == "else") s->else_body = parse_statements({"endif"}, true);
            break;
        }
        return s;
    }

    StmtPtr parse_for() {
        auto s = stmt(Stmt::Kind::For, next());
        s->target = parse_target(false, "in");
        if (!skip_name("in")) fail_here("expected 'in', got " + describe(cur()));
        s->expr = parse_tuple(false, {"recursive"}, false);
        if (skip_name("if")) s->cond = parse_expression(true);
        s->recursive = skip_name("recursive");
        ++loop_depth_;
        s->body = parse_statements({"endfor", "else"}, false);
        --loop_depth_;
        if (next().value == "else") s->else_body = parse_statements({"endfor"}, true);
        return s;
    }

    StmtPtr parse_set() {
        const Token& at = next();
        Target target = parse_target(true, nullptr);
        if (skip_op("=")) {
            auto s = stmt(Stmt::Kind::Set, at);
            s->target = std::move(target);
            s->expr = parse_tuple(true, {}, false);
            return s;
        }
        auto s = stmt(Stmt::Kind::SetBlock, at);
        s->target = std::move(target);
        if (is_op("|")) s->expr = parse_filter(nullptr, false);
        s->body = parse_statements({"endset"}, true);
        return s;
    }

    // name | name.attr (with_namespace) | a, b | (a, b)
    Target parse_target(bool with_namespace, const char* end_rule) {
        Target t;
        bool paren = skip_op("(");
        while (true) {
            if (!t.names.empty()) {
                if (!skip_op(",")) break;
                t.is_tuple = true;
                if (cur().type != Tok::Name || (end_rule && is_name(end_rule))) break;
            }
            t.names.push_back(expect_name());
            if (with_namespace && t.names.size() == 1 && is_op(".")) {
                next();
                t.attr = expect_name();
                return t;
            }
            if (!is_op(",")) break;
        }
        if (paren) {
            expect_op(")");
            t.is_tuple = true;
        }
        for (const auto& n : t.names)
            if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
                fail_here("cannot assign to '" + n + "'");
        return t;
    }

    std::vector<MacroParam> parse_signature() {
        std::vector<MacroParam> params;
        expect_op("(");
        while (!is_op(")")) {
            if (!params.empty()) expect_op(",");
            MacroParam p;
            p.name = expect_name();
            if (skip_op("=")) p.default_value = parse_expression(true);
            else if (!params.empty() && params.back().default_value) fail_here("non-default argument follows default argument");
            params.push_back(std::move(p));
        }
        expect_op(")");
        return params;
    }

    StmtPtr parse_macro() {
        auto s = stmt(Stmt::Kind::Macro, next());
        s->text = expect_name();
        s->params = parse_signature();
        int saved = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_statements({"endmacro"}, true);
        loop_depth_ = saved;
        return s;
    }

    StmtPtr parse_call_block() {
        auto s = stmt(Stmt::Kind::CallBlock, next());
        if (is_op("(")) s->params = parse_signature();
        s->expr = parse_expression(true);
        if (s->expr->kind != Expr::Kind::Call) fail_here("expected a call after 'call'");
        int saved = loop_depth_;
        loop_depth_ = 0;
        s->body = parse_statements({"endcall"}, true);
        loop_depth_ = saved;
        return s;
    }

    StmtPtr parse_filter_block() {
        auto s = stmt(Stmt::Kind::FilterBlock, next());
        s->expr = parse_filter(nullptr, true);
        s->body = parse_statements({"endfilter"}, true);
        return s;
    }

    StmtPtr parse_with() {
        auto s = stmt(Stmt::Kind::With, next());
        while (cur().type != Tok::BlockEnd) {
            if (!s->with_targets.empty()) expect_op(",");
            s->with_targets.push_back(parse_target(false, nullptr));
            expect_op("=");
            s->with_values.push_back(parse_expression(true));
        }
        s->body = parse_statements({"endwith"}, true);
        return s;
    }

    void parse_print(Body& out) {
        next();
        bool first = true;
        while (cur().type != Tok::BlockEnd) {
            if (!first) expect_op(",");
            first = false;
            auto s = stmt(Stmt::Kind::Output, cur());
            s->expr = parse_expression(true);
            out.push_back(std::move(s));
        }
    }

    // ---- expressions ------------------------------------------------------------------------
    ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

    ExprPtr parse_condexpr() {
        DepthGuard g(*this);
        ExprPtr e = parse_or();
        while (is_name("if")) {
            ExprPtr c = node(Expr::Kind::CondExpr, next());
            c->b = parse_or();
            if (skip_name("else")) c->c = parse_condexpr();
            c->a = std::move(e);
            e = fin(std::move(c));
        }
        return e;
    }

    ExprPtr binary(Expr::Kind k, const Token& at, ExprPtr l, ExprPtr r, std::string op = "") {
        ExprPtr e = node(k, at);
        e->a = std::move(l);
        e->b = std::move(r);
        e->name = std::move(op);
        return fin(std::move(e));
    }

    ExprPtr parse_or() {
        ExprPtr l = parse_and();
        while (is_name("or")) {
            const Token& at = next();
            l = binary(Expr::Kind::Or, at, std::move(l), parse_and());
        }
        return l;
    }

    ExprPtr parse_and() {
        ExprPtr l = parse_not();
        while (is_name("and")) {
            const Token& at = next();
            l = binary(Expr::Kind::And, at, std::move(l), parse_not());
        }
        return l;
    }

    ExprPtr parse_not() {
        if (is_name("not")) {
            DepthGuard g(*this);
            ExprPtr e = node(Expr::Kind::Not, next());
            e->a = parse_not();
            return fin(std::move(e));
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        const Token& at = cur();
        ExprPtr first = parse_math1();
        ExprPtr e;
        while (true) {
            std::string op;
            if (cur().type == Tok::Op && (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
                                          cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
                op = next().value;
            } else if (skip_name("in")) {
                op = "in";
            } else if (is_name("not") && peek().type == Tok::Name && peek().value == "in") {
                next();
                next();
                op = "notin";
            } else {
                break;
            }
            if (!e) {
                e = node(Expr::Kind::Compare, at);
                e->a = std::move(first);
            }
            e->ops.push_back(op);
            e->items.push_back(parse_math1());
        }
        return e ? fin(std::move(e)) : std::move(first);
    }

    ExprPtr parse_math1() {
        ExprPtr l = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token& at = next();
            l = binary(Expr::Kind::Binary, at, std::move(l), parse_concat(), at.value);
        }
        return l;
    }

    ExprPtr parse_concat() {
        const Token& at = cur();
        ExprPtr first = parse_math2();
        if (!is_op("~")) return first;
        ExprPtr e = node(Expr::Kind::Concat, at);
        e->items.push_back(std::move(first));
        while (skip_op("~")) e->items.push_back(parse_math2());
        return fin(std::move(e));
    }

    ExprPtr parse_math2() {
        ExprPtr l = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& at = next();
            l = binary(Expr::Kind::Binary, at, std::move(l), parse_pow(), at.value);
        }
        return l;
    }

    ExprPtr parse_pow() {
        ExprPtr l = parse_unary(true);
        while (is_op("**")) {
            const Token& at = next();
            l = binary(Expr::Kind::Binary, at, std::move(l), parse_unary(true), "**");
        }
        return l;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard g(*this);
        ExprPtr e;
        if (is_op("-") || is_op("+")) {
            const Token& at = next();
            e = node(at.value == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, at);
            e->a = parse_unary(false);
            e = fin(std::move(e));
        } else {
            e = parse_primary();
        }
        e = parse_postfix(std::move(e));
        if (with_filter) e = parse_filter_expr(std::move(e));
        return e;
    }

    ExprPtr parse_primary() {
        DepthGuard g(*this);
        const Token& tok = cur();
        switch (tok.type) {
            case Tok::Name: {
                next();
                ExprPtr e = node(Expr::Kind::Const, tok);
                if (tok.value == "true" || tok.value == "True") e->value = Value(true);
                else if (tok.value == "false" || tok.value == "False") e->value = Value(false);
                else if (tok.value == "none" || tok.value == "None") e->value = Value::none();
                else {
                    e->kind = Expr::Kind::Name;
                    e->name = tok.value;
                }
                return e;
            }
            case Tok::String: {
                ExprPtr e = node(Expr::Kind::Const, tok);
                std::string s;
                while (cur().type == Tok::String) s += next().value;
                e->value = Value(std::move(s));
                return e;
            }
            case Tok::Int: {
                next();
                ExprPtr e = node(Expr::Kind::Const, tok);
                e->value = Value(parse_int(tok));
                return e;
            }
            case Tok::Float: {
                next();
                ExprPtr e = node(Expr::Kind::Const, tok);
                e->value = Value(std::strtod(tok.value.c_str(), nullptr));
                return e;
            }
            case Tok::Op:
                if (tok.value == "(") {
                    next();
                    ExprPtr e = parse_tuple(true, {}, true);
                    expect_op(")");
                    return e;
                }
                if (tok.value == "[") return parse_list();
                if (tok.value == "{") return parse_dict();
                break;
            default: break;
        }
        fail_here("unexpected " + describe(tok));
    }

    int64_t parse_int(const Token& tok) {
        const std::string& s = tok.value;
        int base = 10;
        size_t off = 0;
        if (s.size() > 2 && s[0] == '0') {
            char x = static_cast<char>(s[1] | 32);
            base = x == 'b' ? 2 : x == 'o' ? 8 : x == 'x' ? 16 : 10;
            if (base != 10) off = 2;
        }
        int64_t v = 0;
        auto r = std::from_chars(s.data() + off, s.data() + s.size(), v, base);
        if (r.ec != std::errc()) fail_at(tok.line, tok.col, "integer literal too large: " + s);
        return v;
    }

    // Comma-separated expressions; a tuple when there is a comma (or `()` in parentheses).
    ExprPtr parse_tuple(bool with_condexpr, const std::vector<const char*>& extra_end, bool explicit_parens) {
        const Token& at = cur();
        std::vector<ExprPtr> args;
        bool is_tuple = false;
        while (true) {
            if (!args.empty()) expect_op(",");
            bool end = cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")");
            for (const char* e : extra_end) end = end || is_name(e);
            if (end) break;
            args.push_back(parse_expression(with_condexpr));
            if (is_op(",")) is_tuple = true;
            else break;
        }
        if (!is_tuple) {
            if (!args.empty()) return std::move(args[0]);
            if (!explicit_parens) fail_here("expected an expression, got " + describe(cur()));
        }
        ExprPtr e = node(Expr::Kind::Tuple, at);
        e->items = std::move(args);
        return fin(std::move(e));
    }

    ExprPtr parse_list() {
        ExprPtr e = node(Expr::Kind::List, next());
        while (!is_op("]")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("]")) break;
            e->items.push_back(parse_expression(true));
        }
        expect_op("]");
        return fin(std::move(e));
    }

    ExprPtr parse_dict() {
        ExprPtr e = node(Expr::Kind::Dict, next());
        while (!is_op("}")) {
            if (!e->items.empty()) expect_op(",");
            if (is_op("}")) break;
            e->items.push_back(parse_expression(true));
            expect_op(":");
            e->items.push_back(parse_expression(true));
        }
        expect_op("}");
        return fin(std::move(e));
    }

    ExprPtr parse_postfix(ExprPtr e) {
        while (true) {
            if (is_op(".") || is_op("[")) e = fin(parse_subscript(std::move(e)));
            else if (is_op("(")) e = fin(parse_call(std::move(e)));
            else return e;
        }
    }

    ExprPtr parse_filter_expr(ExprPtr e) {
        while (true) {
            if (is_op("|")) e = parse_filter(std::move(e), false);
            else if (is_name("is")) e = fin(parse_test(std::move(e)));
            else if (is_op("(")) e = fin(parse_call(std::move(e)));
            else return e;
        }
    }

    ExprPtr parse_subscript(ExprPtr base) {
        DepthGuard g(*this);
        const Token& tok = next();
        if (tok.value == ".") {
            const Token& attr = cur();
            if (attr.type == Tok::Name) {
                next();
                ExprPtr e = node(Expr::Kind::Getattr, tok);
                e->a = std::move(base);
                e->name = attr.value;
                return e;
            }
            if (attr.type != Tok::Int) fail_here("expected name or number after '.'");
            next();
            ExprPtr e = node(Expr::Kind::Getitem, tok);
            e->a = std::move(base);
            e->b = node(Expr::Kind::Const, attr);
            e->b->value = Value(parse_int(attr));
            return e;
        }
        std::vector<ExprPtr> args;
        while (!is_op("]")) {
            if (!args.empty()) expect_op(",");
            args.push_back(parse_subscribed());
        }
        expect_op("]");
        ExprPtr e = node(Expr::Kind::Getitem, tok);
        e->a = std::move(base);
        if (args.size() == 1) {
            e->b = std::move(args[0]);
        } else {
            e->b = node(Expr::Kind::Tuple, tok);
            e->b->items = std::move(args);
        }
        return e;
    }

    ExprPtr parse_subscribed() {
        const Token& at = cur();
        ExprPtr start;
        if (!is_op(":")) {
            start = parse_expression(true);
            if (!is_op(":")) return start;
        }
        next();  // ':'
        ExprPtr s = node(Expr::Kind::Slice, at);
        s->a = std::move(start);
        if (!is_op("]") && !is_op(",") && !is_op(":")) s->b = parse_expression(true);
        if (skip_op(":")) {
            if (!is_op("]") && !is_op(",")) s->c = parse_expression(true);
        }
        return fin(std::move(s));
    }

    CallSpec parse_call_args() {
        CallSpec spec;
        expect_op("(");
        bool need_comma = false;
        while (!is_op(")")) {
            if (need_comma) {
                expect_op(",");
                if (is_op(")")) break;
            }
            if (is_op("*")) {
                next();
                spec.dyn_args = parse_expression(true);
            } else if (is_op("**")) {
                next();
                spec.dyn_kwargs = parse_expression(true);
            } else if (cur().type == Tok::Name && peek().type == Tok::Op && peek().value == "=") {
                std::string key = next().value;
                next();
                spec.kwargs.push_back({key, parse_expression(true)});
            } else {
                if (!spec.kwargs.empty() || spec.dyn_args || spec.dyn_kwargs)
                    fail_here("invalid syntax for function call expression");
                spec.args.push_back(parse_expression(true));
            }
            need_comma = true;
        }
        expect_op(")");
        return spec;
    }

    ExprPtr parse_call(ExprPtr fn) {
        DepthGuard g(*this);
        ExprPtr e = node(Expr::Kind::Call, cur());
        e->call = parse_call_args();
        e->a = std::move(fn);
        return e;
    }

    // `| name(args)` chains; base may be null ({% filter %} and {% set x | f %} blocks).
    ExprPtr parse_filter(ExprPtr base, bool start_inline) {
        while (is_op("|") || start_inline) {
            DepthGuard g(*this);
            if (!start_inline) next();
            start_inline = false;
            const Token& at = cur();
            std::string name = expect_name();
            while (skip_op(".")) name.append(".").append(expect_name());
            ExprPtr e = node(Expr::Kind::Filter, at);
            e->name = name;
            if (is_op("(")) e->call = parse_call_args();
            e->a = std::move(base);
            base = fin(std::move(e));
        }
        return base;
    }

    ExprPtr parse_test(ExprPtr base) {
        DepthGuard g(*this);
        const Token& at = next();  // 'is'
        bool negated = skip_name("not");
        std::string name = expect_name();
        while (skip_op(".")) name.append(".").append(expect_name());
        ExprPtr e = node(Expr::Kind::Test, at);
        e->name = name;
        e->a = std::move(base);
        const Token& c = cur();
        bool arg_start = c.type == Tok::Name || c.type == Tok::String || c.type == Tok::Int ||
                         c.type == Tok::Float || (c.type == Tok::Op && (c.value == "[" || c.value == "{"));
        if (is_op("(")) {
            e->call = parse_call_args();
        } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
            if (is_name("is")) fail_here("you cannot chain multiple tests with is");
            e->call.args.push_back(parse_postfix(parse_primary()));
        }
        if (!negated) return e;
        ExprPtr n = node(Expr::Kind::Not, at);
        n->a = fin(std::move(e));
        return fin(std::move(n));
    }
};

}  // namespace

Template parse(std::string_view source, const LexOptions& opt) { return Parser(tokenize(source, opt)).run(); }

}  // namespace tessera::jinja
