// Model: the forward step shared by every architecture — checks, staging, and decode graphs.
#include "models/model.h"

#include "core/status.h"
#include "models/decode_graphs.h"
#include "runtime/state_cache.h"

namespace tessera {

Model::Model(ModelConfig cfg, Backend& be, int64_t max_tokens) : cfg_(std::move(cfg)), be_(be), max_tokens_(max_tokens) {}
Model::~Model() = default;

void Model::enable_decode_graphs(bool on) {
    if (!on) {
        graphs_.reset();
    } else if (!graphs_) {
        graphs_ = std::make_unique<DecodeGraphs>(be_);
    }
}

void Model::check_tokens(const Batch& b) const {
    const int64_t T = b.n_tokens();
    TS_CHECK(T > 0 && T <= max_tokens_, "batch of {} tokens (this model was set up for at most {})", T, max_tokens_);
    for (int32_t id : b.tokens)
        TS_CHECK(id >= 0 && id < cfg_.vocab_size, "token id {} out of range [0, {})", id, cfg_.vocab_size);
}

void Model::forward(const Batch& batch, const Caches& caches, float* logits, int32_t* argmax) {
    LogitsOut out;
    out.host = logits;
    out.argmax = argmax;
    forward(batch, caches, out);
}

void Model::forward(const Batch& batch, const Caches& caches, const LogitsOut& out) {
    check_batch(batch, caches);
    TS_CHECK(!out.device, "forward: device logits are decode graphs' own");
    TS_CHECK(out.top_k >= 0 && out.top_k <= Backend::kMaxTopK && (out.top_k == 0 || (out.top_values && out.top_ids)),
             "forward: top_k {} (at most {}) needs both outputs", out.top_k, Backend::kMaxTopK);
    TS_CHECK(out.host || out.argmax || out.top_k > 0 || out.sample || batch.logit_rows.empty(),
             "forward: {} logit rows but nowhere to write them", batch.logit_rows.size());
    TS_CHECK(!out.sample || (out.tokens && !out.argmax && out.top_k == 0),
             "forward: sampling needs `tokens` and excludes argmax and top-k");
    TS_CHECK(out.n_edits == 0 || ((out.argmax || out.top_k > 0 || out.sample) && out.edits),
             "forward: logit edits apply only where the logits stay (argmax, top-k or sampling)");
    for (int64_t i = 0; i < out.n_edits; ++i)
        TS_CHECK(out.edits[i].row >= 0 && size_t(out.edits[i].row) < batch.logit_rows.size() &&
                     (i == 0 || out.edits[i].row >= out.edits[i - 1].row),
                 "forward: logit edit {} has row {} (of {}, in order)", i, out.edits[i].row, batch.logit_rows.size());
    if (graphs_ && graphs_->forward(*this, batch, caches, out)) return;
    run(stager_.stage(batch, be_), caches, out);
}

}  // namespace tessera
