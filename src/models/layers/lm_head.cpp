#include "models/layers/lm_head.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/status.h"
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

namespace {
// out's edits of logit rows [r0, r0 + n), applied to y [n, V] (rows re-based).
void apply_edits(Backend& be, const Tensor& y, const LogitsOut& out, int64_t r0, int64_t n) {
    if (out.n_edits == 0) return;
    const LogitEdit* b = std::lower_bound(out.edits, out.edits + out.n_edits, r0,
                                          [](const LogitEdit& e, int64_t r) { return e.row < r; });
    const LogitEdit* e = std::lower_bound(b, out.edits + out.n_edits, r0 + n,
                                          [](const LogitEdit& x, int64_t r) { return x.row < r; });
    if (b == e) return;
    std::vector<LogitEdit> chunk(b, e);
    for (LogitEdit& c : chunk) c.row -= int32_t(r0);
    be.edit_logits(y, chunk.data(), int64_t(chunk.size()));
}
}  // namespace

void deliver_logits(Backend& be, Arena& scratch, const Tensor& y, int64_t r0, const LogitsOut& out) {
    const int64_t n = y.dim(0), V = y.dim(1);
    if (out.sample && out.host) be.copy_out(out.host + r0 * V, y.data, size_t(n * V) * sizeof(float));  // raw
    apply_edits(be, y, out, r0, n);
    if (out.sample) {
        auto* ids = static_cast<int32_t*>(scratch.alloc(size_t(n) * sizeof(int32_t)));
        be.sample(y, out.sample + r0, ids);
        be.copy_out(out.tokens + r0, ids, size_t(n) * sizeof(int32_t));
    } else if (out.argmax) {
        auto* ids = static_cast<int32_t*>(scratch.alloc(size_t(n) * sizeof(int32_t)));
        be.argmax(y, ids);
        be.copy_out(out.argmax + r0, ids, size_t(n) * sizeof(int32_t));
    } else if (out.top_k > 0) {
        const size_t bytes = size_t(n) * size_t(out.top_k) * 4;
        auto* vals = static_cast<float*>(scratch.alloc(bytes));
        auto* ids = static_cast<int32_t*>(scratch.alloc(bytes));
        be.top_k(y, out.top_k, vals, ids);
        be.copy_out(out.top_values + r0 * out.top_k, vals, bytes);
        be.copy_out(out.top_ids + r0 * out.top_k, ids, bytes);
    } else {
        be.copy_out(out.host + r0 * V, y.data, size_t(n * V) * sizeof(float));
    }
}

void LmHead::logits(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const StagedBatch& b,
                    const LogitsOut& out) const {
    const int64_t n_out = b.n_logits, H = c.hidden, V = c.vocab_size;
    if (n_out == 0) return;
    Tensor rows = arena.tensor(DType::F32, {n_out, H});
    be.embed(rows, x, b.logit_rows);  // gathers the rows whose logits are wanted
    be.rms_norm(rows, rows, output_norm, c.rms_eps);
    if (out.device) {  // the caller's device tensor [n_out, V]; it copies the rows out itself
        TS_CHECK(out.device->ndim == 2 && out.device->dim(0) >= n_out && out.device->dim(1) == V,
                 "lm_head: logits tensor {} for {} rows of {}", out.device->describe(), n_out, V);
        be.matmul(out.device->slice_rows(0, n_out), rows, output);
        return;
    }
    if (be.device() == Device::CPU && !out.argmax && out.top_k == 0 && !out.sample) {
        be.matmul(Tensor(out.host, DType::F32, {n_out, V}), rows, output);
        return;
    }
    // A few rows at a time through a bounded scratch: the logits go to the host, or only their
    // argmaxes or sampled tokens (4 bytes a row instead of 4·V) or top candidates (8·top_k) do.
    for (int64_t r0 = 0; r0 < n_out; r0 += kLogitRowsPerCopy) {
        const int64_t n = std::min(kLogitRowsPerCopy, n_out - r0);
        const size_t mark = arena.used();
        Tensor y = arena.tensor(DType::F32, {n, V});
        be.matmul(y, rows.slice_rows(r0, r0 + n), output);
        deliver_logits(be, arena, y, r0, out);
        arena.rewind(mark);
    }
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
