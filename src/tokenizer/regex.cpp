// Backtracking regex: parse to a tree, compile to a Split/Jmp program, run with an explicit
// backtrack stack (no recursion per character, so 100 KB runs of one class are fine).
#include "tokenizer/regex.h"

#include <memory>

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace tessera::tok {
namespace {

enum AssertKind : uint32_t { kBegin, kEnd, kWordBoundary, kNotWordBoundary };

struct Node {
    enum Kind { Empty, Class, Any, Concat, Alt, Repeat, Look, Assert } kind;
    std::vector<std::unique_ptr<Node>> kids;
    uint32_t cls = 0;     // Class
    int min = 0, max = 0; // Repeat (max -1: unbounded)
    bool greedy = true;
    bool negative = false; // Look
    uint32_t assert_kind = 0;
};
using NodeP = std::unique_ptr<Node>;

NodeP make(Node::Kind k) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    return n;
}

bool nullable(const Node& n) {
    switch (n.kind) {
        case Node::Empty: case Node::Look: case Node::Assert: return true;
        case Node::Class: case Node::Any: return false;
        case Node::Concat:
            for (auto& k : n.kids) if (!nullable(*k)) return false;
            return true;
        case Node::Alt:
            for (auto& k : n.kids) if (nullable(*k)) return true;
            return false;
        case Node::Repeat: return n.min == 0 || nullable(*n.kids[0]);
    }
    return true;
}

uint32_t gc_bit(GeneralCategory g) { return 1u << static_cast<uint32_t>(g); }

// \p{NAME} -> mask of general categories.
std::optional<uint32_t> category_mask(const std::string& name) {
    using G = GeneralCategory;
    static const char* kNames[] = {"Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd",
                                   "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm",
                                   "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"};
    for (uint32_t i = 0; i < 30; ++i)
        if (name == kNames[i]) return 1u << i;
    struct Major { const char* s; const char* l; char c; };
    static const Major kMajor[] = {{"L", "Letter", 'L'}, {"M", "Mark", 'M'}, {"N", "Number", 'N'},
                                   {"P", "Punctuation", 'P'}, {"S", "Symbol", 'S'},
                                   {"Z", "Separator", 'Z'}, {"C", "Other", 'C'}};
    for (const auto& m : kMajor) {
        if (name == m.s || name == m.l) {
            uint32_t mask = 0;
            for (uint32_t i = 0; i < 30; ++i)
                if (major_category(static_cast<G>(i)) == m.c) mask |= 1u << i;
            return mask;
        }
    }
    if (name == "LC" || name == "L&") return gc_bit(G::Lu) | gc_bit(G::Ll) | gc_bit(G::Lt);
    return std::nullopt;
}

bool is_word(char32_t cp) {
    if (cp < 128) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    const auto g = general_category(cp);
    const char m = major_category(g);
    return m == 'L' || m == 'M' || g == GeneralCategory::Nd || g == GeneralCategory::Pc;
}

}  // namespace

bool Regex::CharClass::raw_contains(char32_t cp) const {
    for (const auto& it : items) {
        bool hit = false;
        switch (it.kind) {
            case ClassItem::Range: hit = cp >= it.lo && cp <= it.hi; break;
            case ClassItem::Categories: hit = (it.mask >> static_cast<uint32_t>(general_category(cp))) & 1; break;
            case ClassItem::Space: hit = is_whitespace(cp); break;
            case ClassItem::Digit: hit = general_category(cp) == GeneralCategory::Nd; break;
            case ClassItem::Word: hit = is_word(cp); break;
        }
        if (hit != it.negate) return !negate;
    }
    return negate;
}

bool Regex::CharClass::contains(char32_t cp) const {
    if (cp < 128) return (ascii[cp >> 6] >> (cp & 63)) & 1;
    if (raw_contains(cp)) return true;
    if (icase) {
        const char32_t f = simple_case_fold(cp);
        if (f != cp && raw_contains(f)) return true;
    }
    return false;
}

class RegexCompiler {
public:
    RegexCompiler(Regex& re, std::u32string_view p) : re_(re), p_(p) {}

    void compile() {
        NodeP root = parse_alt();
        if (i_ < p_.size()) error("unbalanced ')'");
        emit(*root);
        re_.prog_.push_back({Regex::Op::Match});
    }

private:
    [[noreturn]] void error(const std::string& what) {
        fail(ErrorKind::Unsupported, "regex '{}': {} at offset {}", re_.pattern_, what, i_);
    }
    bool eof() const { return i_ >= p_.size(); }
    char32_t peek() const { return p_[i_]; }
    bool accept(char32_t c) {
        if (!eof() && p_[i_] == c) return ++i_, true;
        return false;
    }

    NodeP parse_alt() {
        auto first = parse_concat();
        if (eof() || peek() != '|') return first;
        auto alt = make(Node::Alt);
        alt->kids.push_back(std::move(first));
        while (accept('|')) alt->kids.push_back(parse_concat());
        return alt;
    }

    NodeP parse_concat() {
        auto cat = make(Node::Concat);
        const bool saved_icase = icase_;
        while (!eof() && peek() != '|' && peek() != ')') {
            NodeP atom = parse_atom();
            if (!atom) continue;  // an inline flag group like (?i)
            atom = parse_quantifier(std::move(atom));
            cat->kids.push_back(std::move(atom));
        }
        // (?i) lasts to the end of the enclosing group; restore at the group's end.
        if (eof() || peek() == ')') icase_ = saved_icase;
        return cat;
    }

    NodeP parse_quantifier(NodeP atom) {
        for (;;) {
            if (eof()) return atom;
            int mn, mx;
            const size_t start = i_;
            if (accept('?')) mn = 0, mx = 1;
            else if (accept('*')) mn = 0, mx = -1;
            else if (accept('+')) mn = 1, mx = -1;
            else if (peek() == '{' && parse_braces(&mn, &mx)) {}
            else return atom;
            if (atom->kind == Node::Look || atom->kind == Node::Assert) { i_ = start; error("quantified assertion"); }
            auto rep = make(Node::Repeat);
            rep->min = mn, rep->max = mx;
            if (accept('?')) rep->greedy = false;
            else if (!eof() && peek() == '+') error("possessive quantifier");
            if (mx < 0 && nullable(*atom)) error("unbounded repeat of an expression that can be empty");
            if (mn > 1000 || mx > 1000) error("repeat count over 1000");
            rep->kids.push_back(std::move(atom));
            atom = std::move(rep);
        }
    }

    // {n}, {n,}, {n,m}; anything else is a literal '{' (as in Oniguruma).
    bool parse_braces(int* mn, int* mx) {
        size_t j = i_ + 1;
        auto num = [&](int* out) {
            size_t s = j;
            long v = 0;
            while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9' && v < 100000) v = v * 10 + (p_[j++] - '0');
            *out = static_cast<int>(v);
            return j > s;
        };
        if (!num(mn)) return false;
        if (j < p_.size() && p_[j] == '}') { *mx = *mn; i_ = j + 1; return true; }
        if (j >= p_.size() || p_[j] != ',') return false;
        ++j;
        if (j < p_.size() && p_[j] == '}') { *mx = -1; i_ = j + 1; return true; }
        if (!num(mx) || j >= p_.size() || p_[j] != '}') return false;
        if (*mx < *mn) error("bad repeat range");
        i_ = j + 1;
        return true;
    }

    NodeP class_node(Regex::CharClass c) {
        c.icase = c.icase || icase_;
        for (char32_t cp = 0; cp < 128; ++cp) {
            bool in = c.raw_contains(cp);
            if (!in && c.icase) {
                const char32_t f = simple_case_fold(cp);
                // Upper-case partner of an ASCII lower-case letter, for ranges like [a-z].
                const char32_t u = (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
                in = (f != cp && c.raw_contains(f)) || (u != cp && c.raw_contains(u));
            }
            if (in) c.ascii[cp >> 6] |= 1ull << (cp & 63);
        }
        auto n = make(Node::Class);
        n->cls = static_cast<uint32_t>(re_.classes_.size());
        re_.classes_.push_back(std::move(c));
        return n;
    }

    NodeP literal(char32_t cp) {
        Regex::CharClass c;
        char32_t lit = icase_ ? simple_case_fold(cp) : cp;
        c.items.push_back({Regex::ClassItem::Range, false, lit, lit, 0});
        if (icase_ && lit != cp) c.items.push_back({Regex::ClassItem::Range, false, cp, cp, 0});
        return class_node(std::move(c));
    }

    NodeP parse_atom() {
        const char32_t c = p_[i_++];
        switch (c) {
            case '(': return parse_group();
            case '[': return class_node(parse_class());
            case '.': return make(Node::Any);
            case '^': { auto n = make(Node::Assert); n->assert_kind = kBegin; return n; }
            case '$': { auto n = make(Node::Assert); n->assert_kind = kEnd; return n; }
            case '\\': return parse_escape_atom();
            case '*': case '+': case '?': --i_; error("nothing to repeat");
            default: return literal(c);
        }
    }

    NodeP parse_group() {
        if (++depth_ > 200) error("groups nested too deeply");
        struct Leave { int& d; ~Leave() { --d; } } leave{depth_};
        if (!accept('?')) {
            auto body = parse_alt();
            if (!accept(')')) error("missing ')'");
            return body;
        }
        if (accept(':')) return group_body();
        if (accept('=') || (!eof() && peek() == '!')) {
            const bool neg = accept('!');
            auto look = make(Node::Look);
            look->negative = neg;
            look->kids.push_back(parse_alt());
            if (!accept(')')) error("missing ')'");
            return look;
        }
        // Inline flags: (?i) (?-i) (?i:...)
        bool on = true, icase = icase_;
        while (!eof() && peek() != ':' && peek() != ')') {
            const char32_t f = p_[i_++];
            if (f == '-') on = false;
            else if (f == 'i') icase = on;
            else error("unsupported group or flag");
        }
        if (accept(')')) {
            icase_ = icase;
            return nullptr;
        }
        accept(':');
        const bool saved = icase_;
        icase_ = icase;
        auto body = group_body();
        icase_ = saved;
        return body;
    }

    NodeP group_body() {
        auto body = parse_alt();
        if (!accept(')')) error("missing ')'");
        return body;
    }

    uint32_t hex(size_t max_digits, bool braces) {
        uint32_t v = 0;
        size_t n = 0;
        if (braces && !accept('{')) error("expected '{'");
        while (!eof() && n < max_digits) {
            const char32_t h = peek();
            int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                  : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
            if (d < 0) break;
            v = v * 16 + d, ++i_, ++n;
        }
        if (n == 0 || (braces && !accept('}'))) error("bad hex escape");
        if (v > 0x10FFFF) error("code point out of range");
        return v;
    }

    // An escape inside or outside a class: one class item, or a literal code point.
    bool parse_escape(Regex::ClassItem* item, char32_t* lit) {
        if (eof()) error("trailing backslash");
        const char32_t c = p_[i_++];
        using I = Regex::ClassItem;
        switch (c) {
            case 's': case 'S': *item = {I::Space, c == 'S', 0, 0, 0}; return true;
            case 'd': case 'D': *item = {I::Digit, c == 'D', 0, 0, 0}; return true;
            case 'w': case 'W': *item = {I::Word, c == 'W', 0, 0, 0}; return true;
            case 'h': case 'H': error("\\h is not supported");
            case 'p': case 'P': {
                bool neg = c == 'P';
                std::string name;
                if (accept('{')) {
                    if (accept('^')) neg = !neg;
                    while (!eof() && peek() != '}') name.push_back(static_cast<char>(p_[i_++]));
                    if (!accept('}')) error("missing '}'");
                } else {
                    if (eof()) error("bad \\p");
                    name.push_back(static_cast<char>(p_[i_++]));
                }
                auto mask = category_mask(name);
                if (!mask) error("unsupported property \\p{" + name + "}");
                *item = {I::Categories, neg, 0, 0, *mask};
                return true;
            }
            case 'n': *lit = '\n'; return false;
            case 'r': *lit = '\r'; return false;
            case 't': *lit = '\t'; return false;
            case 'f': *lit = '\f'; return false;
            case 'v': *lit = '\v'; return false;
            case 'a': *lit = 0x07; return false;
            case 'e': *lit = 0x1B; return false;
            case '0': *lit = 0; return false;
            case 'x': *lit = (!eof() && peek() == '{') ? hex(8, true) : hex(2, false); return false;
            case 'u': *lit = hex(4, false); return false;
            default:
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
                    { --i_; error("unsupported escape"); }
                *lit = c;
                return false;
        }
    }

    NodeP parse_escape_atom() {
        if (!eof()) {
            const char32_t c = peek();
            uint32_t kind = 99;
            if (c == 'A') kind = kBegin;
            else if (c == 'z') kind = kEnd;
            else if (c == 'b') kind = kWordBoundary;
            else if (c == 'B') kind = kNotWordBoundary;
            if (kind != 99) {
                ++i_;
                auto n = make(Node::Assert);
                n->assert_kind = kind;
                return n;
            }
        }
        Regex::ClassItem item{};
        char32_t lit = 0;
        if (!parse_escape(&item, &lit)) return literal(lit);
        Regex::CharClass c;
        c.items.push_back(item);
        return class_node(std::move(c));
    }

    Regex::CharClass parse_class() {
        Regex::CharClass c;
        if (accept('^')) c.negate = true;
        bool first = true;
        for (;;) {
            if (eof()) error("missing ']'");
            char32_t ch = p_[i_];
            if (ch == ']' && !first) { ++i_; break; }
            first = false;
            if (ch == '[') error("nested classes / POSIX brackets are not supported");
            if (ch == '&' && i_ + 1 < p_.size() && p_[i_ + 1] == '&') error("class intersection is not supported");
            ++i_;
            char32_t lo = ch;
            if (ch == '\\') {
                Regex::ClassItem item{};
                if (parse_escape(&item, &lo)) { c.items.push_back(item); continue; }
            }
            char32_t hi = lo;
            if (i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
                ++i_;
                hi = p_[i_++];
                if (hi == '\\') {
                    Regex::ClassItem item{};
                    if (parse_escape(&item, &hi)) error("bad class range");
                }
                if (hi < lo) error("bad class range");
            }
            c.items.push_back({Regex::ClassItem::Range, false, lo, hi, 0});
        }
        return c;
    }

    // ---- code generation --------------------------------------------------------------
    uint32_t pc() const { return static_cast<uint32_t>(re_.prog_.size()); }
    uint32_t push(Regex::Inst in) { re_.prog_.push_back(in); return pc() - 1; }

    void emit(const Node& n) {
        using Op = Regex::Op;
        switch (n.kind) {
            case Node::Empty: break;
            case Node::Class: push({Op::Char, false, n.cls, 0}); break;
            case Node::Any: push({Op::Any}); break;
            case Node::Assert: push({Op::Assert, false, n.assert_kind, 0}); break;
            case Node::Concat: for (auto& k : n.kids) emit(*k); break;
            case Node::Alt: {
                std::vector<uint32_t> jumps;
                for (size_t k = 0; k < n.kids.size(); ++k) {
                    if (k + 1 < n.kids.size()) {
                        const uint32_t split = push({Op::Split});
                        re_.prog_[split].a = pc();
                        emit(*n.kids[k]);
                        jumps.push_back(push({Op::Jmp}));
                        re_.prog_[split].b = pc();
                    } else {
                        emit(*n.kids[k]);
                    }
                }
                for (uint32_t j : jumps) re_.prog_[j].a = pc();
                break;
            }
            case Node::Look: {
                const uint32_t look = push({Op::Look, n.negative, 0, 0});
                emit(*n.kids[0]);
                push({Op::LookEnd});
                re_.prog_[look].a = pc();
                break;
            }
            case Node::Repeat: {
                const Node& body = *n.kids[0];
                for (int k = 0; k < n.min; ++k) emit(body);
                if (n.max < 0) {
                    const uint32_t split = push({Op::Split});
                    emit(body);
                    push({Op::Jmp, false, split, 0});
                    set_split(split, split + 1, pc(), n.greedy);
                } else {
                    std::vector<uint32_t> splits;
                    for (int k = n.min; k < n.max; ++k) {
                        splits.push_back(push({Op::Split}));
                        emit(body);
                    }
                    for (uint32_t s : splits) set_split(s, s + 1, pc(), n.greedy);
                }
                break;
            }
        }
    }

    void set_split(uint32_t at, uint32_t body, uint32_t skip, bool greedy) {
        re_.prog_[at].a = greedy ? body : skip;
        re_.prog_[at].b = greedy ? skip : body;
    }

    Regex& re_;
    std::u32string_view p_;
    size_t i_ = 0;
    int depth_ = 0;
    bool icase_ = false;
};

Regex::Regex(std::string_view pattern) : pattern_(pattern) {
    const std::u32string p = utf8_to_cpts(pattern);
    for (char32_t c : p)
        if (is_invalid_byte(c)) fail(ErrorKind::Invalid, "regex '{}': invalid UTF-8", pattern_);
    RegexCompiler(*this, p).compile();
}

bool Regex::run(uint32_t start_pc, std::u32string_view s, size_t start_pos, size_t* end) const {
    struct Thread { uint32_t pc; size_t pos; };
    // A budget against catastrophic backtracking in a hostile pattern; the patterns tokenizers
    // use need a few steps per character.
    const uint64_t budget = 50'000'000 + 200 * static_cast<uint64_t>(s.size());
    uint64_t steps = 0;
    std::vector<Thread> stack;
    stack.push_back({start_pc, start_pos});
    while (!stack.empty()) {
        uint32_t pc = stack.back().pc;
        size_t pos = stack.back().pos;
        stack.pop_back();
        for (;;) {
            if (++steps > budget)
                fail(ErrorKind::Invalid, "regex '{}': too much backtracking at offset {}", pattern_, start_pos);
            const Inst& in = prog_[pc];
            bool ok = true;
            switch (in.op) {
                case Op::Char:
                    ok = pos < s.size() && classes_[in.a].contains(s[pos]);
                    ++pc, ++pos;
                    break;
                case Op::Any:
                    ok = pos < s.size() && s[pos] != '\n';
                    ++pc, ++pos;
                    break;
                case Op::Split:
                    stack.push_back({in.b, pos});
                    pc = in.a;
                    break;
                case Op::Jmp: pc = in.a; break;
                case Op::Look: {
                    size_t ignored;
                    const bool m = run(pc + 1, s, pos, &ignored);
                    ok = m != in.flag;
                    pc = in.a;
                    break;
                }
                case Op::Assert: {
                    switch (in.a) {
                        case kBegin: ok = pos == 0; break;
                        case kEnd: ok = pos == s.size(); break;
                        default: {
                            const bool before = pos > 0 && is_word(s[pos - 1]);
                            const bool after = pos < s.size() && is_word(s[pos]);
                            ok = (before != after) == (in.a == kWordBoundary);
                        }
                    }
                    ++pc;
                    break;
                }
                case Op::LookEnd:
                case Op::Match:
                    *end = pos;
                    return true;
            }
            if (!ok) break;
        }
    }
    return false;
}

int64_t Regex::match_at(std::u32string_view s, size_t at) const {
    size_t end;
    return run(0, s, at, &end) ? static_cast<int64_t>(end) : -1;
}

std::optional<std::pair<size_t, size_t>> Regex::search(std::u32string_view s, size_t from) const {
    for (size_t at = from; at <= s.size(); ++at) {
        size_t end;
        if (run(0, s, at, &end)) return std::pair(at, end);
    }
    return std::nullopt;
}

}  // namespace tessera::tok
