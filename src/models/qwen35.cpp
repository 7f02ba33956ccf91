// Hybrid Gated DeltaNet models — Qwen3.5 (qwen35), Qwen3.5/3.6-MoE (qwen35moe), Qwen3-Next
// (qwen3next): most layers mix tokens with a Gated DeltaNet, every few layers with gated full
// attention; the FFN is a sparse MoE with a shared expert (or a dense SwiGLU MLP).
//   x = embed(tokens)
//   per layer:  x += mixer(rms_norm(x))        mixer = GatedDeltaNet | gated Attention
//               x += ffn(rms_norm(x))          ffn   = MoE block | SwiGLU MLP
//   logits = lm_head(rms_norm(x))
// Norm weights follow llama.cpp's convention (the zero-centred 1 + w already added).
#include <cstring>

#include <fmt/format.h>

#include "core/memlog.h"
#include "core/status.h"
#include "models/layers/attention.h"
#include "models/layers/lm_head.h"
#include "models/layers/gated_deltanet.h"
#include "models/layers/moe.h"
#include "models/registry.h"
#include "runtime/kv_cache.h"
#include "runtime/state_cache.h"
#include "runtime/weight_store.h"

namespace tessera {

namespace {

struct HybridLayer {
    Tensor attn_norm, post_norm;  // [H] f32
    int64_t cache_index = 0;      // index among attention layers (KV) or recurrent layers (state)
    bool attention = false;
    Attention attn;
    GatedDeltaNet gdn;
    bool moe = false;
    MoeBlock moe_block;
    SwiGluMlp mlp;
};

class Qwen35 final : public Model {
public:
    Qwen35(const ModelConfig& cfg, WeightStore& w, Backend& be, int64_t max_tokens) : Model(cfg, be, max_tokens) {
        const int64_t H = cfg.hidden;
        TS_CHECK(int64_t(cfg.full_attention.size()) == cfg.n_layers, "{}: layer types missing", cfg.arch);
        head_ = LmHead::load(w, cfg);
        int64_t n_attn = 0, n_rec = 0;
        for (int64_t il = 0; il < cfg.n_layers; ++il) {
            const std::string p = fmt::format("blk.{}.", il);
            HybridLayer L;
            L.attn_norm = w.vector_f32(p + "attn_norm.weight", H);
            L.post_norm = w.vector_f32(p + "post_attention_norm.weight", H);
            L.attention = cfg.is_attention_layer(il);
            if (L.attention) {
                L.attn = Attention::load(w, cfg, il);
                L.cache_index = n_attn++;
            } else {
                L.gdn = GatedDeltaNet::load(w, cfg, il);
                L.cache_index = n_rec++;
            }
            L.moe = cfg.is_moe_layer(il);
            if (L.moe) {
                L.moe_block = MoeBlock::load(w, cfg, il);
            } else {
                L.mlp = SwiGluMlp::load(w, p + "ffn_gate.weight", p + "ffn_up.weight", p + "ffn_down.weight",
                                        cfg.ffn_hidden, H);
            }
            layers_.push_back(std::move(L));
        }
        rope_ = rope_params(cfg_);
        // Per token: residual, normed input, mixer/FFN output, the largest mixer and FFN scratch.
        const int64_t mixer = std::max(n_attn ? Attention::activation_floats(cfg) : 0,
                                       n_rec ? GatedDeltaNet::activation_floats(cfg) : 0);
        const int64_t ffn = std::max(2 * cfg.ffn_hidden, cfg.n_experts ? MoeBlock::activation_floats(cfg) : 0);
        const int64_t floats = max_tokens * (4 * H + mixer + ffn) + 4096 + LmHead::activation_floats(cfg, be);
        arena_ = Arena("activations", size_t(floats) * sizeof(float) + 64 * 64, be.memory());
        MemLog::global().set("activations", int64_t(arena_.capacity()));
    }

    CacheSpec cache_spec() const override {
        CacheSpec s;
        s.attn_layers = cfg_.n_attention_layers();
        s.n_kv_heads = cfg_.n_kv_heads;
        s.head_dim = cfg_.head_dim;
        s.state_layers = cfg_.n_recurrent_layers();
        s.conv_channels = 2 * cfg_.gdn_k_heads * cfg_.gdn_dk + cfg_.gdn_v_heads * cfg_.gdn_dv;
        s.conv_k = cfg_.conv_kernel;
        s.n_v_heads = cfg_.gdn_v_heads;
        s.dk = cfg_.gdn_dk;
        s.dv = cfg_.gdn_dv;
        return s;
    }

    void check_batch(const Batch& b, const Caches& caches) const override {
        TS_CHECK(caches.kv && caches.state, "{}: forward needs a KV cache and state slots", cfg_.arch);
        check_tokens(b);
        for (int32_t s : b.state_slots)
            TS_CHECK(s >= 0 && s < caches.state->shape().n_slots, "sequence without a state slot ({})", s);
    }

    void run(const StagedBatch& sb, const Caches& caches, const LogitsOut& out) override {
        const int64_t T = sb.n_tokens, H = cfg_.hidden;
        arena_.reset();

        Tensor x = arena_.tensor(DType::F32, {T, H});  // residual stream
        Tensor h = arena_.tensor(DType::F32, {T, H});  // normed input of a block
        Tensor o = arena_.tensor(DType::F32, {T, H});  // a block's output
        be_.embed(x, head_.tok_embd, sb.tokens);
        // Each residual add is fused with the norm that reads its result (add_rms_norm: x += o,
        // h = norm(x)); the last layer's add feeds the lm_head's own norm.
        if (!layers_.empty()) be_.rms_norm(h, x, layers_[0].attn_norm, cfg_.rms_eps);
        for (size_t il = 0; il < layers_.size(); ++il) {
            const HybridLayer& L = layers_[il];
            const size_t mark = arena_.used();
            Tensor mixer_out = o;  // or the GDN decode step's partial products (GatedDeltaNet::forward)
            if (L.attention)
                L.attn.forward(be_, arena_, cfg_, rope_, h, o, caches.kv->k(L.cache_index), caches.kv->v(L.cache_index), sb);
            else
                mixer_out = L.gdn.forward(be_, arena_, cfg_, h, o, caches.state->conv(L.cache_index),
                                          caches.state->recurrent(L.cache_index), sb.seq);
            be_.add_rms_norm(x, h, mixer_out, L.post_norm, cfg_.rms_eps);
            arena_.rewind(mark);
            if (L.moe)
                L.moe_block.forward(be_, arena_, cfg_, h, o);
            else
                L.mlp.forward(be_, arena_, h, o);
            if (il + 1 < layers_.size()) be_.add_rms_norm(x, h, o, layers_[il + 1].attn_norm, cfg_.rms_eps);
            else be_.add(x, x, o);
            arena_.rewind(mark);
        }
        head_.logits(be_, arena_, cfg_, x, sb, out);
        MemLog::global().peak("activations_peak", int64_t(arena_.peak()));
    }

private:
    LmHead head_;
    std::vector<HybridLayer> layers_;
    RopeParams rope_;
    Arena arena_;
};

}  // namespace

std::unique_ptr<Model> make_qwen35(const ModelConfig& cfg, WeightStore& weights, Backend& be, int64_t max_batch_tokens) {
    return std::make_unique<Qwen35>(cfg, weights, be, max_batch_tokens);
}

}  // namespace tessera
