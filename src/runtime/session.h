// Session: one model, its KV cache and the sequences in it — what the CLI verbs drive directly
// (the engine's scheduler takes this role in the server). Prefill runs in chunks of at most
// model.max_batch_tokens() so activation memory is bounded whatever the prompt length.
#pragma once
#include <memory>
#include <vector>

#include "models/model.h"
#include "runtime/kv_cache.h"

namespace tessera {

class Session {
public:
    // Allocates a cache of `n_blocks` blocks of `block_size` tokens.
    Session(Model& model, int64_t n_blocks, int64_t block_size, DType kv_dtype = DType::F32);

    int add_sequence();  // returns a sequence id
    void reset(int seq);  // frees the sequence's blocks; it starts again at position 0
    int64_t n_tokens(int seq) const { return seqs_[size_t(seq)].n_tokens; }

    // Feeds tokens to a sequence in chunks. Returns the logits of the last token [vocab], or with
    // all_logits every token's [n, vocab] row-major.
    std::vector<float> feed(int seq, const std::vector<int32_t>& tokens, bool all_logits = false);
    // One step for several sequences at once (one token each): logits [n, vocab].
    std::vector<float> decode(const std::vector<int>& seqs, const std::vector<int32_t>& tokens);

    Model& model() { return model_; }
    KvCache& cache() { return cache_; }

private:
    Model& model_;
    KvCache cache_;
    std::vector<SeqBlocks> seqs_;
};

// Blocks needed for n_tokens positions.
inline int64_t blocks_for(int64_t n_tokens, int64_t block_size) { return (n_tokens + block_size - 1) / block_size; }

}  // namespace tessera
