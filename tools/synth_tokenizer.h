// A synthetic byte-level BPE tokenizer for generated models: the 256 byte tokens, merges
// learned from a short embedded English text, ChatML special tokens and a ChatML template —
// so a random-weight model can take text prompts and chat requests without any download.
// Written as GGUF metadata or as Hugging Face tokenizer files (for MLX checkpoints).
#pragma once
#include "formats/gguf_writer.h"

namespace tessera::cli {

struct SynthTokenizer {
    std::vector<std::string> tokens;  // byte-level alphabet, as GGUF stores them
    std::vector<int32_t> types;       // 1 normal, 3 control
    std::vector<std::string> merges;  // "a b"
    int32_t eos = 0, pad = 0;
};

SynthTokenizer make_synth_tokenizer(int64_t vocab_size);
void add_tokenizer_metadata(GgufWriter& w, const SynthTokenizer& t);
// The same tokenizer as Hugging Face files in `dir`: tokenizer.json (byte-level BPE with Qwen2's
// split rule, the specials as added tokens; the unused padding ids are left out) and
// tokenizer_config.json (eos / pad tokens and the ChatML template).
void write_synth_tokenizer_files(const SynthTokenizer& t, const std::string& dir);

}  // namespace tessera::cli
