// Dense decoder (llama.cpp's llama / qwen2 / qwen3): pre-norm attention with GQA and RoPE
// (optional q/k/v bias, optional per-head q/k RMSNorm), then a SwiGLU MLP.
//   x = embed(tokens)
//   per layer:  x += o_proj(attention(rope(norm_q(q)), rope(norm_k(k)), v))   on rms_norm(x)
//               x += down(silu(gate(h)) * up(h))                              on h = rms_norm(x)
//   logits = lm_head(rms_norm(x))
#include <cmath>
#include <cstring>
#include <fmt/format.h>

#include "core/memlog.h"
#include "core/status.h"
#include "models/registry.h"
#include "runtime/kv_cache.h"
#include "runtime/weight_store.h"

namespace tessera {

namespace {

struct LlamaLayer {
    Tensor attn_norm;             // [H] f32
    Tensor wq, wk, wv, wo;        // [nh*D, H], [nkv*D, H], [nkv*D, H], [H, nh*D]
    Tensor bq, bk, bv;            // optional biases, f32
    Tensor q_norm, k_norm;        // optional [D] f32 (Qwen3)
    Tensor ffn_norm;              // [H] f32
    Tensor w_gate, w_up, w_down;  // [F, H], [F, H], [H, F]
};

class Llama final : public Model {
public:
    Llama(const ModelConfig& cfg, WeightStore& w, Backend& be, int64_t max_tokens) : Model(cfg, be, max_tokens) {
        const int64_t H = cfg.hidden, D = cfg.head_dim, nh = cfg.n_heads, nkv = cfg.n_kv_heads, F = cfg.ffn_hidden;
        TS_CHECK(nh % nkv == 0, "{} query heads are not a multiple of {} kv heads", nh, nkv);
        tok_embd_ = w.matrix("token_embd.weight", cfg.vocab_size, H);
        output_norm_ = w.vector_f32("output_norm.weight", H);
        output_ = cfg.tied_embeddings || !w.source().has("output.weight") ? tok_embd_
                                                                           : w.matrix("output.weight", cfg.vocab_size, H);
        for (int64_t il = 0; il < cfg.n_layers; ++il) {
            const std::string p = fmt::format("blk.{}.", il);
            LlamaLayer L;
            L.attn_norm = w.vector_f32(p + "attn_norm.weight", H);
            L.wq = w.matrix(p + "attn_q.weight", nh * D, H);
            L.wk = w.matrix(p + "attn_k.weight", nkv * D, H);
            L.wv = w.matrix(p + "attn_v.weight", nkv * D, H);
            L.wo = w.matrix(p + "attn_output.weight", H, nh * D);
            L.bq = w.optional_vector_f32(p + "attn_q.bias", nh * D);
            L.bk = w.optional_vector_f32(p + "attn_k.bias", nkv * D);
            L.bv = w.optional_vector_f32(p + "attn_v.bias", nkv * D);
            L.q_norm = w.optional_vector_f32(p + "attn_q_norm.weight", D);
            L.k_norm = w.optional_vector_f32(p + "attn_k_norm.weight", D);
            L.ffn_norm = w.vector_f32(p + "ffn_norm.weight", H);
            L.w_gate = w.matrix(p + "ffn_gate.weight", F, H);
            L.w_up = w.matrix(p + "ffn_up.weight", F, H);
            L.w_down = w.matrix(p + "ffn_down.weight", H, F);
            layers_.push_back(L);
        }
        rope_.rot_dims = int(cfg.rot_dims);
        rope_.theta = cfg.rope_theta;
        rope_.style = cfg.rope_style;
        rope_.inv_freq = cfg_.inv_freq.empty() ? nullptr : cfg_.inv_freq.data();
        const int64_t T = max_tokens;
        const int64_t floats = T * (3 * H + 2 * nh * D + 2 * nkv * D + 2 * F) + 64 * 16;
        arena_ = Arena("activations", size_t(floats) * sizeof(float) + 16 * 64);
        MemLog::global().set("activations", int64_t(arena_.capacity()));
    }

    CacheSpec cache_spec() const override {
        CacheSpec s;
        s.attn_layers = cfg_.n_layers;
        s.n_kv_heads = cfg_.n_kv_heads;
        s.head_dim = cfg_.head_dim;
        return s;
    }

    void forward(const Batch& b, const Caches& caches, float* logits) override {
        TS_CHECK(caches.kv, "{}: forward needs a KV cache", cfg_.arch);
        KvCache& cache = *caches.kv;
        const int64_t T = b.n_tokens(), H = cfg_.hidden, D = cfg_.head_dim, nh = cfg_.n_heads,
                      nkv = cfg_.n_kv_heads, F = cfg_.ffn_hidden;
        TS_CHECK(T > 0 && T <= max_tokens_, "batch of {} tokens (this model was set up for at most {})", T, max_tokens_);
        for (int32_t id : b.tokens)
            TS_CHECK(id >= 0 && id < cfg_.vocab_size, "token id {} out of range [0, {})", id, cfg_.vocab_size);
        arena_.reset();
        const AttnPlan plan = b.attn_plan();
        const float scale = 1.0f / std::sqrt(float(D));

        Tensor x = arena_.tensor(DType::F32, {T, H});       // residual stream
        Tensor h = arena_.tensor(DType::F32, {T, H});       // normed input of a block
        Tensor q = arena_.tensor(DType::F32, {T, nh * D});
        Tensor k = arena_.tensor(DType::F32, {T, nkv * D});
        Tensor v = arena_.tensor(DType::F32, {T, nkv * D});
        Tensor attn = arena_.tensor(DType::F32, {T, nh * D});
        Tensor gate = arena_.tensor(DType::F32, {T, F});
        Tensor up = arena_.tensor(DType::F32, {T, F});

        be_.embed(x, tok_embd_, b.tokens.data());
        for (int64_t il = 0; il < cfg_.n_layers; ++il) {
            const LlamaLayer& L = layers_[size_t(il)];
            // --- attention ---
            be_.rms_norm(h, x, L.attn_norm, cfg_.rms_eps);
            be_.matmul(q, h, L.wq);
            be_.matmul(k, h, L.wk);
            be_.matmul(v, h, L.wv);
            if (!L.bq.empty()) be_.add_bias(q, L.bq);
            if (!L.bk.empty()) be_.add_bias(k, L.bk);
            if (!L.bv.empty()) be_.add_bias(v, L.bv);
            Tensor q3 = q.view({T, nh, D}), k3 = k.view({T, nkv, D}), v3 = v.view({T, nkv, D});
            if (!L.q_norm.empty()) be_.rms_norm(q3, q3, L.q_norm, cfg_.rms_eps);
            if (!L.k_norm.empty()) be_.rms_norm(k3, k3, L.k_norm, cfg_.rms_eps);
            be_.rope(q3, b.positions.data(), rope_);
            be_.rope(k3, b.positions.data(), rope_);
            be_.kv_store(cache.k(il), cache.v(il), k3, v3, b.slots.data());
            be_.attention(attn.view({T, nh, D}), q3, cache.k(il), cache.v(il), plan, scale);
            be_.matmul(h, attn, L.wo);
            be_.add(x, x, h);
            // --- MLP ---
            be_.rms_norm(h, x, L.ffn_norm, cfg_.rms_eps);
            be_.matmul(gate, h, L.w_gate);
            be_.matmul(up, h, L.w_up);
            be_.swiglu(gate, gate, up);
            be_.matmul(h, gate, L.w_down);
            be_.add(x, x, h);
        }
        // --- output: only the rows whose logits were asked for ---
        const int64_t n_out = int64_t(b.logit_rows.size());
        if (n_out == 0) return note_peak();
        Tensor rows = arena_.tensor(DType::F32, {n_out, H});
        for (int64_t i = 0; i < n_out; ++i)
            std::memcpy(rows.ptr<float>() + i * H, x.ptr<float>() + int64_t(b.logit_rows[size_t(i)]) * H,
                        size_t(H) * sizeof(float));
        be_.rms_norm(rows, rows, output_norm_, cfg_.rms_eps);
        be_.matmul(Tensor(logits, DType::F32, {n_out, cfg_.vocab_size}), rows, output_);
        note_peak();
    }

private:
    void note_peak() { MemLog::global().peak("activations_peak", int64_t(arena_.peak())); }

    Tensor tok_embd_, output_norm_, output_;
    std::vector<LlamaLayer> layers_;
    RopeParams rope_;
    Arena arena_;
};

}  // namespace

std::unique_ptr<Model> make_llama(const ModelConfig& cfg, WeightStore& weights, Backend& be, int64_t max_batch_tokens) {
    return std::make_unique<Llama>(cfg, weights, be, max_batch_tokens);
}

}  // namespace tessera
