// libFuzzer target for the GGUF reader: any byte string must either parse or throw
// tessera::Error; never crash, over-read (ASan) or hit undefined behaviour (UBSan).
// Everything a parsed file exposes is touched, including every tensor's first and last byte, and
// a tokenizer in its metadata (tokenizer.ggml.*) is built and run on a sample, or refused.
#include <cstddef>
#include <cstdint>

#include <string>
#include <vector>

#include "core/status.h"
#include "formats/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

volatile uint64_t g_sink;

void touch_value(const tessera::GgufValue& v, int depth) {
    using tessera::GgufType;
    g_sink = g_sink + uint64_t(v.type()) + v.size();
    if (!v.is_array()) {
        if (v.type() == GgufType::STRING) g_sink = g_sink + v.as_string().size();
        else if (v.type() != GgufType::BOOL && v.type() != GgufType::F32 && v.type() != GgufType::F64)
            g_sink = g_sink + uint64_t(v.as_i64() ^ int64_t(v.as_u64()));
        return;
    }
    const size_t n = v.size() < 64 ? v.size() : 64;
    for (size_t i = 0; i < n; ++i) touch_value(v.at(i), depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    try {
        const tessera::GgufFile f = tessera::GgufFile::from_memory(data, size, "fuzz.gguf");
        for (const auto& kv : f.metadata()) {
            try {
                touch_value(kv.value, 0);
            } catch (const tessera::Error&) {  // u64 past INT64_MAX, negative as unsigned
            }
        }
        if (f.has("general.architecture")) g_sink = g_sink + f.architecture().size();
        for (const auto& t : f.tensors()) {
            g_sink = g_sink + t.data[0] + t.data[t.nbytes - 1] + uint64_t(t.numel());
            if (t.has_dtype()) g_sink = g_sink + f.tensor(t.name).nbytes();
        }
        if (f.has("tokenizer.ggml.model")) {
            try {
                const auto tok = tessera::Tokenizer::from_gguf(f);
                const std::vector<int32_t> ids = tok->encode("Hi <|im_start|>there \xF0\x9F\x98\x80\n\n 42", true, true);
                for (int32_t id : ids)
                    if (id < 0 || id >= tok->vocab_size()) __builtin_trap();  // an id outside the vocabulary
                g_sink = g_sink + tok->decode(ids).size() + tok->eos_ids().size() + tok->chat_template().size();
            } catch (const tessera::Error&) {
            }
        }
    } catch (const tessera::Error&) {
    }
    return 0;
}
