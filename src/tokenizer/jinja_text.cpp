// UTF-8 helpers with Python str semantics for the Jinja interpreter.
#include "tokenizer/jinja_text.h"

#include "core/status.h"
#include "tokenizer/unicode.h"

namespace tessera::jinja::text {

std::u32string decode(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        char32_t cp;
        const size_t len = tok::utf8_decode_one(s, i, &cp);
        out.push_back(len ? cp : 0xFFFD);
        i += len ? len : 1;
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) { tok::append_utf8_plain(out, cp); }

std::string encode(std::u32string_view s) {
    std::string out;
    out.reserve(s.size());
    for (char32_t c : s) append_utf8(out, c);
    return out;
}

bool is_ascii(std::string_view s) {
    for (char c : s)
        if (static_cast<unsigned char>(c) >= 0x80) return false;
    return true;
}

size_t length(std::string_view s) {
    if (is_ascii(s)) return s.size();
    return decode(s).size();
}

bool is_space(char32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_printable(char32_t c) {
    if (c < 0x20 || c == 0x7F || (c >= 0x80 && c <= 0xA0) || c == 0xAD) return false;
    if (c == ' ') return true;
    if (is_space(c)) return false;
    if ((c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E) || (c >= 0x2060 && c <= 0x206F))
        return false;
    if (c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE000 && c <= 0xF8FF)) return false;
    if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
    if (c >= 0xF0000 || c == 0xFFFE || c == 0xFFFF) return false;
    return true;
}

// Simple case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic.
char32_t to_lower(char32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7)) return c + 32;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper) return (c % 2 == 1) ? c + 1 : c;
        return (c % 2 == 0) ? c + 1 : c;
    }
    if (c == 0x178) return 0xFF;
    if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
    if (c == 0x386) return 0x3AC;
    if (c >= 0x388 && c <= 0x38A) return c + 37;
    if (c == 0x38C) return 0x3CC;
    if (c == 0x38E || c == 0x38F) return c + 63;
    if (c >= 0x410 && c <= 0x42F) return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x460 && c <= 0x4FF && c % 2 == 0 && !(c >= 0x482 && c <= 0x489) && c != 0x4C0) return c + 1;
    return c;
}

char32_t to_upper(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
    if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
    if (c == 0xFF) return 0x178;
    if (c == 0xB5) return 0x39C;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
        if (odd_upper) return (c % 2 == 0) ? c - 1 : c;
        return (c % 2 == 1) ? c - 1 : c;
    }
    if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
    if (c == 0x3C2) return 0x3A3;
    if (c == 0x3AC) return 0x386;
    if (c >= 0x3AD && c <= 0x3AF) return c - 37;
    if (c == 0x3CC) return 0x38C;
    if (c == 0x3CD || c == 0x3CE) return c - 63;
    if (c >= 0x430 && c <= 0x44F) return c - 32;
    if (c >= 0x450 && c <= 0x45F) return c - 80;
    if (c >= 0x460 && c <= 0x4FF && c % 2 == 1 && !(c >= 0x482 && c <= 0x489) && c != 0x4CF) return c - 1;
    return c;
}

bool is_cased_upper(char32_t c) { return to_lower(c) != c; }
bool is_cased_lower(char32_t c) { return to_upper(c) != c || c == 0xDF; }

bool is_alpha(char32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (c == 0xAA || c == 0xB5 || c == 0xBA) return true;
    if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
    if (is_cased_upper(c) || is_cased_lower(c)) return true;
    if (c >= 0x4E00 && c <= 0x9FFF) return true;  // CJK ideographs
    if ((c >= 0x3040 && c <= 0x30FF) || (c >= 0xAC00 && c <= 0xD7A3)) return true;
    return false;
}

bool is_digit(char32_t c) { return c >= '0' && c <= '9'; }

namespace {
template <typename F>
std::string map_chars(std::string_view s, F f) {
    if (is_ascii(s)) {
        std::string out(s);
        for (char& ch : out) ch = static_cast<char>(f(static_cast<char32_t>(static_cast<unsigned char>(ch))));
        return out;
    }
    std::u32string u = decode(s);
    for (char32_t& c : u) c = f(c);
    return encode(u);
}

bool cased(char32_t c) { return is_cased_upper(c) || is_cased_lower(c); }
}  // namespace

std::string lower(std::string_view s) { return map_chars(s, to_lower); }
std::string upper(std::string_view s) {
    std::string out = map_chars(s, to_upper);
    // The one common full (one-to-many) mapping: ß -> SS.
    return out.find("\xC3\x9F") == std::string::npos ? out : replace(out, "\xC3\x9F", "SS", -1);
}
std::string swapcase(std::string_view s) {
    return map_chars(s, [](char32_t c) { return is_cased_upper(c) ? to_lower(c) : to_upper(c); });
}

std::string title(std::string_view s) {
    std::u32string u = decode(s);
    bool prev_cased = false;
    for (char32_t& c : u) {
        bool is_c = cased(c);
        c = prev_cased ? to_lower(c) : to_upper(c);
        prev_cased = is_c;
    }
    return encode(u);
}

std::string capitalize(std::string_view s) {
    std::u32string u = decode(s);
    for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
    return encode(u);
}

std::string strip(std::string_view s, const std::string* chars, bool left, bool right) {
    std::u32string u = decode(s);
    std::u32string set = chars ? decode(*chars) : std::u32string();
    auto strippable = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_space(c); };
    size_t b = 0, e = u.size();
    if (left)
        while (b < e && strippable(u[b])) ++b;
    if (right)
        while (e > b && strippable(u[e - 1])) --e;
    if (b == 0 && e == u.size()) return std::string(s);
    return encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit) {
    std::vector<std::string> out;
    if (sep) {
        TS_CHECK(!sep->empty(), "split: empty separator");
        size_t pos = 0;
        while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
            size_t f = s.find(*sep, pos);
            if (f == std::string_view::npos) break;
            out.emplace_back(s.substr(pos, f - pos));
            pos = f + sep->size();
        }
        out.emplace_back(s.substr(pos));
        return out;
    }
    std::u32string u = decode(s);
    size_t i = 0;
    while (true) {
        while (i < u.size() && is_space(u[i])) ++i;
        if (i == u.size()) break;
        if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
            size_t e = u.size();
            while (e > i && is_space(u[e - 1])) --e;
            out.push_back(encode(std::u32string_view(u).substr(i, e - i)));
            break;
        }
        size_t j = i;
        while (j < u.size() && !is_space(u[j])) ++j;
        out.push_back(encode(std::u32string_view(u).substr(i, j - i)));
        i = j;
    }
    return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
    if (maxsplit < 0) return split(s, sep, maxsplit);
    std::vector<std::string> out;
    if (sep) {
        TS_CHECK(!sep->empty(), "rsplit: empty separator");
        size_t end = s.size();
        while (static_cast<int64_t>(out.size()) < maxsplit) {
            if (end < sep->size()) break;
            size_t f = s.rfind(*sep, end - sep->size());
            if (f == std::string_view::npos) break;
            out.emplace_back(s.substr(f + sep->size(), end - f - sep->size()));
            end = f;
        }
        out.emplace_back(s.substr(0, end));
    } else {
        std::u32string u = decode(s);
        size_t e = u.size();
        while (true) {
            while (e > 0 && is_space(u[e - 1])) --e;
            if (e == 0) break;
            if (static_cast<int64_t>(out.size()) >= maxsplit) {
                size_t b = 0;
                while (b < e && is_space(u[b])) ++b;
                out.push_back(encode(std::u32string_view(u).substr(b, e - b)));
                break;
            }
            size_t b = e;
            while (b > 0 && !is_space(u[b - 1])) --b;
            out.push_back(encode(std::u32string_view(u).substr(b, e - b)));
            e = b;
        }
    }
    return std::vector<std::string>(out.rbegin(), out.rend());
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
    std::u32string u = decode(s);
    std::vector<std::string> out;
    size_t start = 0, i = 0;
    while (i < u.size()) {
        char32_t c = u[i];
        bool nl = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                  c == 0x85 || c == 0x2028 || c == 0x2029;
        if (!nl) {
            ++i;
            continue;
        }
        size_t end = i;
        ++i;
        if (c == '\r' && i < u.size() && u[i] == '\n') ++i;
        out.push_back(encode(std::u32string_view(u).substr(start, (keepends ? i : end) - start)));
        start = i;
    }
    if (start < u.size()) out.push_back(encode(std::u32string_view(u).substr(start)));
    return out;
}

std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
    std::string out;
    if (from.empty()) {
        std::u32string u = decode(s);
        int64_t n = 0;
        for (size_t i = 0; i <= u.size(); ++i) {
            if (count < 0 || n < count) {
                out.append(to);
                ++n;
            }
            if (i < u.size()) append_utf8(out, u[i]);
        }
        return out;
    }
    size_t pos = 0;
    int64_t n = 0;
    while (count < 0 || n < count) {
        size_t f = s.find(from, pos);
        if (f == std::string_view::npos) break;
        out.append(s.substr(pos, f - pos));
        out.append(to);
        pos = f + from.size();
        ++n;
    }
    out.append(s.substr(pos));
    return out;
}

int64_t count(std::string_view s, std::string_view sub) {
    if (sub.empty()) return static_cast<int64_t>(length(s)) + 1;
    int64_t n = 0;
    for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
    return n;
}

int64_t find(std::string_view s, std::string_view sub, bool reverse) {
    size_t f = reverse ? s.rfind(sub) : s.find(sub);
    if (f == std::string_view::npos) return -1;
    return static_cast<int64_t>(length(s.substr(0, f)));
}

}  // namespace tessera::jinja::text
