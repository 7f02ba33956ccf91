#include "engine/pool_plan.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "core/memlog.h"
#include "core/status.h"
#include "runtime/kv_cache.h"

namespace tessera {

namespace {
constexpr int64_t kMaxSeqsDefault = 256;
constexpr int64_t kDefaultCtx = 4096;  // when the checkpoint does not say
// The context and sequence count a request stands for (its own, else the model's / the default).
int64_t asked_ctx(const PoolRequest& r) {
    return r.max_model_len > 0 ? r.max_model_len : (r.model_ctx > 0 ? r.model_ctx : kDefaultCtx);
}
int64_t asked_seqs(const PoolRequest& r) { return r.max_num_seqs > 0 ? r.max_num_seqs : kMaxSeqsDefault; }

}  // namespace

int64_t kv_bytes_per_block(const CacheSpec& spec, int64_t block_size, int64_t elem_bytes) {
    return 2 * spec.attn_layers * block_size * spec.n_kv_heads * spec.head_dim * elem_bytes;
}

int64_t state_bytes_per_slot(const CacheSpec& spec) {
    if (spec.state_layers == 0) return 0;
    const int64_t conv = (spec.conv_k - 1) * spec.conv_channels, rec = spec.n_v_heads * spec.dk * spec.dv;
    return spec.state_layers * (conv + rec) * int64_t(sizeof(float));
}

std::string PoolPlan::summary() const {
    std::string s = fmt::format("KV pool: {} blocks = {} tokens ({}); ", n_blocks, n_blocks * block_size,
                                format_bytes(kv_bytes()));
    if (slot_bytes > 0) {
        s += fmt::format("state slots: {} ({}); snapshots: {} ({}); ", n_slots, format_bytes(state_bytes()),
                         n_snapshots, format_bytes(snapshot_bytes()));
    } else {
        s += "state slots: 0; ";
    }
    s += fmt::format("max_model_len {}; max_num_seqs {}", max_model_len, max_num_seqs);
    return s;
}

PoolPlan plan_pools(const CacheSpec& spec, const PoolRequest& req) {
    TS_CHECK(req.block_size >= 1, "block size must be >= 1 (got {})", req.block_size);
    TS_CHECK(req.max_num_seqs >= 0 && req.max_model_len >= 0, "max_num_seqs / max_model_len must be >= 0");
    PoolPlan p;
    p.block_size = req.block_size;
    p.kv_block_bytes = kv_bytes_per_block(spec, req.block_size, req.kv_elem_bytes);
    p.slot_bytes = state_bytes_per_slot(spec);
    const int64_t ctx = asked_ctx(req), seqs = asked_seqs(req);
    const int64_t ctx_blocks = blocks_for(ctx, req.block_size);
    int64_t budget = req.budget_bytes;

    if (p.slot_bytes > 0) {
        const int64_t need_one = p.slot_bytes + (req.max_model_len > 0 ? ctx_blocks : 1) * p.kv_block_bytes;
        if (budget < need_one)
            fail(ErrorKind::TooLarge, "memory budget {} cannot hold one sequence: it needs {} (a {} state slot{})",
                 format_bytes(budget), format_bytes(need_one), format_bytes(p.slot_bytes),
                 req.max_model_len > 0 ? fmt::format(" and {} tokens of KV", ctx) : std::string());
        // Snapshots: a share of the budget, at least two when prefix caching is on and they fit.
        if (req.prefix_caching) {
            p.n_snapshots = int64_t(double(budget) * req.snapshot_fraction) / p.slot_bytes;
            if (p.n_snapshots < 2 && budget >= 4 * need_one) p.n_snapshots = 2;
            p.n_snapshots = std::min(p.n_snapshots, 4 * seqs + 64);
        }
        budget -= p.n_snapshots * p.slot_bytes;
        // Live slots: half of what is left (the rest is KV), or as many sequences at full length
        // as the budget holds, if more (a budget sized from need — states larger than their
        // sequences' KV — gets every asked sequence its slot); at least one, at most asked.
        const int64_t full = budget / (p.slot_bytes + ctx_blocks * p.kv_block_bytes);
        p.n_slots = std::clamp<int64_t>(std::max(budget / 2 / p.slot_bytes, full), 1, seqs);
        budget -= p.n_slots * p.slot_bytes;
        p.max_num_seqs = p.n_slots;
    } else {
        p.max_num_seqs = seqs;
    }

    if (p.kv_block_bytes > 0) {
        p.n_blocks = budget / p.kv_block_bytes;
        // Sized from need: no more blocks than every running sequence at full length (plus as much
        // again for the prefix cache to keep).
        const int64_t need = p.max_num_seqs * ctx_blocks * (req.prefix_caching ? 2 : 1);
        p.n_blocks = std::min(p.n_blocks, need);
    } else {
        p.n_blocks = p.max_num_seqs * ctx_blocks;  // no attention layers: block ids are bookkeeping only
    }
    if (p.n_blocks < 1)
        fail(ErrorKind::TooLarge, "memory budget {} holds no KV block ({} each)", format_bytes(req.budget_bytes),
             format_bytes(p.kv_block_bytes));

    const int64_t capacity = p.n_blocks * req.block_size;
    if (req.max_model_len > 0 && capacity < req.max_model_len)
        fail(ErrorKind::TooLarge,
             "max_model_len {} needs {} KV blocks ({}) but the memory budget {} holds {}: raise the budget or lower "
             "max_model_len",
             req.max_model_len, ctx_blocks, format_bytes(ctx_blocks * p.kv_block_bytes), format_bytes(req.budget_bytes),
             p.n_blocks);
    p.max_model_len = std::min(ctx, capacity);
    return p;
}

int64_t host_available_bytes() {
    std::ifstream f("/proc/meminfo");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::istringstream is(line.substr(13));
            int64_t kb = 0;
            is >> kb;
            return kb * 1024;
        }
    }
    return 0;
}

int64_t default_cpu_budget(const CacheSpec& spec, const PoolRequest& req) {
    const int64_t ctx = asked_ctx(req), seqs = asked_seqs(req);
    const int64_t slot = state_bytes_per_slot(spec);
    const double need = double(seqs) * (double(blocks_for(ctx, req.block_size)) *
                                            double(kv_bytes_per_block(spec, req.block_size, req.kv_elem_bytes)) +
                                        double(slot)) *
                        (req.prefix_caching ? 1.5 : 1.0);
    const int64_t avail = host_available_bytes();
    const double cap = avail > 0 ? double(avail) / 2 : 4.0 * (1LL << 30);
    return int64_t(std::min(need, cap));
}

}  // namespace tessera
