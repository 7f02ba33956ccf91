// ggml tensor type ids (as stored in GGUF files) <-> tessera DType, and the block-size table of
// every ggml type so files with types tessera cannot compute with are still validated and listed.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace tessera {

// The ids tessera computes with (ggml.h `enum ggml_type`); the others are only in the table.
namespace ggml_type {
constexpr uint32_t F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8, Q4_K = 12, Q6_K = 14, IQ2_XXS = 16, I8 = 24,
                   I16 = 25, I32 = 26, I64 = 27, F64 = 28, BF16 = 30, MXFP4 = 39;
}

struct GgmlTypeInfo {
    const char* name;       // as gguf-py's GGMLQuantizationType names it: "F32", "Q4_K", "IQ2_XXS"
    uint32_t block_elems;   // elements per block (1 for plain types)
    uint32_t block_bytes;   // bytes per block
};

// nullptr for an id ggml does not define (or that it removed, like the old Q4_0_4_4 repacks).
const GgmlTypeInfo* ggml_type_info(uint32_t type);
// "Q4_K", or "unknown(99)" for an id not in the table.
std::string ggml_type_name(uint32_t type);
// The tessera DType of a ggml type, or nullopt where tessera has none (Q5_K, IQ2_XXS, ...).
std::optional<DType> ggml_type_to_dtype(uint32_t type);
// The ggml id of a tessera DType; throws Error(Unsupported) for types GGUF cannot store (u8, bool).
uint32_t dtype_to_ggml_type(DType dtype);

}  // namespace tessera
