#include "runtime/session.h"

#include <algorithm>

#include "core/status.h"

namespace tessera {

Session::Session(Model& model, int64_t n_blocks, int64_t block_size, int64_t max_seqs, DType kv_dtype)
    : model_(model) {
    const CacheSpec spec = model.cache_spec();
    if (spec.attn_layers > 0) {
        KvCacheShape s;
        s.n_layers = spec.attn_layers;
        s.n_blocks = n_blocks;
        s.block_size = block_size;
        s.n_kv_heads = spec.n_kv_heads;
        s.head_dim = spec.head_dim;
        s.dtype = kv_dtype;
        kv_ = std::make_unique<KvCache>(s, model.backend().memory());
    }
    if (spec.state_layers > 0) {
        StateCacheShape s;
        s.n_layers = spec.state_layers;
        s.n_slots = max_seqs;
        s.conv_channels = spec.conv_channels;
        s.conv_k = spec.conv_k;
        s.n_v_heads = spec.n_v_heads;
        s.dk = spec.dk;
        s.dv = spec.dv;
        state_ = std::make_unique<StateCache>(s, model.backend());
    }
}

int Session::add_sequence() {
    SeqBlocks s;
    if (state_) s.state_slot = state_->alloc();
    seqs_.push_back(std::move(s));
    return int(seqs_.size()) - 1;
}

void Session::reset(int seq) {
    SeqBlocks& s = seqs_.at(size_t(seq));
    if (kv_) s.release(*kv_);
    s.n_tokens = 0;
    if (state_ && s.state_slot >= 0) {
        state_->release(s.state_slot);
        s.state_slot = state_->alloc();  // zeroed
    }
}

void Session::check_room(const SeqBlocks& s, int64_t n) const {
    const int64_t max_ctx = model_.config().max_ctx;
    TS_CHECK(max_ctx <= 0 || s.n_tokens + n <= max_ctx, "sequence of {} tokens exceeds the model's context length {}",
             s.n_tokens + n, max_ctx);
}

std::vector<float> Session::feed(int seq, const std::vector<int32_t>& tokens, bool all_logits) {
    TS_CHECK(!tokens.empty(), "feed: no tokens");
    SeqBlocks& s = seqs_.at(size_t(seq));
    check_room(s, int64_t(tokens.size()));
    if (kv_) s.reserve(*kv_, int64_t(tokens.size()));
    const int64_t V = model_.config().vocab_size, chunk = model_.max_batch_tokens();
    const int block_size = kv_ ? int(kv_->shape().block_size) : 0;
    std::vector<float> out(size_t(all_logits ? int64_t(tokens.size()) * V : V));
    for (int64_t begin = 0; begin < int64_t(tokens.size()); begin += chunk) {
        const int64_t n = std::min<int64_t>(chunk, int64_t(tokens.size()) - begin);
        const bool last = begin + n == int64_t(tokens.size());
        BatchBuilder bb(block_size);
        bb.add(s, tokens.data() + begin, n, all_logits ? 2 : (last ? 1 : 0));
        float* dst = all_logits ? out.data() + begin * V : out.data();
        model_.forward(bb.finish(), caches(), dst);
    }
    return out;
}

std::vector<float> Session::decode(const std::vector<int>& seq_ids, const std::vector<int32_t>& tokens) {
    TS_CHECK(seq_ids.size() == tokens.size() && !tokens.empty(), "decode: {} sequences but {} tokens", seq_ids.size(),
             tokens.size());
    TS_CHECK(int64_t(tokens.size()) <= model_.max_batch_tokens(), "decode batch of {} exceeds {}", tokens.size(),
             model_.max_batch_tokens());
    BatchBuilder bb(kv_ ? int(kv_->shape().block_size) : 0);
    for (size_t i = 0; i < seq_ids.size(); ++i) {
        SeqBlocks& s = seqs_.at(size_t(seq_ids[i]));
        check_room(s, 1);
        if (kv_) s.reserve(*kv_, 1);
        bb.add(s, &tokens[i], 1, 1);
    }
    std::vector<float> out(tokens.size() * size_t(model_.config().vocab_size));
    model_.forward(bb.finish(), caches(), out.data());
    return out;
}

}  // namespace tessera
