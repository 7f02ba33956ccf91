#include "engine/scheduler.h"

#include <algorithm>

#include "core/status.h"

namespace tessera {

Scheduler::Scheduler(const SchedulerConfig& cfg) : cfg_(cfg), pool_(cfg.n_blocks, cfg.block_size, cfg.prefix_caching) {
    TS_CHECK(cfg.max_num_seqs >= 1, "scheduler: max_num_seqs must be >= 1");
    TS_CHECK(cfg.align >= 1 && (cfg.align == 1 || cfg.align % cfg.block_size == 0),
             "scheduler: alignment {} must be 1 or a multiple of the block size {}", cfg.align, cfg.block_size);
    TS_CHECK(cfg.max_num_batched_tokens >= cfg.align,
             "max_num_batched_tokens {} must be at least the prefill alignment {}", cfg.max_num_batched_tokens,
             cfg.align);
    TS_CHECK(cfg.snapshot_interval == 0 || cfg.snapshot_interval % cfg.align == 0,
             "snapshot interval {} must be a multiple of {}", cfg.snapshot_interval, cfg.align);
    if (cfg.has_state)
        for (int64_t i = cfg.max_num_seqs - 1; i >= 0; --i) free_slots_.push_back(int32_t(i));
    if (cfg.has_state && cfg.prefix_caching && cfg.n_snapshots > 0)
        snaps_ = std::make_unique<SnapshotPool>(int32_t(cfg.max_num_seqs), cfg.n_snapshots);
}

void Scheduler::insert_waiting(Sequence* s) {
    auto it = std::upper_bound(waiting_.begin(), waiting_.end(), s,
                               [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
    waiting_.insert(it, s);
}

void Scheduler::add(Sequence* s) {
    TS_ASSERT(!s->tokens.empty() && s->kv.blocks.empty() && s->computed() == 0);
    s->running = false;
    insert_waiting(s);
}

void Scheduler::release(Sequence& s) {
    pool_.release(s.kv.blocks);
    s.kv.blocks.clear();
    s.kv.n_tokens = 0;
    s.n_registered = 0;
    if (s.kv.state_slot >= 0) {
        free_slots_.push_back(s.kv.state_slot);
        s.kv.state_slot = -1;
    }
    if (s.pending_snapshot >= 0) {  // the decode-time snapshot becomes findable now
        snaps_->publish(s.pending_snapshot, s.pending_hash);
        s.pending_snapshot = -1;
    }
}

void Scheduler::finish(Sequence* s) {
    if (s->running) {
        running_.erase(std::remove(running_.begin(), running_.end(), s), running_.end());
    } else {
        waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), s), waiting_.end());
    }
    release(*s);
    s->running = false;
}

void Scheduler::preempt(Sequence* s, StepPlan& plan) {
    running_.erase(std::remove(running_.begin(), running_.end(), s), running_.end());
    release(*s);
    s->running = false;
    insert_waiting(s);
    plan.preempted.push_back(s);
    ++preemptions_;
}

int64_t Scheduler::prompt_snapshot_point(const Sequence& s) const {
    // The last aligned point of the prompt that leaves at least one token to compute: the next
    // turn of a conversation starts with this prompt.
    return (s.n_prompt - 1) / cfg_.align * cfg_.align;
}

int64_t Scheduler::chunk(const Sequence& s, int64_t budget) const {
    if (s.credit == 0 || budget <= 0) return 0;
    const int64_t start = s.computed(), total = int64_t(s.tokens.size());
    int64_t end = std::min(total, start + budget);
    if (end < total) end = end / cfg_.align * cfg_.align;
    if (snaps_ && end - start > 1) {  // stop at the next snapshot point inside the prefill
        int64_t next = total;
        if (cfg_.snapshot_interval > 0) next = (start / cfg_.snapshot_interval + 1) * cfg_.snapshot_interval;
        const int64_t p = prompt_snapshot_point(s);
        if (p > start) next = std::min(next, p);
        end = std::min(end, next);
    }
    return std::max<int64_t>(0, end - start);
}

void Scheduler::ensure_hashes(Sequence& s, int64_t n_blocks) {
    const int64_t bs = cfg_.block_size;
    while (int64_t(s.hashes.size()) < n_blocks) {
        const int64_t b = int64_t(s.hashes.size());
        const uint64_t parent = b ? s.hashes.back() : 0;
        s.hashes.push_back(block_hash(parent, s.tokens.data() + b * bs, bs));
    }
}

int32_t Scheduler::take_cached_prefix(Sequence& s) {
    if (!cfg_.prefix_caching) return -1;
    const int64_t bs = cfg_.block_size;
    // Leave at least one token to compute: its logits give the next token.
    const int64_t max_blocks = (int64_t(s.tokens.size()) - 1) / bs;
    ensure_hashes(s, max_blocks);
    std::vector<int32_t> got;
    int64_t best = 0;  // blocks usable
    int32_t snapshot = -1;
    for (int64_t b = 0; b < max_blocks; ++b) {
        const auto blk = pool_.lookup(s.hashes[size_t(b)], b ? s.hashes[size_t(b - 1)] : 0, s.tokens.data() + b * bs);
        if (!blk) break;
        got.push_back(*blk);
        const int64_t pos = (b + 1) * bs;
        if (!cfg_.has_state) {
            best = b + 1;
        } else if (snaps_ && pos % cfg_.align == 0 && snaps_->contains(s.hashes[size_t(b)])) {
            best = b + 1;
        }
    }
    if (cfg_.has_state && best > 0) snapshot = *snaps_->find(s.hashes[size_t(best - 1)]);
    // Blocks past the usable point go back.
    pool_.release(std::vector<int32_t>(got.begin() + best, got.end()));
    got.resize(size_t(best));
    s.kv.blocks = std::move(got);
    s.kv.n_tokens = best * bs;
    s.n_registered = best;
    s.n_cached = best * bs;
    return snapshot;
}

StepPlan Scheduler::schedule() {
    StepPlan plan;
    int64_t budget = cfg_.max_num_batched_tokens;
    const int64_t bs = cfg_.block_size;

    // 1. Running sequences, oldest first.
    std::sort(running_.begin(), running_.end(), [](const Sequence* a, const Sequence* b) { return a->arrival < b->arrival; });
    for (size_t i = 0; i < running_.size(); ++i) {
        Sequence* s = running_[i];
        const int64_t n = chunk(*s, budget);
        if (n == 0) continue;
        const int64_t need = blocks_for(s->computed() + n, bs) - int64_t(s->kv.blocks.size());
        bool preempted_self = false;
        while (need > pool_.n_available()) {
            Sequence* victim = running_.back();  // the newest; never one already scheduled (those are older)
            preempt(victim, plan);
            if (victim == s) {
                preempted_self = true;
                break;
            }
        }
        if (preempted_self) break;
        if (need > 0) {
            auto got = pool_.allocate(need);
            TS_ASSERT(got);
            s->kv.blocks.insert(s->kv.blocks.end(), got->begin(), got->end());
        }
        plan.items.push_back({s, s->computed(), n, s->computed() + n == int64_t(s->tokens.size())});
        budget -= n;
    }

    // 2. Waiting sequences, first come first served (none while memory is short).
    if (plan.preempted.empty()) {
        for (size_t w = 0; w < waiting_.size() && budget > 0 && int64_t(running_.size()) < cfg_.max_num_seqs;) {
            Sequence* s = waiting_[w];
            if (s->credit == 0) {  // a paused step-mode sequence does not hold up the queue
                ++w;
                continue;
            }
            if (cfg_.has_state && free_slots_.empty()) break;
            const int32_t snapshot = take_cached_prefix(*s);
            const int64_t n = chunk(*s, budget);
            const int64_t need = blocks_for(s->computed() + n, bs) - int64_t(s->kv.blocks.size());
            if (n == 0 || need > pool_.n_available()) {
                pool_.release(s->kv.blocks);
                s->kv.blocks.clear();
                s->kv.n_tokens = s->n_registered = s->n_cached = 0;
                break;
            }
            if (need > 0) {
                auto got = pool_.allocate(need);
                s->kv.blocks.insert(s->kv.blocks.end(), got->begin(), got->end());
            }
            if (cfg_.has_state) {
                s->kv.state_slot = free_slots_.back();
                free_slots_.pop_back();
                plan.state_inits.push_back({s->kv.state_slot, snapshot});
            }
            waiting_.erase(waiting_.begin() + long(w));
            s->running = true;
            running_.push_back(s);
            plan.items.push_back({s, s->computed(), n, s->computed() + n == int64_t(s->tokens.size())});
            budget -= n;
        }
    }
    return plan;
}

std::vector<SnapshotCopy> Scheduler::complete(const StepPlan& plan) {
    std::vector<SnapshotCopy> copies;
    const int64_t bs = cfg_.block_size;
    for (const StepItem& it : plan.items) {
        if (!it.seq) continue;
        Sequence& s = *it.seq;
        TS_ASSERT(s.computed() == it.start);
        s.kv.n_tokens += it.n;
        if (s.credit > 0 && it.logits) --s.credit;
        if (!cfg_.prefix_caching) continue;
        const int64_t full = s.computed() / bs;
        ensure_hashes(s, full);
        for (int64_t b = s.n_registered; b < full; ++b)
            pool_.register_block(s.kv.blocks[size_t(b)], s.hashes[size_t(b)], b ? s.hashes[size_t(b - 1)] : 0,
                                 s.tokens.data() + b * bs);
        s.n_registered = std::max(s.n_registered, full);

        const int64_t pos = s.computed();
        if (!snaps_ || pos == 0 || pos % cfg_.align != 0) continue;
        const uint64_t h = s.hashes[size_t(pos / bs - 1)];
        if (pos <= s.n_prompt) {  // inside the prompt: interval points and the prompt's last aligned point
            const bool point = (cfg_.snapshot_interval > 0 && pos % cfg_.snapshot_interval == 0) ||
                               pos == prompt_snapshot_point(s);
            if (!point || snaps_->contains(h)) continue;
            if (auto dst = snaps_->acquire()) {
                copies.push_back({s.kv.state_slot, *dst});
                snaps_->publish(*dst, h);
            }
        } else {  // generated tokens: one rolling snapshot, published when the sequence ends
            if (s.pending_snapshot < 0) {
                auto dst = snaps_->acquire();
                if (!dst) continue;
                s.pending_snapshot = *dst;
            }
            copies.push_back({s.kv.state_slot, s.pending_snapshot});
            s.pending_hash = h;
        }
    }
    return copies;
}

StepPlan Scheduler::schedule_ahead(const StepPlan& cur) {
    StepPlan next;
    if (cur.items.empty() || !waiting_.empty()) return next;
    // Every running sequence that can go on is in cur (none left out by the token budget).
    int64_t active = 0;
    for (const Sequence* s : running_) active += s->credit != 0;
    if (active != int64_t(cur.items.size())) return next;
    const int64_t bs = cfg_.block_size;
    int64_t need = 0;
    for (const StepItem& it : cur.items) {
        const Sequence* s = it.seq;
        if (!s || !it.logits || !s->running || s->credit != -1) return next;
        const int64_t len = int64_t(s->tokens.size());  // + the token cur samples
        if (s->computed() != len || len + 1 >= s->max_len) return next;
        need += std::max<int64_t>(0, blocks_for(len + 1, bs) - int64_t(s->kv.blocks.size()));
    }
    if (need > pool_.n_available()) return next;
    for (const StepItem& it : cur.items) {
        Sequence* s = it.seq;
        const int64_t more = blocks_for(s->computed() + 1, bs) - int64_t(s->kv.blocks.size());
        if (more > 0) {
            auto got = pool_.allocate(more);
            TS_ASSERT(got);
            s->kv.blocks.insert(s->kv.blocks.end(), got->begin(), got->end());
        }
        next.items.push_back({s, s->computed(), 1, true});
    }
    return next;
}

bool Scheduler::has_work() const {
    for (const Sequence* s : running_)
        if (s->credit != 0 && s->to_compute() > 0) return true;
    for (const Sequence* s : waiting_)
        if (s->credit != 0) return true;
    return false;
}

}  // namespace tessera
