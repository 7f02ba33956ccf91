// The C ABI's versioned structs (tessera_options, tessera_sampling) and their conversion to
// tessera's EngineOptions / GenerationParams.
#pragma once
#include <cstddef>
#include <cstring>

#include "core/status.h"
#include "engine/engine_options.h"
#include "engine/request.h"
#include "tessera/tessera.h"

namespace tessera::capi {

// The caller's struct over defaults: fields past the caller's struct_size keep their defaults;
// a larger struct (a newer header) is accepted only if the bytes this library does not know are
// zero. Throws Error(Invalid) naming `what`.
template <typename T>
T read_versioned(const T* in, const T& defaults, const char* what) {
    T out = defaults;
    if (!in) return out;
    const size_t n = in->struct_size;
    if (n < sizeof(size_t))
        fail(ErrorKind::Invalid, "{}.struct_size is {} (fill the struct with its *_default() function first)", what, n);
    if (n > sizeof(T)) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(in);
        for (size_t i = sizeof(T); i < n; ++i)
            if (bytes[i] != 0)
                fail(ErrorKind::Invalid, "{}.struct_size {} is larger than this library's {} and the extra fields are set "
                     "(a newer tessera.h than libtessera.so?)", what, n, sizeof(T));
    }
    std::memcpy(static_cast<void*>(&out), in, n < sizeof(T) ? n : sizeof(T));
    out.struct_size = sizeof(T);
    return out;
}

EngineOptions to_engine_options(const char* path, const tessera_options* opts);
GenerationParams to_generation_params(const tessera_sampling* sampling);

}  // namespace tessera::capi
