// Token embedding and output head shared by the decoder models: embed ids, and logits =
// rms_norm(x)·Wᵀ for only the rows a batch asks for (tied to the embedding when the checkpoint
// has no separate output matrix).
#pragma once
#include "core/arena.h"
#include "kernels/backend.h"
#include "models/model.h"

namespace tessera {

class WeightStore;

struct LmHead {
    // Logits are computed this many rows at a time into scratch (rows × vocab) where they do not
    // go straight to the host: a device backend's, and every backend's when only argmaxes are asked.
    static constexpr int64_t kLogitRowsPerCopy = 16;
    // Activation floats logits() needs beyond the model's own (the scratch rows and their ids).
    static int64_t activation_floats(const ModelConfig& c, const Backend&) {
        return kLogitRowsPerCopy * (c.vocab_size + 1 + 2 * Backend::kMaxTopK) + 64;
    }

    Tensor tok_embd;     // [V, H]
    Tensor output_norm;  // [H] f32
    Tensor output;       // [V, H] (== tok_embd when tied)

    static LmHead load(WeightStore& w, const ModelConfig& c);
    // logits [b.n_logits, V] from the residual stream x [T, H], to host memory or a device tensor,
    // or only their argmaxes to host memory (LogitsOut).
    void logits(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const StagedBatch& b,
                const LogitsOut& out) const;
};

// Logit rows [r0, r0 + n) of a step, y [n, V] in the backend's memory, to where `out` wants them:
// its edits applied, then the rows, their argmaxes or their top candidates copied to the host
// (`scratch`, the backend's memory, holds the ids and values on the way).
void deliver_logits(Backend& be, Arena& scratch, const Tensor& y, int64_t r0, const LogitsOut& out);

// The model's RoPE settings (frequencies precomputed in the config).
RopeParams rope_params(const ModelConfig& c);

}  // namespace tessera
