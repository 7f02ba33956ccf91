// Added (and special) tokens: found in the text before pre-tokenization, leftmost-longest,
// with Hugging Face's lstrip / rstrip / single_word rules.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tok {

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false;     // skipped by decode(skip_special); matched only with parse_special
    bool normalized = false;  // matched in the normalized text (else in the raw text)
    bool lstrip = false, rstrip = false, single_word = false;
};

class AddedTokenMatcher {
public:
    // `tokens` are matched by their content as given (the caller normalizes them if needed).
    void build(const std::vector<AddedToken>& tokens);
    bool empty() const { return tokens_.empty(); }

    struct Segment {
        size_t begin, end;  // byte span of the text
        int32_t id;         // the added token's id, or -1 for plain text
    };
    // Splits text into plain spans and token spans covering it in order (empty plain spans are
    // left out). Special tokens are matched only when parse_special.
    std::vector<Segment> split(std::string_view text, bool parse_special) const;

private:
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> next;  // sorted by byte
        int32_t token = -1;                             // index into tokens_ ending here
    };
    int32_t child(int32_t node, uint8_t b) const;
    std::vector<AddedToken> tokens_;
    std::vector<Node> trie_;
    bool first_byte_[256] = {};
};

}  // namespace tessera::tok
