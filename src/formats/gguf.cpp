// GGUF reader: header, metadata, tensor infos and the data section, each validated against the
// file's size before use, so truncated or hostile files fail with a clear Error.
#include "formats/gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/status.h"

namespace tessera {

namespace {
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;              // empty key, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims 0, type, offset

// Integer getters name the type they convert to when the value is not an integer at all.
void require_integer(const GgufValue& v, const char* want) {
    if (v.is_array() || !gguf_type_is_integer(v.type()))
        fail(ErrorKind::Invalid, "expected {}, found {}", want, v.type_str());
}

uint32_t byteswap32(uint32_t v) {
    return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}
}  // namespace

// ---- tensor info -------------------------------------------------------------------------

int64_t GgufTensorInfo::numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
}

DType GgufTensorInfo::dtype() const {
    const auto d = ggml_type_to_dtype(ggml_type);
    if (!d)
        fail(ErrorKind::Unsupported, "tensor {}: ggml type {} ({}) is not supported by tessera", name,
             ggml_type_name(ggml_type), ggml_type);
    return *d;
}

std::string GgufTensorInfo::shape_str() const {
    std::string s = "[";
    for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// ---- open / parse ------------------------------------------------------------------------

GgufFile GgufFile::open(const std::string& path) {
    GgufFile f;
    f.file_ = MappedFile(path);
    f.name_ = path;
    f.data_ = f.file_.data();
    f.size_ = f.file_.size();
    with_context(path, [&] { f.parse(); });
    return f;
}

GgufFile GgufFile::from_memory(const uint8_t* data, size_t size, const std::string& name) {
    GgufFile f;
    f.name_ = name;
    f.data_ = data;
    f.size_ = size;
    with_context(name, [&] { f.parse(); });
    return f;
}

void GgufFile::parse() {
    ByteReader r(data_, size_);
    const uint32_t magic = r.read<uint32_t>("magic");
    if (magic != kGgufMagic)
        fail(ErrorKind::Invalid, "not a GGUF file: magic is {:#010x}, expected {:#010x} (\"GGUF\")", magic, kGgufMagic);
    version_ = r.read<uint32_t>("version");
    if (version_ == 1)
        fail(ErrorKind::Unsupported, "GGUF version 1 is not supported (re-convert the model with current llama.cpp)");
    if (byteswap32(version_) == 2 || byteswap32(version_) == 3)
        fail(ErrorKind::Unsupported, "big-endian GGUF files are not supported");
    if (version_ != 2 && version_ != 3)
        fail(ErrorKind::Unsupported, "unsupported GGUF version {} (expected 3, or 2)", version_);

    const uint64_t tensor_count = r.read<uint64_t>("tensor count");
    const uint64_t kv_count = r.read<uint64_t>("metadata count");
    TS_CHECK(kv_count <= r.remaining() / kMinKvBytes, "metadata count {} cannot fit in a {}-byte file", kv_count,
             size_);
    TS_CHECK(tensor_count <= r.remaining() / kMinTensorInfoBytes, "tensor count {} cannot fit in a {}-byte file",
             tensor_count, size_);

    kvs_.reserve(size_t(kv_count));
    for (uint64_t i = 0; i < kv_count; ++i) {
        const std::string key(with_context(fmt::format("metadata entry {}", i), [&] { return r.read_string("key"); }));
        with_context("key " + key, [&] {
            const uint32_t type = r.read<uint32_t>("value type");
            TS_CHECK(type < kGgufTypeCount, "invalid value type {} at offset {}", type, r.pos() - 4);
            TS_CHECK(!kv_index_.count(key), "duplicate key");
            GgufValue value = gguf_read_value(r, GgufType(type));
            kv_index_.emplace(key, kvs_.size());
            kvs_.push_back({key, std::move(value)});
        });
    }

    if (has("general.alignment")) {
        const uint32_t a = get_u32("general.alignment");
        TS_CHECK(a != 0 && (a & (a - 1)) == 0, "key general.alignment: {} is not a power of two", a);
        alignment_ = a;
    }

    parse_tensor_infos(r, tensor_count);
    data_offset_ = (uint64_t(r.pos()) + alignment_ - 1) / alignment_ * alignment_;
    place_tensors();
}

void GgufFile::parse_tensor_infos(ByteReader& r, uint64_t count) {
    tensors_.reserve(size_t(count));
    for (uint64_t i = 0; i < count; ++i) {
        GgufTensorInfo t;
        t.name = std::string(with_context(fmt::format("tensor info {}", i), [&] { return r.read_string("tensor name"); }));
        with_context("tensor " + t.name, [&] {
            TS_CHECK(!tensor_index_.count(t.name), "duplicate tensor name");
            const uint32_t n_dims = r.read<uint32_t>("n_dims");
            TS_CHECK(n_dims <= 4, "{} dimensions (at most 4 are supported)", n_dims);
            t.ndim = int(n_dims);
            uint64_t ne[4] = {1, 1, 1, 1};
            int64_t numel = 1;
            for (uint32_t d = 0; d < n_dims; ++d) {
                ne[d] = r.read<uint64_t>("dimension");
                TS_CHECK(ne[d] > 0 && ne[d] <= uint64_t(std::numeric_limits<int64_t>::max()),
                         "dimension ne[{}] = {} is not a positive int64", d, ne[d]);
                TS_CHECK(!__builtin_mul_overflow(numel, int64_t(ne[d]), &numel),
                         "element count overflows int64 at ne[{}] = {}", d, ne[d]);
                t.shape[n_dims - 1 - d] = int64_t(ne[d]);
            }
            t.ggml_type = r.read<uint32_t>("ggml type");
            const GgmlTypeInfo* info = ggml_type_info(t.ggml_type);
            if (!info) fail(ErrorKind::Invalid, "unknown ggml type id {}", t.ggml_type);
            TS_CHECK(ne[0] % info->block_elems == 0, "row length {} is not a multiple of the {} block size {}", ne[0],
                     info->name, info->block_elems);
            const uint64_t blocks = uint64_t(numel) / info->block_elems;
            TS_CHECK(!__builtin_mul_overflow(blocks, uint64_t(info->block_bytes), &t.nbytes) &&
                         t.nbytes <= uint64_t(std::numeric_limits<int64_t>::max()),
                     "byte size of {} {} elements overflows", numel, info->name);
            t.offset = r.read<uint64_t>("data offset");
        });
        tensor_index_.emplace(t.name, tensors_.size());
        tensors_.push_back(std::move(t));
    }
}

void GgufFile::place_tensors() {
    if (tensors_.empty()) return;
    TS_CHECK(data_offset_ <= size_, "data section would start at offset {}, past the end of the {}-byte file",
             data_offset_, size_);
    const uint64_t data_size = size_ - data_offset_;
    for (auto& t : tensors_) {
        with_context("tensor " + t.name, [&] {
            TS_CHECK(t.offset % alignment_ == 0, "data offset {} is not a multiple of the alignment {}", t.offset,
                     alignment_);
            TS_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset,
                     "data [{}, {}) runs past the end of the {}-byte data section (file truncated?)", t.offset,
                     uint64_t(t.offset + t.nbytes), data_size);
        });
        t.data = data_ + data_offset_ + t.offset;
    }
    std::vector<size_t> order(tensors_.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    for (size_t i = 1; i < order.size(); ++i) {
        const auto& prev = tensors_[order[i - 1]];
        const auto& cur = tensors_[order[i]];
        TS_CHECK(prev.offset + prev.nbytes <= cur.offset, "tensors {} [{}, {}) and {} [{}, ...) overlap", prev.name,
                 prev.offset, prev.offset + prev.nbytes, cur.name, cur.offset);
    }
}

// ---- metadata ----------------------------------------------------------------------------

const GgufValue* GgufFile::find(const std::string& key) const {
    const auto it = kv_index_.find(key);
    return it == kv_index_.end() ? nullptr : &kvs_[it->second].value;
}

const GgufValue& GgufFile::get(const std::string& key) const {
    const GgufValue* v = find(key);
    if (!v) fail(ErrorKind::NotFound, "{}: key {} not found", name_, key);
    return *v;
}

// Runs fn(value of key); an Error is prefixed with "file: key K".
template <typename Fn>
decltype(auto) GgufFile::with_key(const std::string& key, Fn&& fn) const {
    const GgufValue& v = get(key);
    return with_context(fmt::format("{}: key {}", name_, key), [&]() -> decltype(auto) { return fn(v); });
}

uint32_t GgufFile::get_u32(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) {
        require_integer(v, "u32");
        const uint64_t x = v.as_u64();
        TS_CHECK(x <= std::numeric_limits<uint32_t>::max(), "value {} ({}) does not fit u32", x, v.type_str());
        return uint32_t(x);
    });
}

int32_t GgufFile::get_i32(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) {
        require_integer(v, "i32");
        const int64_t x = v.as_i64();
        TS_CHECK(x >= std::numeric_limits<int32_t>::min() && x <= std::numeric_limits<int32_t>::max(),
                 "value {} ({}) does not fit i32", x, v.type_str());
        return int32_t(x);
    });
}

uint64_t GgufFile::get_u64(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) {
        require_integer(v, "u64");
        return v.as_u64();
    });
}
int64_t GgufFile::get_i64(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) {
        require_integer(v, "i64");
        return v.as_i64();
    });
}
float GgufFile::get_f32(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) { return float(v.as_f64()); });
}
double GgufFile::get_f64(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) { return v.as_f64(); });
}
bool GgufFile::get_bool(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) { return v.as_bool(); });
}
const std::string& GgufFile::get_string(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) -> const std::string& { return v.as_string(); });
}
std::vector<int64_t> GgufFile::get_i64_array(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) { return v.as_i64_array(); });
}
std::vector<float> GgufFile::get_f32_array(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) {
        const auto d = v.as_f64_array();
        return std::vector<float>(d.begin(), d.end());
    });
}
const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) -> const std::vector<std::string>& { return v.as_string_array(); });
}
const GgufValue& GgufFile::get_array(const std::string& key) const {
    return with_key(key, [](const GgufValue& v) -> const GgufValue& {
        v.elem_type();  // throws unless an array
        return v;
    });
}

std::optional<uint32_t> GgufFile::find_u32(const std::string& k) const { return has(k) ? std::optional(get_u32(k)) : std::nullopt; }
std::optional<int32_t> GgufFile::find_i32(const std::string& k) const { return has(k) ? std::optional(get_i32(k)) : std::nullopt; }
std::optional<uint64_t> GgufFile::find_u64(const std::string& k) const { return has(k) ? std::optional(get_u64(k)) : std::nullopt; }
std::optional<int64_t> GgufFile::find_i64(const std::string& k) const { return has(k) ? std::optional(get_i64(k)) : std::nullopt; }
std::optional<float> GgufFile::find_f32(const std::string& k) const { return has(k) ? std::optional(get_f32(k)) : std::nullopt; }
std::optional<double> GgufFile::find_f64(const std::string& k) const { return has(k) ? std::optional(get_f64(k)) : std::nullopt; }
std::optional<bool> GgufFile::find_bool(const std::string& k) const { return has(k) ? std::optional(get_bool(k)) : std::nullopt; }
std::optional<std::string> GgufFile::find_string(const std::string& k) const {
    return has(k) ? std::optional(get_string(k)) : std::nullopt;
}

std::string GgufFile::architecture() const { return find_string("general.architecture").value_or(""); }

// ---- tensors -----------------------------------------------------------------------------

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
    const auto it = tensor_index_.find(name);
    return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor_info(const std::string& name) const {
    const GgufTensorInfo* t = find_tensor(name);
    if (!t) fail(ErrorKind::NotFound, "{}: tensor {} not found", name_, name);
    return *t;
}

Tensor GgufFile::tensor(const std::string& name) const {
    const GgufTensorInfo& t = tensor_info(name);
    const DType dtype = with_context(name_, [&] { return t.dtype(); });
    return Tensor::contiguous(const_cast<uint8_t*>(t.data), dtype, t.shape.data(), t.ndim);
}

}  // namespace tessera
