#include "models/layers/lm_head.h"

#include <cstring>

#include "runtime/weight_store.h"

namespace tessera {

LmHead LmHead::load(WeightStore& w, const ModelConfig& c) {
    LmHead h;
    h.tok_embd = w.matrix("token_embd.weight", c.vocab_size, c.hidden);
    h.output_norm = w.vector_f32("output_norm.weight", c.hidden);
    h.output = c.tied_embeddings || !w.source().has("output.weight") ? h.tok_embd
                                                                      : w.matrix("output.weight", c.vocab_size, c.hidden);
    return h;
}

void LmHead::logits(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Batch& b,
                    float* out) const {
    const int64_t n_out = int64_t(b.logit_rows.size()), H = c.hidden;
    if (n_out == 0) return;
    Tensor rows = arena.tensor(DType::F32, {n_out, H});
    for (int64_t i = 0; i < n_out; ++i)
        std::memcpy(rows.ptr<float>() + i * H, x.ptr<float>() + int64_t(b.logit_rows[size_t(i)]) * H,
                    size_t(H) * sizeof(float));
    be.rms_norm(rows, rows, output_norm, c.rms_eps);
    be.matmul(Tensor(out, DType::F32, {n_out, c.vocab_size}), rows, output);
}

RopeParams rope_params(const ModelConfig& c) {
    RopeParams r;
    r.rot_dims = int(c.rot_dims);
    r.theta = c.rope_theta;
    r.style = c.rope_style;
    r.inv_freq = c.inv_freq.empty() ? nullptr : c.inv_freq.data();
    return r;
}

}  // namespace tessera
