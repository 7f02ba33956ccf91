// libFuzzer target for the tokenizer: what clients send (prompt text, any bytes) and what a
// checkpoint ships (tokenizer.json). The first byte picks the mode, the rest is the input:
//   even: text. Encoded by a small byte-level BPE tokenizer built here (Qwen's split regex, merges,
//         special and plain added tokens, no normalizer) with every (add_special, parse_special)
//         pair, and, where ../shared/data/tokenizers holds them, by the real Qwen3 and DeepSeek-V3
//         tokenizers. Encoding any text must succeed (a client's prompt is never refused), every
//         id must be in the vocabulary, decode(encode(text)) must give the text back byte for byte
//         where nothing normalizes it, and StreamDecoder fed the ids one at a time must give what
//         an independent UTF-8 repair of the decoded bytes gives (one U+FFFD a maximal invalid
//         subpart, as Python's errors="replace").
//   odd:  a tokenizer.json. Either it loads or it is refused with tessera::Error; what loads must
//         encode and decode a sample without failing but with tessera::Error.
// Nothing may crash, over-read (ASan) or hit undefined behaviour (UBSan).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace {

using tessera::Tokenizer;

volatile uint64_t g_sink;

[[noreturn]] void failed(const char* what, std::string_view text) {
    std::fprintf(stderr, "fuzz_tokenizer: %s (input of %zu bytes)\n", what, text.size());
    std::abort();
}

// GPT-2's byte-level alphabet: byte b as the vocabulary spells it (tokenizer/byte_level.h).
std::string byte_char(int b) {
    const char c = static_cast<char>(b);
    return tessera::tok::byte_level_encode(std::string_view(&c, 1));
}

// A small tokenizer.json in the shape of Qwen's: every byte a token, a few merges, the split
// regex, special and plain added tokens, a ByteLevel decoder.
std::string tiny_tokenizer_json() {
    using nlohmann::ordered_json;
    ordered_json vocab = ordered_json::object();
    for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
    const std::string sp = byte_char(' '), nl = byte_char('\n');
    const std::vector<std::pair<std::string, std::string>> merges = {
        {sp, "t"}, {"h", "e"}, {sp + "t", "he"}, {"i", "n"}, {sp, "a"}, {"e", "r"}, {nl, nl}, {sp, sp},
        {"o", "u"}, {"in", "g"}, {byte_char(0xC3), byte_char(0xA9)}};
    ordered_json merge_list = ordered_json::array();
    int id = 256;
    for (const auto& [a, b] : merges) {
        merge_list.push_back(a + " " + b);
        vocab[a + b] = id++;
    }
    ordered_json added = ordered_json::array();
    auto add = [&](const char* content, bool special) {
        added.push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                         {"rstrip", false}, {"normalized", !special}, {"special", special}});
    };
    add("<|endoftext|>", true);
    add("<|im_start|>", true);
    add("<|im_end|>", true);
    add("<think>", false);
    add("</think>", false);
    const char* split =
        R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    ordered_json j = {
        {"version", "1.0"},
        {"added_tokens", added},
        {"normalizer", nullptr},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", split}}}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}}},
        {"post_processor", nullptr},
        {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
        {"model",
         {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
          {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
          {"vocab", vocab}, {"merges", merge_list}}}};
    return j.dump();
}

struct Tokenizers {
    std::unique_ptr<Tokenizer> tiny;                // no normalizer: decode(encode(t)) == t
    std::vector<std::unique_ptr<Tokenizer>> real;  // Qwen3, DeepSeek-V3 where present
};

const Tokenizers& tokenizers() {
    static const Tokenizers t = [] {
        Tokenizers r;
        r.tiny = Tokenizer::from_hf_json(tiny_tokenizer_json(), "");
        namespace fs = std::filesystem;
        const char* env = std::getenv("TESSERA_FUZZ_TOKENIZERS");  // a folder of tokenizer folders
        const fs::path root = env ? fs::path(env) : fs::path(TESSERA_SOURCE_DIR) / ".." / "shared" / "data" / "tokenizers";
        for (const char* name : {"qwen3", "deepseek_v3"}) {
            std::error_code ec;
            if (fs::exists(root / name / "tokenizer.json", ec)) r.real.push_back(Tokenizer::from_hf_dir((root / name).string()));
        }
        std::fprintf(stderr, "fuzz_tokenizer: the tiny tokenizer and %zu real ones\n", r.real.size());
        return r;
    }();
    return t;
}

// Length of a well-formed UTF-8 character at s[i], or −n for a maximal invalid subpart of n
// bytes (Unicode 3.9, table 3-7; what Python's errors="replace" turns into one U+FFFD).
int utf8_step(std::string_view s, size_t i) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t c = b(i);
    if (c < 0x80) return 1;
    int len = 0;
    uint8_t lo = 0x80, hi = 0xBF;  // the second byte's range
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xE1 && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else return -1;
    for (int k = 1; k < len; ++k) {
        if (i + k >= s.size()) return -k;
        const uint8_t x = b(i + k);
        if (k == 1 ? (x < lo || x > hi) : (x < 0x80 || x > 0xBF)) return -k;
    }
    return len;
}

std::string utf8_repaired(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
        const int n = utf8_step(s, i);
        if (n > 0) out.append(s.substr(i, size_t(n)));
        else out += "\xEF\xBF\xBD";
        i += size_t(n > 0 ? n : -n);
    }
    return out;
}

void check_ids(const Tokenizer& tok, const std::vector<int32_t>& ids, std::string_view text) {
    for (int32_t id : ids)
        if (id < 0 || id >= tok.vocab_size()) failed("an id outside the vocabulary", text);
}

// Streams the ids through StreamDecoder and compares with the repaired bytes of decode(ids).
void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, bool skip_special, std::string_view text) {
    tessera::StreamDecoder sd(tok, skip_special);
    std::string streamed;
    for (int32_t id : ids) streamed += sd.push(id);
    streamed += sd.flush();
    if (streamed != utf8_repaired(tok.decode(ids, skip_special))) failed("StreamDecoder differs from decode", text);
}

void fuzz_text(std::string_view text) {
    const Tokenizers& t = tokenizers();
    for (int flags = 0; flags < 4; ++flags) {
        const bool add_special = flags & 1, parse_special = flags & 2;
        std::vector<int32_t> ids;
        try {
            ids = t.tiny->encode(text, add_special, parse_special);
        } catch (const tessera::Error& e) {
            std::fprintf(stderr, "%s\n", e.what());
            failed("the tiny tokenizer refused a text", text);
        }
        check_ids(*t.tiny, ids, text);
        // The tiny tokenizer adds no BOS / EOS and normalizes nothing: its bytes come back whole.
        if (t.tiny->decode(ids) != text) failed("decode(encode(text)) is not the text", text);
        check_stream(*t.tiny, ids, flags == 3, text);
    }
    for (const auto& tok : t.real) {
        std::vector<int32_t> ids;
        try {
            ids = tok->encode(text, false, true);
        } catch (const tessera::Error& e) {
            std::fprintf(stderr, "%s\n", e.what());
            failed("a real tokenizer refused a text", text);
        }
        check_ids(*tok, ids, text);
        check_stream(*tok, ids, false, text);
    }
}

void fuzz_tokenizer_json(std::string_view json) {
    std::unique_ptr<Tokenizer> tok;
    try {
        tok = Tokenizer::from_hf_json(json, "");
    } catch (const tessera::Error&) {
        return;
    }
    static const std::string kSample = "Hello, world! <|im_start|>user\n  3.14 caf\xC3\xA9 \xF0\x9F\x98\x80 \xFF\n\n";
    try {
        for (std::string_view s : {std::string_view(kSample), json.substr(0, 256)}) {
            const std::vector<int32_t> ids = tok->encode(s, true, true);
            check_ids(*tok, ids, json);
            g_sink = g_sink + tok->decode(ids).size() + tok->decode(ids, true).size();
            check_stream(*tok, ids, false, json);
        }
        for (int32_t id = 0; id < tok->vocab_size() && id < 512; ++id)
            g_sink = g_sink + tok->token_to_piece(id).size() + tok->token_text(id).size() + tok->is_special(id);
        g_sink = g_sink + tok->eos_ids().size() + tok->chat_template().size();
    } catch (const tessera::Error&) {  // e.g. a regex that backtracks without end on the sample
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    if ((data[0] & 1) == 0) fuzz_text(rest);
    else fuzz_tokenizer_json(rest);
    return 0;
}
