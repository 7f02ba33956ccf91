// GGUF v3 writer following llama.cpp's layout: header, metadata in insertion order, tensor infos
// (ne[0] innermost), then tensor data, each tensor aligned to general.alignment and zero-padded.
// Tensor bytes are streamed from pointers or producer callbacks, so memory does not grow with the
// model.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "core/dtype.h"
#include "formats/gguf_value.h"

namespace tessera {

class GgufWriter {
public:
    // Receives a tensor's bytes in pieces of any size.
    using Sink = std::function<void(const void* data, size_t n)>;
    // Produces one tensor's bytes into the sink; must emit exactly the tensor's byte size.
    using Producer = std::function<void(const Sink& sink)>;

    explicit GgufWriter(uint32_t alignment = 32);  // a power of two; written as general.alignment if not 32

    // Adds a metadata entry (kept in insertion order); throws on a duplicate key. Setting
    // general.alignment changes the alignment (it must be a u32 power of two).
    void set(const std::string& key, GgufValue value);

    // Adds a tensor of `shape` (outermost first, at most 4 dims, each > 0). `data` must stay valid
    // until write(); it holds the tensor's bytes in ggml layout.
    void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, const void* data);
    void add_tensor(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Producer produce);
    // A tensor of any ggml type id (including types tessera cannot compute with), e.g. when copying.
    void add_tensor_ggml(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape,
                         Producer produce);

    uint32_t alignment() const { return alignment_; }
    size_t tensor_count() const { return tensors_.size(); }

    // Writes the file: to `path`.partial first, renamed to `path` once complete, so a failure
    // never leaves a truncated file under the final name. Calls each producer once.
    void write(const std::string& path) const;

private:
    struct PendingTensor {
        std::string name;
        uint32_t ggml_type;
        std::vector<int64_t> shape;  // outermost first
        uint64_t nbytes;
        uint64_t offset;             // in the data section
        const void* data;            // the bytes, or null when produced
        Producer produce;
    };

    void add(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& shape, const void* data,
             Producer produce);
    std::string header_bytes() const;  // everything before the data section, unpadded

    uint32_t alignment_;
    std::vector<std::pair<std::string, GgufValue>> kvs_;
    std::unordered_set<std::string> keys_;
    std::vector<PendingTensor> tensors_;
    std::unordered_set<std::string> tensor_names_;
    uint64_t data_size_ = 0;  // padded size of the data section so far
};

}  // namespace tessera
