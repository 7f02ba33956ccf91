// libFuzzer target for the safetensors reader: any byte string must either parse or throw
// tessera::Error; never crash, over-read (ASan) or hit undefined behaviour (UBSan). Everything a
// parsed header exposes is touched, including every tensor's first and last byte.
#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "formats/safetensors.h"

namespace {

volatile uint64_t g_sink;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const tessera::SafetensorsHeader h = tessera::parse_safetensors(data, size, "fuzz.safetensors");
        for (const auto& t : h.tensors) {
            g_sink = g_sink + t.name.size() + t.dtype_name.size() + uint64_t(t.numel()) + t.shape_str().size();
            if (t.nbytes > 0) g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1];
        }
        for (const auto& [k, v] : h.metadata) g_sink = g_sink + k.size() + v.size();
    } catch (const tessera::Error&) {
    }
    return 0;
}
