// One `tessera synth` run: what to write (preset, type, seed, tokenizer) and the writers for each
// output format — a llama.cpp-style GGUF file, an mlx-community-style 4-bit directory — plus the
// --dry-run plan.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "synth_presets.h"
#include "synth_tensors.h"

namespace tessera {
class Tokenizer;
}

namespace tessera::cli {

struct SynthJob {
    SynthPreset preset;     // config with --layers applied
    std::string type_name;  // as given: q4_0, q4_k, q8_0, bf16, f16, f32, q6_k, mlx4
    DType type = DType::F16;  // GGUF matrix type (unused for mlx4)
    bool mlx = false;         // --type mlx4: an MLX directory
    uint64_t seed = 0;
    std::string out;
    std::string tokenizer;  // a tokenizer.json to embed; empty: the synthetic byte-level one
    std::shared_ptr<const Tokenizer> tok;  // loaded from `tokenizer`
};

// The ggml type a tensor is stored in for `want`: f32 outside the weight matrices; f16 where a
// row does not fit want's blocks (as `tessera convert`).
DType synth_gguf_type(const SynthTensor& t, DType want);

// MLX affine quantization used by synth (mlx-lm's defaults): group 64; 4-bit matrices, 8-bit routers.
constexpr int64_t kMlxGroup = 64;
int synth_mlx_bits(const SynthTensor& t);  // 0: stored as bf16

void write_synth_gguf(const SynthJob& job);
void write_synth_mlx(const SynthJob& job);
// The plan as JSON: the preset's config, every tensor's name, shape, stored type and bytes.
std::string synth_plan_json(const SynthJob& job);

}  // namespace tessera::cli
