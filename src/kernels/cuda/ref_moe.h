// Reference MoE on the device: the router (softmax, top-k, renormalisation) and the experts
// (SwiGLU FFNs over bf16 or f32 weights), with exactly the semantics of Backend::moe_topk and
// Backend::moe_experts (kernels/backend.h). Simple and graph-friendly: no host round trip, no
// atomics, a fixed summation order, so results are deterministic. Raw device pointers (every
// array, including the per-expert pointer arrays, lives in device memory); queued on `stream`,
// no host synchronisation. Throws Error on bad arguments or a failed launch.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::ref {

// Largest expert count moe_topk takes (one row of probabilities in shared memory).
constexpr int64_t kMoeTopkMaxExperts = 12288;

// Router over logits [T, E] (contiguous; [T, E + 1] with `shared`): p = softmax(row) in f32 (the
// normaliser summed in double, in expert order, as the CPU op does), the k largest p per row into
// ids / weights [T, k] ([T, k + 1] with `shared`) in descending order, ties to the lower expert
// index, NaN ranked above everything; weights renormalised to sum 1 when `renormalize`; with
// `shared` slot k is (E, σ(logits[t, E])) (Backend::moe_topk's MoeRouting). 1 <= k <= E <=
// kMoeTopkMaxExperts.
void moe_topk(const float* logits, int64_t T, int64_t E, int k, bool renormalize, bool shared, int32_t* ids,
              float* weights, cudaStream_t stream);

// Floats of scratch moe_experts needs: the SwiGLU activations [T·k, I].
inline int64_t moe_experts_scratch_floats(int64_t T, int k, int64_t I) { return T * k * I; }

// y[t] = Σ_{j<k} weights[t, j] · down_e(silu(gate_e · x_t) ⊙ (up_e · x_t)), e = ids[t, j], for
// x, y [T, H] (row strides ldx, ldy in elements; y may be x itself, not otherwise overlap it).
// gate, up, down: device arrays [E] of device pointers to each expert's contiguous weights:
// gate[e], up[e] [I, H] and down[e] [H, I], bf16 bits or f32. ids, weights: [T, k] (e.g. from
// moe_topk). Per (token, slot) the gate/up dot products and SwiGLU go to scratch [T·k, I]; then
// per (token, output) the down dot products are summed over j = 0..k-1 in order. f32
// accumulation throughout. An id outside [0, E) cannot be reported without a host round trip:
// that token's output row becomes NaN.
void moe_experts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H, int64_t I, int E,
                 const uint16_t* const* gate, const uint16_t* const* up, const uint16_t* const* down,
                 const int32_t* ids, const float* weights, int k, float* scratch, cudaStream_t stream);
void moe_experts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H, int64_t I, int E,
                 const float* const* gate, const float* const* up, const float* const* down, const int32_t* ids,
                 const float* weights, int k, float* scratch, cudaStream_t stream);

namespace detail {
// The entry points into ref_moe.cu (which includes no fmt: nvcc rejects its consteval format
// strings). Arguments are already checked; each returns its launch's error. weight_bf16 selects
// the weights' element type (bf16 bits or f32).
cudaError_t launch_moe_topk(const float* logits, int64_t T, int64_t E, int k, bool renormalize, bool shared,
                            int32_t* ids, float* weights, cudaStream_t stream);
cudaError_t launch_moe_experts(bool weight_bf16, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                               int64_t H, int64_t I, int E, const void* const* gate, const void* const* up,
                               const void* const* down, const int32_t* ids, const float* weights, int k,
                               float* scratch, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
