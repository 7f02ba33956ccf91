// C ABI: the single stream, per-request streams, batched requests and raw logits.
#include <mutex>

#include "capi/args.h"
#include "capi/bridge.h"
#include "capi/errors.h"
#include "capi/params.h"

using namespace tessera;
using namespace tessera::capi;

namespace {

// The token or FINISHED of a step-mode call.
tessera_status deliver(const NextToken& t, int32_t* out) {
    *out = t.token;
    return t.finished ? failure(TESSERA_STATUS_FINISHED, t.why) : TESSERA_STATUS_OK;
}

}  // namespace

extern "C" {

tessera_status tessera_prefill(tessera_engine* engine, const int32_t* tokens, int32_t n,
                               const tessera_sampling* sampling, int32_t* first_token) {
    return guard([&] {
        const char* fn = "tessera_prefill";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& out = deref(first_token, fn, "first_token");
        out = -1;
        const auto prompt = token_span(tokens, n, fn);
        GenerationParams params = with_context(fn, [&] { return to_generation_params(sampling); });
        std::lock_guard lock(b.mutex());
        return deliver(b.prefill(nullptr, prompt, std::move(params)), &out);
    });
}

tessera_status tessera_decode_step(tessera_engine* engine, int32_t* next_token) {
    return guard([&] {
        const char* fn = "tessera_decode_step";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& out = deref(next_token, fn, "next_token");
        out = -1;
        std::lock_guard lock(b.mutex());
        return deliver(b.decode_step(nullptr), &out);
    });
}

const float* tessera_get_logits(tessera_engine* engine, int32_t* n_vocab) {
    const float* result = nullptr;
    guard([&] {
        const char* fn = "tessera_get_logits";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& n = deref(n_vocab, fn, "n_vocab");
        n = 0;
        std::lock_guard lock(b.mutex());
        const std::vector<float>* l = b.last_logits();
        if (!l)
            fail(ErrorKind::NotFound, "{}: no logits (they belong to the token the last prefill / decode_step "
                 "returned, and no call has come in between)", fn);
        result = l->data();
        n = int32_t(l->size());
        return TESSERA_STATUS_OK;
    });
    return result;
}

tessera_status tessera_reset(tessera_engine* engine) {
    return guard([&] {
        Bridge& b = deref(engine, "tessera_reset", "engine").bridge;
        std::lock_guard lock(b.mutex());
        b.reset_stream();
        return TESSERA_STATUS_OK;
    });
}

tessera_status tessera_prefill_req(tessera_engine* engine, const char* request_id, const int32_t* tokens, int32_t n,
                                   const tessera_sampling* sampling, int32_t* first_token) {
    return guard([&] {
        const char* fn = "tessera_prefill_req";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& out = deref(first_token, fn, "first_token");
        out = -1;
        const std::string name = request_name(request_id, fn);
        const auto prompt = token_span(tokens, n, fn);
        GenerationParams params = with_context(fn, [&] { return to_generation_params(sampling); });
        std::lock_guard lock(b.mutex());
        return deliver(b.prefill(&name, prompt, std::move(params)), &out);
    });
}

tessera_status tessera_decode_step_req(tessera_engine* engine, const char* request_id, int32_t* next_token) {
    return guard([&] {
        const char* fn = "tessera_decode_step_req";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& out = deref(next_token, fn, "next_token");
        out = -1;
        const std::string name = request_name(request_id, fn);
        std::lock_guard lock(b.mutex());
        return deliver(b.decode_step(&name), &out);
    });
}

tessera_status tessera_finish_req(tessera_engine* engine, const char* request_id) {
    return guard([&] {
        const char* fn = "tessera_finish_req";
        Bridge& b = deref(engine, fn, "engine").bridge;
        const std::string name = request_name(request_id, fn);
        std::lock_guard lock(b.mutex());
        b.finish(name);
        return TESSERA_STATUS_OK;
    });
}

tessera_status tessera_get_finish_reason(tessera_engine* engine, const char* request_id,
                                         tessera_finish_reason* reason) {
    return guard([&] {
        const char* fn = "tessera_get_finish_reason";
        Bridge& b = deref(engine, fn, "engine").bridge;
        tessera_finish_reason& out = deref(reason, fn, "reason");
        out = TESSERA_FINISH_REASON_NONE;
        const std::string name = request_id ? request_name(request_id, fn) : std::string();
        std::lock_guard lock(b.mutex());
        out = to_abi(b.finish_reason(request_id ? &name : nullptr));
        return TESSERA_STATUS_OK;
    });
}

tessera_status tessera_add_request(tessera_engine* engine, const char* request_id, const int32_t* tokens, int32_t n,
                                   const tessera_sampling* sampling) {
    return guard([&] {
        const char* fn = "tessera_add_request";
        Bridge& b = deref(engine, fn, "engine").bridge;
        const std::string name = request_name(request_id, fn);
        const auto prompt = token_span(tokens, n, fn);
        GenerationParams params = with_context(fn, [&] { return to_generation_params(sampling); });
        std::lock_guard lock(b.mutex());
        b.add(name, prompt, std::move(params));
        return TESSERA_STATUS_OK;
    });
}

tessera_status tessera_step(tessera_engine* engine, tessera_token_event* out, int32_t cap, int32_t* n_out) {
    return guard([&] {
        const char* fn = "tessera_step";
        Bridge& b = deref(engine, fn, "engine").bridge;
        int32_t& n = deref(n_out, fn, "n_out");
        n = 0;
        deref(out, fn, "out");
        if (cap <= 0) fail(ErrorKind::Invalid, "{}: cap is {} (room for at least one event is needed)", fn, cap);
        std::lock_guard lock(b.mutex());
        n = b.step(out, cap);
        return TESSERA_STATUS_OK;
    });
}

}  // extern "C"
