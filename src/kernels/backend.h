// The backend-neutral op contract. Models call these ops and nothing else; every op has a CPU
// implementation (the ground truth, kernels/cpu/) and later a CUDA one (kernels/cuda/).
// Activations are f32 on CPU; weights may be any DType (f32/f16/bf16/quantized blocks).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/memory.h"
#include "core/tensor.h"
#include "kernels/logit_edit.h"
#include "kernels/sampling.h"

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
// A sequence with kv_len 0 is padding (CUDA graphs fill a batch-size bucket with such sequences):
// its tokens attend to nothing and their outputs are zero.
struct AttnPlan {
    int n_seqs = 0;
    const int32_t* q_start = nullptr;      // [n_seqs + 1]
    const int32_t* kv_len = nullptr;       // [n_seqs] context length including this step's tokens
    const int32_t* block_table = nullptr;  // [n_seqs, max_blocks]
    int max_blocks = 0;
    int block_size = 0;
};

// Per-step plan for the recurrent (Gated DeltaNet) layers: which tokens belong to which sequence
// and which state slot each sequence reads and writes. Token t of sequence s: q_start[s] <= t <
// q_start[s+1]. A slot holds the state after the sequence's previous tokens (zeros for a new one).
// Slot -1 marks a padding sequence: it starts from a zero state and writes none back.
struct SeqPlan {
    int n_seqs = 0;
    const int32_t* q_start = nullptr;  // [n_seqs + 1]
    const int32_t* slot = nullptr;     // [n_seqs] state slot of each sequence (-1: padding)
};

enum class GdnMode : uint8_t {
    Recurrent,  // token by token for every sequence (the definition)
    Chunked,    // per sequence: the chunked WY form, a lone token the recurrent step (see GdnParams)
};

// How gated_delta_rule computes each sequence of a batch (equal to the definition up to f32
// rounding in every mode; the rule fixes the rounding so results are batch-invariant):
//  - Recurrent: every token by the recurrent step.
//  - Chunked: the sequence's tokens in this call are cut into chunks of `chunk` counted from its
//    first token in the call; each chunk takes the WY form, except that a sequence of exactly one
//    token, and a last partial chunk of exactly one token (chunk > 1), take the recurrent step.
// So in Chunked mode a sequence's outputs and final state depend only on its own tokens, its
// starting state and where its calls begin: running tokens [0, n) in one call is bit-identical to
// [0, a) then [a, n) whenever a is a multiple of `chunk`, and a one-token decode gives the same
// bits alone, batched with other decodes, or batched with prefills. Models always pass Chunked
// (the engine splits prompts and restores prefix snapshots at multiples of 64 = chunk).
struct GdnParams {
    int n_k_heads = 0;         // nk: q/k heads
    int n_v_heads = 0;         // nv: v heads, a multiple of nk (r = nv / nk)
    // Which key head value head h reads: h / r (HF's grouped order) or h % nk (llama.cpp's
    // re-tiled qwen35 GGUF order).
    bool tiled_heads = false;
    GdnMode mode = GdnMode::Recurrent;
    int chunk = 64;  // Chunked: tokens per WY chunk, in [1, 256]
};

// MoE expert weights, one view per expert (slices of stacked [E, rows, cols] tensors or separate
// per-expert tensors): gate[e], up[e] [I, H]; down[e] [H, I]. Any matmul dtype.
struct MoeWeights {
    std::vector<Tensor> gate, up, down;
    int n_experts() const { return int(gate.size()); }
};

// How a token's experts are chosen (Backend::moe_topk): the k most probable of the router's E,
// and with `shared` a shared expert gated per token, run as one more expert (index E) in slot k
// with weight σ(g), g the logits' extra last column (the model's shared-expert gate, stacked onto
// the router): y = Σ_j w_j · expert_j(x) + σ(g) · shared(x), summed in slot order.
struct MoeRouting {
    int k = 0;                 // routed experts a token
    bool renormalize = false;  // their k weights rescaled to sum 1 (the shared slot's never)
    bool shared = false;
    int slots() const { return k + (shared ? 1 : 0); }  // ids / weights a token
};

struct MoeLimits {
    int experts = 0, slots = 0;
};

// How a model uses a weight, for backends that place weights in memory of their own.
enum class WeightUse : uint8_t {
    Matrix,  // a matmul / embedding operand: any dtype
    Expert,  // one MoE expert's matrix (a slice of the stacked experts), read by moe_experts
    Vector,  // f32, read elementwise by norms, biases, gates, conv
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual Device device() const = 0;
    virtual std::string name() const = 0;

    // ---- memory. Every tensor and every plan array an op reads or writes (positions, slots,
    // AttnPlan / SeqPlan arrays, MoE ids and weights) lives in memory(). The defaults are the
    // host's (the CPU backend); a device backend overrides all of them.
    virtual MemoryResource& memory();
    // host → memory(), ordered before the ops queued after it. src may be reused on return —
    // except staging_memory(), which (as an asynchronous copy's source) is read when the copy runs.
    virtual void copy_in(void* dst, const void* host_src, size_t bytes);
    // memory() → host, after every op queued before it (waits for them).
    virtual void copy_out(void* host_dst, const void* src, size_t bytes);
    virtual void copy(void* dst, const void* src, size_t bytes);  // within memory(), queued
    virtual void zero(void* dst, size_t bytes);                   // within memory(), queued
    virtual void synchronize() {}  // waits for every queued op (before freeing memory they may use)
    // memory() → host_dst in staging_memory(), queued: returns at once; the bytes are there once
    // a mark() queued after it has passed (wait_mark). The host's backend copies at once.
    virtual void copy_out_queued(void* host_dst, const void* src, size_t bytes);
    // A point in the queue: wait_mark(m) returns once every op queued before mark() returned m
    // has run (throws if one failed). Marks are cheap and need no release; the host's are 0.
    virtual uint64_t mark() { return 0; }
    virtual void wait_mark(uint64_t) {}
    // A weight as this backend's ops want it. The CPU returns the host view itself (mmapped or
    // owned by the WeightStore); a device backend copies it into memory it owns for its lifetime,
    // converting if its kernels want another dtype (the CUDA reference path: bf16 matrices).
    virtual Tensor place_weight(const Tensor& host, WeightUse use);
    // Matrices of one shape and dtype placed as a set (an MoE layer's experts, one matrix each),
    // in order: a device backend may keep them one after another in one allocation (the CUDA
    // backend's MoE kernels describe such a stack with one tensor map). The default places each.
    virtual std::vector<Tensor> place_weights(const std::vector<Tensor>& hosts, WeightUse use);
    // A device backend's free and total memory now (false: host memory, not reported here).
    virtual bool device_memory(int64_t* free_bytes, int64_t* total_bytes);
    // Host memory that copy_in / copy_out move fastest (page-locked for a device backend; the
    // plain host heap for the CPU). For buffers the host exchanges with the device every step.
    virtual MemoryResource& staging_memory();

    // ---- recording (CUDA graphs). record() runs `body`, capturing the ops it queues instead of
    // executing them, and returns a replayable recording — or null where the backend cannot
    // record (the CPU). The body must not copy to or from the host, synchronize or allocate: run
    // it once unrecorded first, so every buffer the ops need internally exists. Recordings read
    // the exact addresses they were made with; internal_epoch() changes whenever the backend
    // reallocates memory its ops use internally (scratch, tables), which invalidates them.
    class Recording {
    public:
        virtual ~Recording() = default;
        virtual void replay() = 0;  // queued like any op
    };
    virtual std::unique_ptr<Recording> record(const std::function<void()>& body);
    virtual uint64_t internal_epoch() const { return 0; }

    // y[T, N] = x[T, K] · w[N, K]ᵀ. x, y f32; w any dtype with rows of K elements.
    virtual void matmul(const Tensor& y, const Tensor& x, const Tensor& w) = 0;
    // y[T, H] = table[ids[t], :] converted to f32; table any dtype.
    virtual void embed(const Tensor& y, const Tensor& table, const int32_t* ids) = 0;
    // y[R, C] = x · rsqrt(mean(x²) + eps) · w[C]   (per row; y may alias x; w f32)
    virtual void rms_norm(const Tensor& y, const Tensor& x, const Tensor& w, float eps) = 0;
    // The residual step of a block: x[R, C] += delta, then y = rms_norm(x) · w — the same values
    // as add then rms_norm (the default runs those two); a backend may do it in one pass. y and
    // delta must not alias x. delta may be [P, R, C] (contiguous): P parts of a product added in
    // order, x ← ((x + delta[0]) + delta[1]) + … (what gdn_decode_step's fused out-projection leaves).
    virtual void add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& delta, const Tensor& w, float eps);
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
    // The attention block's step from its projections to the cache: q [T, n_head, D] and
    // k [T, n_kv, D] rms_norm'ed in place by q_norm / k_norm ([D]; an empty tensor: no norm), both
    // rotated by rope at pos, then kv_store(k_cache, v_cache, k, v, slot) — the same values as
    // those ops in order (the default runs them); a backend may do it in one pass.
    virtual void qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                    const Tensor& k_norm, float eps, const int32_t* pos, const RopeParams& rp,
                                    const Tensor& k_cache, const Tensor& v_cache, const int32_t* slot);
    // out[T, n_head, D] = causal softmax(q·kᵀ·scale)·v over the paged cache, GQA: query head h
    // reads kv head h / (n_head / n_kv).
    virtual void attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                           const AttnPlan& plan, float scale) = 0;
    // attention into out, then out ⊙= σ(gate) with gate [T, n_head, Dv] like out (gated
    // attention: Qwen3.5 / Qwen3-Next) — the same values as attention then sigmoid_mul (the
    // default runs those two); a backend may apply the gate as attention writes out.
    virtual void attention_gated(const Tensor& out, const Tensor& q, const Tensor& gate, const Tensor& k_cache,
                                 const Tensor& v_cache, const AttnPlan& plan, float scale);
    // In-place softmax over each row of x[R, C] (f32).
    virtual void softmax(const Tensor& x) = 0;
    // out[r] = argmax of row r of x[R, C] (first index on ties).
    virtual void argmax(const Tensor& x, int32_t* out) = 0;
    // The k largest non-NaN values of each row of x[R, C] (f32), by descending value and then
    // ascending index: values[r, j], ids[r, j] ([R, k] in this backend's memory); a row with fewer
    // than k non-NaN values pads with NaN and id -1. 1 <= k <= kMaxTopK. The candidates sampling
    // needs (Sampler::sample_sorted), so a step returns k ids a row instead of the vocabulary.
    static constexpr int kMaxTopK = 128;
    virtual void top_k(const Tensor& x, int k, float* values, int32_t* ids);
    // x[R, V] in place: edits[i] applied to x[edits[i].row, edits[i].id] (kernels/logit_edit.h:
    // a request's penalties and bias, so sampling can stay on the device). `edits` in host memory;
    // at most one edit per (row, id); rows and ids are checked.
    virtual void edit_logits(const Tensor& x, const LogitEdit* edits, int64_t n);
    // ids[r] = a token drawn from row r of x[R, V] (f32) with rows[r] (host memory, [R]; ids [R]
    // in this backend's memory): greedy, or temperature, top-k, top-p and min-p, then a Gumbel-max
    // draw keyed by (seed, counter) — kernels/sampling.h. cpu::sample is the reference; backends
    // draw the same tokens from the same logits. Throws on parameters out of range.
    virtual void sample(const Tensor& x, const SampleRow* rows, int32_t* ids);

    // ---- hybrid models (Qwen3.5 / Qwen3-Next). Defaults throw Unsupported until a backend
    // implements them (backend.cpp).

    // y = x ⊙ σ(gate); gate [R, C] like x, or [R, 1] (one gate per row). y may alias x.
    virtual void sigmoid_mul(const Tensor& y, const Tensor& x, const Tensor& gate);
    // x[T, n, D] in place: x · rsqrt(Σ x² + eps) · scale per head (FLA / HF l2norm, eps 1e-6).
    virtual void l2_norm(const Tensor& x, float eps, float scale);
    // y[T, n, D] = w[D] ⊙ x · rsqrt(mean(x²) + eps) ⊙ silu(z)   per head (the GDN output norm).
    virtual void rms_norm_gated(const Tensor& y, const Tensor& x, const Tensor& z, const Tensor& w, float eps);
    // Causal depthwise conv over time then SiLU, per sequence: y[t, c] = silu(Σ_{i<K} w[c, i] ·
    // x[t-K+1+i, c]); the K-1 inputs before a sequence's first token come from its conv state
    // conv_state[slot] ([n_slots, K-1, C], oldest first), which is left holding the last K-1 inputs.
    // x, y [T, C]; w [C, K] f32.
    virtual void conv1d_silu(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                             const SeqPlan& plan);
    // conv1d_silu, then l2_norm (eps) of y's first 2·n_qk heads of `dim` channels seen as [T, n, dim]
    // — q, the first n_qk, scaled by q_scale; k, the next n_qk, by 1 — the Gated DeltaNet layer's
    // front. The default runs those three ops in turn; a backend may fuse them with the same result.
    virtual void conv1d_silu_qk_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                                     const SeqPlan& plan, int64_t n_qk, int64_t dim, float eps, float q_scale);
    // Gates of the delta rule, elementwise over [T, nv]: beta = σ(b);
    // g = neg_exp_a · softplus(a + dt_bias) with neg_exp_a = −exp(A_log) [nv].
    virtual void gdn_gates(const Tensor& beta, const Tensor& g, const Tensor& b, const Tensor& a,
                           const Tensor& neg_exp_a, const Tensor& dt_bias);
    // The gated delta rule per sequence and value head h (key head per GdnParams), state
    // S [dk, dv] = state[slot, h] (f32, [n_slots, nv, dk, dv]), updated in place:
    //   S ← exp(g_t)·S;  u = Sᵀk_t;  S ← S + k_t ⊗ β_t(v_t − u);  o_t = Sᵀq_t
    // q, k [T, nk, dk] (already l2-normed, q scaled); v, o [T, nv, dv]; g, beta [T, nv].
    virtual void gated_delta_rule(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& g, const Tensor& beta, const Tensor& state, const SeqPlan& plan,
                                  const GdnParams& p);
    // Whether gdn_decode_step is available for these shapes (a fused kernel); the default: no.
    virtual bool fuses_gdn_decode(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k) const;
    // The Gated DeltaNet layer's core for a step where every sequence adds exactly one token
    // (T = plan.n_seqs), fused: conv1d_silu of mixed [T, C] (C = 2·nk·dk + nv·dv, q | k | v),
    // l2_norm of q (scaled 1/√dk) and k, gdn_gates from b, a [T, nv], gated_delta_rule, and
    // rms_norm_gated with z [T, nv·dv] and norm_w [dv] into y [T, nv·dv] — the same result as
    // those ops in sequence, the conv and recurrent states updated alike. Only where
    // fuses_gdn_decode says so (the default throws Unsupported).
    // With w_out (and out_parts; both null otherwise): the layer's out-projection too, where
    // gdn_decode_out_parts said P > 0 for it — out_parts [P, T, H] gets P partial products whose
    // sum in order is y · w_outᵀ (add_rms_norm takes them as its delta); y is written as well.
    virtual void gdn_decode_step(const Tensor& y, const Tensor& mixed, const Tensor& z, const Tensor& b,
                                 const Tensor& a, const Tensor& conv_w, const Tensor& conv_state,
                                 const Tensor& neg_exp_a, const Tensor& dt_bias, const Tensor& rec_state,
                                 const Tensor& norm_w, float eps, const SeqPlan& plan, const GdnParams& p,
                                 const Tensor* w_out, const Tensor* out_parts);
    // Whether gdn_decode_step can fuse the out-projection w_out [H, nv·dv] for a step of n_seqs
    // sequences: the number of parts P it leaves, 0 for no (the default).
    virtual int gdn_decode_out_parts(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k, int64_t n_seqs,
                                     const Tensor& w_out) const;
    // The most experts and slots a token moe_topk / moe_experts take (a model runs its shared
    // expert as one more routed expert only within them).
    virtual MoeLimits moe_limits() const;
    // Router: p = softmax(logits[T, E]) in f32, the r.k largest per row into ids/weights
    // [T, r.slots()] (descending; ties to the lower index), renormalised to sum 1 when
    // r.renormalize; with r.shared logits are [T, E + 1] and each row ends with (E, σ(g)).
    virtual void moe_topk(const Tensor& logits, const MoeRouting& r, int32_t* ids, float* weights);
    // y[T, H] = Σ_j weights[t, j] · down_e(silu(gate_e·x_t) ⊙ up_e·x_t), e = ids[t, j], computed
    // grouped by expert (each expert's tokens gathered into one matmul), not token by token.
    // When ids come from the moe_topk call just before, x must be the tensor routed there, unchanged
    // since (the CUDA backend then reads x ahead of the ids).
    virtual void moe_experts(const Tensor& y, const Tensor& x, const MoeWeights& w, const int32_t* ids,
                             const float* weights, int k);
};

// Backend::conv1d_silu_qk_norm's arguments: y a 2-D f32 [T, C] holding 2·n_qk heads of dim (n_qk,
// dim >= 1) in front; throws Error otherwise. Its default and the backends that fuse it check alike.
void check_conv1d_silu_qk_norm(const Tensor& y, int64_t n_qk, int64_t dim);

// The CPU backend (multi-threaded over ThreadPool::global()).
std::unique_ptr<Backend> make_cpu_backend();

// The inverse frequencies [rot_dims / 2] that rope() applies for p: p.inv_freq when set, else
// theta with linear / llama3 scaling computed in f32 exactly as HF transformers does. Every
// backend uses this so they rotate alike (rot_dims must be > 0 here).
void rope_inv_freq(const RopeParams& p, float* inv_freq);

}  // namespace tessera
