// A streaming safetensors writer for `tessera synth`'s MLX checkpoints: the header (names, dtypes,
// shapes, offsets, __metadata__) is known up front, tensor bytes come from producers one by one.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tessera::cli {

class SafetensorsWriter {
public:
    using Sink = std::function<void(const void* data, size_t n)>;
    using Producer = std::function<void(const Sink& sink)>;  // must emit exactly the tensor's bytes

    explicit SafetensorsWriter(std::map<std::string, std::string> metadata = {});
    // dtype: "U32", "BF16", "F16", "F32"; shape outermost first. Tensors are laid out in the order added.
    void add(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape, Producer produce);
    uint64_t data_bytes() const { return data_bytes_; }
    size_t size() const { return tensors_.size(); }
    std::vector<std::string> names() const;  // in file order
    // Writes `path`.partial, renamed to `path` when complete. `progress` gets every chunk's size.
    void write(const std::string& path, const std::function<void(uint64_t)>& progress = {}) const;

private:
    struct Entry {
        std::string name, dtype;
        std::vector<int64_t> shape;
        uint64_t begin, end;
        Producer produce;
    };
    std::map<std::string, std::string> metadata_;
    std::vector<Entry> tensors_;
    uint64_t data_bytes_ = 0;
};

// Bytes per element of a safetensors dtype name (U32, BF16, F16, F32); throws on others.
size_t safetensors_dtype_size(const std::string& dtype);

}  // namespace tessera::cli
