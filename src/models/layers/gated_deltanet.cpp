#include "models/layers/gated_deltanet.h"

#include <cmath>

#include <fmt/format.h>

#include "core/views.h"
#include "runtime/tensor_source.h"
#include "runtime/weight_store.h"

namespace tessera {

GatedDeltaNet GatedDeltaNet::load(WeightStore& w, const ModelConfig& c, int64_t il) {
    const std::string p = fmt::format("blk.{}.", il);
    const int64_t H = c.hidden, nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk, dv = c.gdn_dv;
    const int64_t C = 2 * nk * dk + nv * dv;
    const TensorSource& src = w.source();
    GatedDeltaNet g;
    using Piece = WeightStore::RowPiece;
    std::vector<Piece> pieces;  // W_qkv | W_z | W_b | W_a
    if (src.has(p + "attn_qkv.weight")) {
        pieces.push_back({p + "attn_qkv.weight", C, {}});
        pieces.push_back({p + "attn_gate.weight", nv * dv, {}});
    } else {
        // Qwen3-Next's fused ssm_in (HF in_proj_qkvz): rows per key head g are
        // [q_g (dk) | k_g (dk) | v_g (r·dv) | z_g (r·dv)]; regroup as [q | k | v] and [z].
        const int64_t r = nv / nk, per = 2 * dk + 2 * r * dv;
        check_shape(src.get(p + "ssm_in.weight"), {nk * per, H}, src.describe() + ": tensor " + p + "ssm_in.weight");
        std::vector<int64_t> qkv, z;
        for (int64_t part = 0; part < 3; ++part)  // q, k, v
            for (int64_t gk = 0; gk < nk; ++gk)
                for (int64_t i = 0; i < (part < 2 ? dk : r * dv); ++i) qkv.push_back(gk * per + part * dk + i);
        for (int64_t gk = 0; gk < nk; ++gk)
            for (int64_t i = 0; i < r * dv; ++i) z.push_back(gk * per + 2 * dk + r * dv + i);
        pieces.push_back({p + "ssm_in.weight", C, qkv});
        pieces.push_back({p + "ssm_in.weight", nv * dv, z});
    }
    if (src.has(p + "ssm_beta.weight")) {
        pieces.push_back({p + "ssm_beta.weight", nv, {}});
        pieces.push_back({p + "ssm_alpha.weight", nv, {}});
    } else {
        // Qwen3-Next's fused ssm_ba (HF in_proj_ba): rows per key head g are [b_g (r) | a_g (r)].
        const int64_t r = nv / nk;
        check_shape(src.get(p + "ssm_ba.weight"), {2 * nv, H}, src.describe() + ": tensor " + p + "ssm_ba.weight");
        std::vector<int64_t> b, a;
        for (int64_t gk = 0; gk < nk; ++gk)
            for (int64_t j = 0; j < r; ++j) {
                b.push_back(gk * 2 * r + j);
                a.push_back(gk * 2 * r + r + j);
            }
        pieces.push_back({p + "ssm_ba.weight", nv, b});
        pieces.push_back({p + "ssm_ba.weight", nv, a});
    }
    g.w_in = StackedLinear::load(w, pieces, H);
    g.conv = w.matrix_f32(p + "ssm_conv1d.weight", C, c.conv_kernel);
    g.dt_bias = w.vector_f32(p + "ssm_dt.bias", nv);
    g.neg_exp_a = w.vector_f32(p + "ssm_a", nv);
    g.norm = w.vector_f32(p + "ssm_norm.weight", dv);
    g.w_out = w.matrix(p + "ssm_out.weight", H, nv * dv);
    return g;
}

int64_t GatedDeltaNet::activation_floats(const ModelConfig& c) {
    const int64_t nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk, dv = c.gdn_dv;
    const int64_t C = 2 * nk * dk + nv * dv;
    return 2 * C + nv * dv /*z*/ + 4 * nv /*b a beta g*/ + nv * dv /*o*/;
}

Tensor GatedDeltaNet::forward(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Tensor& out,
                              const Tensor& conv_state, const Tensor& rec_state, const SeqPlan& plan) const {
    const int64_t T = x.dim(0), nk = c.gdn_k_heads, nv = c.gdn_v_heads, dk = c.gdn_dk, dv = c.gdn_dv;
    const int64_t C = 2 * nk * dk + nv * dv;
    // x·W_inᵀ = [mixed (q | k | v before the conv) | z | b | a], column bands of one buffer.
    Tensor proj = arena.tensor(DType::F32, {T, C + nv * dv + 2 * nv});
    Tensor mixed = col_view(proj, 0, C), z = col_view(proj, C, nv * dv);
    Tensor b = col_view(proj, C + nv * dv, nv), a = col_view(proj, C + nv * dv + nv, nv);
    Tensor qkv = arena.tensor(DType::F32, {T, C});  // after conv + SiLU
    Tensor beta = arena.tensor(DType::F32, {T, nv}), g = arena.tensor(DType::F32, {T, nv});
    Tensor o = arena.tensor(DType::F32, {T, nv * dv});

    w_in.apply(be, proj, x);
    GdnParams gp;
    gp.n_k_heads = int(nk);
    gp.n_v_heads = int(nv);
    gp.tiled_heads = c.gdn_tiled_heads;
    gp.mode = GdnMode::Chunked;  // per sequence: WY chunks of 64, a lone token the recurrent step
    if (T == plan.n_seqs && be.fuses_gdn_decode(gp, dk, dv, conv.dim(1))) {  // one token per sequence
        // The fused out-projection's parts [P, T, H] take the arena's room past this layer's buffers
        // (activation_floats does not count them: a decode step's few tokens leave plenty), else the GEMV.
        const int P = be.gdn_decode_out_parts(gp, dk, dv, conv.dim(1), T, w_out);
        const bool fused = P > 0 && arena.fits(size_t(P * T * out.dim(1)) * sizeof(float));
        const Tensor parts = fused ? arena.tensor(DType::F32, {P, T, out.dim(1)}) : Tensor();
        be.gdn_decode_step(o, mixed, z, b, a, conv, conv_state, neg_exp_a, dt_bias, rec_state, norm, c.rms_eps, plan,
                           gp, fused ? &w_out : nullptr, fused ? &parts : nullptr);
        if (fused) return parts;
        be.matmul(out, o, w_out);
        return out;
    }
    // conv1d_silu, then q̂ = l2norm(q)/√dk and k̂ = l2norm(k) (one pass where the backend fuses them)
    be.conv1d_silu_qk_norm(qkv, mixed, conv, conv_state, plan, nk, dk, 1e-6f, 1.0f / std::sqrt(float(dk)));
    Tensor q = head_view(qkv, 0, nk, dk, dk);            // [T, nk, dk]
    Tensor k = head_view(qkv, nk * dk, nk, dk, dk);      // [T, nk, dk]
    Tensor v = head_view(qkv, 2 * nk * dk, nv, dv, dv);  // [T, nv, dv]
    be.gdn_gates(beta, g, b, a, neg_exp_a, dt_bias);
    Tensor o3 = o.view({T, nv, dv});
    be.gated_delta_rule(o3, q, k, v, g, beta, rec_state, plan, gp);
    be.rms_norm_gated(o3, o3, head_view(proj, C, nv, dv, dv), norm, c.rms_eps);
    be.matmul(out, o, w_out);
    return out;
}

}  // namespace tessera
