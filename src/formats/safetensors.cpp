// Parsing and validation of one safetensors file image. Every offset and size in the header is
// checked before a data pointer is formed, so a hostile file is an Error, never a bad read.
#include "formats/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/status.h"

namespace tessera {

namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct StDType {
    const char* name;
    int bits;                    // per element
    std::optional<DType> dtype;  // empty: known but not computable here
};

constexpr StDType kDTypes[] = {
    {"F64", 64, DType::F64},  {"F32", 32, DType::F32},  {"F16", 16, DType::F16},  {"BF16", 16, DType::BF16},
    {"I64", 64, DType::I64},  {"I32", 32, DType::I32},  {"I16", 16, DType::I16},  {"I8", 8, DType::I8},
    {"U64", 64, DType::U64},  {"U32", 32, DType::U32},  {"U16", 16, DType::U16},  {"U8", 8, DType::U8},
    {"BOOL", 8, DType::BOOL}, {"F8_E4M3", 8, {}},       {"F8_E5M2", 8, {}},       {"F8_E8M0", 8, {}},
    {"E8M0", 8, {}},          {"F4", 4, {}},            {"F6_E2M3", 6, {}},       {"F6_E3M2", 6, {}},
    {"C64", 64, {}},
};

const StDType* find_dtype(const std::string& name) {
    for (const auto& d : kDTypes)
        if (name == d.name) return &d;
    return nullptr;
}

const char* json_type(const json& j) {
    if (j.is_null()) return "null";
    if (j.is_boolean()) return "bool";
    if (j.is_number_integer()) return "integer";
    if (j.is_number()) return "number";
    if (j.is_string()) return "string";
    if (j.is_array()) return "array";
    return "object";
}

uint64_t as_u64(const json& j, const std::string& what) {
    TS_CHECK(j.is_number_unsigned() || (j.is_number_integer() && j.get<int64_t>() >= 0),
             "{}: expected a non-negative integer, got {} {}", what, json_type(j), j.dump());
    return j.get<uint64_t>();
}

SafetensorsTensorInfo parse_entry(const std::string& name, const json& e, const uint8_t* data_base,
                                  uint64_t data_size, const std::string& path) {
    const std::string what = fmt::format("tensor '{}'", name);
    TS_CHECK(!name.empty(), "empty tensor name");
    TS_CHECK(e.is_object(), "{}: expected an object, got {}", what, json_type(e));
    TS_CHECK(e.contains("dtype") && e["dtype"].is_string(), "{}: missing or non-string 'dtype'", what);
    TS_CHECK(e.contains("shape") && e["shape"].is_array(), "{}: missing or non-array 'shape'", what);
    TS_CHECK(e.contains("data_offsets") && e["data_offsets"].is_array() && e["data_offsets"].size() == 2,
             "{}: 'data_offsets' must be an array [begin, end]", what);

    SafetensorsTensorInfo t;
    t.name = name;
    t.file = path;
    t.dtype_name = e["dtype"].get<std::string>();
    const StDType* dt = find_dtype(t.dtype_name);
    TS_CHECK(dt != nullptr, "{}: unknown dtype '{}'", what, t.dtype_name);
    t.dtype = dt->dtype;

    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
        const uint64_t v = as_u64(d, what + " shape");
        TS_CHECK(v <= (uint64_t(1) << 62) && !__builtin_mul_overflow(numel, v, &numel) && numel <= (uint64_t(1) << 62),
                 "{}: shape {} is too large", what, e["shape"].dump());
        t.shape.push_back(int64_t(v));
    }
    const uint64_t begin = as_u64(e["data_offsets"][0], what + " data_offsets[0]");
    const uint64_t end = as_u64(e["data_offsets"][1], what + " data_offsets[1]");
    TS_CHECK(begin <= end, "{}: data_offsets [{}, {}] end before begin", what, begin, end);
    TS_CHECK(end <= data_size, "{}: data_offsets [{}, {}] beyond the {} bytes of data", what, begin, end, data_size);
    uint64_t bits = 0;
    TS_CHECK(!__builtin_mul_overflow(numel, uint64_t(dt->bits), &bits) && bits % 8 == 0,
             "{}: {} elements of {} are not a whole number of bytes", what, numel, t.dtype_name);
    TS_CHECK(end - begin == bits / 8, "{}: {} {} needs {} bytes but data_offsets [{}, {}] hold {}", what, t.dtype_name,
             t.shape_str(), bits / 8, begin, end, end - begin);
    t.data = data_base + begin;
    t.nbytes = size_t(end - begin);
    return t;
}

}  // namespace

int64_t SafetensorsTensorInfo::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string SafetensorsTensorInfo::shape_str() const { return fmt::format("[{}]", fmt::join(shape, ", ")); }

SafetensorsHeader parse_safetensors(const uint8_t* data, size_t size, const std::string& path) {
    return with_context(path, [&] {
        TS_CHECK(size >= 8, "file is {} bytes, too short for the 8-byte header length", size);
        uint64_t header_len;
        std::memcpy(&header_len, data, 8);  // little-endian on every supported host
        TS_CHECK(header_len <= kMaxHeaderBytes, "header length {} is over the 100 MB limit (corrupt file?)", header_len);
        TS_CHECK(header_len <= size - 8, "header length {} exceeds the {} bytes after the length field", header_len,
                 size - 8);
        const char* text = reinterpret_cast<const char*>(data + 8);
        json header;
        try {
            header = json::parse(text, text + header_len);
        } catch (const json::exception& e) {
            fail(ErrorKind::Invalid, "bad JSON header: {}", e.what());
        }
        TS_CHECK(header.is_object(), "header must be a JSON object, got {}", json_type(header));

        const uint8_t* data_base = data + 8 + header_len;
        const uint64_t data_size = size - 8 - header_len;
        SafetensorsHeader out;
        for (const auto& [key, value] : header.items()) {
            if (key == "__metadata__") {
                TS_CHECK(value.is_object(), "__metadata__ must be an object, got {}", json_type(value));
                for (const auto& [k, v] : value.items()) out.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
                continue;
            }
            out.tensors.push_back(parse_entry(key, value, data_base, data_size, path));
        }
        // Tensors may not share bytes (empty tensors occupy none).
        std::vector<const SafetensorsTensorInfo*> order;
        for (const auto& t : out.tensors)
            if (t.nbytes > 0) order.push_back(&t);
        std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->data < b->data; });
        for (size_t i = 1; i < order.size(); ++i) {
            const auto* prev = order[i - 1];
            TS_CHECK(order[i]->data >= prev->data + prev->nbytes, "tensors '{}' and '{}' overlap", prev->name,
                     order[i]->name);
        }
        return out;
    });
}

}  // namespace tessera
