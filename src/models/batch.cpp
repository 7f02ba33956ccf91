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

StagedBatch BatchStager::stage(const Batch& b, Backend& be) {
    StagedBatch s;
    s.n_tokens = b.n_tokens();
    s.n_logits = int64_t(b.logit_rows.size());
    s.attn = b.attn_plan();
    s.seq = b.seq_plan();
    if (be.device() == Device::CPU) {  // the host vectors are the backend's memory
        s.tokens = b.tokens.data();
        s.positions = b.positions.data();
        s.slots = b.slots.data();
        s.logit_rows = b.logit_rows.data();
        return s;
    }
    size_t need = 0;
    for (const auto* v : {&b.tokens, &b.positions, &b.slots, &b.logit_rows, &b.q_start, &b.kv_len, &b.block_table,
                          &b.state_slots})
        need += (v->size() * sizeof(int32_t) + 255) / 256 * 256;
    if (need > arena_.capacity()) {
        be.synchronize();  // the previous step's ops may still read the old plan
        arena_ = Arena("batch plan", std::max(need, 2 * arena_.capacity()), be.memory());
    }
    arena_.reset();
    auto put = [&](const std::vector<int32_t>& v) -> const int32_t* {
        if (v.empty()) return nullptr;
        auto* d = static_cast<int32_t*>(arena_.alloc(v.size() * sizeof(int32_t), 256));
        be.copy_in(d, v.data(), v.size() * sizeof(int32_t));
        return d;
    };
    s.tokens = put(b.tokens);
    s.positions = put(b.positions);
    s.slots = put(b.slots);
    s.logit_rows = put(b.logit_rows);
    s.attn.q_start = put(b.q_start);
    s.attn.kv_len = put(b.kv_len);
    s.attn.block_table = put(b.block_table);
    s.seq.q_start = s.attn.q_start;
    s.seq.slot = put(b.state_slots);
    return s;
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
