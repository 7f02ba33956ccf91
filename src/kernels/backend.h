// The backend-neutral op contract. Models call these ops and nothing else; every op has a CPU
// implementation (the ground truth, kernels/cpu/) and later a CUDA one (kernels/cuda/).
// Activations are f32 on CPU; weights may be any DType (f32/f16/bf16/quantized blocks).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"

namespace tessera {

enum class RopeStyle : uint8_t {
    NeoX,  // rotate-half: pairs (i, i + rot/2)       — HF Llama/Qwen, llama.cpp NEOX
    GptJ,  // interleaved: pairs (2i, 2i + 1)         — llama.cpp NORM, DeepSeek
};

struct RopeParams {
    int rot_dims = 0;       // rotate the first rot_dims of each head (partial rotary); == D (or 0) for full
    float theta = 10000.f;  // base
    RopeStyle style = RopeStyle::NeoX;
    // Llama-3 style frequency scaling (rope_scaling.rope_type == "llama3"); factor <= 1 disables.
    float llama3_factor = 0.f, llama3_low_freq_factor = 1.f, llama3_high_freq_factor = 4.f;
    int llama3_original_ctx = 8192;
    float linear_factor = 1.f;  // positions divided by this ("linear" scaling)
    // If set, the inverse frequencies [rot_dims / 2] to use as they are (theta and scaling are
    // then ignored). Models precompute them once at load, e.g. from GGUF `rope_freqs` factors.
    const float* inv_freq = nullptr;
};

// Per-step attention plan over a paged KV cache, built once per step, shared by every layer.
// Token t of the batch belongs to sequence s with q_start[s] <= t < q_start[s+1]; its position
// is kv_len[s] - (q_start[s+1]-q_start[s]) + (t - q_start[s]); it attends causally to the
// sequence's positions [0, its own position].
// Position p of sequence s lives in block block_table[s*max_blocks + p/block_size], row p%block_size.
struct AttnPlan {
    int n_seqs = 0;
    const int32_t* q_start = nullptr;      // [n_seqs + 1]
    const int32_t* kv_len = nullptr;       // [n_seqs] context length including this step's tokens
    const int32_t* block_table = nullptr;  // [n_seqs, max_blocks]
    int max_blocks = 0;
    int block_size = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual Device device() const = 0;
    virtual std::string name() const = 0;

    // y[T, N] = x[T, K] · w[N, K]ᵀ. x, y f32; w any dtype with rows of K elements.
    virtual void matmul(const Tensor& y, const Tensor& x, const Tensor& w) = 0;
    // y[T, H] = table[ids[t], :] converted to f32; table any dtype.
    virtual void embed(const Tensor& y, const Tensor& table, const int32_t* ids) = 0;
    // y[R, C] = x · rsqrt(mean(x²) + eps) · w[C]   (per row; y may alias x; w f32)
    virtual void rms_norm(const Tensor& y, const Tensor& x, const Tensor& w, float eps) = 0;
    // x[T, n_head, D] rotated in place at positions pos[T].
    virtual void rope(const Tensor& x, const int32_t* pos, const RopeParams& p) = 0;
    // y[T, I] = silu(gate[T, I]) ⊙ up[T, I]   (y may alias gate or up)
    virtual void swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) = 0;
    // y = a + b, elementwise, same shapes (y may alias a or b)
    virtual void add(const Tensor& y, const Tensor& a, const Tensor& b) = 0;
    // y[R, C] += bias[C] for every row (bias f32; e.g. Qwen2's q/k/v projection biases)
    virtual void add_bias(const Tensor& y, const Tensor& bias) = 0;
    // Writes k/v [T, n_kv, D] into the caches [n_blocks, block_size, n_kv, D] at slot[t]
    // (= block * block_size + row; slot < 0: padding, skipped). Cache dtype f32 or f16.
    virtual void kv_store(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                          const int32_t* slot) = 0;
    // out[T, n_head, D] = causal softmax(q·kᵀ·scale)·v over the paged cache, GQA: query head h
    // reads kv head h / (n_head / n_kv).
    virtual void attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           const AttnPlan& plan, float scale) = 0;
    // In-place softmax over each row of x[R, C] (f32).
    virtual void softmax(const Tensor& x) = 0;
    // out[r] = argmax of row r of x[R, C] (first index on ties).
    virtual void argmax(const Tensor& x, int32_t* out) = 0;
};

// The CPU backend (multi-threaded over ThreadPool::global()).
std::unique_ptr<Backend> make_cpu_backend();

// The inverse frequencies [rot_dims / 2] that rope() applies for p: p.inv_freq when set, else
// theta with linear / llama3 scaling computed in f32 exactly as HF transformers does. Every
// backend uses this so they rotate alike (rot_dims must be > 0 here).
void rope_inv_freq(const RopeParams& p, float* inv_freq);

}  // namespace tessera
