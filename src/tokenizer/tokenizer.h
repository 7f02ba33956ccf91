// Byte-level BPE tokenizer (GPT-2 / Llama-3 / Qwen / DeepSeek), built from a Hugging Face
// tokenizer.json (+ tokenizer_config.json, generation_config.json) or from GGUF metadata.
// encode: added tokens are split out first, the rest is normalized (NFC where the tokenizer
// asks), pre-tokenized by the model's split rule and BPE-merged. decode returns raw bytes.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

class GgufFile;

class Tokenizer {
public:
    struct Parts;  // everything a loader fills in (tokenizer_parts.h)

    // A directory with tokenizer.json (tokenizer_config.json and generation_config.json optional).
    static std::unique_ptr<Tokenizer> from_hf_dir(const std::string& dir);
    // The same from file contents; config_json / generation_config_json may be empty.
    static std::unique_ptr<Tokenizer> from_hf_json(std::string_view tokenizer_json, std::string_view config_json,
                                                   std::string_view generation_config_json = {});
    static std::unique_ptr<Tokenizer> from_gguf(const GgufFile& gguf);
    static std::unique_ptr<Tokenizer> from_parts(Parts parts);  // checks and indexes the parts

    ~Tokenizer();

    // add_special: BOS/EOS (and other template tokens) as the tokenizer's config says.
    // parse_special: special tokens written in the text become their ids; otherwise they are
    // tokenized as plain text. Non-special added tokens are always matched (as Hugging Face does).
    std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special) const;
    // Concatenated raw bytes of the tokens (not necessarily valid UTF-8). Ids at or past
    // vocab_size() (a model's padding rows beyond the tokenizer) decode to nothing; a negative
    // id throws.
    std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
    // Raw bytes of one token (an added token's content as written); empty past vocab_size().
    const std::string& token_to_piece(int32_t id) const;
    // The token's text as stored in the vocabulary (byte-level alphabet for model tokens).
    const std::string& token_text(int32_t id) const;

    int32_t vocab_size() const;
    std::optional<int32_t> bos_id() const;
    std::optional<int32_t> eos_id() const;
    // Ids that end generation: the EOS token, plus generation_config.json's eos_token_id list
    // (HF) or EOT/EOM tokens (GGUF).
    std::vector<int32_t> eos_ids() const;
    std::optional<int32_t> pad_id() const;
    int32_t token_id(std::string_view text) const;  // by stored text; -1 if absent
    bool is_special(int32_t id) const;
    // The chat template from tokenizer_config.json / chat_template.jinja / tokenizer.chat_template;
    // empty when there is none.
    const std::string& chat_template() const;
    // The loaded pieces (tokenizer_parts.h), for exporters such as tokenizer_export.cpp.
    const Parts& parts() const { return *p_; }

private:
    explicit Tokenizer(std::unique_ptr<Parts> p);
    void check_id(int32_t id) const;
    std::unique_ptr<Parts> p_;
};

// Detokenizes a stream of ids into text that never ends inside a UTF-8 character: bytes of an
// incomplete character are held until the next token completes it. Bytes that can never form a
// valid character are emitted as U+FFFD (one per maximal invalid subsequence, as Python's
// errors="replace" does), so every returned string is valid UTF-8.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false) : tok_(tok), skip_special_(skip_special) {}
    std::string push(int32_t id);  // the newly completed text (possibly empty)
    std::string flush();           // the rest; a held incomplete character becomes U+FFFD
    void reset() { pending_.clear(); }

private:
    std::string drain(bool final);
    const Tokenizer& tok_;
    bool skip_special_;
    std::string pending_;
};

// Loads the tokenizer of a model PATH: a .gguf file, a directory with tokenizer.json (an HF
// checkpoint or a tokenizer folder), a directory holding a .gguf model, or a tokenizer.json file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace tessera
