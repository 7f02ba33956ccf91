// Defaults of the C ABI's structs and their conversion to the engine's types (params.h).
#include "capi/params.h"

#include "core/memlog.h"

namespace tessera::capi {
namespace {

tessera_options default_options() {
    const EngineOptions e;
    tessera_options o{};
    o.struct_size = sizeof(o);
    o.device = nullptr;
    o.memory_budget = e.memory_budget;
    o.gpu_memory_fraction = e.gpu_memory_fraction;
    o.max_model_len = e.max_model_len;
    o.max_num_seqs = e.max_num_seqs;
    o.max_num_batched_tokens = e.max_num_batched_tokens;
    o.max_queue = e.max_queue;
    o.block_size = e.block_size;
    o.kv_dtype = nullptr;
    o.prefix_caching = e.prefix_caching ? 1 : 0;
    o.memlog = 0;
    o.sampling = nullptr;
    o.pipeline = nullptr;
    return o;
}

tessera_sampling default_sampling() {
    const GenerationParams g;
    tessera_sampling s{};
    s.struct_size = sizeof(s);
    s.temperature = g.sampling.temperature;
    s.top_p = g.sampling.top_p;
    s.top_k = g.sampling.top_k;
    s.min_p = g.sampling.min_p;
    s.seed = g.sampling.seed;
    s.repetition_penalty = g.repetition_penalty;
    s.presence_penalty = g.presence_penalty;
    s.frequency_penalty = g.frequency_penalty;
    s.max_tokens = g.max_tokens;
    s.stop_token_ids = nullptr;
    s.n_stop_token_ids = 0;
    s.ignore_eos = g.ignore_eos ? 1 : 0;
    return s;
}

}  // namespace

EngineOptions to_engine_options(const char* path, const tessera_options* in) {
    if (!path) fail(ErrorKind::Invalid, "tessera_engine_create: path is NULL");
    if (!*path) fail(ErrorKind::Invalid, "tessera_engine_create: path is empty");
    const tessera_options o = read_versioned(in, default_options(), "tessera_options");
    EngineOptions e;
    e.model_path = path;
    if (o.device) e.device = o.device;
    e.memory_budget = o.memory_budget;
    e.gpu_memory_fraction = o.gpu_memory_fraction;
    e.max_model_len = o.max_model_len;
    e.max_num_seqs = o.max_num_seqs;
    e.max_num_batched_tokens = o.max_num_batched_tokens;
    e.max_queue = o.max_queue;
    e.block_size = o.block_size;
    if (o.kv_dtype) e.kv_dtype = o.kv_dtype;
    e.prefix_caching = o.prefix_caching != 0;
    if (o.memlog) MemLog::global().set_enabled(true);
    if (o.sampling) e.sampling = o.sampling;
    if (o.pipeline) e.pipeline = o.pipeline;
    return e;
}

GenerationParams to_generation_params(const tessera_sampling* in) {
    const tessera_sampling s = read_versioned(in, default_sampling(), "tessera_sampling");
    if (s.n_stop_token_ids < 0)
        fail(ErrorKind::Invalid, "tessera_sampling.n_stop_token_ids is {} (must be >= 0)", s.n_stop_token_ids);
    if (s.n_stop_token_ids > 0 && !s.stop_token_ids)
        fail(ErrorKind::Invalid, "tessera_sampling.stop_token_ids is NULL but n_stop_token_ids is {}", s.n_stop_token_ids);
    if (s.max_tokens < -1)
        fail(ErrorKind::Invalid, "tessera_sampling.max_tokens is {} (-1 = unlimited, else >= 0)", s.max_tokens);
    GenerationParams g;
    g.sampling.temperature = s.temperature;
    g.sampling.top_p = s.top_p;
    g.sampling.top_k = s.top_k;
    g.sampling.min_p = s.min_p;
    g.sampling.seed = s.seed;
    g.repetition_penalty = s.repetition_penalty;
    g.presence_penalty = s.presence_penalty;
    g.frequency_penalty = s.frequency_penalty;
    g.max_tokens = s.max_tokens;
    g.stop_token_ids.assign(s.stop_token_ids, s.stop_token_ids + s.n_stop_token_ids);
    g.ignore_eos = s.ignore_eos != 0;
    return g;
}

}  // namespace tessera::capi

extern "C" {

void tessera_options_default(tessera_options* opts) {
    if (opts) *opts = tessera::capi::default_options();
}

void tessera_sampling_default(tessera_sampling* sampling) {
    if (sampling) *sampling = tessera::capi::default_sampling();
}

}  // extern "C"
