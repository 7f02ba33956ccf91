#include "models/layers/attention.h"

#include <cmath>

#include <fmt/format.h>

#include "core/views.h"
#include "runtime/weight_store.h"

namespace tessera {

Attention Attention::load(WeightStore& w, const ModelConfig& c, int64_t il) {
    const std::string p = fmt::format("blk.{}.", il);
    const int64_t H = c.hidden, D = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads;
    TS_CHECK(nh % nkv == 0, "{} query heads are not a multiple of {} kv heads", nh, nkv);
    Attention a;
    a.gated = c.attn_output_gate;
    a.wqkv = StackedLinear::load(
        w, {{p + "attn_q.weight", nh * D * (a.gated ? 2 : 1), {}}, {p + "attn_k.weight", nkv * D, {}},
            {p + "attn_v.weight", nkv * D, {}}},
        H);
    a.wo = w.matrix(p + "attn_output.weight", H, nh * D);
    a.bq = w.optional_vector_f32(p + "attn_q.bias", nh * D);
    a.bk = w.optional_vector_f32(p + "attn_k.bias", nkv * D);
    a.bv = w.optional_vector_f32(p + "attn_v.bias", nkv * D);
    a.q_norm = w.optional_vector_f32(p + "attn_q_norm.weight", D);
    a.k_norm = w.optional_vector_f32(p + "attn_k_norm.weight", D);
    TS_CHECK(!a.gated || a.bq.empty(), "tensor {}attn_q.bias: biases with a gated q projection are not supported", p);
    return a;
}

int64_t Attention::activation_floats(const ModelConfig& c) {
    return c.n_heads * c.head_dim * (c.attn_output_gate ? 2 : 1) + 2 * c.n_kv_heads * c.head_dim +
           c.n_heads * c.head_dim;
}

void Attention::forward(Backend& be, Arena& arena, const ModelConfig& c, const RopeParams& rope, const Tensor& x,
                        const Tensor& out, const Tensor& k_cache, const Tensor& v_cache, const StagedBatch& b) const {
    const int64_t T = x.dim(0), D = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads;
    const int64_t qw = nh * D * (gated ? 2 : 1), kw = nkv * D;
    Tensor qkv = arena.tensor(DType::F32, {T, qw + 2 * kw});  // q (or [q | gate] per head) | k | v
    Tensor attn = arena.tensor(DType::F32, {T, nh * D});
    wqkv.apply(be, qkv, x);
    if (!bq.empty()) be.add_bias(col_view(qkv, 0, qw), bq);
    if (!bk.empty()) be.add_bias(col_view(qkv, qw, kw), bk);
    if (!bv.empty()) be.add_bias(col_view(qkv, qw + kw, kw), bv);
    Tensor q3 = head_view(qkv, 0, nh, D, gated ? 2 * D : D);  // [T, nh, D], token stride qw + 2·kw
    Tensor k3 = head_view(qkv, qw, nkv, D, D), v3 = head_view(qkv, qw + kw, nkv, D, D);
    be.qk_norm_rope_store(q3, k3, v3, q_norm, k_norm, c.rms_eps, b.positions, rope, k_cache, v_cache, b.slots);
    Tensor attn3 = attn.view({T, nh, D});
    const float scale = 1.0f / std::sqrt(float(D));
    if (gated) be.attention_gated(attn3, q3, head_view(qkv, D, nh, D, 2 * D), k_cache, v_cache, b.attn, scale);
    else be.attention(attn3, q3, k_cache, v_cache, b.attn, scale);
    be.matmul(out, attn, wo);
}

}  // namespace tessera
