// The pieces a Tokenizer is made of; loaders (HF json, GGUF) fill them in, Tokenizer::from_parts
// validates and indexes them. Internal to src/tokenizer/.
#pragma once
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

struct Tokenizer::Parts {
    std::string source;  // for error messages: the file it came from
    // Model vocabulary: stored text (byte-level alphabet) and id.
    std::vector<std::pair<std::string, int32_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    // Tokens that have an id and text but never come out of BPE (GGUF UNUSED padding entries).
    std::vector<std::pair<std::string, int32_t>> inert;
    bool ignore_merges = false;
    std::vector<tok::AddedToken> added;
    bool nfc = false;
    tok::PreTokenizer pre;
    std::vector<int32_t> prefix_ids, suffix_ids;  // added around the text when add_special
    std::optional<int32_t> bos, eos, pad;
    std::vector<int32_t> extra_eos;
    std::string chat_template;

    // Filled by from_parts (which empties `vocab` and `inert` into texts/pieces; `merges` stay).
    tok::BpeModel bpe;
    tok::AddedTokenMatcher raw_matcher, normalized_matcher;
    std::vector<std::string> texts;   // id -> stored text
    std::vector<std::string> pieces;  // id -> raw bytes
    std::vector<uint8_t> special;     // id -> special
    std::unordered_map<std::string, int32_t> ids;  // stored text -> id
};

}  // namespace tessera
