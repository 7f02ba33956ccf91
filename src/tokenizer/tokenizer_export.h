// Writes a Tokenizer as GGUF metadata (tokenizer.ggml.*), as llama.cpp's converter does, so a
// tessera-converted GGUF carries its tokenizer and chat template.
#pragma once
#include <cstdint>
#include <string>

namespace tessera {

class GgufWriter;
class Tokenizer;

// The llama.cpp `tokenizer.ggml.pre` name whose split rule equals the tokenizer's own (found by
// comparing the splits of a probe text); throws Error(Unsupported) when none does.
std::string detect_gguf_pre(const Tokenizer& tok);
// Adds tokenizer.ggml.{model, pre, tokens, token_type, merges, *_token_id, add_*_token} and
// tokenizer.chat_template; the token list is padded to `vocab_size` with unused entries.
void add_tokenizer_to_gguf(const Tokenizer& tok, GgufWriter& w, int64_t vocab_size);

}  // namespace tessera
