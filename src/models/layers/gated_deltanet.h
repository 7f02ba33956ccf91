// The Gated DeltaNet token mixer (Qwen3.5 / Qwen3-Next linear-attention layers):
//   qkv = conv1d_silu(x·W_qkvᵀ);  q̂ = l2norm(q)/√dk, k̂ = l2norm(k)
//   β = σ(x·W_bᵀ), g = −exp(A_log)·softplus(x·W_aᵀ + dt_bias)
//   o = gated_delta_rule(q̂, k̂, v, g, β; state);  out = (w ⊙ rmsnorm(o) ⊙ silu(x·W_zᵀ))·W_outᵀ
#pragma once
#include "core/arena.h"
#include "kernels/backend.h"
#include "models/layers/stacked_linear.h"
#include "models/model_config.h"

namespace tessera {

class WeightStore;

struct GatedDeltaNet {
    // The input projections, one matmul where their dtypes agree: [C + nv·dv + 2·nv, H], rows
    // W_qkv (C = 2·nk·dk + nv·dv: q heads | k heads | v heads) | W_z [nv·dv] | W_b [nv] | W_a [nv].
    StackedLinear w_in;
    Tensor conv;       // [C, K] f32, C = 2·nk·dk + nv·dv
    Tensor dt_bias;    // [nv] f32
    Tensor neg_exp_a;  // [nv] f32: −exp(A_log)
    Tensor norm;       // [dv] f32 (plain weight, not zero-centred)
    Tensor w_out;      // [H, nv·dv]

    // Binds blk.{il}.* (llama.cpp names), checking shapes against the config.
    static GatedDeltaNet load(WeightStore& w, const ModelConfig& c, int64_t il);
    // Per-token f32 activations forward() takes from the arena.
    static int64_t activation_floats(const ModelConfig& c);

    // out[T, H] = the mixer applied to x[T, H] (already normed), continuing each sequence from its
    // slots in conv_state [n_slots, K-1, C] / rec_state [n_slots, nv, dk, dv]. The delta rule runs
    // in GdnMode::Chunked, which picks the form per sequence (decodes: recurrent), so a sequence's
    // result does not depend on what else is in the batch. Returns what to add to the residual
    // stream: out itself, or — where the backend fuses the out-projection into its decode step —
    // P partial products [P, T, H] from the arena (Backend::add_rms_norm sums them in order).
    Tensor forward(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Tensor& out,
                   const Tensor& conv_state, const Tensor& rec_state, const SeqPlan& plan) const;
};

}  // namespace tessera
