// Element types: plain floats/ints and llama.cpp-style quantized blocks.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessera {

enum class DType : uint8_t {
    F32, F16, BF16, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL,
    Q4_0, Q8_0, Q4_K, Q6_K, MXFP4,
    COUNT
};

struct DTypeInfo {
    const char* name;
    int block_elems;   // elements per block (1 for plain types)
    int block_bytes;   // bytes per block
    bool quantized;
};

const DTypeInfo& dtype_info(DType t);
inline const char* dtype_name(DType t) { return dtype_info(t).name; }
inline bool dtype_is_quantized(DType t) { return dtype_info(t).quantized; }
// Parses "f32", "bf16", "q4_0", ... (case-insensitive); throws Error on an unknown name.
DType dtype_from_name(std::string_view name);
// Bytes of a row of n elements; throws if n is not a multiple of the block size.
size_t dtype_row_bytes(DType t, int64_t n);

}  // namespace tessera
