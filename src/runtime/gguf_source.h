// TensorSource over a GGUF file (names are already llama.cpp's).
#pragma once
#include <memory>

#include "formats/gguf.h"
#include "runtime/tensor_source.h"

namespace tessera {

class GgufSource final : public TensorSource {
public:
    explicit GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}
    bool has(const std::string& name) const override { return file_->find_tensor(name) != nullptr; }
    Tensor get(const std::string& name) const override;
    std::vector<std::string> names() const override;
    std::string describe() const override { return file_->path(); }
    const GgufFile& file() const { return *file_; }

private:
    std::shared_ptr<const GgufFile> file_;
};

struct ModelConfig;
// Reads a dense model's hyper-parameters from GGUF metadata ({arch}.block_count, ...).
ModelConfig gguf_model_config(const GgufFile& f);

}  // namespace tessera
