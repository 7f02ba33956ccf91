// libFuzzer target for what a checkpoint says of its model: a Hugging Face config.json (even first
// byte) or a GGUF file's metadata (odd first byte), read into a ModelConfig. Either the config is
// read — and then it is one a model can be built from: sizes positive, the per-layer lists as long
// as the layers — or it is refused with tessera::Error; nothing crashes, allocates without bound,
// over-reads (ASan) or hits undefined behaviour (UBSan).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/status.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "models/model_config.h"
#include "runtime/gguf_source.h"
#include "runtime/hf_source.h"

namespace {

volatile uint64_t g_sink;

void check(const tessera::ModelConfig& c) {
    const auto bad = [](const char* what) {
        std::fprintf(stderr, "fuzz_model_config: a config was read with %s\n", what);
        std::abort();
    };
    if (c.n_layers <= 0 || c.hidden <= 0 || c.vocab_size <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0)
        bad("a size that is not positive");
    if (!c.full_attention.empty() && int64_t(c.full_attention.size()) != c.n_layers) bad("layer types of another length");
    if (!c.moe_layer.empty() && int64_t(c.moe_layer.size()) != c.n_layers) bad("MoE flags of another length");
    g_sink = g_sink + c.describe().size() + uint64_t(c.n_attention_layers()) + uint64_t(c.n_recurrent_layers());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    try {
        if ((data[0] & 1) == 0) {
            const tessera::HfConfig hc =
                tessera::HfConfig::parse(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
            check(tessera::hf_model_config(hc));
        } else {
            const tessera::GgufFile f = tessera::GgufFile::from_memory(data + 1, size - 1, "fuzz.gguf");
            check(tessera::gguf_model_config(f));
        }
    } catch (const tessera::Error&) {
    }
    return 0;
}
