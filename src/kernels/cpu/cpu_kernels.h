// The CPU kernels behind the Backend ops, over raw pointers, sizes and strides (strides in
// elements unless named *_bytes). cpu_backend.cpp checks Tensors and calls these.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/backend.h"

namespace tessera::cpu {

// y[T, N] = x[T, K] · w[N, K]ᵀ; w rows are w_stride_bytes apart. Multi-threaded.
void matmul(float* y, int64_t y_stride, const float* x, int64_t x_stride, const void* w, size_t w_stride_bytes,
            DType w_type, int64_t T, int64_t N, int64_t K);

// y[H] = row (H elements of type t) converted to f32.
void convert_row(DType t, const void* row, float* y, int64_t H);

// y[R, C] = x · rsqrt(mean(x²) + eps) · w[C]
void rms_norm(float* y, int64_t y_stride, const float* x, int64_t x_stride, const float* w, int64_t R, int64_t C,
              float eps);
struct HeadsView;
// The same on every head row of [T, n_heads, D] views whose token stride need not be
// n_heads · head stride (e.g. q heads inside a stacked q | k | v projection); y may be x.
void rms_norm_heads(const HeadsView& y, const HeadsView& x, const float* w, float eps);

// x[T, n_head, D] rotated in place (p.inv_freq, when set, replaces the schedule); token t at x + t*tok_stride, head h at + h*head_stride.
void rope(float* x, int64_t T, int64_t tok_stride, int64_t n_head, int64_t head_stride, int64_t D,
          const int32_t* pos, const RopeParams& p);

// Elementwise over rows [R, C].
void swiglu(float* y, int64_t ys, const float* g, int64_t gs, const float* u, int64_t us, int64_t R, int64_t C);
void add(float* y, int64_t ys, const float* a, int64_t as, const float* b, int64_t bs, int64_t R, int64_t C);
void add_bias(float* y, int64_t ys, const float* bias, int64_t R, int64_t C);  // y[r, :] += bias[C]
void softmax(float* x, int64_t xs, int64_t R, int64_t C);
void argmax(const float* x, int64_t xs, int64_t R, int64_t C, int32_t* out);
// values / ids [R, k]: each row's k largest non-NaN values, descending, ties by the lower index;
// padded with NaN / -1 past the row's non-NaN count.
void top_k(const float* x, int64_t xs, int64_t R, int64_t C, int k, float* values, int32_t* ids);
// out[r] = a token drawn from row r of x[R, V] with rows[r] (kernels/sampling.h; the reference
// of Backend::sample).
void sample(const float* x, int64_t xs, int64_t R, int64_t V, const SampleRow* rows, int32_t* out);

// A KV cache [n_blocks, block_size, n_kv, D] of f32 or f16, byte strides per dim.
struct KvCacheView {
    void* data = nullptr;
    DType dtype = DType::F32;
    int64_t n_blocks = 0, block_size = 0, n_kv = 0, D = 0;
    int64_t block_stride = 0, row_stride = 0, head_stride = 0;  // bytes
};
// A row-major [T, n_heads, D] f32 activation, element strides per token and per head.
struct HeadsView {
    float* data = nullptr;
    int64_t T = 0, n_heads = 0, D = 0;
    int64_t tok_stride = 0, head_stride = 0;
};

// Writes k/v [T, n_kv, D] into the caches at slot[t] (slot < 0: skipped).
void kv_store(const KvCacheView& kc, const KvCacheView& vc, const HeadsView& k, const HeadsView& v, const int32_t* slot);
// out[T, n_head, D] = causal GQA softmax(q·kᵀ·scale)·v over the paged cache (plan validated).
void attention(const HeadsView& out, const HeadsView& q, const KvCacheView& kc, const KvCacheView& vc,
               const AttnPlan& plan, float scale);
// Throws Error on a plan that does not fit T tokens and a cache of n_blocks × block_size.
void check_attn_plan(const AttnPlan& plan, int64_t T, int64_t n_blocks, int64_t block_size);

// ---- Gated DeltaNet ----
// Throws Error unless the plan covers tokens [0, T) in order with distinct slots < n_slots.
void check_seq_plan(const SeqPlan& plan, int64_t T, int64_t n_slots, const char* op);
// x[T, n, D] in place: x · rsqrt(Σ x² + eps) · scale per head.
void l2_norm(const HeadsView& x, float eps, float scale);
// y[T, n, D] = w[D] ⊙ x · rsqrt(mean(x²) + eps) ⊙ silu(z) per head (y may be x or z itself).
void rms_norm_gated(const HeadsView& y, const HeadsView& x, const HeadsView& z, const float* w, float eps);
// Over rows [T, nv]: beta = σ(b); g = neg_exp_a[h] · softplus(a + dt_bias[h]) (outputs may be the inputs).
void gdn_gates(float* beta, int64_t beta_s, float* g, int64_t g_s, const float* b, int64_t b_s, const float* a,
               int64_t a_s, const float* neg_exp_a, const float* dt_bias, int64_t T, int64_t nv);
// y[T, C] = silu(causal depthwise conv of x[T, C] with w[C, K]) per sequence of the (checked)
// plan; the state [K-1, C] (oldest first) of slot s at state + s·slot_stride is read and updated.
void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, const float* w, int64_t C, int64_t K,
                 float* state, int64_t slot_stride, const SeqPlan& plan);
// The gated delta rule of backend.h for each (sequence, value head) of the (checked) plan; the
// state [dk, dv] of (slot s, head h) at state + s·slot_stride + h·dk·dv; g, beta rows [T, nv].
void gated_delta_rule(const HeadsView& o, const HeadsView& q, const HeadsView& k, const HeadsView& v,
                      const float* g, int64_t g_s, const float* beta, int64_t beta_s, float* state,
                      int64_t slot_stride, const SeqPlan& plan, const GdnParams& p);
// ---- end Gated DeltaNet ----

// ---- MoE and gating ----
// y[R, C] = x ⊙ σ(g); g is [R, C] (per_row false) or one value per row (per_row true: g[r·gs]).
void sigmoid_mul(float* y, int64_t ys, const float* x, int64_t xs, const float* g, int64_t gs, bool per_row,
                 int64_t R, int64_t C);
// The same over [T, n_heads, D] views of any token and head strides (the attention output gate
// read from a stacked q | gate | k | v projection); y may be x.
void sigmoid_mul_heads(const HeadsView& y, const HeadsView& x, const HeadsView& g);
// Router over logits [T, E] (+ the shared expert's gate column with r.shared): softmax in f32, the
// r.k largest into ids/weights [T, r.slots()] (descending, ties to the lower index, NaN first as
// in torch), renormalised to sum 1 when asked; with r.shared slot k is (E, σ(logits[t, E])).
void moe_topk(const float* logits, int64_t ls, int64_t T, int64_t E, const MoeRouting& r, int32_t* ids,
              float* weights);
// One weight matrix [rows, cols] of any matmul dtype, rows `stride` bytes apart.
struct MoeMatrix {
    const void* data = nullptr;
    size_t stride = 0;
    DType dtype = DType::F32;
};
struct MoeExpert {
    MoeMatrix gate, up;  // [I, H]
    MoeMatrix down;      // [H, I]
};
// y[T, H] = Σ_j weights[t, j] · down_e(silu(gate_e·x_t) ⊙ up_e·x_t), e = ids[t, j] (checked < E),
// computed grouped by expert; batch-invariant. y may alias x. Multi-threaded.
void moe_experts(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t H, int64_t I,
                 const MoeExpert* experts, int E, const int32_t* ids, const float* weights, int k);
// ---- end MoE and gating ----

}  // namespace tessera::cpu
