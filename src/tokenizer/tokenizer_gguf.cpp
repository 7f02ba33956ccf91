// Tokenizer from GGUF metadata (tokenizer.ggml.*): byte-level BPE ("gpt2" model) with the split
// rule named by tokenizer.ggml.pre; control / user-defined tokens become special / added tokens.
#include "core/log.h"
#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer_parts.h"

namespace tessera {
namespace {
// tokenizer.ggml.token_type values (llama.cpp llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
}

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GgufFile& g) {
    return with_context(g.path(), [&] {
        Parts p;
        p.source = g.path();
        const std::string model = g.get_string("tokenizer.ggml.model");
        if (model != "gpt2")
            fail(ErrorKind::Unsupported, "tokenizer.ggml.model '{}' is not supported (only 'gpt2', byte-level BPE)", model);
        const auto& tokens = g.get_string_array("tokenizer.ggml.tokens");
        std::vector<int64_t> types;
        if (g.has("tokenizer.ggml.token_type")) {
            types = g.get_i64_array("tokenizer.ggml.token_type");
            TS_CHECK(types.size() == tokens.size(), "tokenizer.ggml.token_type has {} entries for {} tokens",
                     types.size(), tokens.size());
        }
        TS_CHECK(tokens.size() < (size_t{1} << 24), "tokenizer.ggml.tokens: {} tokens is too many", tokens.size());
        p.vocab.reserve(tokens.size());
        for (size_t i = 0; i < tokens.size(); ++i) {
            const int64_t type = types.empty() ? kNormal : types[i];
            const auto id = static_cast<int32_t>(i);
            if (type == kControl || type == kUnknown || type == kUserDefined) {
                tok::AddedToken t;
                t.content = tokens[i];
                t.id = id;
                t.special = type != kUserDefined;
                p.added.push_back(std::move(t));
            } else if (type == kUnused) {
                p.inert.emplace_back(tokens[i], id);
            } else {
                p.vocab.emplace_back(tokens[i], id);
            }
        }
        if (g.has("tokenizer.ggml.merges")) {
            const auto& merges = g.get_string_array("tokenizer.ggml.merges");
            p.merges.reserve(merges.size());
            for (size_t i = 0; i < merges.size(); ++i) {
                const std::string& m = merges[i];
                const size_t sp = m.find(' ', 1);
                TS_CHECK(sp != std::string::npos && sp + 1 < m.size(), "tokenizer.ggml.merges[{}] '{}' is not 'a b'", i, m);
                p.merges.emplace_back(m.substr(0, sp), m.substr(sp + 1));
            }
        }
        std::string pre = g.find_string("tokenizer.ggml.pre").value_or("default");
        if (!tok::PreTokenizer::has_gguf_pre(pre)) {
            // As llama.cpp does: an unknown split rule falls back to its 'default' rule.
            TS_LOG_WARN("{}: tokenizer.ggml.pre '{}' is not known; using the 'default' split rule", g.path(), pre);
            pre = "default";
        }
        tok::PreTokenizer::GgufPreFlags flags;
        p.pre = tok::PreTokenizer::from_gguf_pre(pre, &flags);
        p.nfc = flags.nfc;
        p.ignore_merges = flags.ignore_merges;
        auto id_key = [&](const char* key) -> std::optional<int32_t> {
            auto v = g.find_i64(key);
            if (!v) return std::nullopt;
            TS_CHECK(*v >= 0 && *v < static_cast<int64_t>(tokens.size()), "{} = {} is outside the vocabulary [0, {})",
                     key, *v, tokens.size());
            return static_cast<int32_t>(*v);
        };
        p.bos = id_key("tokenizer.ggml.bos_token_id");
        p.eos = id_key("tokenizer.ggml.eos_token_id");
        p.pad = id_key("tokenizer.ggml.padding_token_id");
        for (const char* k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
            if (auto id = id_key(k)) p.extra_eos.push_back(*id);
        // End-of-generation tokens llama.cpp recognises by their text.
        for (const auto& t : p.added)
            for (const char* eog : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                                    "<|eom_id|>", "<｜end▁of▁sentence｜>"})
                if (t.content == eog) p.extra_eos.push_back(t.id);
        if (g.find_bool("tokenizer.ggml.add_bos_token").value_or(flags.add_bos) && p.bos) p.prefix_ids.push_back(*p.bos);
        if (g.find_bool("tokenizer.ggml.add_eos_token").value_or(false) && p.eos) p.suffix_ids.push_back(*p.eos);
        p.chat_template = g.find_string("tokenizer.chat_template").value_or("");
        return from_parts(std::move(p));
    });
}

}  // namespace tessera
