// C ABI: engine lifecycle, model facts and the memory snapshot.
#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>

#include "capi/args.h"
#include "capi/bridge.h"
#include "capi/errors.h"
#include "capi/params.h"
#include "core/memlog.h"

using namespace tessera;
using namespace tessera::capi;

extern "C" {

tessera_engine* tessera_engine_create(const char* path, const tessera_options* opts) {
    tessera_engine* engine = nullptr;
    guard([&] {
        const EngineOptions o = to_engine_options(path, opts);
        engine = new tessera_engine(o);
        return TESSERA_STATUS_OK;
    });
    return engine;
}

void tessera_engine_destroy(tessera_engine* engine) {
    guard([&] {
        delete engine;
        return TESSERA_STATUS_OK;
    });
}

int32_t tessera_vocab_size(const tessera_engine* engine) {
    if (!engine) return -1;
    return int32_t(engine->bridge.core().config().vocab_size);
}

int32_t tessera_num_layers(const tessera_engine* engine) {
    if (!engine) return -1;
    return int32_t(engine->bridge.core().config().n_layers);
}

tessera_status tessera_memory_snapshot(tessera_engine* engine, tessera_memory* out) {
    return guard([&] {
        const char* fn = "tessera_memory_snapshot";
        Bridge& b = deref(engine, fn, "engine").bridge;
        tessera_memory& dst = deref(out, fn, "out");
        if (dst.struct_size < sizeof(size_t))
            fail(ErrorKind::Invalid, "{}: out->struct_size is {} (set it to sizeof(tessera_memory))", fn, dst.struct_size);
        EngineStats st;
        {
            std::lock_guard lock(b.mutex());
            st = b.core().stats();
        }
        tessera_memory m{};
        m.struct_size = std::min(dst.struct_size, sizeof(m));
        m.weights_bytes = st.weight_bytes;
        m.kv_pool_bytes = st.kv_bytes;
        m.state_pool_bytes = st.state_bytes;
        m.activations_peak_bytes = MemLog::global().get("activations_peak");
        m.host_rss_bytes = host_rss_bytes();
        m.kv_blocks_used = st.kv_blocks_used;
        m.kv_blocks_total = st.kv_blocks_total;
        m.state_slots_used = st.state_slots_used;
        m.state_slots_total = st.state_slots_total;
        std::memcpy(static_cast<void*>(&dst), &m, m.struct_size);  // no more than the caller's struct holds
        return TESSERA_STATUS_OK;
    });
}

}  // extern "C"
