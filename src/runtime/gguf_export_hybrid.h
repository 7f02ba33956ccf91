// The GGUF conventions of llama.cpp's qwen35 / qwen35moe / qwen3next that go beyond names:
// their metadata keys, Qwen3.5's re-tiled value heads, and experts stacked into one tensor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/gguf_writer.h"
#include "models/model_config.h"

namespace tessera {

// Where output row / column i of a tensor comes from in the source (empty: unchanged).
struct TensorRemap {
    std::vector<int64_t> rows, cols;
};

void add_hybrid_metadata(GgufWriter& w, const ModelConfig& c);
// For qwen35*: the value-head re-tiling (grouped h = g·r + j -> tiled h' = j·nk + g) of the tensor
// named `name` with `rows` rows of `cols` elements.
TensorRemap hybrid_remap(const std::string& name, int64_t rows, int64_t cols, const ModelConfig& c);

}  // namespace tessera
