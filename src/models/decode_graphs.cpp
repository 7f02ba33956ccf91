#include "models/decode_graphs.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "core/log.h"
#include "models/layers/lm_head.h"
#include "core/memlog.h"
#include "core/status.h"

namespace tessera {

namespace {

// Batch sizes recorded: every size up to 4, then steps of 8, then 32 (vLLM's choice is similar).
constexpr std::array<int, 15> kBuckets = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};

// int32 arrays of a padded plan, each starting on a 256-byte boundary.
size_t padded_ints(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

// One recording: its padded plan's device arrays (fixed addresses the recording reads) and the
// staged view of them.
struct DecodeGraphs::Graph {
    int bucket = 0, width = 0;
    Arena plan;      // device: the arrays below, in this order
    size_t ints = 0; // int32 count of the whole plan
    StagedBatch sb;
    std::unique_ptr<Backend::Recording> rec;
};

DecodeGraphs::DecodeGraphs(Backend& be) : be_(be) {}
DecodeGraphs::~DecodeGraphs() {
    if (!graphs_.empty()) be_.synchronize();  // a replay may still read the plans
}

int DecodeGraphs::bucket_for(int n_seqs) {
    for (int b : kBuckets)
        if (b >= n_seqs) return b;
    return 0;
}

int DecodeGraphs::table_width_for(int max_blocks) {
    int w = 8;
    while (w < max_blocks) w *= 2;
    return w;
}

void DecodeGraphs::drop_all() {
    if (graphs_.empty()) return;
    be_.synchronize();
    graphs_.clear();
    ++stats_.drops;
}

DecodeGraphs::Graph& DecodeGraphs::graph_for(int bucket, int width) {
    auto& slot = graphs_[{bucket, width}];
    if (slot) return *slot;
    auto g = std::make_unique<Graph>();
    g->bucket = bucket;
    g->width = width;
    const size_t B = size_t(bucket);
    // tokens, positions, slots, logit_rows, q_start, kv_len, block_table, state_slots
    const size_t sizes[] = {B, B, B, B, B + 1, B, B * size_t(width), B};
    for (size_t n : sizes) g->ints += padded_ints(n);
    g->plan = Arena("decode graph plan", g->ints * sizeof(int32_t), be_.memory());
    auto* base = static_cast<int32_t*>(g->plan.alloc(g->ints * sizeof(int32_t), 256));
    const int32_t* p[8];
    size_t off = 0;
    for (int i = 0; i < 8; ++i) {
        p[i] = base + off;
        off += padded_ints(sizes[i]);
    }
    StagedBatch& sb = g->sb;
    sb.n_tokens = bucket;
    sb.n_logits = bucket;
    sb.tokens = p[0];
    sb.positions = p[1];
    sb.slots = p[2];
    sb.logit_rows = p[3];
    sb.attn = AttnPlan{bucket, p[4], p[5], p[6], width, 0};
    sb.seq = SeqPlan{bucket, p[4], p[7]};
    slot = std::move(g);
    return *slot;
}

// The batch padded to g's bucket, written to this turn's half of the page-locked staging memory
// and queued for copy into g's plan arrays — all but the tokens with keep_tokens (a chained step
// whose tokens the last step's argmax wrote there). That half's previous copy (two steps back)
// has landed: its step has been collected (decode_graphs.h).
void DecodeGraphs::stage(Graph& g, const Batch& b, bool keep_tokens) {
    const size_t bytes = g.ints * sizeof(int32_t);
    Arena& staging = staging_[turn_];
    if (staging.capacity() < bytes)
        staging = Arena("decode graph staging", std::max(bytes, 2 * staging.capacity()), be_.staging_memory());
    staging.reset();
    auto* h = static_cast<int32_t*>(staging.alloc(bytes, 256));
    std::memset(h, 0, bytes);
    const int n = b.n_seqs(), B = g.bucket, W = g.width;
    int32_t* dst = h;
    auto next = [&](size_t n_ints) {
        int32_t* d = dst;
        dst += padded_ints(n_ints);
        return d;
    };
    int32_t* tokens = next(B);
    int32_t* positions = next(B);
    int32_t* slots = next(B);
    int32_t* logit_rows = next(B);
    int32_t* q_start = next(B + 1);
    int32_t* kv_len = next(B);
    int32_t* table = next(size_t(B) * W);
    int32_t* state_slots = next(B);
    for (int s = 0; s < B; ++s) {
        const bool real = s < n;
        tokens[s] = real ? b.tokens[size_t(s)] : 0;
        positions[s] = real ? b.positions[size_t(s)] : 0;
        slots[s] = real ? b.slots[size_t(s)] : -1;
        logit_rows[s] = s;
        q_start[s] = s;
        kv_len[s] = real ? b.kv_len[size_t(s)] : 0;
        state_slots[s] = real && !b.state_slots.empty() ? b.state_slots[size_t(s)] : -1;
        if (real)
            std::copy_n(b.block_table.begin() + int64_t(s) * b.max_blocks, b.max_blocks, table + int64_t(s) * W);
    }
    q_start[B] = B;
    const size_t skip = keep_tokens ? padded_ints(size_t(B)) * sizeof(int32_t) : 0;
    be_.copy_in(const_cast<int32_t*>(g.sb.tokens) + skip / sizeof(int32_t), h + skip / sizeof(int32_t), bytes - skip);
}

bool DecodeGraphs::forward(Model& m, const Batch& b, const Caches& c, const LogitsOut& host_out, Launch* launch) {
    const bool chain = launch && launch->chain;
    TS_CHECK(!chain || holds_ids(b.n_seqs()), "decode graphs: a chained step of {} rows, but the last step left {}",
             b.n_seqs(), last_ids_ ? last_rows_ : 0);
    const int32_t* chain_ids = last_ids_;
    const Graph* chain_graph = last_graph_;
    last_ids_ = nullptr;  // whatever runs now, the ids are no longer the last step's
    last_graph_ = nullptr;
    if (launch) {
        launch->ids = nullptr;
        launch->mark = 0;
    }
    if (disabled_) return false;
    const int n = b.n_seqs();
    if (n == 0 || b.n_tokens() != n || int64_t(b.logit_rows.size()) != n) return false;
    for (int s = 0; s < n; ++s)
        if (b.logit_rows[size_t(s)] != s) return false;
    const int B = bucket_for(n);
    if (B == 0 || B > m.max_batch_tokens()) return false;
    const int W = table_width_for(b.max_blocks);

    if (c.kv != kv_ || c.state != state_ || be_.internal_epoch() != epoch_) {
        if (chain) {  // the ids live in a recording's plan, about to be freed (after a synchronize)
            if (parked_.capacity() == 0)
                parked_ = Arena("decode graph parked ids", size_t(kBuckets.back()) * sizeof(int32_t), be_.memory());
            parked_.reset();
            auto* p = static_cast<int32_t*>(parked_.alloc(size_t(n) * sizeof(int32_t)));
            be_.copy(p, chain_ids, size_t(n) * sizeof(int32_t));
            chain_ids = p;
            chain_graph = nullptr;
        }
        drop_all();
        kv_ = c.kv;
        state_ = c.state;
        epoch_ = be_.internal_epoch();
    }
    const int64_t V = m.config().vocab_size;
    if (logit_rows_ < B) {
        TS_ASSERT(!chain);  // a chained step has the last one's rows, so its bucket fits (no drop here)
        drop_all();  // the recordings write the old logits buffer
        logit_rows_ = std::max<int64_t>(B, 2 * logit_rows_);
        // the logits, then their argmaxes or top candidates (LogitsOut)
        logits_ = Arena("decode graph logits",
                        size_t(logit_rows_ * (V + 1 + 2 * Backend::kMaxTopK)) * sizeof(float) + 4096, be_.memory());
    }
    logits_.reset();
    const Tensor out_dev = logits_.tensor(DType::F32, {B, V});
    const LogitsOut out{nullptr, &out_dev};

    Graph& g = graph_for(B, W);
    g.sb.attn.block_size = b.block_size;
    turn_ ^= 1;
    const bool in_place = chain && chain_graph == &g;  // the last step's ids are g's tokens already
    stage(g, b, in_place);
    // Else the last step's argmax ids over the staged tokens (queued: the copy lands after the plan).
    if (chain && !in_place) be_.copy(const_cast<int32_t*>(g.sb.tokens), chain_ids, size_t(n) * sizeof(int32_t));
    if (g.rec) {
        g.rec->replay();
        ++stats_.replays;
    } else {
        m.run(g.sb, c, out);  // creates what the ops allocate internally, and gives this step's logits
        try {
            g.rec = be_.record([&] { m.run(g.sb, c, out); });
        } catch (const Error& e) {
            TS_LOG_WARN("decode graphs disabled: recording a step of {} sequences failed: {}", B, e.what());
            disabled_ = true;
        }
        if (!g.rec) {
            disabled_ = true;  // the backend cannot record: never try again
        } else {
            ++stats_.recordings;
            if (be_.internal_epoch() != epoch_) {  // the plain run reallocated: older recordings are stale
                for (auto& [key, other] : graphs_)
                    if (other.get() != &g) other->rec.reset();
                epoch_ = be_.internal_epoch();
            }
        }
    }
    // Edits and summaries run after the replay, unrecorded; only what the step wants crosses. A
    // step whose only output is tokens (argmax, or drawn on the device) lets them cross without
    // waiting when the caller can collect them later.
    const bool tokens_only = !host_out.host && host_out.n_edits == 0 &&
                             (host_out.argmax || (host_out.sample && host_out.tokens));
    if (!launch || !tokens_only) {
        deliver_logits(be_, logits_, out_dev.slice_rows(0, n), 0, host_out);
        return true;
    }
    // Over g's tokens, which the replay has read: the next step, if chained to this one through
    // the same recording, reads them where they are.
    auto* ids = const_cast<int32_t*>(g.sb.tokens);
    if (host_out.argmax) be_.argmax(out_dev.slice_rows(0, n), ids);
    else be_.sample(out_dev.slice_rows(0, n), host_out.sample, ids);
    Arena& pinned = ids_[turn_];
    const size_t bytes = size_t(B) * sizeof(int32_t);
    if (pinned.capacity() < bytes)
        pinned = Arena("decode graph ids", std::max(bytes, 2 * pinned.capacity()), be_.staging_memory());
    pinned.reset();
    auto* host_ids = static_cast<int32_t*>(pinned.alloc(bytes));
    be_.copy_out_queued(host_ids, ids, size_t(n) * sizeof(int32_t));
    launch->ids = host_ids;
    launch->mark = be_.mark();
    last_ids_ = ids;
    last_graph_ = &g;
    last_rows_ = n;
    return true;
}

}  // namespace tessera
