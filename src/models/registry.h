// The model registry: architecture key -> factory. One model file per architecture family.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"

namespace tessera {

class WeightStore;

using ModelFactory = std::unique_ptr<Model> (*)(const ModelConfig& cfg, WeightStore& weights, Backend& be,
                                                int64_t max_batch_tokens);

struct ModelEntry {
    const char* arch;      // GGUF general.architecture / tessera key
    ModelFactory make;
};

// Throws Error(Unsupported) listing the known architectures.
const ModelEntry& find_model(const std::string& arch);
std::vector<std::string> known_architectures();

// Factories (one per model file).
std::unique_ptr<Model> make_llama(const ModelConfig& cfg, WeightStore& weights, Backend& be, int64_t max_batch_tokens);
std::unique_ptr<Model> make_qwen35(const ModelConfig& cfg, WeightStore& weights, Backend& be, int64_t max_batch_tokens);

}  // namespace tessera
