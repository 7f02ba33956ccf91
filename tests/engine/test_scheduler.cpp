// Scheduler as data in, data out (no model): budget packing with chunked prefill, alignment and
// snapshot points, FCFS admission, preemption by recompute that never drops a request, prefix
// reuse of cached blocks and state snapshots, LRU eviction, step mode.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "engine/scheduler.h"

using namespace tessera;

namespace {

struct Sim {
    explicit Sim(SchedulerConfig c) : cfg(c), sched(c) {}
    SchedulerConfig cfg;
    Scheduler sched;
    std::vector<std::unique_ptr<Sequence>> seqs;
    int64_t arrival = 0;
    std::vector<Sequence*> finished;

    Sequence* add(std::vector<int32_t> prompt, int64_t max_new) {
        auto s = std::make_unique<Sequence>();
        s->id = uint64_t(seqs.size() + 1);
        s->arrival = arrival++;
        s->n_prompt = int64_t(prompt.size());
        s->tokens = std::move(prompt);
        s->max_len = s->n_prompt + max_new;
        sched.add(s.get());
        seqs.push_back(std::move(s));
        return seqs.back().get();
    }
    // One step: schedule, "run", sample token 7 for every sequence that reached its end.
    StepPlan step() {
        StepPlan plan = sched.schedule();
        last_copies = sched.complete(plan);
        for (const StepItem& it : plan.items) {
            if (!it.logits) continue;
            it.seq->tokens.push_back(7);
            if (int64_t(it.seq->tokens.size()) >= it.seq->max_len) {
                sched.finish(it.seq);
                finished.push_back(it.seq);
            }
        }
        return plan;
    }
    std::vector<SnapshotCopy> last_copies;
};

std::vector<int32_t> range_tokens(int64_t n, int32_t base = 100) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) t[size_t(i)] = base + int32_t(i % 1000);
    return t;
}

SchedulerConfig dense(int64_t budget, int64_t n_blocks, int64_t seqs = 16) {
    SchedulerConfig c;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = seqs;
    c.block_size = 16;
    c.n_blocks = n_blocks;
    return c;
}

SchedulerConfig hybrid(int64_t budget, int64_t n_blocks, int64_t seqs, int64_t snaps, int64_t interval) {
    SchedulerConfig c = dense(budget, n_blocks, seqs);
    c.has_state = true;
    c.n_snapshots = snaps;
    c.align = 64;
    c.snapshot_interval = interval;
    return c;
}

}  // namespace

TEST(Scheduler, PacksDecodesAndPrefillChunksIntoTheBudget) {
    Sim sim(dense(256, 1000));
    Sequence* a = sim.add(range_tokens(100), 10);
    Sequence* b = sim.add(range_tokens(300), 10);
    Sequence* c = sim.add(range_tokens(50, 7000), 10);
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 2u);  // a whole, b's first chunk; the budget is spent before c
    EXPECT_EQ(p.items[0].seq, a);
    EXPECT_EQ(p.items[0].n, 100);
    EXPECT_TRUE(p.items[0].logits);
    EXPECT_EQ(p.items[1].seq, b);
    EXPECT_EQ(p.items[1].n, 156);
    EXPECT_FALSE(p.items[1].logits);
    EXPECT_EQ(sim.sched.n_waiting(), 1);

    p = sim.step();  // a decodes, b finishes its prompt, c is admitted whole
    ASSERT_EQ(p.items.size(), 3u);
    EXPECT_EQ(p.items[0].n, 1);
    EXPECT_EQ(p.items[0].start, 100);
    EXPECT_EQ(p.items[1].n, 144);
    EXPECT_EQ(p.items[1].start, 156);
    EXPECT_TRUE(p.items[1].logits);
    EXPECT_EQ(p.items[2].seq, c);
    EXPECT_EQ(p.items[2].n, 50);
    EXPECT_LE(p.n_tokens(), 256);
}

TEST(Scheduler, HybridChunksEndAtAlignedAndSnapshotPoints) {
    Sim sim(hybrid(200, 1000, 4, 8, 128));
    Sequence* a = sim.add(range_tokens(300), 4);
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].n, 128);  // budget 200 -> 192 aligned, then the snapshot point at 128
    ASSERT_EQ(sim.last_copies.size(), 1u);  // a snapshot of a's state at 128
    EXPECT_EQ(sim.last_copies[0].src, a->kv.state_slot);
    EXPECT_GE(sim.last_copies[0].dst, 4);  // snapshot slots follow the live ones
    p = sim.step();
    EXPECT_EQ(p.items[0].n, 128);  // 128 -> 256 (interval point, also the prompt's last aligned point 256)
    EXPECT_EQ(sim.last_copies.size(), 1u);
    p = sim.step();
    EXPECT_EQ(p.items[0].start, 256);
    EXPECT_EQ(p.items[0].n, 44);  // the rest of the prompt (the sequence's end needs no alignment)
    EXPECT_TRUE(p.items[0].logits);
}

TEST(Scheduler, NoAlignedRoomMeansNoChunk) {
    Sim sim(hybrid(64, 1000, 4, 0, 0));
    sim.add(range_tokens(10), 100);
    sim.step();                              // prompt of 10
    Sequence* b = sim.add(range_tokens(200), 4);
    StepPlan p = sim.step();                 // 1 decode leaves 63 < 64: b waits
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(b->computed(), 0);
}

TEST(Scheduler, FirstComeFirstServedWithoutSkipping) {
    // 10 blocks of 16: a holds 7 blocks, b needs 5 and must wait; c (small, later) must not pass b.
    Sim sim(dense(512, 10));
    sim.add(range_tokens(100), 10);         // 7 blocks incl. room for growth
    Sequence* b = sim.add(range_tokens(70), 2);
    Sequence* c = sim.add(range_tokens(5), 2);
    sim.step();
    EXPECT_EQ(b->computed(), 0);
    EXPECT_EQ(c->computed(), 0);
    EXPECT_EQ(sim.sched.n_waiting(), 2);
}

TEST(Scheduler, PreemptionByRecomputeNeverDropsARequest) {
    std::mt19937 rng(3);
    Sim sim(dense(96, 24, 8));  // 384 tokens of KV for many growing sequences
    std::vector<Sequence*> all;
    for (int i = 0; i < 20; ++i) {
        const int64_t n = 5 + int64_t(rng() % 120), gen = 1 + int64_t(rng() % 150);
        all.push_back(sim.add(range_tokens(n, 10 * i), std::min<int64_t>(gen, 380 - n)));
    }
    int steps = 0;
    while (sim.sched.has_work() && steps < 20000) {
        StepPlan p = sim.step();
        EXPECT_LE(p.n_tokens(), 96);
        EXPECT_LE(sim.sched.n_running(), 8);
        ++steps;
    }
    EXPECT_GT(sim.sched.n_preemptions(), 0) << "the test should exercise preemption";
    ASSERT_EQ(sim.finished.size(), all.size());
    for (Sequence* s : all) EXPECT_EQ(int64_t(s->tokens.size()), s->max_len);
    EXPECT_EQ(sim.sched.blocks().n_used(), 0);  // nothing leaked
}

TEST(Scheduler, PreemptedSequenceKeepsItsTokensAndRecomputesThem) {
    Sim sim(dense(64, 6, 4));  // 96 tokens of KV
    Sequence* a = sim.add(range_tokens(40), 50);
    Sequence* b = sim.add(range_tokens(40), 50);
    bool saw_preempt = false;
    for (int i = 0; i < 400 && sim.sched.has_work(); ++i) {
        StepPlan p = sim.step();
        for (Sequence* s : p.preempted) {
            saw_preempt = true;
            EXPECT_EQ(s, b);  // the newest goes
            EXPECT_EQ(s->computed(), 0);
            EXPECT_GT(s->generated(), 0);
        }
    }
    EXPECT_TRUE(saw_preempt);
    EXPECT_EQ(int64_t(a->tokens.size()), 90);
    EXPECT_EQ(int64_t(b->tokens.size()), 90);
}

TEST(Scheduler, PrefixCacheReusesFullBlocksOfAFinishedPrompt) {
    Sim sim(dense(512, 100));
    std::vector<int32_t> prompt = range_tokens(100);
    sim.add(prompt, 3);
    while (sim.sched.has_work()) sim.step();
    // Same first 80 tokens, then different.
    std::vector<int32_t> p2(prompt.begin(), prompt.begin() + 80);
    p2.push_back(5);
    p2.push_back(6);
    Sequence* b = sim.add(p2, 2);
    StepPlan p = sim.step();
    EXPECT_EQ(b->n_cached, 80);
    EXPECT_EQ(p.items[0].start, 80);
    EXPECT_EQ(p.items[0].n, 2);
    // The identical prompt: all but the last block's worth (one token must be computed).
    Sequence* c = sim.add(prompt, 2);
    p = sim.step();
    EXPECT_EQ(c->n_cached, 96);
    // A different first token: nothing.
    std::vector<int32_t> p3 = prompt;
    p3[0] = 1;
    Sequence* d = sim.add(p3, 2);
    sim.step();
    EXPECT_EQ(d->n_cached, 0);
}

TEST(Scheduler, PrefixCacheOffReusesNothing) {
    SchedulerConfig cfg = dense(512, 100);
    cfg.prefix_caching = false;
    Sim sim(cfg);
    sim.add(range_tokens(100), 2);
    while (sim.sched.has_work()) sim.step();
    Sequence* b = sim.add(range_tokens(100), 2);
    sim.step();
    EXPECT_EQ(b->n_cached, 0);
}

TEST(Scheduler, HybridPrefixStartsFromTheLastSnapshotBeforeTheCommonPrefix) {
    Sim sim(hybrid(512, 200, 4, 8, 128));
    std::vector<int32_t> turn1 = range_tokens(300);
    sim.add(turn1, 1);
    while (sim.sched.has_work()) sim.step();
    // Snapshots at 128, 256 (interval) and 256 is also the prompt's last aligned point.
    std::vector<int32_t> turn2 = turn1;
    for (int i = 0; i < 40; ++i) turn2.push_back(2000 + i);
    Sequence* b = sim.add(turn2, 1);
    StepPlan p = sim.step();
    EXPECT_EQ(b->n_cached, 256);
    ASSERT_EQ(p.state_inits.size(), 1u);
    EXPECT_GE(p.state_inits[0].snapshot, 4);  // restored from a snapshot slot
    // Diverging at 200: the snapshot at 128 is the last usable one.
    std::vector<int32_t> turn3(turn1.begin(), turn1.begin() + 200);
    for (int i = 0; i < 40; ++i) turn3.push_back(3000 + i);
    Sequence* c = sim.add(turn3, 1);
    while (c->computed() == 0 && sim.sched.has_work()) sim.step();
    EXPECT_EQ(c->n_cached, 128);
}

TEST(Scheduler, HybridWithoutSnapshotReusesNoBlocks) {
    Sim sim(hybrid(512, 200, 4, 8, 0));
    std::vector<int32_t> t = range_tokens(50);  // shorter than one aligned point: no snapshot
    sim.add(t, 1);
    while (sim.sched.has_work()) sim.step();
    t.push_back(9);
    Sequence* b = sim.add(t, 1);
    StepPlan p = sim.step();
    EXPECT_EQ(b->n_cached, 0);
    ASSERT_EQ(p.state_inits.size(), 1u);
    EXPECT_EQ(p.state_inits[0].snapshot, -1);  // zeroed
}

TEST(Scheduler, DecodeSnapshotIsPublishedAtTheEnd) {
    Sim sim(hybrid(512, 200, 4, 8, 0));
    std::vector<int32_t> t = range_tokens(40);
    Sequence* a = sim.add(t, 100);  // generates past 64 and 128
    while (sim.sched.has_work()) sim.step();
    // The next turn repeats everything a computed (its last sampled token was never computed).
    std::vector<int32_t> next(a->tokens.begin(), a->tokens.end() - 1);
    next.push_back(11);
    Sequence* b = sim.add(next, 1);
    sim.step();
    EXPECT_EQ(b->n_cached, 128);
}

TEST(Scheduler, CachedBlocksAreEvictedLeastRecentlyUsedFirst) {
    Sim sim(dense(512, 12));  // 192 tokens
    std::vector<int32_t> x = range_tokens(64, 1000), y = range_tokens(64, 5000);
    sim.add(x, 1);
    while (sim.sched.has_work()) sim.step();
    sim.add(y, 1);
    while (sim.sched.has_work()) sim.step();
    EXPECT_GT(sim.sched.blocks().n_cached(), 0);
    // A big new prompt needs 10 blocks: the free ones, then the oldest cached (x's).
    sim.add(range_tokens(150, 9000), 1);
    while (sim.sched.has_work()) sim.step();
    Sequence* y2 = sim.add(y, 1);
    sim.step();
    Sequence* x2 = sim.add(x, 1);
    sim.step();
    EXPECT_GT(y2->n_cached, x2->n_cached);
}

TEST(Scheduler, MaxNumSeqsBoundsRunning) {
    Sim sim(dense(512, 1000, 3));
    for (int i = 0; i < 6; ++i) sim.add(range_tokens(10, 100 * i), 5);
    sim.step();
    EXPECT_EQ(sim.sched.n_running(), 3);
    EXPECT_EQ(sim.sched.n_waiting(), 3);
}

TEST(Scheduler, StepModeWaitsForCredit) {
    Sim sim(dense(512, 100));
    Sequence* a = sim.add(range_tokens(20), 100);
    a->credit = 1;
    StepPlan p = sim.step();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(a->credit, 0);
    EXPECT_FALSE(sim.sched.has_work());
    EXPECT_TRUE(sim.sched.schedule().items.empty());
    a->credit = 1;
    p = sim.step();
    ASSERT_EQ(p.items.size(), 1u);
    EXPECT_EQ(p.items[0].n, 1);
}

// The pipelined decode's next step, planned before the current step's tokens are known: every
// sampling sequence once more, in the same order, at the position of the token being sampled;
// blocks allocated when that position starts one; nothing when a condition fails.
TEST(Scheduler, ScheduleAheadPlansTheNextDecodeBeforeItsTokens) {
    Sim sim(dense(256, 1000));
    Sequence* a = sim.add(range_tokens(15), 10);  // its first sampled token sits at position 15
    Sequence* b = sim.add(range_tokens(48), 10);  // ... and b's at 48, past its 3 full blocks
    StepPlan cur = sim.sched.schedule();
    sim.sched.complete(cur);
    ASSERT_EQ(cur.items.size(), 2u);
    const size_t a_blocks = a->kv.blocks.size(), b_blocks = b->kv.blocks.size();
    StepPlan next = sim.sched.schedule_ahead(cur);
    ASSERT_EQ(next.items.size(), 2u);
    EXPECT_EQ(next.items[0].seq, a);
    EXPECT_EQ(next.items[1].seq, b);
    for (const StepItem& it : next.items) {
        EXPECT_EQ(it.start, int64_t(it.seq->tokens.size()));  // the token cur samples
        EXPECT_EQ(it.n, 1);
        EXPECT_TRUE(it.logits);
    }
    EXPECT_EQ(a->kv.blocks.size(), a_blocks);      // position 15 is in its first block
    EXPECT_EQ(b->kv.blocks.size(), b_blocks + 1);
    // The tokens arrive; the ahead step completes like any other.
    a->tokens.push_back(7);
    b->tokens.push_back(7);
    sim.sched.complete(next);
    EXPECT_EQ(a->computed(), 16);
    EXPECT_EQ(b->computed(), 49);
    EXPECT_EQ(a->to_compute(), 0);
}

TEST(Scheduler, ScheduleAheadDeclinesWhatItCannotPlan) {
    auto ready = [](Sim& sim, std::vector<Sequence*> seqs) {
        StepPlan cur = sim.sched.schedule();
        sim.sched.complete(cur);
        EXPECT_EQ(cur.items.size(), seqs.size());
        return cur;
    };
    {  // a request waits: it must be admitted by a normal step
        Sim sim(dense(256, 1000));
        Sequence* a = sim.add(range_tokens(20), 10);
        StepPlan cur = ready(sim, {a});
        sim.add(range_tokens(5), 3);
        EXPECT_TRUE(sim.sched.schedule_ahead(cur).items.empty());
    }
    {  // a prefill chunk that does not reach the prompt's end samples nothing
        Sim sim(dense(64, 1000));
        Sequence* a = sim.add(range_tokens(100), 10);
        StepPlan cur = ready(sim, {a});
        EXPECT_FALSE(cur.items[0].logits);
        EXPECT_TRUE(sim.sched.schedule_ahead(cur).items.empty());
    }
    {  // the token being sampled ends the sequence by length
        Sim sim(dense(256, 1000));
        Sequence* a = sim.add(range_tokens(20), 1);
        StepPlan cur = ready(sim, {a});
        EXPECT_TRUE(sim.sched.schedule_ahead(cur).items.empty());
    }
    {  // one more token fits: max_len is two past the prompt
        Sim sim(dense(256, 1000));
        Sequence* a = sim.add(range_tokens(20), 2);
        StepPlan cur = ready(sim, {a});
        EXPECT_EQ(sim.sched.schedule_ahead(cur).items.size(), 1u);
    }
    {  // step mode
        Sim sim(dense(256, 1000));
        Sequence* a = sim.add(range_tokens(20), 10);
        a->credit = 3;
        StepPlan cur = ready(sim, {a});
        EXPECT_TRUE(sim.sched.schedule_ahead(cur).items.empty());
    }
    {  // no free block for the position the next step writes: nothing allocated
        Sim sim(dense(256, 2));
        Sequence* a = sim.add(range_tokens(32), 10);  // two full blocks; the next token needs a third
        StepPlan cur = ready(sim, {a});
        EXPECT_EQ(sim.sched.blocks().n_available(), 0);
        EXPECT_TRUE(sim.sched.schedule_ahead(cur).items.empty());
        EXPECT_EQ(a->kv.blocks.size(), 2u);
    }
    {  // a running sequence left out of cur (the token budget) must not wait behind planned steps
        Sim sim(dense(256, 1000));
        Sequence* a = sim.add(range_tokens(10), 10);
        Sequence* b = sim.add(range_tokens(20), 10);
        StepPlan cur = ready(sim, {a, b});
        StepPlan only_a = cur;
        only_a.items.pop_back();
        EXPECT_TRUE(sim.sched.schedule_ahead(only_a).items.empty());
        EXPECT_EQ(sim.sched.schedule_ahead(cur).items.size(), 2u);
    }
}
