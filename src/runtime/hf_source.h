// TensorSource over a Hugging Face checkpoint directory (config.json + safetensors), presenting
// tensors under llama.cpp's GGUF names; also reads config.json into a ModelConfig.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

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
    const nlohmann::json& config_json() const { return json_; }  // the text model's config

private:
    std::string dir_;
    nlohmann::json json_;
    SafetensorsCheckpoint ckpt_;
    std::map<std::string, std::string> map_;  // gguf name -> file name
    ModelConfig config_;
};

// Reads a dense model's ModelConfig from the text model's config.json object.
ModelConfig hf_model_config(const nlohmann::json& cfg, const std::string& where);

}  // namespace tessera
