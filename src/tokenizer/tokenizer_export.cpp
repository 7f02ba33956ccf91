#include "tokenizer/tokenizer_export.h"

#include <algorithm>

#include "core/status.h"
#include "formats/gguf_writer.h"
#include "tokenizer/tokenizer_parts.h"
#include "tokenizer/unicode.h"

namespace tessera {

namespace {

// Exercises what split rules differ on: contractions and case, digit runs, whitespace runs and
// newlines, punctuation, CJK, Hangul, accents, emoji, other scripts.
constexpr const char* kProbe =
    "Hello world! It's DON'T you'll 1234567 3.14159 x=y+z;  \n\n\t  indented\r\n  trailing   \n"
    "中文字符测试，标点。 日本語のテキスト 한국어 텍스트 café naïve Ünïcödé ١٢٣ ½ "
    "🤗🤗 emoji 👨‍👩‍👧 <tag attr=\"v\"> __init__(self) {a: [1, 2]} ... ?!? end";

// The llama.cpp names tessera knows, most common first.
constexpr const char* kCandidates[] = {"qwen2", "qwen35", "llama-bpe", "deepseek-v3", "gpt-2", "gpt-4o",
                                       "tekken", "deepseek-coder", "starcoder", "falcon", "bloom", "default"};

}  // namespace

std::string detect_gguf_pre(const Tokenizer& tok) {
    const auto& parts = tok.parts();
    const std::u32string probe = tok::utf8_to_cpts(kProbe);
    const auto want = parts.pre.split(probe);
    for (const char* name : kCandidates) {
        tok::PreTokenizer::GgufPreFlags flags;
        const auto cand = tok::PreTokenizer::from_gguf_pre(name, &flags);
        if (flags.nfc == parts.nfc && flags.ignore_merges == parts.ignore_merges && cand.split(probe) == want)
            return name;
    }
    fail(ErrorKind::Unsupported, "{}: the tokenizer's split rule matches no llama.cpp pre-tokenizer tessera knows",
         parts.source);
}

void add_tokenizer_to_gguf(const Tokenizer& tok, GgufWriter& w, int64_t vocab_size) {
    const auto& p = tok.parts();
    const int64_t n = std::max<int64_t>(vocab_size, int64_t(p.texts.size()));
    std::vector<std::string> tokens(static_cast<size_t>(n));
    std::vector<int32_t> types(static_cast<size_t>(n), 5);  // unused unless filled below
    for (size_t id = 0; id < p.texts.size(); ++id) {
        tokens[id] = p.texts[id];
        types[id] = 1;  // normal
    }
    for (const auto& a : p.added) {
        tokens[size_t(a.id)] = a.content;
        types[size_t(a.id)] = a.special ? 3 : 4;  // control : user-defined
    }
    for (int64_t id = 0; id < n; ++id)
        if (tokens[size_t(id)].empty()) tokens[size_t(id)] = "[PAD" + std::to_string(id) + "]";
    std::vector<std::string> merges;
    merges.reserve(p.merges.size());
    for (const auto& [a, b] : p.merges) merges.push_back(a + " " + b);

    w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    w.set("tokenizer.ggml.pre", GgufValue::string(detect_gguf_pre(tok)));
    w.set("tokenizer.ggml.tokens", GgufValue::string_array(std::move(tokens)));
    w.set("tokenizer.ggml.token_type", GgufValue::array(types));
    w.set("tokenizer.ggml.merges", GgufValue::string_array(std::move(merges)));
    if (p.bos) w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(uint32_t(*p.bos)));
    if (p.eos) w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(*p.eos)));
    if (p.pad) w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(uint32_t(*p.pad)));
    const bool add_bos = p.bos && std::find(p.prefix_ids.begin(), p.prefix_ids.end(), *p.bos) != p.prefix_ids.end();
    const bool add_eos = p.eos && std::find(p.suffix_ids.begin(), p.suffix_ids.end(), *p.eos) != p.suffix_ids.end();
    w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(add_bos));
    w.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(add_eos));
    if (!p.chat_template.empty()) w.set("tokenizer.chat_template", GgufValue::string(p.chat_template));
}

}  // namespace tessera
