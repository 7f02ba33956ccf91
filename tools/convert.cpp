// `tessera convert`: a Hugging Face checkpoint (or a GGUF) -> a GGUF in llama.cpp's conventions,
// with matrices in the requested type and the tokenizer when the checkpoint has one.
#include <cstdio>
#include <filesystem>
#include <unistd.h>

#include "cli.h"
#include "core/status.h"
#include "formats/gguf.h"
#include "runtime/gguf_export.h"
#include "runtime/model_loader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_export.h"

namespace tessera::cli {
namespace {

int run_convert(const Args& args) {
    const auto& pos = args.positional();
    const std::string in = args.has("model") ? args.get("model") : (pos.size() >= 1 ? pos[0] : "");
    const std::string out = args.has("out") ? args.get("out") : (pos.size() >= 2 ? pos[1] : "");
    TS_CHECK(!in.empty() && !out.empty(), "usage: tessera convert HF_DIR OUT.gguf [--type T]");
    TS_CHECK(std::filesystem::absolute(in) != std::filesystem::absolute(out), "input and output are the same file");
    const DType type = dtype_from_name(args.get("type", "f16"));
    TS_CHECK(type == DType::F32 || type == DType::F16 || type == DType::BF16 || type == DType::Q8_0 ||
                 type == DType::Q4_0 || type == DType::Q4_K || type == DType::Q6_K,
             "--type {}: choose f32, f16, bf16, q8_0, q4_0, q4_k or q6_k", dtype_name(type));

    ModelConfig cfg;
    auto src = open_tensor_source(in, &cfg);
    ExportOptions opts;
    opts.type = type;
    opts.name = std::filesystem::path(in).filename().string();
    std::unique_ptr<Tokenizer> tok;
    if (std::filesystem::is_directory(in) && std::filesystem::exists(std::filesystem::path(in) / "tokenizer.json"))
        tok = load_tokenizer(in);
    else if (is_gguf_path(in) && GgufFile::open(in).has("tokenizer.ggml.model"))
        tok = load_tokenizer(in);  // GGUF input: carry its tokenizer over
    if (tok) {
        TS_CHECK(tok->vocab_size() <= cfg.vocab_size, "{}: the tokenizer has {} tokens but the model only {} rows",
                 in, tok->vocab_size(), cfg.vocab_size);
        opts.add_tokenizer = [&](GgufWriter& w) { add_tokenizer_to_gguf(*tok, w, cfg.vocab_size); };
    } else {
        std::fprintf(stderr, "convert: no tokenizer in %s; writing the model without one\n", in.c_str());
    }
    const bool tty = isatty(fileno(stderr));
    opts.progress = [tty](const std::string& name, size_t done, size_t total) {
        if (tty) std::fprintf(stderr, "\rconvert: %zu/%zu %-40s", done, total, name.c_str());
    };
    export_gguf(*src, cfg, out, opts);
    std::fprintf(stderr, "%sconvert: wrote %s (%s)\n", tty ? "\n" : "", out.c_str(), dtype_name(type));
    return 0;
}

}  // namespace

TESSERA_VERB("convert", "write a GGUF (llama.cpp conventions) from an HF checkpoint",
             {{"model", true, "input: HF checkpoint directory (or the first positional argument)"},
              {"out", true, "output .gguf (or the second positional argument)"},
              {"type", true, "matrix type: f32 f16 bf16 q8_0 q4_0 q4_k q6_k (default f16)"},
              {"threads", true, "CPU threads (default: every core)"}},
             run_convert);

}  // namespace tessera::cli
