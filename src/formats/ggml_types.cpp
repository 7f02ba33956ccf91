// The ggml type table (ggml.c `type_traits`, gguf-py GGML_QUANT_SIZES) and DType mapping.
#include "formats/ggml_types.h"

#include <fmt/format.h>

#include "core/status.h"

namespace tessera {

namespace {
// Indexed by ggml type id; {nullptr, 0, 0} marks ids ggml does not define (any more).
constexpr GgmlTypeInfo kTypes[] = {
    {"F32", 1, 4},        {"F16", 1, 2},       {"Q4_0", 32, 18},    {"Q4_1", 32, 20},
    {nullptr, 0, 0},      {nullptr, 0, 0},     {"Q5_0", 32, 22},    {"Q5_1", 32, 24},
    {"Q8_0", 32, 34},     {"Q8_1", 32, 40},    {"Q2_K", 256, 84},   {"Q3_K", 256, 110},
    {"Q4_K", 256, 144},   {"Q5_K", 256, 176},  {"Q6_K", 256, 210},  {"Q8_K", 256, 292},
    {"IQ2_XXS", 256, 66}, {"IQ2_XS", 256, 74}, {"IQ3_XXS", 256, 98}, {"IQ1_S", 256, 50},
    {"IQ4_NL", 32, 18},   {"IQ3_S", 256, 110}, {"IQ2_S", 256, 82},  {"IQ4_XS", 256, 136},
    {"I8", 1, 1},         {"I16", 1, 2},       {"I32", 1, 4},       {"I64", 1, 8},
    {"F64", 1, 8},        {"IQ1_M", 256, 56},  {"BF16", 1, 2},      {nullptr, 0, 0},
    {nullptr, 0, 0},      {nullptr, 0, 0},     {"TQ1_0", 256, 54},  {"TQ2_0", 256, 66},
    {nullptr, 0, 0},      {nullptr, 0, 0},     {nullptr, 0, 0},     {"MXFP4", 32, 17},
    {"NVFP4", 64, 36},    {"Q1_0", 128, 18},
};
constexpr uint32_t kTypeCount = sizeof(kTypes) / sizeof(kTypes[0]);

struct Pair {
    uint32_t ggml;
    DType dtype;
};
constexpr Pair kPairs[] = {
    {ggml_type::F32, DType::F32},   {ggml_type::F16, DType::F16},   {ggml_type::BF16, DType::BF16},
    {ggml_type::F64, DType::F64},   {ggml_type::I8, DType::I8},     {ggml_type::I16, DType::I16},
    {ggml_type::I32, DType::I32},   {ggml_type::I64, DType::I64},   {ggml_type::Q4_0, DType::Q4_0},
    {ggml_type::Q8_0, DType::Q8_0}, {ggml_type::Q4_K, DType::Q4_K}, {ggml_type::Q6_K, DType::Q6_K},
    {ggml_type::MXFP4, DType::MXFP4},
};
}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
    if (type >= kTypeCount || kTypes[type].name == nullptr) return nullptr;
    return &kTypes[type];
}

std::string ggml_type_name(uint32_t type) {
    const GgmlTypeInfo* info = ggml_type_info(type);
    return info ? std::string(info->name) : fmt::format("unknown({})", type);
}

std::optional<DType> ggml_type_to_dtype(uint32_t type) {
    for (const Pair& p : kPairs)
        if (p.ggml == type) return p.dtype;
    return std::nullopt;
}

uint32_t dtype_to_ggml_type(DType dtype) {
    for (const Pair& p : kPairs)
        if (p.dtype == dtype) return p.ggml;
    fail(ErrorKind::Unsupported, "dtype {} has no GGUF (ggml) type", dtype_name(dtype));
}

}  // namespace tessera
