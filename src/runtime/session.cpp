#include "runtime/session.h"

#include <algorithm>

#include "core/memlog.h"
#include "core/status.h"

namespace tessera {

namespace {
KvCacheShape cache_shape(const Model& m, int64_t n_blocks, int64_t block_size, DType dtype) {
    KvCacheShape s;
    s.n_layers = m.n_attention_layers();
    s.n_blocks = n_blocks;
    s.block_size = block_size;
    s.n_kv_heads = m.config().n_kv_heads;
    s.head_dim = m.config().head_dim;
    s.dtype = dtype;
    return s;
}
}  // namespace

Session::Session(Model& model, int64_t n_blocks, int64_t block_size, DType kv_dtype)
    : model_(model), cache_(cache_shape(model, n_blocks, block_size, kv_dtype)) {}

int Session::add_sequence() {
    seqs_.emplace_back();
    return int(seqs_.size()) - 1;
}

void Session::reset(int seq) { seqs_.at(size_t(seq)).release(cache_); }

std::vector<float> Session::feed(int seq, const std::vector<int32_t>& tokens, bool all_logits) {
    TS_CHECK(!tokens.empty(), "feed: no tokens");
    SeqBlocks& s = seqs_.at(size_t(seq));
    const int64_t V = model_.config().vocab_size, max_ctx = model_.config().max_ctx;
    TS_CHECK(max_ctx <= 0 || s.n_tokens + int64_t(tokens.size()) <= max_ctx,
             "sequence of {} tokens exceeds the model's context length {}", s.n_tokens + int64_t(tokens.size()),
             max_ctx);
    s.reserve(cache_, int64_t(tokens.size()));
    const int64_t chunk = model_.max_batch_tokens();
    std::vector<float> out(size_t(all_logits ? int64_t(tokens.size()) * V : V));
    for (int64_t begin = 0; begin < int64_t(tokens.size()); begin += chunk) {
        const int64_t n = std::min<int64_t>(chunk, int64_t(tokens.size()) - begin);
        const bool last = begin + n == int64_t(tokens.size());
        BatchBuilder bb(int(cache_.shape().block_size));
        bb.add(s, tokens.data() + begin, n, all_logits ? 2 : (last ? 1 : 0));
        Batch b = bb.finish();
        float* dst = all_logits ? out.data() + begin * V : out.data();
        model_.forward(b, cache_, dst);
    }
    return out;
}

std::vector<float> Session::decode(const std::vector<int>& seq_ids, const std::vector<int32_t>& tokens) {
    TS_CHECK(seq_ids.size() == tokens.size() && !tokens.empty(), "decode: {} sequences but {} tokens", seq_ids.size(),
             tokens.size());
    TS_CHECK(int64_t(tokens.size()) <= model_.max_batch_tokens(), "decode batch of {} exceeds {}", tokens.size(),
             model_.max_batch_tokens());
    BatchBuilder bb(int(cache_.shape().block_size));
    for (size_t i = 0; i < seq_ids.size(); ++i) {
        SeqBlocks& s = seqs_.at(size_t(seq_ids[i]));
        const int64_t max_ctx = model_.config().max_ctx;
        TS_CHECK(max_ctx <= 0 || s.n_tokens + 1 <= max_ctx, "sequence reached the model's context length {}", max_ctx);
        s.reserve(cache_, 1);
        bb.add(s, &tokens[i], 1, 1);
    }
    Batch b = bb.finish();
    std::vector<float> out(tokens.size() * size_t(model_.config().vocab_size));
    model_.forward(b, cache_, out.data());
    return out;
}

}  // namespace tessera
