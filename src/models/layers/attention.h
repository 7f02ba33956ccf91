// Causal self-attention with GQA and RoPE over the paged KV cache, as the dense and hybrid models
// use it: optional q/k/v biases (Qwen2), optional per-head q/k RMSNorm (Qwen3, Qwen3.5), and the
// optional sigmoid output gate of Qwen3.5 / Qwen3-Next, whose q_proj yields [q | gate] per head.
#pragma once
#include "core/arena.h"
#include "kernels/backend.h"
#include "models/layers/stacked_linear.h"
#include "models/model.h"

namespace tessera {

class WeightStore;

struct Attention {
    // q | k | v: [nh·D (x2 when gated), H], [nkv·D, H], [nkv·D, H], one matmul where their dtypes
    // agree; the heads are read as views of its output (token stride: all three widths).
    StackedLinear wqkv;
    Tensor wo;              // [H, nh·D]
    Tensor bq, bk, bv;      // optional biases (f32)
    Tensor q_norm, k_norm;  // optional [D] f32
    bool gated = false;

    static Attention load(WeightStore& w, const ModelConfig& c, int64_t il);
    static int64_t activation_floats(const ModelConfig& c);

    // out[T, H] = attention over x[T, H] (already normed); k/v of this step go into the cache.
    void forward(Backend& be, Arena& arena, const ModelConfig& c, const RopeParams& rope, const Tensor& x,
                 const Tensor& out, const Tensor& k_cache, const Tensor& v_cache, const StagedBatch& b) const;
};

}  // namespace tessera
