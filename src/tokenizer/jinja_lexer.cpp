// Jinja lexer, following jinja2's lexer rules (see jinja2/lexer.py) so whitespace handling
// matches byte for byte.
#include "tokenizer/jinja_lexer.h"

#include <cstring>

#include "core/status.h"
#include "tokenizer/jinja_text.h"

namespace tessera::jinja {

void fail_at(int line, int col, const std::string& msg) {
    fail(ErrorKind::Invalid, "chat template: line {} col {}: {}", line, col, msg);
}

namespace {

bool is_name_start(unsigned char c) { return c == '_' || ((c | 32) >= 'a' && (c | 32) <= 'z') || c >= 0x80; }
bool is_name_char(unsigned char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Length in bytes of the (Unicode) whitespace run at s[pos...].
size_t space_run(std::string_view s, size_t pos) {
    size_t p = pos;
    while (p < s.size()) {
        unsigned char c = static_cast<unsigned char>(s[p]);
        if (c < 0x80) {
            if (!text::is_space(c)) break;
            ++p;
            continue;
        }
        size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
        std::u32string u = text::decode(s.substr(p, n));
        if (u.size() != 1 || !text::is_space(u[0])) break;
        p += n;
    }
    return p - pos;
}

// Python str.rstrip() on UTF-8.
std::string_view rstrip_space(std::string_view s) {
    if (text::is_ascii(s)) {
        size_t e = s.size();
        while (e > 0 && text::is_space(static_cast<unsigned char>(s[e - 1]))) --e;
        return s.substr(0, e);
    }
    std::string stripped = text::strip(s, nullptr, false, true);
    return s.substr(0, stripped.size());
}

bool all_space(std::string_view s) { return !s.empty() && space_run(s, 0) == s.size(); }

class Lexer {
public:
    Lexer(std::string_view src, const LexOptions& opt) : opt_(opt) {
        // Newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False).
        src_.reserve(src.size());
        for (size_t i = 0; i < src.size(); ++i) {
            if (src[i] == '\r') {
                src_.push_back('\n');
                if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
            } else {
                src_.push_back(src[i]);
            }
        }
        if (!src_.empty() && src_.back() == '\n') src_.pop_back();
    }

    std::vector<Token> run() {
        while (pos_ < src_.size()) root();
        emit(Tok::Eof, "", pos_);
        return std::move(out_);
    }

private:
    const LexOptions& opt_;
    std::string src_;
    size_t pos_ = 0;
    bool line_starting_ = true;
    std::vector<Token> out_;
    // line bookkeeping: line of pos line_pos_, which starts at byte line_start_
    int line_ = 1;
    size_t line_scan_ = 0, line_start_ = 0;

    void locate(size_t pos, int& line, int& col) {
        while (line_scan_ < pos && line_scan_ < src_.size()) {
            if (src_[line_scan_] == '\n') {
                ++line_;
                line_start_ = line_scan_ + 1;
            }
            ++line_scan_;
        }
        line = line_;
        col = static_cast<int>(pos - line_start_) + 1;
    }

    [[noreturn]] void error(size_t pos, const std::string& msg) {
        int l, c;
        locate(pos, l, c);
        fail_at(l, c, msg);
    }

    void emit(Tok t, std::string v, size_t pos) {
        Token tok{t, std::move(v)};
        locate(pos, tok.line, tok.col);
        out_.push_back(std::move(tok));
    }

    bool at(size_t p, const char* s) const { return src_.compare(p, std::strlen(s), s) == 0; }

    // Text before a tag, with the tag's whitespace control applied (jinja2 OptionalLStrip).
    void emit_text(size_t begin, size_t end, char sign, bool is_variable) {
        std::string_view text(src_.data() + begin, end - begin);
        if (sign == '-') {
            text = rstrip_space(text);
        } else if (sign != '+' && opt_.lstrip_blocks && !is_variable) {
            size_t nl = text.rfind('\n');
            size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
            if ((l_pos > 0 || line_starting_) && all_space(text.substr(l_pos))) text = text.substr(0, l_pos);
        }
        if (!text.empty()) emit(Tok::Data, std::string(text), begin);
    }

    // After a tag end: "-" eats all whitespace, a plain end eats one newline when trim_blocks.
    void after_end(size_t end_pos, char sign, bool trim) {
        pos_ = end_pos;
        if (sign == '-') pos_ += space_run(src_, pos_);
        else if (sign != '+' && trim && opt_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
    }

    void root() {
        size_t i = pos_;
        while (true) {
            i = src_.find('{', i);
            if (i == std::string::npos || i + 1 >= src_.size()) {
                emit(Tok::Data, src_.substr(pos_), pos_);
                pos_ = src_.size();
                return;
            }
            char k = src_[i + 1];
            if (k == '%' || k == '{' || k == '#') break;
            ++i;
        }
        char kind = src_[i + 1];
        size_t p = i + 2;
        char sign = (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ? src_[p] : 0;
        if (kind == '%' && raw_begin(i, sign)) return;
        emit_text(pos_, i, sign, kind == '{');
        if (sign) ++p;
        if (kind == '#') return comment(i, p);
        emit(kind == '%' ? Tok::BlockBegin : Tok::VarBegin, "", i);
        pos_ = p;
        tag(kind == '%', i);
    }

    // {% raw %}...{% endraw %}: the body is data, untouched.
    bool raw_begin(size_t start, char sign) {
        size_t p = start + 2 + (sign ? 1 : 0);
        p += space_run(src_, p);
        if (!at(p, "raw")) return false;
        p += 3;
        p += space_run(src_, p);
        size_t body;
        if (at(p, "-%}")) body = p + 3 + space_run(src_, p + 3);
        else if (at(p, "%}")) body = p + 2;
        else return false;
        emit_text(pos_, start, sign, false);
        for (size_t q = body; (q = src_.find("{%", q)) != std::string::npos; ++q) {
            size_t r = q + 2;
            char esign = (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) ? src_[r] : 0;
            if (esign) ++r;
            r += space_run(src_, r);
            if (!at(r, "endraw")) continue;
            r += 6;
            r += space_run(src_, r);
            char end_sign;
            size_t end;
            if (at(r, "+%}")) end_sign = '+', end = r + 3;
            else if (at(r, "-%}")) end_sign = '-', end = r + 3;
            else if (at(r, "%}")) end_sign = 0, end = r + 2;
            else continue;
            line_starting_ = false;
            emit_text(body, q, esign, false);
            after_end(end, end_sign, true);
            return true;
        }
        error(start, "missing end of raw directive");
    }

    void comment(size_t start, size_t p) {
        for (; p < src_.size(); ++p) {
            char sign = src_[p];
            if ((sign == '+' || sign == '-') && at(p + 1, "#}")) return after_end(p + 3, sign, true);
            if (at(p, "#}")) return after_end(p + 2, 0, true);
        }
        error(start, "missing end of comment tag");
    }

    void tag(bool block, size_t start) {
        std::vector<char> balance;
        const char* end = block ? "%}" : "}}";
        while (true) {
            if (pos_ >= src_.size()) error(start, "unexpected end of template: tag is not closed");
            if (balance.empty()) {
                char c = src_[pos_];
                if ((c == '-' || (c == '+' && block)) && at(pos_ + 1, end)) {
                    emit(block ? Tok::BlockEnd : Tok::VarEnd, "", pos_);
                    return after_end(pos_ + 3, c, block);
                }
                if (at(pos_, end)) {
                    emit(block ? Tok::BlockEnd : Tok::VarEnd, "", pos_);
                    return after_end(pos_ + 2, 0, block);
                }
            }
            size_t ws = space_run(src_, pos_);
            if (ws) {
                pos_ += ws;
                continue;
            }
            char c = src_[pos_];
            if (is_digit(c)) {
                number();
            } else if (is_name_start(static_cast<unsigned char>(c))) {
                size_t b = pos_;
                while (pos_ < src_.size() && is_name_char(static_cast<unsigned char>(src_[pos_]))) ++pos_;
                emit(Tok::Name, src_.substr(b, pos_ - b), b);
            } else if (c == '\'' || c == '"') {
                string_literal();
            } else {
                op(balance);
            }
        }
    }

    size_t digits(size_t p, bool (*ok)(char)) {
        // (\d+_)*\d+ style runs: digits with single underscores between them
        size_t q = p;
        while (q < src_.size() && (ok(src_[q]) || (src_[q] == '_' && q > p && q + 1 < src_.size() && ok(src_[q + 1]))))
            ++q;
        return q;
    }

    void number() {
        size_t b = pos_;
        auto dec = [](char c) { return c >= '0' && c <= '9'; };
        bool after_dot = b > 0 && src_[b - 1] == '.';
        size_t q = digits(b, dec);
        // float: digits (. digits)? e[+-]digits | digits . digits
        if (!after_dot) {
            size_t f = q;
            bool frac = false;
            if (f < src_.size() && src_[f] == '.' && f + 1 < src_.size() && dec(src_[f + 1])) {
                f = digits(f + 1, dec);
                frac = true;
            }
            size_t e = f;
            bool expo = false;
            if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
                size_t s = e + 1;
                if (s < src_.size() && (src_[s] == '+' || src_[s] == '-')) ++s;
                if (s < src_.size() && dec(src_[s])) {
                    e = digits(s, dec);
                    expo = true;
                }
            }
            if (frac || expo) {
                std::string t;
                for (size_t i = b; i < (expo ? e : f); ++i)
                    if (src_[i] != '_') t.push_back(src_[i]);
                emit(Tok::Float, t, b);
                pos_ = expo ? e : f;
                return;
            }
        }
        // integer: 0b / 0o / 0x prefixes, [1-9](_?\d)*, 0(_?0)*
        if (src_[b] == '0' && b + 2 < src_.size() + 1 && b + 1 < src_.size()) {
            char x = static_cast<char>(src_[b + 1] | 32);
            bool (*ok)(char) = nullptr;
            if (x == 'b') ok = [](char c) { return c == '0' || c == '1'; };
            if (x == 'o') ok = [](char c) { return c >= '0' && c <= '7'; };
            if (x == 'x') ok = [](char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'f'); };
            if (ok) {
                size_t s = b + 2;
                if (s < src_.size() && src_[s] == '_') ++s;
                size_t e = (s < src_.size() && ok(src_[s])) ? digits(s, ok) : s;
                if (e > s) {
                    std::string t = src_.substr(b, 2);
                    for (size_t i = b + 2; i < e; ++i)
                        if (src_[i] != '_') t.push_back(src_[i]);
                    emit(Tok::Int, t, b);
                    pos_ = e;
                    return;
                }
            }
        }
        size_t e = b + 1;
        if (src_[b] == '0') {
            while (e < src_.size() && (src_[e] == '0' || (src_[e] == '_' && e + 1 < src_.size() && src_[e + 1] == '0')))
                ++e;
        } else {
            e = q;
        }
        std::string t;
        for (size_t i = b; i < e; ++i)
            if (src_[i] != '_') t.push_back(src_[i]);
        emit(Tok::Int, t, b);
        pos_ = e;
    }

    static int hexval(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        c = static_cast<char>(c | 32);
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    }

    // Python "unicode-escape" decoding of a string literal body.
    void string_literal() {
        size_t b = pos_;
        char q = src_[pos_++];
        std::string v;
        while (true) {
            if (pos_ >= src_.size()) error(b, "unterminated string literal");
            char c = src_[pos_];
            if (c == q) {
                ++pos_;
                break;
            }
            if (c != '\\') {
                v.push_back(c);
                ++pos_;
                continue;
            }
            if (pos_ + 1 >= src_.size()) error(b, "unterminated string literal");
            char e = src_[pos_ + 1];
            pos_ += 2;
            switch (e) {
                case '\n': break;
                case '\\': v.push_back('\\'); break;
                case '\'': v.push_back('\''); break;
                case '"': v.push_back('"'); break;
                case 'a': v.push_back('\a'); break;
                case 'b': v.push_back('\b'); break;
                case 'f': v.push_back('\f'); break;
                case 'n': v.push_back('\n'); break;
                case 'r': v.push_back('\r'); break;
                case 't': v.push_back('\t'); break;
                case 'v': v.push_back('\v'); break;
                case 'x':
                case 'u':
                case 'U': {
                    int n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    uint32_t cp = 0;
                    for (int i = 0; i < n; ++i) {
                        int h = pos_ < src_.size() ? hexval(src_[pos_]) : -1;
                        if (h < 0) error(b, "truncated \\" + std::string(1, e) + " escape in string literal");
                        cp = cp * 16 + static_cast<uint32_t>(h);
                        ++pos_;
                    }
                    if (cp > 0x10FFFF) error(b, "illegal Unicode character in string literal");
                    text::append_utf8(v, cp);
                    break;
                }
                default:
                    if (e >= '0' && e <= '7') {
                        uint32_t cp = static_cast<uint32_t>(e - '0');
                        for (int i = 0; i < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++i)
                            cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
                        text::append_utf8(v, cp);
                    } else {
                        v.push_back('\\');
                        v.push_back(e);
                    }
            }
        }
        emit(Tok::String, std::move(v), b);
    }

    void op(std::vector<char>& balance) {
        static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
        for (const char* t : kTwo)
            if (at(pos_, t)) {
                emit(Tok::Op, t, pos_);
                pos_ += 2;
                return;
            }
        char c = src_[pos_];
        if (!std::strchr("+-/*%~[](){}<>=.:|,;", c)) {
            error(pos_, std::string("unexpected char '") + c + "'");
        }
        if (c == '(' || c == '[' || c == '{') balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
        if (c == ')' || c == ']' || c == '}') {
            if (balance.empty()) error(pos_, std::string("unexpected '") + c + "'");
            if (balance.back() != c) error(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
            balance.pop_back();
        }
        emit(Tok::Op, std::string(1, c), pos_);
        ++pos_;
    }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexOptions& opt) { return Lexer(source, opt).run(); }

}  // namespace tessera::jinja
