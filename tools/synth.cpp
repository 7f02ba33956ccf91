// `tessera synth`: writes a random-weight model with a real architecture's tensor names, shapes
// and metadata — a llama.cpp-style GGUF, or an mlx-community-style 4-bit directory — for demos,
// tests and benchmarks at real sizes without downloading weights. Weights are scaled so
// activations stay finite; quantized types are written as random codes, so writing is I/O-bound.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "cli.h"
#include "core/status.h"
#include "synth_job.h"
#include "tokenizer/tokenizer.h"

namespace tessera::cli {
namespace {

// Loads --tokenizer into the job; a tiny preset takes the tokenizer's vocabulary (rounded up to a
// multiple of 64), a real-size preset must already hold it.
void load_job_tokenizer(SynthJob& job) {
    if (job.tokenizer.empty()) return;
    job.tok = load_tokenizer(job.tokenizer);
    ModelConfig& c = job.preset.cfg;
    const int64_t n = job.tok->vocab_size();
    if (n <= c.vocab_size) return;
    TS_CHECK(job.preset.name == "tiny", "--tokenizer {}: its {} tokens do not fit {}'s vocabulary of {}", job.tokenizer, n,
             job.preset.name, c.vocab_size);
    c.vocab_size = (n + 63) / 64 * 64;
}

SynthJob parse_job(const Args& args) {
    SynthJob job;
    const std::string arch = args.require("arch");
    std::optional<int64_t> layers;
    if (args.has("layers")) layers = args.get_int("layers", 0);
    job.preset = synth_preset(arch, args.get("preset", "tiny"), layers);
    job.type_name = args.get("type", "f16");
    job.mlx = job.type_name == "mlx4";
    if (!job.mlx) {
        constexpr const char* kTypes[] = {"q4_0", "q4_k", "q8_0", "q6_k", "bf16", "f16", "f32"};
        TS_CHECK(std::find(std::begin(kTypes), std::end(kTypes), job.type_name) != std::end(kTypes),
                 "--type {}: choose q4_0, q4_k, q8_0, q6_k, bf16, f16, f32 or mlx4", job.type_name);
        job.type = dtype_from_name(job.type_name);
    }
    const int64_t seed = args.get_int("seed", 0);
    TS_CHECK(seed >= 0, "--seed {}: must not be negative", seed);
    job.seed = uint64_t(seed);
    job.tokenizer = args.get("tokenizer", "");
    if (!args.flag("dry-run")) job.out = args.require("out");
    load_job_tokenizer(job);
    return job;
}

int run_synth(const Args& args) {
    const SynthJob job = parse_job(args);
    if (args.flag("dry-run")) {
        std::printf("%s\n", synth_plan_json(job).c_str());
        return 0;
    }
    if (job.mlx)
        write_synth_mlx(job);
    else
        write_synth_gguf(job);
    return 0;
}

}  // namespace

TESSERA_VERB("synth", "write a random-weight model with a real architecture's shapes (GGUF or MLX 4-bit)",
             {{"arch", true, "qwen3 | llama | qwen35moe | qwen3next"},
              {"preset", true,
               "size: tiny (default); qwen3-0.6b, qwen3-8b (qwen3); llama-3-8b (llama); qwen3.6-35b-a3b (qwen35moe); "
               "qwen3-next-80b-a3b (qwen3next)"},
              {"layers", true, "override the number of layers"},
              {"type", true, "q4_0 q4_k q8_0 (random codes), bf16 f16 f32 q6_k (from floats), mlx4 (MLX directory); default f16"},
              {"seed", true, "random seed (default 0)"},
              {"tokenizer", true, "a tokenizer.json to embed (tokenizer_config.json beside it is read too); default: synthetic"},
              {"dry-run", false, "print the tensor plan as JSON and write nothing"},
              {"threads", true, "CPU threads (default: every core)"},
              {"out", true, "output .gguf file, or directory for mlx4"}},
             run_synth);

}  // namespace tessera::cli
