// TensorSource over a Hugging Face checkpoint directory (config.json + safetensors), presenting
// tensors under llama.cpp's GGUF names; also reads config.json into a ModelConfig.
#pragma once
#include <map>
#include <string>

#include "formats/safetensors.h"
#include "models/model_config.h"
#include "runtime/tensor_source.h"

namespace tessera {

class HfConfig;

class HfSource final : public TensorSource {
public:
    explicit HfSource(const std::string& dir);
    bool has(const std::string& name) const override { return map_.count(name) > 0 || derived_.count(name) > 0; }
    Tensor get(const std::string& name) const override;
    std::vector<std::string> names() const override;
    std::string describe() const override { return dir_; }

    const ModelConfig& config() const { return config_; }

private:
    // llama.cpp's conventions for the hybrids, made once at load (hf_hybrid.cpp): zero-centred
    // norms stored as 1 + w, ssm_a = -exp(A_log), conv1d squeezed.
    void derive_hybrid_tensors();
    // MLX affine-quantized weights (hf_mlx.cpp), expanded to f32.
    void dequantize_mlx(const HfConfig& hc);
    // A new owned tensor under `name` (replacing any file tensor of that name), zero-filled.
    Tensor derive(const std::string& name, DType dtype, std::vector<int64_t> shape);

    struct Derived {
        std::vector<uint8_t> bytes;
        Tensor view;
    };
    std::string dir_;
    SafetensorsCheckpoint ckpt_;
    std::map<std::string, std::string> map_;  // gguf name -> file name
    std::map<std::string, Derived> derived_;  // gguf name -> owned, transformed tensor
    ModelConfig config_;
    bool mlx_ = false;  // an MLX checkpoint: quantized modules, norms with their +1 already added
};

// Reads a model's ModelConfig from the text model's config.json.
ModelConfig hf_model_config(const HfConfig& cfg);
// The hybrid part: layer types, Gated DeltaNet and MoE sizes (hf_hybrid.cpp).
void hf_hybrid_config(const HfConfig& cfg, ModelConfig& m);

}  // namespace tessera
