#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <string>

#include "core/status.h"

namespace tessera {

namespace {
constexpr DTypeInfo kInfo[] = {
    {"f32", 1, 4, false},   {"f16", 1, 2, false},    {"bf16", 1, 2, false},
    {"f64", 1, 8, false},   {"i8", 1, 1, false},     {"i16", 1, 2, false},
    {"i32", 1, 4, false},   {"i64", 1, 8, false},    {"u8", 1, 1, false},
    {"u16", 1, 2, false},   {"u32", 1, 4, false},    {"u64", 1, 8, false},
    {"bool", 1, 1, false},  {"q4_0", 32, 18, true},  {"q8_0", 32, 34, true},
    {"q4_k", 256, 144, true}, {"q6_k", 256, 210, true}, {"mxfp4", 32, 17, true},
};
static_assert(sizeof(kInfo) / sizeof(kInfo[0]) == size_t(DType::COUNT));
}  // namespace

const DTypeInfo& dtype_info(DType t) {
    TS_ASSERT(t < DType::COUNT);
    return kInfo[size_t(t)];
}

DType dtype_from_name(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    for (size_t i = 0; i < size_t(DType::COUNT); ++i)
        if (lower == kInfo[i].name) return DType(i);
    fail(ErrorKind::Invalid, "unknown dtype '{}'", name);
}

size_t dtype_row_bytes(DType t, int64_t n) {
    const auto& info = dtype_info(t);
    TS_CHECK(n >= 0 && n % info.block_elems == 0, "row of {} elements is not a multiple of the {} block size {}",
             n, info.name, info.block_elems);
    return size_t(n / info.block_elems) * size_t(info.block_bytes);
}

}  // namespace tessera
