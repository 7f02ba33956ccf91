// Model: the forward step shared by every architecture — checks, staging, and decode graphs.
#include "models/model.h"

#include <algorithm>

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

void Model::check_out(const Batch& batch, const LogitsOut& out) const {
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
}

void Model::forward(const Batch& batch, const Caches& caches, const LogitsOut& out) {
    TS_CHECK(pending_.empty(), "forward: {} launched step(s) not collected", pending_.size());
    launch(batch, caches, out);
    collect();
}

Batch Model::chained_on_host(const Batch& batch) {
    const Pending& prev = pending_.back();
    const int32_t* ids = prev.out.argmax ? prev.out.argmax : prev.out.tokens;
    if (prev.ids) {  // still on its way from the device
        be_.wait_mark(prev.mark);
        ids = prev.ids;
    }
    Batch b = batch;
    std::copy_n(ids, b.tokens.size(), b.tokens.begin());
    check_tokens(b);  // the ids the last step chose, checked as any batch's
    return b;
}

void Model::launch(const Batch& batch, const Caches& caches, const LogitsOut& out, bool chain) {
    TS_CHECK(pending_.size() < 2, "launch: two steps are in flight already (collect one first)");
    check_batch(batch, caches);
    check_out(batch, out);
    const int n = batch.n_seqs();
    if (chain) {
        TS_CHECK(!pending_.empty(), "launch: a chained step needs a step launched before it");
        const Pending& prev = pending_.back();
        const bool tokens_out = prev.out.argmax || (prev.out.sample && prev.out.tokens);
        TS_CHECK(tokens_out && prev.out.n_edits == 0 && prev.rows == n && batch.n_tokens() == n,
                 "launch: a chained step of {} sequences ({} tokens) after a step of {} rows{}", n, batch.n_tokens(),
                 prev.rows, tokens_out ? "" : " without token output (argmax or a device draw)");
    }
    Pending p;
    p.out = out;
    p.rows = int64_t(batch.logit_rows.size());
    Batch on_host;  // a chained batch's tokens, where they cannot come from the device
    const Batch* b = &batch;
    if (graphs_) {
        DecodeGraphs::Launch l;
        l.chain = chain && graphs_->holds_ids(n);
        if (chain && !l.chain) b = &(on_host = chained_on_host(batch));
        if (graphs_->forward(*this, *b, caches, out, &l)) {
            p.ids = l.ids;
            p.mark = l.mark;
            pending_.push_back(p);
            return;
        }
        if (l.chain) b = &(on_host = chained_on_host(batch));  // not a graph's step after all
    } else if (chain) {
        b = &(on_host = chained_on_host(batch));
    }
    run(stager_.stage(*b, be_), caches, out);
    pending_.push_back(p);
}

void Model::collect() {
    TS_CHECK(!pending_.empty(), "collect: no launched step");
    const Pending p = pending_.front();
    pending_.pop_front();
    if (!p.ids) return;  // finished inside launch()
    be_.wait_mark(p.mark);
    std::copy_n(p.ids, p.rows, p.out.argmax ? p.out.argmax : p.out.tokens);
}

}  // namespace tessera
