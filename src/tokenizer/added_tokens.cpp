// A byte trie over the added tokens' contents; Hugging Face's AddedVocabulary::find_matches rules.
#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace tessera::tok {
namespace {
// Rust regex's Unicode \w (what Hugging Face checks for single_word): letters, marks, decimal
// and letter numbers, connector punctuation, joiners.
bool is_word_char(char32_t cp) {
    const GeneralCategory g = general_category(cp);
    const char m = major_category(g);
    return m == 'L' || m == 'M' || g == GeneralCategory::Nd || g == GeneralCategory::Nl ||
           g == GeneralCategory::Pc || cp == 0x200C || cp == 0x200D;
}
// Last / first code point of a byte range (invalid bytes count as non-word, non-space).
char32_t last_cp(std::string_view s) {
    size_t i = s.size();
    while (i > 0 && (static_cast<uint8_t>(s[i - 1]) & 0xC0) == 0x80 && s.size() - i < 3) --i;
    if (i > 0) --i;
    char32_t cp;
    return utf8_decode_one(s, i, &cp) == s.size() - i ? cp : kInvalidByteBase;
}
char32_t first_cp(std::string_view s) {
    char32_t cp;
    return utf8_decode_one(s, 0, &cp) ? cp : kInvalidByteBase;
}
}  // namespace

int32_t AddedTokenMatcher::child(int32_t node, uint8_t b) const {
    const auto& nx = trie_[node].next;
    auto it = std::lower_bound(nx.begin(), nx.end(), std::pair<uint8_t, int32_t>(b, -1));
    return (it != nx.end() && it->first == b) ? it->second : -1;
}

void AddedTokenMatcher::build(const std::vector<AddedToken>& tokens) {
    tokens_.clear();
    trie_.assign(1, Node{});
    std::fill(std::begin(first_byte_), std::end(first_byte_), false);
    for (const auto& t : tokens) {
        if (t.content.empty()) continue;
        int32_t node = 0;
        for (unsigned char b : t.content) {
            int32_t c = child(node, b);
            if (c < 0) {
                c = static_cast<int32_t>(trie_.size());
                trie_.push_back(Node{});
                auto& nx = trie_[node].next;
                nx.insert(std::upper_bound(nx.begin(), nx.end(), std::pair<uint8_t, int32_t>(b, -1)),
                          {b, c});
            }
            node = c;
        }
        if (trie_[node].token < 0) {
            trie_[node].token = static_cast<int32_t>(tokens_.size());
            tokens_.push_back(t);
        }
        first_byte_[static_cast<uint8_t>(t.content[0])] = true;
    }
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::split(std::string_view text, bool parse_special) const {
    std::vector<Segment> out;
    size_t plain_start = 0;  // where the current plain span starts
    size_t pos = 0;          // where the next search starts
    while (pos < text.size() && !tokens_.empty()) {
        // Leftmost-longest match at or after pos.
        size_t mstart = text.size(), mend = 0;
        int32_t mtok = -1;
        for (size_t i = pos; i < text.size() && mtok < 0; ++i) {
            if (!first_byte_[static_cast<uint8_t>(text[i])]) continue;
            int32_t node = 0;
            for (size_t j = i; j < text.size(); ++j) {
                node = child(node, static_cast<uint8_t>(text[j]));
                if (node < 0) break;
                if (trie_[node].token >= 0) mstart = i, mend = j + 1, mtok = trie_[node].token;
            }
        }
        if (mtok < 0) break;
        pos = mend;
        const AddedToken& t = tokens_[mtok];
        if (t.special && !parse_special) continue;
        if (t.single_word) {
            const bool start_ok = mstart == 0 || !is_word_char(last_cp(text.substr(0, mstart)));
            const bool end_ok = mend == text.size() || !is_word_char(first_cp(text.substr(mend)));
            if (!start_ok || !end_ok) continue;
        }
        size_t start = mstart, stop = mend;
        if (t.lstrip) {
            size_t s = start;
            while (s > plain_start) {
                const char32_t cp = last_cp(text.substr(0, s));
                if (!is_whitespace(cp)) break;
                size_t len = 1;
                while (len < s && (static_cast<uint8_t>(text[s - len]) & 0xC0) == 0x80) ++len;
                s -= len;
            }
            start = s;
        }
        if (t.rstrip) {
            while (stop < text.size()) {
                char32_t cp;
                const size_t len = utf8_decode_one(text, stop, &cp);
                if (len == 0 || !is_whitespace(cp)) break;
                stop += len;
            }
        }
        if (plain_start < start) out.push_back({plain_start, start, -1});
        out.push_back({start, stop, t.id});
        plain_start = stop;
        pos = std::max(pos, stop);
    }
    if (plain_start < text.size()) out.push_back({plain_start, text.size(), -1});
    return out;
}

}  // namespace tessera::tok
