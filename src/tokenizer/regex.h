// A small backtracking regex engine over code points, for pre-tokenizer split patterns.
// It follows Oniguruma's (Hugging Face tokenizers') semantics for the subset those patterns
// use: alternation in priority order, greedy/lazy quantifiers incl. {n,m}, groups, (?i:...),
// lookahead (?=...) (?!...), classes with \p{..} (general categories), \s \d \w and escapes.
// Anything else (lookbehind, backreferences, scripts) is a clear Error at compile time.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::tok {

class Regex {
public:
    explicit Regex(std::string_view pattern);  // throws Error naming the pattern

    // Leftmost match starting at or after `from`: [begin, end) in code points (may be empty).
    std::optional<std::pair<size_t, size_t>> search(std::u32string_view s, size_t from) const;
    // End of a match that starts exactly at `at`, or -1.
    int64_t match_at(std::u32string_view s, size_t at) const;
    const std::string& pattern() const { return pattern_; }

    struct ClassItem {
        enum Kind : uint8_t { Range, Categories, Space, Digit, Word } kind;
        bool negate;
        char32_t lo, hi;  // Range
        uint32_t mask;    // Categories: bit per GeneralCategory
    };
    struct CharClass {
        std::vector<ClassItem> items;
        bool negate = false;
        bool icase = false;
        uint64_t ascii[2] = {0, 0};  // precomputed membership for code points < 128
        bool contains(char32_t cp) const;
        bool raw_contains(char32_t cp) const;
    };
    enum class Op : uint8_t { Char, Any, Split, Jmp, Look, LookEnd, Assert, Match };
    struct Inst {
        Op op;
        bool flag = false;   // Look: negative; Split: unused
        uint32_t a = 0;      // Char: class index; Split/Jmp: target; Look: end pc; Assert: kind
        uint32_t b = 0;      // Split: second target
    };

private:
    bool run(uint32_t pc, std::u32string_view s, size_t pos, size_t* end) const;

    std::string pattern_;
    std::vector<CharClass> classes_;
    std::vector<Inst> prog_;
    friend class RegexCompiler;
};

}  // namespace tessera::tok
