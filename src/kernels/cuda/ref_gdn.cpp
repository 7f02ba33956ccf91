// Argument checks for the reference Gated DeltaNet ops (ref_gdn.cu holds the device code). Only
// what the host knows is checked here; the plan arrays are device memory, checked there.
#include "kernels/cuda/ref_gdn.h"

#include <limits>

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::ref {

namespace {
void check_plan(const SeqPlan& plan, int64_t T, int64_t n_slots, const char* op) {
    TS_CHECK(n_slots >= 1, "{}: the state has {} slots", op, n_slots);
    TS_CHECK(plan.n_seqs >= 1 && plan.q_start != nullptr && plan.slot != nullptr,
             "{}: {} tokens but the plan has {} sequences or missing arrays", op, T, plan.n_seqs);
    TS_CHECK(plan.n_seqs <= std::numeric_limits<int32_t>::max(), "{}: {} sequences", op, plan.n_seqs);
}
}  // namespace

bool check_conv1d_silu(const char* op, const float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C,
                       const float* w, int64_t K, const float* conv_state, int64_t slot_stride, int64_t n_slots,
                       const SeqPlan& plan) {
    TS_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max() && C >= 1 && C <= int64_t(65535) * 256 && K >= 1,
             "{}: bad shape T={} C={} K={}", op, T, C, K);
    if (T == 0) return false;
    check_plan(plan, T, n_slots, op);
    TS_CHECK(y && x && w && (conv_state || K == 1), "{}: null y, x, w or conv_state", op);
    TS_CHECK(ys >= C && xs >= C, "{}: row strides ys={} xs={} smaller than C={}", op, ys, xs, C);
    TS_CHECK(K == 1 || slot_stride >= (K - 1) * C, "{}: slot stride {} smaller than [{}, {}]", op, slot_stride, K - 1,
             C);
    return true;
}

void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w, int64_t K,
                 float* conv_state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, cudaStream_t stream) {
    if (!check_conv1d_silu("conv1d_silu", y, ys, x, xs, T, C, w, K, conv_state, slot_stride, n_slots, plan)) return;
    TS_CUDA_CHECK(detail::launch_conv1d_silu(y, ys, x, xs, T, C, w, K, conv_state, slot_stride, n_slots, plan, stream));
}

void gated_delta_rule(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                      int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv, float* state,
                      int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const GdnParams& p,
                      cudaStream_t stream) {
    const char* op = "gated_delta_rule";
    const int64_t nk = p.n_k_heads, nv = p.n_v_heads;
    TS_CHECK(nk > 0 && nv > 0 && nv % nk == 0 && nv <= 65535,
             "gated_delta_rule: {} value heads are not a multiple of {} key heads", nv, nk);
    TS_CHECK(dk >= 1 && dk <= kGdnMaxHeadDim && dv >= 1 && dv <= kGdnMaxHeadDim,
             "gated_delta_rule: head dims dk={} dv={} must be in [1, {}]", dk, dv, kGdnMaxHeadDim);
    TS_CHECK(p.mode != GdnMode::Chunked || (p.chunk >= 1 && p.chunk <= 256),
             "gated_delta_rule: chunk {} must be in [1, 256]", p.chunk);
    TS_CHECK(T >= 0, "gated_delta_rule: {} tokens", T);
    if (T == 0) return;
    check_plan(plan, T, n_slots, op);
    TS_CHECK(o && q.data && k.data && v.data && g && beta && state, "gated_delta_rule: null pointer argument");
    TS_CHECK(o_hs >= dv && (T == 1 || o_ts >= (nv - 1) * o_hs + dv),
             "gated_delta_rule: o strides (token {}, head {}) overlap [{}, {}, {}]", o_ts, o_hs, T, nv, dv);
    TS_CHECK(slot_stride >= nv * dk * dv, "gated_delta_rule: slot stride {} smaller than [{}, {}, {}]", slot_stride,
             nv, dk, dv);
    TS_CUDA_CHECK(detail::launch_gated_delta_rule(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state,
                                                  slot_stride, n_slots, plan, p, stream));
}

}  // namespace tessera::cuda::ref
