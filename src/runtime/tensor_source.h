// TensorSource: named weight tensors from a checkpoint (GGUF file or HF safetensors directory),
// always under llama.cpp's GGUF names ("blk.3.attn_q.weight"), whatever the file calls them.
// Views point into the mmapped file: on CPU weights are used in place, never copied.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tessera {

class TensorSource {
public:
    virtual ~TensorSource() = default;
    virtual bool has(const std::string& name) const = 0;
    // Throws Error "<file>: no tensor <name>" if absent.
    virtual Tensor get(const std::string& name) const = 0;
    virtual std::vector<std::string> names() const = 0;
    virtual std::string describe() const = 0;  // the file or directory

    // get(name) checked against an expected shape; the error names the tensor.
    Tensor get(const std::string& name, std::initializer_list<int64_t> shape) const;
    // Returns an empty Tensor if absent.
    Tensor find(const std::string& name) const { return has(name) ? get(name) : Tensor(); }
};

}  // namespace tessera
