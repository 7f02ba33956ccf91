// Writes a model (any TensorSource + its ModelConfig) as a GGUF file in llama.cpp's conventions:
// tensor names, {arch}.* metadata, Llama's q/k row permutation, rope_freqs for Llama-3 scaling,
// 1-D tensors in f32 and matrices in the requested type. Streams tensor by tensor.
#pragma once
#include <functional>
#include <string>

#include "core/dtype.h"
#include "formats/gguf_writer.h"
#include "models/model_config.h"
#include "runtime/tensor_source.h"

namespace tessera {

struct ExportOptions {
    DType type = DType::F16;  // matrices; falls back per tensor where the row length does not fit the block
    std::string name;         // general.name
    // Adds tokenizer metadata (tokenizer.ggml.*) to the writer, if the caller has a tokenizer.
    std::function<void(GgufWriter&)> add_tokenizer;
    std::function<void(const std::string& tensor, size_t done, size_t total)> progress;
};

// The type a matrix with rows of `cols` elements gets when `want` is asked for.
DType export_matrix_type(DType want, int64_t cols);
// The dense model's {arch}.* and general.* metadata.
void add_model_metadata(GgufWriter& w, const ModelConfig& cfg, DType type, const std::string& name);
void export_gguf(const TensorSource& src, const ModelConfig& cfg, const std::string& out_path,
                 const ExportOptions& opts);

}  // namespace tessera
