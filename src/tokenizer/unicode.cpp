// UTF-8 coding and code point properties over the generated tables.
#include "tokenizer/unicode.h"

#include <algorithm>

#include "tokenizer/unicode_tables.h"

namespace tessera::tok {

size_t utf8_decode_one(std::string_view s, size_t i, char32_t* cp) {
    const size_t n = s.size();
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    size_t len;
    char32_t v;
    char32_t min;
    if ((b0 & 0xE0) == 0xC0) {
        len = 2, v = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        len = 3, v = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        len = 4, v = b0 & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (i + len > n) return 0;
    for (size_t k = 1; k < len; ++k) {
        const auto b = static_cast<uint8_t>(s[i + k]);
        if ((b & 0xC0) != 0x80) return 0;
        v = (v << 6) | (b & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

std::u32string utf8_to_cpts(std::string_view s) {
    std::u32string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        char32_t cp;
        const size_t len = utf8_decode_one(s, i, &cp);
        if (len == 0) {
            out.push_back(kInvalidByteBase + static_cast<uint8_t>(s[i]));
            i += 1;
        } else {
            out.push_back(cp);
            i += len;
        }
    }
    return out;
}

void append_utf8(std::string& out, char32_t cp) {
    if (is_invalid_byte(cp)) out.push_back(static_cast<char>(cp - kInvalidByteBase));
    else append_utf8_plain(out, cp);
}

void append_utf8_plain(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string cpts_to_utf8(std::u32string_view cps) {
    std::string out;
    out.reserve(cps.size());
    for (char32_t cp : cps) append_utf8(out, cp);
    return out;
}

namespace {
// Value of the range holding cp in a sorted range table, or 0.
uint32_t range_lookup(const tables::CategoryRange* t, size_t n, char32_t cp) {
    const auto* end = t + n;
    const auto* it = std::upper_bound(t, end, cp, [](char32_t c, const tables::CategoryRange& r) {
        return c < r.lo;
    });
    if (it == t) return 0;
    --it;
    return cp <= it->hi ? it->value : 0;
}

struct AsciiCategories {
    GeneralCategory gc[128];
    AsciiCategories() {
        for (char32_t c = 0; c < 128; ++c)
            gc[c] = static_cast<GeneralCategory>(
                range_lookup(tables::kCategoryRanges, tables::kCategoryRangesCount, c));
    }
};
const AsciiCategories kAscii;
}  // namespace

GeneralCategory general_category(char32_t cp) {
    if (cp < 128) return kAscii.gc[cp];
    if (is_invalid_byte(cp)) return GeneralCategory::Cn;
    return static_cast<GeneralCategory>(
        range_lookup(tables::kCategoryRanges, tables::kCategoryRangesCount, cp));
}

char major_category(GeneralCategory gc) {
    static constexpr char kMajor[] = "CLLLLLMMMNNNPPPPPPPSSSSZZZCCCC";
    return kMajor[static_cast<size_t>(gc)];
}

bool is_whitespace(char32_t cp) {
    if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
    switch (cp) {
        case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F:
        case 0x3000:
            return true;
        default:
            return cp >= 0x2000 && cp <= 0x200A;
    }
}

char32_t simple_case_fold(char32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    const auto* t = tables::kCaseFold;
    const auto* end = t + tables::kCaseFoldCount;
    const auto* it = std::lower_bound(t, end, cp, [](const tables::CodepointPair& p, char32_t c) {
        return p.from < c;
    });
    return (it != end && it->from == cp) ? it->to : cp;
}

}  // namespace tessera::tok
