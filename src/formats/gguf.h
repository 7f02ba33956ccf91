// GGUF (v2/v3) reader: mmaps a file (or parses a caller's buffer), validates every header field,
// and exposes typed metadata and tensor views into the mapping (weights are never copied).
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/tensor.h"
#include "formats/ggml_types.h"
#include "formats/gguf_value.h"

namespace tessera {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kGgufDefaultAlignment = 32;

struct GgufTensorInfo {
    std::string name;
    uint32_t ggml_type = 0;
    int ndim = 0;
    std::array<int64_t, 4> shape{};  // tessera order, outermost first: shape[ndim-1] is ggml ne[0]
    uint64_t offset = 0;             // from the start of the data section
    uint64_t nbytes = 0;
    const uint8_t* data = nullptr;   // into the file's bytes

    int64_t numel() const;
    std::string type_name() const { return ggml_type_name(ggml_type); }
    bool has_dtype() const { return ggml_type_to_dtype(ggml_type).has_value(); }
    // Throws Error(Unsupported) "tensor X: ggml type IQ2_XXS (16) is not supported by tessera".
    DType dtype() const;
    std::string shape_str() const;  // "[151936, 1024]"
};

struct GgufKv {
    std::string key;
    GgufValue value;
};

class GgufFile {
public:
    // Maps and parses `path`; throws Error naming the file and the offending key or tensor.
    static GgufFile open(const std::string& path);
    // Parses a buffer the caller keeps alive for the GgufFile's lifetime (no copy); `name` is used
    // in error messages.
    static GgufFile from_memory(const uint8_t* data, size_t size, const std::string& name);

    const std::string& path() const { return name_; }
    uint32_t version() const { return version_; }
    uint32_t alignment() const { return alignment_; }
    uint64_t data_offset() const { return data_offset_; }  // start of the tensor data section
    size_t file_size() const { return size_; }

    // ---- metadata, in file order ----
    const std::vector<GgufKv>& metadata() const { return kvs_; }
    const GgufValue* find(const std::string& key) const;  // nullptr if absent
    const GgufValue& get(const std::string& key) const;   // Error(NotFound) if absent
    bool has(const std::string& key) const { return find(key) != nullptr; }
    // Typed getters: "file: key qwen3.block_count: expected an integer, found string". Integer
    // getters accept any integer type whose value fits; float getters accept f32 and f64.
    uint32_t get_u32(const std::string& key) const;
    int32_t get_i32(const std::string& key) const;
    uint64_t get_u64(const std::string& key) const;
    int64_t get_i64(const std::string& key) const;
    float get_f32(const std::string& key) const;
    double get_f64(const std::string& key) const;
    bool get_bool(const std::string& key) const;
    const std::string& get_string(const std::string& key) const;
    std::vector<int64_t> get_i64_array(const std::string& key) const;
    std::vector<float> get_f32_array(const std::string& key) const;
    const std::vector<std::string>& get_string_array(const std::string& key) const;
    const GgufValue& get_array(const std::string& key) const;  // any array
    // The same, nullopt when the key is absent (a present key of the wrong type still throws).
    std::optional<uint32_t> find_u32(const std::string& key) const;
    std::optional<int32_t> find_i32(const std::string& key) const;
    std::optional<uint64_t> find_u64(const std::string& key) const;
    std::optional<int64_t> find_i64(const std::string& key) const;
    std::optional<float> find_f32(const std::string& key) const;
    std::optional<double> find_f64(const std::string& key) const;
    std::optional<bool> find_bool(const std::string& key) const;
    std::optional<std::string> find_string(const std::string& key) const;
    // general.architecture, or "" when absent.
    std::string architecture() const;

    // ---- tensors, in file order ----
    const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
    const GgufTensorInfo* find_tensor(const std::string& name) const;  // nullptr if absent
    const GgufTensorInfo& tensor_info(const std::string& name) const;  // Error(NotFound)
    // A contiguous CPU view of the tensor's bytes (read-only: do not write through it).
    Tensor tensor(const std::string& name) const;

private:
    GgufFile() = default;
    void parse();
    void parse_tensor_infos(ByteReader& r, uint64_t count);
    void place_tensors();
    template <typename Fn> decltype(auto) with_key(const std::string& key, Fn&& fn) const;

    MappedFile file_;  // empty for from_memory
    std::string name_;
    const uint8_t* data_ = nullptr;
    size_t size_ = 0;
    uint32_t version_ = 0;
    uint32_t alignment_ = kGgufDefaultAlignment;
    uint64_t data_offset_ = 0;
    std::vector<GgufKv> kvs_;
    std::unordered_map<std::string, size_t> kv_index_;
    std::vector<GgufTensorInfo> tensors_;
    std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace tessera
