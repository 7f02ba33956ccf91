// Byte-level BPE model: raw-byte vocabulary and merge ranks; encodes one pre-tokenized piece
// exactly as Hugging Face tokenizers' BPE does (lowest rank first, leftmost on ties).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tessera::tok {

class BpeModel {
public:
    // vocab: byte-level token text -> id. Tokens whose text is not byte-level (added tokens)
    // are ignored here. merges: byte-level (left, right) pairs in rank order; a merge whose
    // parts or result are not in the vocabulary is skipped (it could never apply).
    void build(const std::vector<std::pair<std::string, int32_t>>& vocab,
               const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges);

    // Raw bytes of one piece -> ids appended to out. Bytes without a token are dropped
    // (as Hugging Face does without an unk token); byte-level vocabularies have all 256.
    void encode(std::string_view bytes, std::vector<int32_t>& out) const;

    size_t merge_count() const { return merges_.size(); }
    size_t skipped_merges() const { return skipped_merges_; }

private:
    static uint64_t key(int32_t a, int32_t b) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
    }
    std::unordered_map<std::string, int32_t> vocab_;  // raw bytes -> id
    int32_t byte_id_[256];
    struct Merge { int32_t rank, new_id; };
    std::unordered_map<uint64_t, Merge> merges_;
    bool ignore_merges_ = false;
    size_t skipped_merges_ = 0;
};

}  // namespace tessera::tok
