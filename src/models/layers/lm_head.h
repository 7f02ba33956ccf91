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
    Tensor tok_embd;     // [V, H]
    Tensor output_norm;  // [H] f32
    Tensor output;       // [V, H] (== tok_embd when tied)

    static LmHead load(WeightStore& w, const ModelConfig& c);
    // logits [batch.logit_rows.size(), V] from the residual stream x [T, H].
    void logits(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Batch& b, float* out) const;
};

// The model's RoPE settings (frequencies precomputed in the config).
RopeParams rope_params(const ModelConfig& c);

}  // namespace tessera
