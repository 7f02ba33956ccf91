// The tensors of a synthetic model: names and shapes exactly as llama.cpp's GGUF conversion (or
// mlx-lm's MLX conversion) writes them for the architecture, with how each one's random values
// are drawn and stored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/model_config.h"

namespace tessera::cli {

// How a tensor's values are drawn (the float recipe; quantized types reproduce its std).
enum class SynthInit {
    Normal,  // zero mean, standard deviation `std`: 1/sqrt(cols) for matrices, 1 for embeddings
    Norm,    // 1 + N(0, 0.1²): RMSNorm weights (llama.cpp and mlx-lm store Qwen3.5's 1 + w)
    NegA,    // -U(0.5, 8): llama.cpp's ssm_a = -exp(A_log)
    LogA,    // log U(0.5, 8): HF / MLX A_log
};

// Where a tensor's values are stored.
enum class SynthStore {
    Float,   // f32 in GGUF, bf16 in MLX: norms, small vectors, conv taps
    Matrix,  // the requested type: GGUF --type (f16 where a row does not fit its blocks), MLX 4-bit
    Router,  // f32 in GGUF (llama.cpp does not quantize routers), 8-bit in MLX (as mlx-lm converts)
};

struct SynthTensor {
    std::string name;            // GGUF name, or the HF name as mlx-lm saves it (with ".weight")
    std::vector<int64_t> shape;  // outermost first
    SynthInit init = SynthInit::Normal;
    float std = 1.f;             // for Normal
    SynthStore store = SynthStore::Matrix;

    int64_t cols() const { return shape.back(); }
    int64_t rows() const;        // product of the outer dimensions
};

// llama.cpp's tensors for qwen3 / llama / qwen35moe / qwen3next (qwen3next in the current layout:
// attn_qkv + attn_gate + ssm_ba, as llama.cpp's converter writes it).
std::vector<SynthTensor> gguf_tensor_plan(const ModelConfig& c);
// mlx-lm's tensors (before the .scales / .biases of quantized modules) for qwen3 / llama /
// qwen35moe (language_model.* prefix) / qwen3next (fused in_proj_qkvz / in_proj_ba).
std::vector<SynthTensor> mlx_tensor_plan(const ModelConfig& c);

}  // namespace tessera::cli
