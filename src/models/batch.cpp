#include <algorithm>

#include "core/status.h"
#include "models/model.h"
#include "runtime/kv_cache.h"

namespace tessera {

void BatchBuilder::add(SeqBlocks& seq, const int32_t* tokens, int64_t n, int want_logits) {
    const int64_t bs = batch_.block_size;  // 0: the model keeps no KV cache
    TS_ASSERT(bs == 0 || int64_t(seq.blocks.size()) * bs >= seq.n_tokens + n);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t pos = seq.n_tokens + i;
        if (want_logits == 2 || (want_logits == 1 && i == n - 1))
            batch_.logit_rows.push_back(int32_t(batch_.tokens.size()));
        batch_.tokens.push_back(tokens[i]);
        batch_.positions.push_back(int32_t(pos));
        batch_.slots.push_back(bs ? seq.slot(pos, bs) : -1);
    }
    seq.n_tokens += n;
    batch_.q_start.push_back(int32_t(batch_.tokens.size()));
    batch_.kv_len.push_back(int32_t(seq.n_tokens));
    batch_.state_slots.push_back(seq.state_slot);
    tables_.push_back(seq.blocks);
}

Batch BatchBuilder::finish() {
    size_t maxb = 1;
    for (const auto& t : tables_) maxb = std::max(maxb, t.size());
    batch_.max_blocks = int(maxb);
    batch_.block_table.assign(tables_.size() * maxb, 0);
    for (size_t s = 0; s < tables_.size(); ++s)
        std::copy(tables_[s].begin(), tables_[s].end(), batch_.block_table.begin() + long(s * maxb));
    return std::move(batch_);
}

}  // namespace tessera
