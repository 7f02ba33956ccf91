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
#include "models/layers/attention.h"
#include "models/layers/lm_head.h"
#include "models/layers/moe.h"
#include "models/registry.h"
#include "runtime/kv_cache.h"
#include "runtime/weight_store.h"

namespace tessera {

namespace {

struct LlamaLayer {
    Tensor attn_norm, ffn_norm;  // [H] f32
    Attention attn;              // GQA + RoPE, optional q/k/v bias (Qwen2) and q/k norm (Qwen3)
    SwiGluMlp mlp;               // [F, H], [F, H], [H, F]
};

class Llama final : public Model {
public:
    Llama(const ModelConfig& cfg, WeightStore& w, Backend& be, int64_t max_tokens) : Model(cfg, be, max_tokens) {
        const int64_t H = cfg.hidden, F = cfg.ffn_hidden;
        head_ = LmHead::load(w, cfg);
        for (int64_t il = 0; il < cfg.n_layers; ++il) {
            const std::string p = fmt::format("blk.{}.", il);
            LlamaLayer L;
            L.attn_norm = w.vector_f32(p + "attn_norm.weight", H);
            L.attn = Attention::load(w, cfg, il);
            L.ffn_norm = w.vector_f32(p + "ffn_norm.weight", H);
            L.mlp = SwiGluMlp::load(w, p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight", F, H);
            layers_.push_back(L);
        }
        rope_ = rope_params(cfg_);
        const int64_t floats = max_tokens * (4 * H + Attention::activation_floats(cfg) + 2 * F) + 4096 +
                               LmHead::activation_floats(cfg, be);
        arena_ = Arena("activations", size_t(floats) * sizeof(float) + 16 * 64, be.memory());
        MemLog::global().set("activations", int64_t(arena_.capacity()));
    }

    CacheSpec cache_spec() const override {
        CacheSpec s;
        s.attn_layers = cfg_.n_layers;
        s.n_kv_heads = cfg_.n_kv_heads;
        s.head_dim = cfg_.head_dim;
        return s;
    }

    void check_batch(const Batch& b, const Caches& caches) const override {
        TS_CHECK(caches.kv, "{}: forward needs a KV cache", cfg_.arch);
        check_tokens(b);
    }

    void run(const StagedBatch& sb, const Caches& caches, const LogitsOut& out) override {
        KvCache& cache = *caches.kv;
        const int64_t T = sb.n_tokens, H = cfg_.hidden;
        arena_.reset();
        Tensor x = arena_.tensor(DType::F32, {T, H});  // residual stream
        Tensor h = arena_.tensor(DType::F32, {T, H});  // normed input of a block
        Tensor o = arena_.tensor(DType::F32, {T, H});  // a block's output
        be_.embed(x, head_.tok_embd, sb.tokens);
        // Each residual add is fused with the norm that reads its result (add_rms_norm: x += o,
        // h = norm(x)); the last layer's add feeds the lm_head's own norm.
        if (!layers_.empty()) be_.rms_norm(h, x, layers_[0].attn_norm, cfg_.rms_eps);
        for (int64_t il = 0; il < cfg_.n_layers; ++il) {
            const LlamaLayer& L = layers_[size_t(il)];
            const size_t mark = arena_.used();
            L.attn.forward(be_, arena_, cfg_, rope_, h, o, cache.k(il), cache.v(il), sb);
            be_.add_rms_norm(x, h, o, L.ffn_norm, cfg_.rms_eps);
            arena_.rewind(mark);
            L.mlp.forward(be_, arena_, h, o);
            if (il + 1 < cfg_.n_layers) be_.add_rms_norm(x, h, o, layers_[size_t(il + 1)].attn_norm, cfg_.rms_eps);
            else be_.add(x, x, o);
            arena_.rewind(mark);
        }
        head_.logits(be_, arena_, cfg_, x, sb, out);
        note_peak();
    }

private:
    void note_peak() { MemLog::global().peak("activations_peak", int64_t(arena_.peak())); }

    LmHead head_;
    std::vector<LlamaLayer> layers_;
    RopeParams rope_;
    Arena arena_;
};

}  // namespace

std::unique_ptr<Model> make_llama(const ModelConfig& cfg, WeightStore& weights, Backend& be, int64_t max_batch_tokens) {
    return std::make_unique<Llama>(cfg, weights, be, max_batch_tokens);
}

}  // namespace tessera
