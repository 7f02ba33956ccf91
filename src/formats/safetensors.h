// Hugging Face safetensors: one file (u64 header length, JSON header, raw little-endian data)
// or a checkpoint directory (model.safetensors, sharded via model.safetensors.index.json, or every
// *.safetensors). Files are memory-mapped; tensors are read-only views into the mapping.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"

namespace tessera {

struct SafetensorsTensorInfo {
    std::string name;
    std::string dtype_name;       // as written in the header: "BF16", "U32", "F8_E4M3", ...
    std::optional<DType> dtype;   // empty for dtypes tessera does not compute in (F8, F4, F6, C64)
    std::vector<int64_t> shape;   // outermost first, as in the file
    const uint8_t* data = nullptr;  // in the mapping; alignment is whatever the writer chose
    size_t nbytes = 0;
    std::string file;             // path of the file holding it

    int64_t numel() const;
    std::string shape_str() const;  // "[2, 3]"
};

// The parsed header of one file image: tensors (data pointers into `data`) and __metadata__.
struct SafetensorsHeader {
    std::vector<SafetensorsTensorInfo> tensors;
    std::map<std::string, std::string> metadata;
};

// Validates and parses a whole safetensors file image of `size` bytes; `path` names it in errors.
// Throws Error (Invalid) on a truncated or malformed file: header length beyond the file or over
// 100 MB, bad JSON, unknown dtype, offsets out of range or overlapping, size != dtype x shape.
SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& path);

class SafetensorsCheckpoint {
public:
    // A .safetensors file, a *.safetensors.index.json file, or a directory:
    // model.safetensors.index.json (or the one *.safetensors.index.json) if present, else
    // model.safetensors, else every *.safetensors.
    static SafetensorsCheckpoint open(const std::string& dir_or_file);

    bool has(const std::string& name) const { return tensors_.count(name) > 0; }
    // Throws Error(NotFound) naming the tensor and the checkpoint.
    const SafetensorsTensorInfo& info(const std::string& name) const;
    // A contiguous CPU view (read-only memory despite the non-const pointer). Throws
    // Error(Unsupported) for dtypes without a tessera DType (e.g. F8_E4M3) or rank > 4.
    Tensor tensor(const std::string& name) const;
    std::vector<std::string> names() const;  // sorted
    size_t size() const { return tensors_.size(); }
    const std::vector<std::string>& files() const { return paths_; }
    // __metadata__ of all files merged (the first file that sets a key wins).
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    const std::string& path() const { return path_; }

private:
    void add_file(const std::string& file_path);
    void add_index(const std::string& dir, const std::string& index_path);  // the shards it names

    std::string path_;
    std::vector<MappedFile> files_;
    std::vector<std::string> paths_;
    std::map<std::string, SafetensorsTensorInfo> tensors_;
    std::map<std::string, std::string> metadata_;
};

}  // namespace tessera
