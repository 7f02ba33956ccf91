// GgufValue construction, typed access, and the GGUF value encoding (little-endian hosts only,
// like ggml itself).
#include "formats/gguf_value.h"

#include <fmt/format.h>

#include <limits>

#include "core/status.h"

namespace tessera {

namespace {
constexpr const char* kTypeNames[kGgufTypeCount] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                    "bool", "string", "array", "u64", "i64", "f64"};
constexpr size_t kSizes[kGgufTypeCount] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

bool is_float(GgufType t) { return t == GgufType::F32 || t == GgufType::F64; }
bool is_fixed(GgufType t) { return gguf_scalar_size(t) > 0; }

// Reads one fixed-size element from little-endian bytes as a signed or unsigned integer.
int64_t load_signed(GgufType t, const uint8_t* p) {
    switch (t) {
        case GgufType::I8: { int8_t v; std::memcpy(&v, p, 1); return v; }
        case GgufType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
        case GgufType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
        case GgufType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
        default: TS_ASSERT(false); return 0;
    }
}
uint64_t load_unsigned(GgufType t, const uint8_t* p) {
    uint64_t v = 0;
    std::memcpy(&v, p, gguf_scalar_size(t));
    return v;
}
double load_float(GgufType t, const uint8_t* p) {
    if (t == GgufType::F32) { float v; std::memcpy(&v, p, 4); return v; }
    double v;
    std::memcpy(&v, p, 8);
    return v;
}
bool is_signed(GgufType t) {
    return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

// An integer element as int64; fails for u64 values past INT64_MAX.
int64_t load_i64(GgufType t, const uint8_t* p) {
    if (is_signed(t)) return load_signed(t, p);
    const uint64_t u = load_unsigned(t, p);
    TS_CHECK(u <= uint64_t(std::numeric_limits<int64_t>::max()), "value {} (u64) does not fit i64", u);
    return int64_t(u);
}
}  // namespace

const char* gguf_type_name(GgufType t) {
    return uint32_t(t) < kGgufTypeCount ? kTypeNames[uint32_t(t)] : "invalid";
}
size_t gguf_scalar_size(GgufType t) { return uint32_t(t) < kGgufTypeCount ? kSizes[uint32_t(t)] : 0; }
bool gguf_type_is_integer(GgufType t) { return is_fixed(t) && !is_float(t) && t != GgufType::BOOL; }

// ---- construction -------------------------------------------------------------------------

GgufValue GgufValue::scalar(GgufType t, const void* v) {
    GgufValue r;
    r.type_ = t;
    std::memcpy(&r.bits_, v, gguf_scalar_size(t));
    return r;
}

GgufValue GgufValue::boolean(bool v) {
    const uint8_t b = v ? 1 : 0;
    return scalar(GgufType::BOOL, &b);
}

GgufValue GgufValue::string(std::string v) {
    GgufValue r;
    r.type_ = GgufType::STRING;
    r.str_ = std::move(v);
    return r;
}

GgufValue GgufValue::numeric_array(GgufType elem, const void* data, size_t count) {
    TS_CHECK(is_fixed(elem), "numeric_array of {} elements", gguf_type_name(elem));
    GgufValue r;
    r.type_ = GgufType::ARRAY;
    r.elem_ = elem;
    r.count_ = count;
    const auto* p = static_cast<const uint8_t*>(data);
    r.raw_.assign(p, p + count * gguf_scalar_size(elem));
    return r;
}

GgufValue GgufValue::bool_array(const std::vector<bool>& v) {
    std::vector<uint8_t> bytes(v.begin(), v.end());
    return numeric_array(GgufType::BOOL, bytes.data(), bytes.size());
}

GgufValue GgufValue::string_array(std::vector<std::string> v) {
    GgufValue r;
    r.type_ = GgufType::ARRAY;
    r.elem_ = GgufType::STRING;
    r.count_ = v.size();
    r.strings_ = std::move(v);
    return r;
}

GgufValue GgufValue::array_of_arrays(std::vector<GgufValue> items) {
    for (size_t i = 0; i < items.size(); ++i)
        TS_CHECK(items[i].is_array(), "array of arrays: element {} is a {}", i, items[i].type_str());
    GgufValue r;
    r.type_ = GgufType::ARRAY;
    r.elem_ = GgufType::ARRAY;
    r.count_ = items.size();
    r.items_ = std::move(items);
    return r;
}

// ---- access -------------------------------------------------------------------------------

void GgufValue::mismatch(const char* expected) const {
    fail(ErrorKind::Invalid, "expected {}, found {}", expected, type_str());
}

GgufType GgufValue::elem_type() const {
    if (!is_array()) mismatch("array");
    return elem_;
}

size_t GgufValue::size() const { return is_array() ? count_ : 1; }

std::string GgufValue::type_str() const {
    if (!is_array()) return gguf_type_name(type_);
    return fmt::format("array[{}]", gguf_type_name(elem_));
}

int64_t GgufValue::as_i64() const {
    if (!gguf_type_is_integer(type_)) mismatch("an integer");
    return load_i64(type_, reinterpret_cast<const uint8_t*>(&bits_));
}

uint64_t GgufValue::as_u64() const {
    if (!gguf_type_is_integer(type_)) mismatch("an integer");
    const auto* p = reinterpret_cast<const uint8_t*>(&bits_);
    if (is_signed(type_)) {
        const int64_t v = load_signed(type_, p);
        TS_CHECK(v >= 0, "value {} ({}) is negative, expected an unsigned integer", v, type_str());
        return uint64_t(v);
    }
    return load_unsigned(type_, p);
}

double GgufValue::as_f64() const {
    if (!is_float(type_)) mismatch("f32 or f64");
    return load_float(type_, reinterpret_cast<const uint8_t*>(&bits_));
}

bool GgufValue::as_bool() const {
    if (type_ != GgufType::BOOL) mismatch("bool");
    return bits_ != 0;
}

const std::string& GgufValue::as_string() const {
    if (type_ != GgufType::STRING) mismatch("string");
    return str_;
}

std::vector<int64_t> GgufValue::as_i64_array() const {
    if (!is_array() || !gguf_type_is_integer(elem_)) mismatch("an array of integers");
    std::vector<int64_t> out(count_);
    const size_t es = gguf_scalar_size(elem_);
    for (size_t i = 0; i < count_; ++i) out[i] = load_i64(elem_, raw_.data() + i * es);
    return out;
}

std::vector<double> GgufValue::as_f64_array() const {
    if (!is_array() || !is_float(elem_)) mismatch("an array of f32 or f64");
    std::vector<double> out(count_);
    const size_t es = gguf_scalar_size(elem_);
    for (size_t i = 0; i < count_; ++i) out[i] = load_float(elem_, raw_.data() + i * es);
    return out;
}

const std::vector<std::string>& GgufValue::as_string_array() const {
    if (!is_array() || elem_ != GgufType::STRING) mismatch("array[string]");
    return strings_;
}

const std::vector<GgufValue>& GgufValue::as_array_array() const {
    if (!is_array() || elem_ != GgufType::ARRAY) mismatch("array[array]");
    return items_;
}

GgufValue GgufValue::at(size_t i) const {
    if (!is_array()) mismatch("array");
    TS_CHECK(i < count_, "index {} out of range for an array of {}", i, count_);
    if (elem_ == GgufType::STRING) return string(strings_[i]);
    if (elem_ == GgufType::ARRAY) return items_[i];
    return scalar(elem_, raw_.data() + i * gguf_scalar_size(elem_));
}

std::span<const uint8_t> GgufValue::raw() const {
    if (is_array()) {
        if (!is_fixed(elem_)) mismatch("an array of fixed-size elements");
        return raw_;
    }
    if (!is_fixed(type_)) mismatch("a fixed-size value");
    return {reinterpret_cast<const uint8_t*>(&bits_), gguf_scalar_size(type_)};
}

// ---- bytes --------------------------------------------------------------------------------

void ByteReader::need(uint64_t n, const char* what) const {
    if (n > remaining())
        fail(ErrorKind::Invalid, "truncated: {} needs {} bytes at offset {} but only {} remain", what, n, pos_,
             remaining());
}

const uint8_t* ByteReader::take(uint64_t n, const char* what) {
    need(n, what);
    const uint8_t* p = data_ + pos_;
    pos_ += size_t(n);
    return p;
}

std::string_view ByteReader::read_string(const char* what) {
    const uint64_t n = read<uint64_t>(what);
    const uint8_t* p = take(n, what);
    return {reinterpret_cast<const char*>(p), size_t(n)};
}

GgufValue gguf_read_value(ByteReader& r, GgufType t, int depth) {
    if (is_fixed(t)) {
        const size_t n = gguf_scalar_size(t);
        const uint8_t* p = r.take(n, gguf_type_name(t));
        if (t == GgufType::BOOL) TS_CHECK(*p <= 1, "bool value {} at offset {} is not 0 or 1", *p, r.pos() - 1);
        return GgufValue::numeric_array(t, p, 1).at(0);
    }
    if (t == GgufType::STRING) return GgufValue::string(std::string(r.read_string("string")));
    TS_CHECK(t == GgufType::ARRAY, "invalid value type {} at offset {}", uint32_t(t), r.pos() - 4);
    TS_CHECK(depth < kGgufMaxDepth, "arrays nested deeper than {} at offset {}", kGgufMaxDepth, r.pos());
    const uint32_t et = r.read<uint32_t>("array element type");
    TS_CHECK(et < kGgufTypeCount, "invalid array element type {} at offset {}", et, r.pos() - 4);
    const auto elem = GgufType(et);
    const uint64_t count = r.read<uint64_t>("array length");
    // Smallest encoding of one element: a fixed size, a string's length, an array's header.
    const uint64_t min_elem = is_fixed(elem) ? gguf_scalar_size(elem) : elem == GgufType::STRING ? 8 : 12;
    TS_CHECK(count <= r.remaining() / min_elem,
             "array of {} {} elements at offset {} cannot fit in the {} bytes that remain", count,
             gguf_type_name(elem), r.pos() - 8, r.remaining());
    if (elem == GgufType::BOOL) {
        const uint8_t* p = r.take(count, "bool array");
        for (uint64_t i = 0; i < count; ++i) TS_CHECK(p[i] <= 1, "bool array element {} is {}, not 0 or 1", i, p[i]);
        return GgufValue::numeric_array(elem, p, size_t(count));
    }
    if (is_fixed(elem)) return GgufValue::numeric_array(elem, r.take(count * min_elem, "array"), size_t(count));
    if (elem == GgufType::STRING) {
        std::vector<std::string> v;
        v.reserve(size_t(count));
        for (uint64_t i = 0; i < count; ++i) v.emplace_back(r.read_string("string array element"));
        return GgufValue::string_array(std::move(v));
    }
    std::vector<GgufValue> items;
    items.reserve(size_t(count));
    for (uint64_t i = 0; i < count; ++i) items.push_back(gguf_read_value(r, GgufType::ARRAY, depth + 1));
    return GgufValue::array_of_arrays(std::move(items));
}

void gguf_write_string(std::string_view s, std::string& out) {
    const uint64_t n = s.size();
    out.append(reinterpret_cast<const char*>(&n), 8);
    out.append(s);
}

void gguf_write_value(const GgufValue& v, std::string& out) {
    auto put_u32 = [&](uint32_t x) { out.append(reinterpret_cast<const char*>(&x), 4); };
    auto put_u64 = [&](uint64_t x) { out.append(reinterpret_cast<const char*>(&x), 8); };
    if (v.type() == GgufType::STRING) return gguf_write_string(v.as_string(), out);
    if (!v.is_array()) {
        const auto raw = v.raw();
        out.append(reinterpret_cast<const char*>(raw.data()), raw.size());
        return;
    }
    put_u32(uint32_t(v.elem_type()));
    put_u64(v.size());
    if (v.elem_type() == GgufType::STRING) {
        for (const auto& s : v.as_string_array()) gguf_write_string(s, out);
    } else if (v.elem_type() == GgufType::ARRAY) {
        for (const auto& item : v.as_array_array()) gguf_write_value(item, out);
    } else {
        const auto raw = v.raw();
        out.append(reinterpret_cast<const char*>(raw.data()), raw.size());
    }
}

}  // namespace tessera
