// GGUF metadata values: the 13 value types, GgufValue (an owning value, read from a file or built
// for the writer) with typed access, and the byte-level decoding/encoding both sides share.
#pragma once
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace tessera {

// Value type tags as stored in the file (gguf.h `enum gguf_type`).
enum class GgufType : uint32_t {
    U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7,
    STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
};
constexpr uint32_t kGgufTypeCount = 13;

const char* gguf_type_name(GgufType t);   // "u32", "string", "array", ...
size_t gguf_scalar_size(GgufType t);      // bytes of a fixed-size value; 0 for string and array
bool gguf_type_is_integer(GgufType t);    // u8..i64 (not bool)

// The GgufType of a C++ scalar: uint8_t -> U8, ..., float -> F32, double -> F64.
template <typename T> constexpr GgufType gguf_type_of() {
    if constexpr (std::is_same_v<T, uint8_t>) return GgufType::U8;
    else if constexpr (std::is_same_v<T, int8_t>) return GgufType::I8;
    else if constexpr (std::is_same_v<T, uint16_t>) return GgufType::U16;
    else if constexpr (std::is_same_v<T, int16_t>) return GgufType::I16;
    else if constexpr (std::is_same_v<T, uint32_t>) return GgufType::U32;
    else if constexpr (std::is_same_v<T, int32_t>) return GgufType::I32;
    else if constexpr (std::is_same_v<T, float>) return GgufType::F32;
    else if constexpr (std::is_same_v<T, uint64_t>) return GgufType::U64;
    else if constexpr (std::is_same_v<T, int64_t>) return GgufType::I64;
    else if constexpr (std::is_same_v<T, double>) return GgufType::F64;
    else static_assert(sizeof(T) == 0, "no GGUF type for this C++ type");
}

class GgufValue {
public:
    GgufValue() = default;  // u8 0

    // Scalars.
    static GgufValue u8(uint8_t v) { return scalar(GgufType::U8, &v); }
    static GgufValue i8(int8_t v) { return scalar(GgufType::I8, &v); }
    static GgufValue u16(uint16_t v) { return scalar(GgufType::U16, &v); }
    static GgufValue i16(int16_t v) { return scalar(GgufType::I16, &v); }
    static GgufValue u32(uint32_t v) { return scalar(GgufType::U32, &v); }
    static GgufValue i32(int32_t v) { return scalar(GgufType::I32, &v); }
    static GgufValue f32(float v) { return scalar(GgufType::F32, &v); }
    static GgufValue boolean(bool v);
    static GgufValue u64(uint64_t v) { return scalar(GgufType::U64, &v); }
    static GgufValue i64(int64_t v) { return scalar(GgufType::I64, &v); }
    static GgufValue f64(double v) { return scalar(GgufType::F64, &v); }
    static GgufValue string(std::string v);
    // Arrays.
    template <typename T> static GgufValue array(std::span<const T> v) {
        return numeric_array(gguf_type_of<T>(), v.data(), v.size());
    }
    template <typename T> static GgufValue array(const std::vector<T>& v) { return array(std::span<const T>(v)); }
    static GgufValue bool_array(const std::vector<bool>& v);
    static GgufValue string_array(std::vector<std::string> v);
    // An array of arrays (elements of any one array type each).
    static GgufValue array_of_arrays(std::vector<GgufValue> items);
    // `count` little-endian elements of a fixed-size type (u8..f64, bool) copied from `data`.
    static GgufValue numeric_array(GgufType elem, const void* data, size_t count);

    GgufType type() const { return type_; }
    bool is_array() const { return type_ == GgufType::ARRAY; }
    GgufType elem_type() const;   // arrays only
    size_t size() const;          // array length (1 for a scalar)
    std::string type_str() const; // "u32", "array[string]"

    // Typed access; a mismatch throws Error "expected u32, found string". Integer access takes
    // any integer type whose value fits; float access takes f32 or f64.
    int64_t as_i64() const;
    uint64_t as_u64() const;
    double as_f64() const;
    bool as_bool() const;
    const std::string& as_string() const;

    // Arrays: integer / float elements widened, strings, nested arrays, or one element as a value.
    std::vector<int64_t> as_i64_array() const;
    std::vector<double> as_f64_array() const;
    const std::vector<std::string>& as_string_array() const;
    const std::vector<GgufValue>& as_array_array() const;
    GgufValue at(size_t i) const;
    // Raw little-endian bytes of a fixed-size scalar or of a fixed-size-element array.
    std::span<const uint8_t> raw() const;

    bool operator==(const GgufValue& o) const = default;  // bitwise for floats

private:
    static GgufValue scalar(GgufType t, const void* v);
    [[noreturn]] void mismatch(const char* expected) const;

    GgufType type_ = GgufType::U8;
    GgufType elem_ = GgufType::U8;       // arrays
    uint64_t bits_ = 0;                  // fixed-size scalars, little-endian in the low bytes
    std::vector<uint8_t> raw_;           // fixed-size-element arrays: count * size bytes
    std::string str_;                    // string
    std::vector<std::string> strings_;   // string arrays
    std::vector<GgufValue> items_;       // arrays of arrays
    size_t count_ = 0;                   // array length
};

// Bounds-checked little-endian reads over a byte buffer. Every failure is an Error naming what
// was being read and at which offset; lengths are checked against what remains before any
// allocation, so hostile sizes cannot exhaust memory.
class ByteReader {
public:
    ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    size_t pos() const { return pos_; }
    size_t remaining() const { return size_ - pos_; }
    void need(uint64_t n, const char* what) const;   // throws unless n bytes remain
    template <typename T> T read(const char* what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    const uint8_t* take(uint64_t n, const char* what);  // n bytes, advanced past
    std::string_view read_string(const char* what);    // u64 length + bytes

private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
};

// Decodes a value of type `t` (its tag already read); nested arrays up to kGgufMaxDepth deep.
constexpr int kGgufMaxDepth = 8;
GgufValue gguf_read_value(ByteReader& r, GgufType t, int depth = 0);
// Appends the encoding of v (without its type tag) to out.
void gguf_write_value(const GgufValue& v, std::string& out);
void gguf_write_string(std::string_view s, std::string& out);  // u64 length + bytes

}  // namespace tessera
