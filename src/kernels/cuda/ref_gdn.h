// The reference CUDA Gated DeltaNet ops: causal depthwise conv1d + SiLU with per-slot conv state,
// and the gated delta rule (Backend::conv1d_silu / gated_delta_rule, kernels/backend.h). Plain,
// obviously correct kernels that stay as the baseline for the fast kernel pack. Raw device
// pointers, element strides; SeqPlan arrays (q_start, slot) live in device memory and are read
// only there (launch sizes come from T, C, n_seqs and heads: CUDA-graph friendly). Queued on
// `stream`; throws Error on bad host-side arguments.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/backend.h"

namespace tessera::cuda::ref {

// y[T, C] = silu(Σ_{i<K} w[c, i] · x[t-K+1+i, c]) per sequence of the plan; the K-1 inputs before a
// sequence's first token come from its conv state, which is left holding the sequence's last K-1
// inputs (with fewer than K-1 tokens the old rows shift up). y, x rows ys / xs apart (y overlaps
// neither x nor the state); w [C, K] contiguous; conv_state [n_slots, K-1, C]: slot s at
// conv_state + s·slot_stride, rows C apart, oldest first. Two launches: the outputs (one thread
// per (token, channel), reading the old state), then the state update (per sequence, channel).
// A sequence whose slot is outside [0, n_slots) gets NaN outputs and no state write; the slots of
// one plan must be distinct (device memory: not checked).
void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w, int64_t K,
                 float* conv_state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, cudaStream_t stream);

// conv1d_silu's host-side checks (op names the caller in the errors): false for T = 0 (nothing to
// launch), true where the call may go ahead; throws Error otherwise. fast::conv1d_silu shares them.
bool check_conv1d_silu(const char* op, const float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C,
                       const float* w, int64_t K, const float* conv_state, int64_t slot_stride, int64_t n_slots,
                       const SeqPlan& plan);

// A [T, n_heads, D] f32 input on the device: element (t, h, i) at data[t·tok_stride + h·head_stride + i].
struct HeadsIn {
    const float* data = nullptr;
    int64_t tok_stride = 0, head_stride = 0;
};

inline constexpr int64_t kGdnMaxHeadDim = 256;  // dk and dv

// The gated delta rule per sequence and value head h (key head h / (nv/nk), or h % nk when
// p.tiled_heads), state S [dk, dv] = state[slot, h] (f32 [n_slots, nv, dk, dv], slot s at
// state + s·slot_stride, inner dims contiguous), updated in place token by token:
//   S ← exp(g_t)·S;  u = Sᵀk_t;  S ← S + k_t ⊗ β_t(v_t − u);  o_t = Sᵀq_t
// q, k [T, nk, dk]; v [T, nv, dv]; o [T, nv, dv] at o + t·o_ts + h·o_hs; g, beta [T, nv] rows
// g_s / beta_s apart. dk, dv <= 256. Columns of S evolve independently, so one warp per
// (sequence, value head, column j) holds S[:, j] in registers (dk/32 rows per lane; Sᵀk and Sᵀq
// are warp sums) and walks the tokens in order.
// Every GdnMode computes this recurrence token by token: GdnMode::Chunked (the WY form on the
// CPU) is the same math re-associated, so the two agree up to f32 rounding, not bit for bit;
// the tests compare with tolerances. A sequence whose slot is outside [0, n_slots) gets NaN
// outputs and its state is left alone; the slots of one plan must be distinct (not checked).
void gated_delta_rule(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                      int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv, float* state,
                      int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const GdnParams& p,
                      cudaStream_t stream);

namespace detail {
// The entry points into ref_gdn.cu (which includes no fmt: nvcc rejects its consteval format
// strings). Arguments are already checked; each returns its launch's error.
cudaError_t launch_conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C,
                               const float* w, int64_t K, float* conv_state, int64_t slot_stride, int64_t n_slots,
                               const SeqPlan& plan, cudaStream_t stream);
// The second of launch_conv1d_silu's launches alone: conv_state[slot of s] ← the last K-1 inputs of
// each sequence (after every output of the call has read the old state; same stream). Nothing for K = 1.
cudaError_t launch_conv_state(const float* x, int64_t xs, int64_t T, int64_t C, int64_t K, float* conv_state,
                              int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, cudaStream_t stream);
cudaError_t launch_gated_delta_rule(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v,
                                    const float* g, int64_t g_s, const float* beta, int64_t beta_s, int64_t T,
                                    int64_t dk, int64_t dv, float* state, int64_t slot_stride, int64_t n_slots,
                                    const SeqPlan& plan, const GdnParams& p, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
