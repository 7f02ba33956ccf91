// NFC normalization (UAX #15): full canonical decomposition, canonical ordering of combining
// marks, canonical composition with Hangul handled algorithmically.
#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/unicode_tables.h"

namespace tessera::tok {
namespace {
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;

uint8_t ccc(char32_t cp) {
    if (cp < 0x300 || is_invalid_byte(cp)) return 0;
    const auto* t = tables::kCombiningClass;
    const auto* end = t + tables::kCombiningClassCount;
    const auto* it = std::upper_bound(t, end, cp, [](char32_t c, const tables::CategoryRange& r) {
        return c < r.lo;
    });
    if (it == t) return 0;
    --it;
    return cp <= it->hi ? static_cast<uint8_t>(it->value) : 0;
}

void decompose(char32_t cp, std::u32string& out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const char32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount != 0) out.push_back(kTBase + s % kTCount);
        return;
    }
    const auto* t = tables::kDecompIndex;
    const auto* end = t + tables::kDecompIndexCount;
    const auto* it = std::lower_bound(t, end, cp, [](const tables::DecompEntry& e, char32_t c) {
        return e.cp < c;
    });
    if (it != end && it->cp == cp) {
        out.append(reinterpret_cast<const char32_t*>(tables::kDecompData + it->offset), it->count);
    } else {
        out.push_back(cp);
    }
}

// The primary composite of (a, b), or 0.
char32_t compose(char32_t a, char32_t b) {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
        b < kTBase + kTCount)
        return a + (b - kTBase);
    const auto* t = tables::kCompositions;
    const auto* end = t + tables::kCompositionsCount;
    const auto* it = std::lower_bound(t, end, std::pair(a, b),
                                      [](const tables::CompositionEntry& e, std::pair<char32_t, char32_t> k) {
                                          return e.first != k.first ? e.first < k.first : e.second < k.second;
                                      });
    return (it != end && it->first == a && it->second == b) ? it->composite : 0;
}
}  // namespace

std::u32string nfc(std::u32string_view cps) {
    // Below U+0300 nothing decomposes or combines, so such text is already NFC.
    if (std::all_of(cps.begin(), cps.end(), [](char32_t c) { return c < 0x300; }))
        return std::u32string(cps);
    std::u32string d;
    d.reserve(cps.size() + 8);
    for (char32_t cp : cps) decompose(cp, d);
    // Canonical ordering: stable sort of each run of non-starters by combining class.
    for (size_t i = 0; i < d.size();) {
        if (ccc(d[i]) == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < d.size() && ccc(d[j]) != 0) ++j;
        std::stable_sort(d.begin() + i, d.begin() + j,
                         [](char32_t x, char32_t y) { return ccc(x) < ccc(y); });
        i = j;
    }
    // Composition: each character combines with the last starter unless blocked.
    std::u32string out;
    out.reserve(d.size());
    size_t starter = std::u32string::npos;
    int last_ccc = -1;
    for (char32_t cp : d) {
        const int c = ccc(cp);
        if (starter != std::u32string::npos) {
            const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= c);
            if (!blocked) {
                if (char32_t comp = compose(out[starter], cp)) {
                    out[starter] = comp;
                    continue;
                }
            }
        }
        if (c == 0) {
            starter = out.size();
            last_ccc = -1;
        } else {
            last_ccc = c;
        }
        out.push_back(cp);
    }
    return out;
}

std::string nfc_utf8(std::string_view s) {
    for (unsigned char c : s)
        if (c >= 0xCC) return cpts_to_utf8(nfc(utf8_to_cpts(s)));  // U+0300 starts with 0xCC
    return std::string(s);
}

}  // namespace tessera::tok
