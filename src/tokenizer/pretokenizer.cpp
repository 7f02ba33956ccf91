// Regex splitting with Hugging Face's split behaviours, and llama.cpp's named split rules.
#include "tokenizer/pretokenizer.h"

#include <map>

#include "core/status.h"

namespace tessera::tok {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {
// llama.cpp llama-vocab.cpp regex lists, in the form of the matching tokenizer.json patterns.
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: combining marks join letters and leave punctuation runs.
const char* const kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDeepseekV3[] = {
    R"(\p{N}{1,3})",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};
// GPT-2's word rule without the final \s+ (llama.cpp's lists leave such gaps as their own pieces).
const char* const kGpt2Words = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kFalcon[] = {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Words, "[0-9][0-9][0-9]"};
const char* const kDeepseekCoder[] = {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
                                      R"(\p{N})"};
const char* const kBloom = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
// GPT-4o / o200k, as in its tokenizer.json.
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kDefault[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct Preset {
    std::vector<const char*> patterns;
    bool nfc;
    bool ignore_merges = false;
    bool add_bos = false;
};

const std::map<std::string, Preset, std::less<>>& presets() {
    static const std::map<std::string, Preset, std::less<>> m = [] {
        std::map<std::string, Preset, std::less<>> p;
        for (const char* n : {"gpt2", "gpt-2", "phi-2", "roberta-bpe", "gigachat", "jina-es", "jina-de", "jina-v1-en",
                              "jina-v2-es", "jina-v2-de", "jina-v2-code", "mpt", "olmo", "jais", "trillion"})
            p[n] = {{kGpt2Pattern}, false};
        for (const char* n : {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})
            p[n] = {{R"(\p{N})", kGpt2Words}, false};
        p["falcon"] = {{std::begin(kFalcon), std::end(kFalcon)}, false};
        p["deepseek-coder"] = {{std::begin(kDeepseekCoder), std::end(kDeepseekCoder)}, false};
        for (const char* n : {"poro-chat", "bloom", "gpt3-finnish"}) p[n] = {{kBloom}, false};
        p["viking"] = {{kBloom, R"(\p{N})"}, false};
        for (const char* n : {"gpt-4o", "minimax-m2"}) p[n] = {{kGpt4o}, false};
        p["tekken"] = {{kTekken}, false, true, true};
        for (const char* n : {"llama3", "llama-bpe", "llama-v3", "dbrx", "smaug-bpe", "falcon3", "pixtral"})
            p[n] = {{kLlama3}, false, true, true};
        for (const char* n : {"chatglm-bpe", "glm4"}) p[n] = {{kLlama3}, false};
        for (const char* n : {"qwen2", "stablelm2", "hunyuan", "megrez", "deepseek-r1-qwen", "grok-2", "solar-open"})
            p[n] = {{kQwen2}, true};
        p["qwen35"] = {{kQwen35}, true};
        for (const char* n : {"deepseek-v3", "hunyuan-dense"})
            p[n] = {{std::begin(kDeepseekV3), std::end(kDeepseekV3)}, false};
        p["default"] = {{std::begin(kDefault), std::end(kDefault)}, false};
        return p;
    }();
    return m;
}

// Spans of `s` that match (true) or lie between matches (false), covering s in order.
std::vector<std::pair<std::u32string_view, bool>> find_matches(const Regex& re, std::u32string_view s) {
    std::vector<std::pair<std::u32string_view, bool>> spans;
    size_t prev = 0, at = 0;
    while (at <= s.size()) {
        auto m = re.search(s, at);
        if (!m) break;
        auto [b, e] = *m;
        if (prev != b) spans.emplace_back(s.substr(prev, b - prev), false);
        spans.emplace_back(s.substr(b, e - b), true);
        prev = e;
        at = e == b ? e + 1 : e;  // an empty match moves the search on by one
    }
    if (prev < s.size()) spans.emplace_back(s.substr(prev), false);
    return spans;
}

void split_one(const Regex& re, SplitBehavior behavior, bool invert, std::u32string_view s,
               std::vector<std::u32string>& out) {
    auto spans = find_matches(re, s);
    if (invert)
        for (auto& sp : spans) sp.second = !sp.second;
    std::vector<std::u32string> pieces;
    bool glue_next = false;  // MergedWithNext: the last piece waits for the next one
    bool last_was_match = false;
    for (auto& [text, is_match] : spans) {
        if (text.empty()) continue;
        switch (behavior) {
            case SplitBehavior::Removed:
                if (!is_match) pieces.emplace_back(text);
                break;
            case SplitBehavior::Isolated: pieces.emplace_back(text); break;
            case SplitBehavior::MergedWithPrevious:
                if (is_match && !pieces.empty()) pieces.back().append(text);
                else pieces.emplace_back(text);
                break;
            case SplitBehavior::MergedWithNext:
                if (glue_next) pieces.back().append(text);
                else pieces.emplace_back(text);
                glue_next = is_match;
                break;
            case SplitBehavior::Contiguous:
                if (is_match && last_was_match && !pieces.empty()) pieces.back().append(text);
                else pieces.emplace_back(text);
                break;
        }
        last_was_match = is_match;
    }
    for (auto& p : pieces) out.push_back(std::move(p));
}
}  // namespace

void PreTokenizer::add_split(std::shared_ptr<const Regex> re, SplitBehavior behavior, bool invert) {
    steps_.push_back({std::move(re), behavior, invert, false, false});
}

void PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
    static const auto gpt2 = std::make_shared<const Regex>(kGpt2Pattern);
    steps_.push_back({use_regex ? gpt2 : nullptr, SplitBehavior::Isolated, false, true, add_prefix_space});
}

bool PreTokenizer::has_gguf_pre(std::string_view name) { return presets().count(name) > 0; }

PreTokenizer PreTokenizer::from_gguf_pre(std::string_view name, GgufPreFlags* flags) {
    const auto& p = presets();
    auto it = p.find(name);
    if (it == p.end()) {
        std::string known;
        for (auto& [k, v] : p) known += (known.empty() ? "" : ", ") + k;
        fail(ErrorKind::Unsupported, "tokenizer.ggml.pre '{}' is not supported (known: {})", name, known);
    }
    PreTokenizer pre;
    for (const char* pat : it->second.patterns)
        pre.add_split(std::make_shared<const Regex>(pat), SplitBehavior::Isolated, false);
    pre.add_byte_level(false, false);
    if (flags) *flags = {it->second.nfc, it->second.ignore_merges, it->second.add_bos};
    return pre;
}

std::string PreTokenizer::escape_literal(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (std::string_view(R"(\^$.|?*+()[]{}-)").find(c) != std::string_view::npos) out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

std::vector<std::u32string> PreTokenizer::split(std::u32string_view text) const {
    std::vector<std::u32string> pieces;
    if (text.empty()) return pieces;
    pieces.emplace_back(text);
    for (const Step& st : steps_) {
        std::vector<std::u32string> next;
        next.reserve(pieces.size());
        for (auto& p : pieces) {
            if (st.byte_level && st.add_prefix_space && p.front() != U' ') p.insert(p.begin(), U' ');
            if (st.re) split_one(*st.re, st.behavior, st.invert, p, next);
            else next.push_back(std::move(p));
        }
        pieces = std::move(next);
    }
    return pieces;
}

}  // namespace tessera::tok
