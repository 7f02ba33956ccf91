// Sparse MoE block (Qwen3.5-MoE / Qwen3-Next): softmax router, top-k (renormalised when the
// model says), SwiGLU experts computed grouped by expert, plus a shared expert scaled by
// σ(x·w_shared_gate).   y = Σ_j w_j · expert_{e_j}(x) + σ(x·g_s) · shared(x)
// Where the shared expert has the routed experts' shape and dtypes (and the backend takes E + 1
// experts), it IS expert E: its gate row is stacked under the router, every token's routing
// ends with (E, σ(x·g_s)) (MoeRouting::shared), and one moe_experts call computes the sum in
// the same slot order — 3 launches a layer instead of 9.
#pragma once
#include <string>

#include "core/arena.h"
#include "kernels/backend.h"
#include "models/layers/stacked_linear.h"
#include "models/model_config.h"

namespace tessera {

class WeightStore;

struct SwiGluMlp {
    StackedLinear gate_up;  // [2F, H]: gate | up, one matmul where their dtypes agree
    Tensor down;            // [H, F]

    // Binds the tensors named gate, up, down (shapes checked).
    static SwiGluMlp load(WeightStore& w, const std::string& gate, const std::string& up, const std::string& down,
                          int64_t F, int64_t H);
    bool empty() const { return down.empty(); }
    void forward(Backend& be, Arena& arena, const Tensor& x, const Tensor& out) const;  // out = down(silu(gate x) ⊙ up x)
};

struct MoeBlock {
    Tensor router;       // [E, H]; [E + 1, H] (router | shared gate) when shared_is_expert
    MoeWeights experts;  // per expert: gate/up [I, H], down [H, I]; the shared expert last when shared_is_expert
    bool shared_is_expert = false;
    SwiGluMlp shared;    // optional (empty tensors when the model has none or it is an expert)
    Tensor shared_gate;  // [1, H] optional, likewise

    // Binds blk.{il}.ffn_*: stacked (ffn_{gate,up,down}_exps or fused ffn_gate_up_exps) or
    // per-expert (ffn_{gate,up,down}_exps.E) expert tensors.
    static MoeBlock load(WeightStore& w, const ModelConfig& c, int64_t il);
    static int64_t activation_floats(const ModelConfig& c);
    void forward(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Tensor& out) const;
};

}  // namespace tessera
