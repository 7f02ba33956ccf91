// Pre-tokenization: text (code points) -> pieces that BPE encodes independently. A sequence of
// regex splits (tokenizer.json "Split" / llama.cpp's per-`tokenizer.ggml.pre` regex lists)
// and the byte-level step (optional GPT-2 regex and prefix space).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace tessera::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// The GPT-2 pattern (also what a tokenizer.json ByteLevel step with use_regex applies).
extern const char* const kGpt2Pattern;

class PreTokenizer {
public:
    void add_split(std::shared_ptr<const Regex> re, SplitBehavior behavior, bool invert);
    void add_byte_level(bool add_prefix_space, bool use_regex);

    // What else a `tokenizer.ggml.pre` name implies.
    struct GgufPreFlags {
        bool nfc = false;            // the matching Hugging Face tokenizer normalizes to NFC
        bool ignore_merges = false;  // BPE takes a piece whole when the vocabulary has it
        bool add_bos = false;        // llama.cpp's default when tokenizer.ggml.add_bos_token is absent
    };
    // The regex list llama.cpp uses for a `tokenizer.ggml.pre` name (throws for an unknown name).
    static PreTokenizer from_gguf_pre(std::string_view name, GgufPreFlags* flags = nullptr);
    static PreTokenizer from_gguf_pre(std::string_view name, bool* needs_nfc) {
        GgufPreFlags f;
        PreTokenizer p = from_gguf_pre(name, &f);
        *needs_nfc = f.nfc;
        return p;
    }
    static bool has_gguf_pre(std::string_view name);
    // Escapes a literal string so Regex matches it verbatim.
    static std::string escape_literal(std::string_view s);

    // One segment of text (no added tokens inside) -> pieces, in order, none empty.
    std::vector<std::u32string> split(std::u32string_view text) const;

private:
    struct Step {
        std::shared_ptr<const Regex> re;  // null for a byte-level step without regex
        SplitBehavior behavior = SplitBehavior::Isolated;
        bool invert = false;
        bool byte_level = false;
        bool add_prefix_space = false;
    };
    std::vector<Step> steps_;
};

}  // namespace tessera::tok
