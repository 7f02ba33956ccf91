// C ABI: the model's tokenizer (text <-> token ids), for callers such as the Python package.
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "capi/args.h"
#include "capi/bridge.h"
#include "capi/errors.h"
#include "tokenizer/tokenizer.h"

using namespace tessera;
using namespace tessera::capi;

namespace {

const Tokenizer& tokenizer_of(Bridge& b, const char* fn) {
    const Tokenizer* t = b.core().tokenizer();
    if (!t) fail(ErrorKind::Unsupported, "{}: model {} has no tokenizer", fn, b.core().model_name());
    return *t;
}

}  // namespace

extern "C" {

tessera_status tessera_tokenize(tessera_engine* engine, const char* text, int add_special, int32_t* out, int32_t cap,
                                int32_t* n_out) {
    return guard([&] {
        const char* fn = "tessera_tokenize";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& n = deref(n_out, fn, "n_out");
        n = 0;
        deref(text, fn, "text");
        if (cap < 0) fail(ErrorKind::Invalid, "{}: cap is {}", fn, cap);
        if (cap > 0) deref(out, fn, "out");
        std::vector<int32_t> ids;
        {
            std::lock_guard lock(b.mutex());
            ids = tokenizer_of(b, fn).encode(text, add_special != 0, /*parse_special=*/true);
        }
        if (ids.size() > size_t(INT32_MAX)) fail(ErrorKind::TooLarge, "{}: {} tokens", fn, ids.size());
        n = int32_t(ids.size());
        if (n > cap) fail(ErrorKind::TooLarge, "{}: the text is {} tokens, out has room for {}", fn, n, cap);
        if (n > 0) std::memcpy(out, ids.data(), ids.size() * sizeof(int32_t));
        return TESSERA_STATUS_OK;
    });
}

tessera_status tessera_detokenize(tessera_engine* engine, const int32_t* tokens, int32_t n, char* out, size_t cap,
                                  size_t* n_out) {
    return guard([&] {
        const char* fn = "tessera_detokenize";
        Bridge& b = deref(engine, fn, "engine").bridge;
        size_t& len = deref(n_out, fn, "n_out");
        len = 0;
        if (n < 0) fail(ErrorKind::Invalid, "{}: n is {}", fn, n);
        if (n > 0) deref(tokens, fn, "tokens");
        if (cap > 0) deref(out, fn, "out");
        std::string text;
        {
            std::lock_guard lock(b.mutex());
            const Tokenizer& t = tokenizer_of(b, fn);
            const std::vector<int32_t> ids(tokens, tokens + n);
            for (size_t i = 0; i < ids.size(); ++i)
                if (ids[i] < 0) fail(ErrorKind::Invalid, "{}: tokens[{}] is {}", fn, i, ids[i]);
            text = t.decode(ids, /*skip_special=*/false);
        }
        len = text.size();
        if (cap < len + 1)
            fail(ErrorKind::TooLarge, "{}: the text is {} bytes, out has room for {} (the NUL included)", fn, len, cap);
        std::memcpy(out, text.data(), len);
        out[len] = '\0';
        return TESSERA_STATUS_OK;
    });
}

}  // extern "C"
