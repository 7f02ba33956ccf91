// load_model(PATH): a GGUF file or an HF checkpoint directory -> config, weights, backend and
// the architecture's Model, ready for a Session.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "models/model.h"
#include "runtime/tensor_source.h"
#include "runtime/weight_store.h"

namespace tessera {

struct LoadOptions {
    std::string device = "auto";     // cpu | cuda | auto
    int64_t max_batch_tokens = 512;  // the prefill chunk: bounds activation memory
    bool decode_graphs = true;       // on a device backend: replay recorded decode steps (TESSERA_CUDA_GRAPHS=0: off)
};

struct LoadedModel {
    std::string path;
    std::unique_ptr<TensorSource> source;
    ModelConfig config;
    std::unique_ptr<WeightStore> weights;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Model> model;
};

// Opens the checkpoint's tensors and reads its config (no model is built).
std::unique_ptr<TensorSource> open_tensor_source(const std::string& path, ModelConfig* config);
LoadedModel load_model(const std::string& path, const LoadOptions& opts = {});

bool is_gguf_path(const std::string& path);

// End-of-generation ids the checkpoint declares without a tokenizer: generation_config.json's
// eos_token_id (HF folders) or tokenizer.ggml.eos_token_id (GGUF); empty when none.
std::vector<int32_t> checkpoint_eos_ids(const std::string& path);

}  // namespace tessera
