// TensorSource over a Hugging Face checkpoint directory (config.json + safetensors), presenting
// tensors under llama.cpp's GGUF names; also reads config.json into a ModelConfig.
#pragma once
#include <map>
#include <string>

#include "formats/safetensors.h"
#include "models/model_config.h"
#include "runtime/tensor_source.h"

namespace tessera {

class HfSource final : public TensorSource {
public:
    explicit HfSource(const std::string& dir);
    bool has(const std::string& name) const override { return map_.count(name) > 0; }
    Tensor get(const std::string& name) const override;
    std::vector<std::string> names() const override;
    std::string describe() const override { return dir_; }

    const ModelConfig& config() const { return config_; }

private:
    std::string dir_;
    SafetensorsCheckpoint ckpt_;
    std::map<std::string, std::string> map_;  // gguf name -> file name
    ModelConfig config_;
};

class HfConfig;
// Reads a dense model's ModelConfig from the text model's config.json.
ModelConfig hf_model_config(const HfConfig& cfg);

}  // namespace tessera
