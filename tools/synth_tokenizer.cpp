#include "synth_tokenizer.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/byte_level.h"

namespace tessera::cli {

namespace {

constexpr const char* kCorpus =
    "The quick brown fox jumps over the lazy dog. Hello! How are you today? I am a small language model "
    "made by tessera with random weights, so what I say is not meant to make sense. The model reads tokens, "
    "the tokens are bytes and merges of bytes, and the answer is streamed back one token at a time. "
    "There is a cat on the mat, and there are three birds in the tree. What is the time? It is nine o'clock. "
    "Please tell me a story about the sea, the sun and the wind; she said that they would come in the evening.";

constexpr const char* kChatML =
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

// Qwen2's split rule (llama.cpp's tokenizer.ggml.pre "qwen2"), as tokenizer.json writes it.
constexpr const char* kQwen2Split =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// GPT-2's byte -> printable code point map, as UTF-8 strings (tokenizer/byte_level.h).
std::vector<std::string> byte_alphabet() {
    std::vector<std::string> out;
    for (int b = 0; b < 256; ++b) {
        const char c = static_cast<char>(b);
        out.push_back(tok::byte_level_encode(std::string_view(&c, 1)));
    }
    return out;
}

}  // namespace

SynthTokenizer make_synth_tokenizer(int64_t vocab_size) {
    const char* specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    const int64_t n_special = 3;
    TS_CHECK(vocab_size >= 256 + n_special, "vocabulary of {} is too small for a byte-level tokenizer", vocab_size);
    SynthTokenizer t;
    const auto alphabet = byte_alphabet();
    t.tokens = alphabet;
    t.types.assign(256, 1);
    // Learn merges from the corpus: words (a leading space stays with the word) as symbol lists.
    std::vector<std::vector<std::string>> words;
    const std::string text = kCorpus;
    // Pre-split like GPT-2: an optional space followed by a run of letters, or any other byte.
    for (size_t i = 0; i < text.size();) {
        size_t j = i + (text[i] == ' ' ? 1 : 0);
        while (j < text.size() && std::isalpha((unsigned char)text[j])) ++j;
        if (j == i || (j == i + 1 && text[i] == ' ')) j = i + 1;
        std::vector<std::string> w;
        for (size_t k = i; k < j; ++k) w.push_back(alphabet[(unsigned char)text[k]]);
        words.push_back(w);
        i = j;
    }
    const int64_t n_merges = vocab_size - 256 - n_special;
    for (int64_t m = 0; m < n_merges; ++m) {
        std::map<std::pair<std::string, std::string>, int> counts;
        for (const auto& w : words)
            for (size_t k = 0; k + 1 < w.size(); ++k) counts[{w[k], w[k + 1]}]++;
        if (counts.empty()) break;
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
            if (it->second > best->second) best = it;
        if (best->second < 2) break;
        const auto [a, b] = best->first;
        t.merges.push_back(a + " " + b);
        t.tokens.push_back(a + b);
        t.types.push_back(1);
        for (auto& w : words) {
            std::vector<std::string> nw;
            for (size_t k = 0; k < w.size(); ++k) {
                if (k + 1 < w.size() && w[k] == a && w[k + 1] == b) {
                    nw.push_back(a + b);
                    ++k;
                } else {
                    nw.push_back(w[k]);
                }
            }
            w = std::move(nw);
        }
    }
    for (const char* s : specials) {
        t.tokens.push_back(s);
        t.types.push_back(3);
    }
    // Pad to the model's vocabulary with unused tokens (as real checkpoints do).
    for (int64_t i = int64_t(t.tokens.size()); i < vocab_size; ++i) {
        t.tokens.push_back("<|unused_" + std::to_string(i) + "|>");
        t.types.push_back(5);
    }
    t.pad = int32_t(256 + t.merges.size());         // <|endoftext|>
    t.eos = int32_t(256 + t.merges.size() + 2);     // <|im_end|>
    return t;
}

void add_tokenizer_metadata(GgufWriter& w, const SynthTokenizer& t) {
    w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    w.set("tokenizer.ggml.pre", GgufValue::string("qwen2"));
    w.set("tokenizer.ggml.tokens", GgufValue::string_array(t.tokens));
    w.set("tokenizer.ggml.token_type", GgufValue::array(t.types));
    w.set("tokenizer.ggml.merges", GgufValue::string_array(t.merges));
    w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(uint32_t(t.eos)));
    w.set("tokenizer.ggml.padding_token_id", GgufValue::u32(uint32_t(t.pad)));
    w.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
    w.set("tokenizer.chat_template", GgufValue::string(kChatML));
}

}  // namespace tessera::cli

namespace tessera::cli {

void write_synth_tokenizer_files(const SynthTokenizer& t, const std::string& dir) {
    using ojson = nlohmann::ordered_json;
    const ojson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
    ojson vocab = ojson::object(), added = ojson::array();
    for (size_t id = 0; id < t.tokens.size(); ++id) {
        if (t.types[id] == 1) {
            TS_CHECK(!vocab.contains(t.tokens[id]), "synthetic tokenizer: token '{}' appears twice", t.tokens[id]);
            vocab[t.tokens[id]] = id;
        } else if (t.types[id] == 3) {
            added.push_back({{"id", id}, {"content", t.tokens[id]}, {"single_word", false}, {"lstrip", false},
                             {"rstrip", false}, {"normalized", false}, {"special", true}});
        }
    }
    ojson tj = {
        {"version", "1.0"},
        {"truncation", nullptr},
        {"padding", nullptr},
        {"added_tokens", added},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", kQwen2Split}}}, {"behavior", "Isolated"}, {"invert", false}},
            byte_level}}}},
        {"post_processor", byte_level},
        {"decoder", byte_level},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
          {"vocab", vocab}, {"merges", t.merges}}},
    };
    const ojson cfg = {{"add_bos_token", false},     {"add_prefix_space", false},
                       {"bos_token", nullptr},       {"eos_token", t.tokens[size_t(t.eos)]},
                       {"pad_token", t.tokens[size_t(t.pad)]}, {"unk_token", nullptr},
                       {"chat_template", kChatML},   {"model_max_length", 131072},
                       {"tokenizer_class", "Qwen2Tokenizer"}};
    for (const auto& [name, j] : {std::pair<const char*, const ojson*>{"tokenizer.json", &tj}, {"tokenizer_config.json", &cfg}}) {
        const std::string path = (std::filesystem::path(dir) / name).string();
        std::ofstream f(path, std::ios::binary);
        f << j->dump(2);
        if (!f) fail(ErrorKind::Io, "{}: cannot write", path);
    }
}

}  // namespace tessera::cli
