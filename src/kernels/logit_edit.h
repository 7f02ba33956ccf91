// One token's penalties and bias in a row of logits, for applying them where the logits are
// (Backend::edit_logits): x ← x + bias (BIAS), then x > 0 ? x / rep : x · rep (REP), then
// x − sub (SUB) — LogitsProcessor::apply's arithmetic, one token at a time. Plain data: the
// CUDA kernels include it too.
#pragma once
#include <cstdint>

namespace tessera {

struct LogitEdit {
    enum : uint32_t { kBias = 1, kRep = 2, kSub = 4 };
    int32_t row = 0;  // logit row of the step
    int32_t id = 0;   // token id
    float bias = 0.f, rep = 1.f, sub = 0.f;
    uint32_t flags = 0;
};

// The edit applied to one logit (host and device).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline float apply_logit_edit(float x, const LogitEdit& e) {
    if (e.flags & LogitEdit::kBias) x += e.bias;
    if (e.flags & LogitEdit::kRep) x = x > 0.f ? x / e.rep : x * e.rep;
    if (e.flags & LogitEdit::kSub) x -= e.sub;
    return x;
}

}  // namespace tessera
