// EngineCore: admission (validation), one step = schedule → state inits → forward → snapshots →
// sampling → events, and the per-request generation state (sampler, penalties, detokenizer,
// stop strings).
#include "engine/engine_core.h"

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <optional>
#include <unordered_map>


#include "core/arena.h"
#include "core/log.h"
#include "core/memlog.h"
#include "core/status.h"
#include "engine/logits_processor.h"
#include "engine/pool_plan.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "runtime/kv_cache.h"
#include "runtime/model_loader.h"
#include "runtime/state_cache.h"
#include "tokenizer/tokenizer.h"

namespace tessera {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length: return "length";
        case FinishReason::Cancelled: return "cancelled";
        case FinishReason::Error: return "error";
        case FinishReason::None: break;
    }
    return "";
}

namespace {

constexpr int64_t kGdnChunk = 64;  // the chunked Gated DeltaNet's chunk: prefill splits align to it

// Runs a request's callback; a throwing callback is the caller's bug and must not take the
// engine (or the other requests in the step) down with it.
void deliver(const OutputCallback& cb, const RequestOutput& out) {
    if (!cb) return;
    try {
        cb(out);
    } catch (const std::exception& e) {
        TS_LOG_ERROR("request {}: output callback threw: {}", out.id, e.what());
    } catch (...) {
        TS_LOG_ERROR("request {}: output callback threw", out.id);
    }
}

// A request in flight: the scheduler's Sequence plus how it generates.
struct Live {
    Sequence seq;
    GenerationParams params;
    OutputCallback cb;
    std::unique_ptr<Sampler> sampler;
    std::unique_ptr<LogitsProcessor> proc;
    std::unique_ptr<StreamDecoder> dec;
    std::unique_ptr<StopMatcher> stop;
    bool started = false;  // scheduled at least once
    int64_t cached = 0;    // prompt tokens from the prefix cache at the first admission
};

// A step on its way: its plan, how its rows draw, and the host buffers its outputs land in
// (Model::launch writes them by collect(); moving the struct keeps the vectors' memory).
struct Launched {
    StepPlan plan;
    bool decode_only = true;
    bool greedy = false;      // argmax rows only
    bool sample = false;      // drawn where the logits are (device sampling)
    bool raw_needed = false;  // a request wants its raw row (logits or logprobs)
    int top_k = 0;            // drawn on the host from each row's top candidates
    float* logits = nullptr;  // whole rows (host), in Impl::logits
    std::vector<int32_t> argmax;
    std::vector<float> top_values;  // [rows, top_k]
    std::vector<int32_t> top_ids;
    std::vector<SampleRow> sample_rows;  // a sampling step's rows (Backend::sample) and its tokens
    std::vector<int32_t> tokens;
    std::vector<LogitEdit> edits;  // penalties and bias, by row, where the logits stay
};

}  // namespace

struct EngineCore::Impl {
    EngineOptions opts;
    LoadedModel m;
    std::unique_ptr<Tokenizer> tok;
    std::vector<int32_t> eos;
    PoolPlan plan;
    std::unique_ptr<KvCache> kv;
    std::unique_ptr<StateCache> state;
    std::unique_ptr<Scheduler> sched;
    std::unordered_map<uint64_t, std::unique_ptr<Live>> live;
    uint64_t next_id = 1;
    int64_t next_arrival = 0;
    Arena logits;            // a step's logits, in the backend's staging memory (page-locked on a GPU)
    bool device_sampling = false;        // EngineOptions::sampling
    bool pipeline = false;               // EngineOptions::pipeline
    std::optional<Launched> ahead;       // the next step, launched before this one's tokens were taken
    StepPlan* current = nullptr;         // the step() in progress's plan
    std::vector<float> raw;  // a row before penalties, for logprobs
    EngineStats counters;
    int64_t decode_steps = 0;
    bool logged_prefill = false;

    void emit_final(Live& l, FinishReason why, const std::string& error, RequestOutput out);
    void sample_row(Live& l, float* row);
    RequestOutput raw_outputs(const Live& l, const float* row, int32_t token);
    void take_token(Live& l, int32_t token, RequestOutput out);
    void fail_items(const StepPlan& plan, const std::string& msg);
    bool launch(Launched& s, bool chain);
    void take_tokens(Launched& s);
    void retire_ahead();
};

EngineCore::EngineCore(const EngineOptions& o) : impl_(std::make_unique<Impl>()) {
    Impl& I = *impl_;
    I.opts = o;
    TS_CHECK(!o.model_path.empty(), "engine: no model path given");
    TS_CHECK(o.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1 (got {})", o.max_num_batched_tokens);
    TS_CHECK(o.max_queue >= 1, "max_queue must be >= 1 (got {})", o.max_queue);
    TS_CHECK(o.block_size >= 1 && o.block_size <= 1024, "block size {} out of range [1, 1024]", o.block_size);
    TS_CHECK(o.kv_dtype == "f16" || o.kv_dtype == "f32", "kv dtype must be f16 or f32 (got '{}')", o.kv_dtype);
    TS_CHECK(o.snapshot_interval >= 0, "snapshot interval must be >= 0");
    TS_CHECK(o.snapshot_fraction >= 0 && o.snapshot_fraction < 0.9, "snapshot fraction {} out of range [0, 0.9)",
             o.snapshot_fraction);
    TS_CHECK(o.gpu_memory_fraction > 0 && o.gpu_memory_fraction <= 1, "gpu memory fraction {} out of range (0, 1]",
             o.gpu_memory_fraction);
    TS_CHECK(o.sampling == "auto" || o.sampling == "host" || o.sampling == "device",
             "sampling must be auto, host or device (got '{}')", o.sampling);
    TS_CHECK(o.pipeline == "auto" || o.pipeline == "on" || o.pipeline == "off",
             "pipeline must be auto, on or off (got '{}')", o.pipeline);

    LoadOptions lo;
    lo.device = o.device;
    lo.max_batch_tokens = o.max_num_batched_tokens;
    I.m = load_model(o.model_path, lo);
    I.device_sampling = o.sampling == "device" || (o.sampling == "auto" && I.m.backend->device() != Device::CPU);
    I.pipeline = o.pipeline == "on" || (o.pipeline == "auto" && I.m.backend->device() != Device::CPU);
    try {
        I.tok = load_tokenizer(o.model_path);
    } catch (const Error& e) {
        TS_LOG_INFO("no tokenizer ({}): requests give token ids and get no text", e.what());
    }
    I.eos = I.tok ? I.tok->eos_ids() : std::vector<int32_t>{};
    for (int32_t id : checkpoint_eos_ids(o.model_path))
        if (std::find(I.eos.begin(), I.eos.end(), id) == I.eos.end()) I.eos.push_back(id);

    // Pools from need and budget.
    const CacheSpec spec = I.m.model->cache_spec();
    PoolRequest pr;
    pr.block_size = o.block_size;
    pr.kv_elem_bytes = o.kv_dtype == "f16" ? 2 : 4;
    pr.model_ctx = I.m.config.max_ctx;
    pr.max_model_len = o.max_model_len;
    pr.max_num_seqs = o.max_num_seqs;
    pr.prefix_caching = o.prefix_caching;
    pr.snapshot_fraction = o.snapshot_fraction;
    int64_t dev_free = 0, dev_total = 0;
    if (o.memory_budget > 0) {
        pr.budget_bytes = o.memory_budget;
    } else if (I.m.backend->device_memory(&dev_free, &dev_total)) {
        // The process may use gpu_memory_fraction of the device; weights and activations are
        // already allocated, so the caches get what is left of that share (at most what they need).
        const int64_t used = dev_total - dev_free;
        const int64_t share = int64_t(double(dev_total) * o.gpu_memory_fraction) - used;
        TS_CHECK(share > 0, "--gpu-memory-fraction {}: {} of {} device memory is already in use, nothing left for "
                 "the caches", o.gpu_memory_fraction, format_bytes(used), format_bytes(dev_total));
        pr.budget_bytes = share;  // plan_pools still sizes the pools from need within it
    } else {
        pr.budget_bytes = default_cpu_budget(spec, pr);
    }
    I.plan = plan_pools(spec, pr);
    if (o.max_model_len == 0 && pr.model_ctx > 0 && I.plan.max_model_len < pr.model_ctx)
        TS_LOG_WARN("max_model_len {} (the model's context is {}; the memory budget {} holds no more)",
                    I.plan.max_model_len, pr.model_ctx, format_bytes(pr.budget_bytes));

    if (spec.attn_layers > 0) {
        KvCacheShape s;
        s.n_layers = spec.attn_layers;
        s.n_blocks = I.plan.n_blocks;
        s.block_size = o.block_size;
        s.n_kv_heads = spec.n_kv_heads;
        s.head_dim = spec.head_dim;
        s.dtype = o.kv_dtype == "f16" ? DType::F16 : DType::F32;
        I.kv = std::make_unique<KvCache>(s, I.m.backend->memory());
    }
    SchedulerConfig sc;
    sc.max_num_batched_tokens = o.max_num_batched_tokens;
    sc.max_num_seqs = I.plan.max_num_seqs;
    sc.block_size = o.block_size;
    sc.n_blocks = I.plan.n_blocks;
    sc.prefix_caching = o.prefix_caching;
    if (spec.state_layers > 0) {
        StateCacheShape s;
        s.n_layers = spec.state_layers;
        s.n_slots = I.plan.n_slots + I.plan.n_snapshots;
        s.conv_channels = spec.conv_channels;
        s.conv_k = spec.conv_k;
        s.n_v_heads = spec.n_v_heads;
        s.dk = spec.dk;
        s.dv = spec.dv;
        I.state = std::make_unique<StateCache>(s, *I.m.backend);
        MemLog::global().set("state_pool", int64_t(I.plan.state_bytes()));
        MemLog::global().set("snapshot_pool", int64_t(I.plan.snapshot_bytes()));
        sc.has_state = true;
        sc.n_snapshots = I.plan.n_snapshots;
        sc.align = std::lcm(kGdnChunk, o.block_size);
        sc.snapshot_interval = o.snapshot_interval > 0 ? (o.snapshot_interval + sc.align - 1) / sc.align * sc.align : 0;
        TS_CHECK(o.max_num_batched_tokens >= sc.align,
                 "max_num_batched_tokens {} must be at least {} for a model with recurrent layers (prefill chunks are "
                 "cut at multiples of {} tokens)",
                 o.max_num_batched_tokens, sc.align, sc.align);
    }
    I.sched = std::make_unique<Scheduler>(sc);
    I.opts.max_model_len = I.plan.max_model_len;
    I.opts.max_num_seqs = I.plan.max_num_seqs;
    I.opts.memory_budget = pr.budget_bytes;
    I.opts.snapshot_interval = sc.snapshot_interval;
    TS_LOG_INFO("{}", I.plan.summary());
    MemLog::global().snapshot("after cache allocation");
}

EngineCore::~EngineCore() {
    if (!impl_) return;
    cancel_all();
    if (impl_->ahead) impl_->retire_ahead();  // its outputs land in buffers about to go
    MemLog::global().snapshot("destroy");
}

void EngineCore::cancel_all() {
    std::vector<uint64_t> ids;
    for (auto& [id, l] : impl_->live) ids.push_back(id);
    std::sort(ids.begin(), ids.end());
    for (uint64_t id : ids) cancel(id);
}

const ModelConfig& EngineCore::config() const { return impl_->m.config; }
const Tokenizer* EngineCore::tokenizer() const { return impl_->tok.get(); }
const EngineOptions& EngineCore::options() const { return impl_->opts; }
std::string EngineCore::model_name() const {
    std::filesystem::path p(impl_->opts.model_path);
    while (!p.empty() && p.filename().empty()) p = p.parent_path();  // "dir/" -> "dir"
    return p.filename().string();
}

void EngineCore::validate(const Request& r) const {
    const Impl& I = *impl_;
    const int64_t V = I.m.config.vocab_size;
    TS_CHECK(!r.prompt.empty(), "the prompt is empty");
    for (size_t i = 0; i < r.prompt.size(); ++i)
        TS_CHECK(r.prompt[i] >= 0 && r.prompt[i] < V, "prompt token {} at position {} is outside the vocabulary [0, {})",
                 r.prompt[i], i, V);
    const int64_t n = int64_t(r.prompt.size()), max_len = I.plan.max_model_len;
    if (n + 1 > max_len)
        fail(ErrorKind::TooLarge, "the prompt has {} tokens; this engine's max_model_len is {} (prompt + generated)", n,
             max_len);
    const GenerationParams& p = r.params;
    TS_CHECK(p.max_tokens >= -1, "max_tokens must be >= 0 (got {})", p.max_tokens);
    TS_CHECK(p.logprobs >= -1 && p.logprobs <= 20, "logprobs must be in [0, 20] (got {})", p.logprobs);
    for (int32_t id : p.stop_token_ids) TS_CHECK(id >= 0 && id < V, "stop token id {} is outside the vocabulary", id);
    Sampler check(p.sampling);  // throws on bad temperature / top_p / min_p
    TS_CHECK(p.sampling.top_k >= 0 || p.sampling.top_k == -1, "top_k must be >= 0 or -1 (got {})", p.sampling.top_k);
    LogitsProcessor check_penalties(p, {}, int(V));  // throws on bad penalties / biases
}

int64_t EngineCore::queued() const { return impl_->sched->n_waiting(); }

uint64_t EngineCore::add(Request r) {
    Impl& I = *impl_;
    validate(r);
    if (I.sched->n_waiting() >= I.opts.max_queue)
        fail(ErrorKind::Busy, "the engine's queue is full ({} requests waiting)", I.sched->n_waiting());
    const uint64_t id = r.id ? r.id : I.next_id++;
    TS_CHECK(!I.live.count(id), "request id {} is already in use", id);
    I.next_id = std::max(I.next_id, id + 1);

    auto l = std::make_unique<Live>();
    Live& L = *l;
    L.seq.id = id;
    L.seq.arrival = I.next_arrival++;
    L.seq.tokens = std::move(r.prompt);
    L.seq.n_prompt = int64_t(L.seq.tokens.size());
    L.seq.max_len = I.plan.max_model_len;
    if (r.params.max_tokens >= 0) L.seq.max_len = std::min(L.seq.max_len, L.seq.n_prompt + r.params.max_tokens);
    L.seq.credit = r.step_mode ? 1 : -1;
    L.params = std::move(r.params);
    L.cb = std::move(r.on_output);
    L.sampler = std::make_unique<Sampler>(L.params.sampling);
    L.proc = std::make_unique<LogitsProcessor>(L.params, L.seq.tokens, int(I.m.config.vocab_size));
    if (I.tok) L.dec = std::make_unique<StreamDecoder>(*I.tok, L.params.skip_special_tokens);
    L.stop = std::make_unique<StopMatcher>(L.params.stop);
    I.live.emplace(id, std::move(l));
    if (L.seq.max_len <= L.seq.n_prompt) {  // max_tokens 0: nothing to generate
        I.emit_final(L, FinishReason::Length, "", RequestOutput{});
        return id;
    }
    I.sched->add(&L.seq);
    return id;
}

void EngineCore::Impl::emit_final(Live& l, FinishReason why, const std::string& error, RequestOutput out) {
    out.id = l.seq.id;
    out.finish = why;
    out.error = error;
    if (why != FinishReason::Stop || !l.stop->stopped()) {  // release held-back text (never after a stop string)
        if (l.dec && why != FinishReason::Error && why != FinishReason::Cancelled) out.text += l.stop->push(l.dec->flush());
        out.text += l.stop->flush();
    }
    out.prompt_tokens = l.seq.n_prompt;
    out.completion_tokens = l.seq.generated();
    out.cached_tokens = l.cached;
    if (why == FinishReason::Cancelled) ++counters.requests_cancelled;
    else if (why == FinishReason::Error) ++counters.requests_failed;
    else ++counters.requests_finished;
    sched->finish(&l.seq);
    // The steps in flight compute its rows in vain; their books and tokens skip it.
    for (StepPlan* p : {current, ahead ? &ahead->plan : nullptr})
        if (p)
            for (StepItem& it : p->items)
                if (it.seq == &l.seq) it.seq = nullptr;
    const uint64_t id = l.seq.id;
    OutputCallback cb = std::move(l.cb);
    live.erase(id);  // l is gone
    deliver(cb, out);
}

void EngineCore::cancel(uint64_t id) {
    auto it = impl_->live.find(id);
    if (it == impl_->live.end()) return;
    impl_->emit_final(*it->second, FinishReason::Cancelled, "", RequestOutput{});
}

void EngineCore::resume(uint64_t id) {
    auto it = impl_->live.find(id);
    if (it != impl_->live.end() && it->second->seq.credit == 0) it->second->seq.credit = 1;
}

bool EngineCore::has_work() const { return impl_->sched->has_work(); }

void EngineCore::Impl::fail_items(const StepPlan& plan, const std::string& msg) {
    std::vector<uint64_t> ids;
    for (const StepItem& it : plan.items)
        if (it.seq) ids.push_back(it.seq->id);
    for (uint64_t id : ids) {
        auto f = live.find(id);
        if (f != live.end()) emit_final(*f->second, FinishReason::Error, msg, RequestOutput{});
    }
}

void EngineCore::Impl::sample_row(Live& l, float* row) {
    const int V = int(m.config.vocab_size);
    const bool keep_raw = l.params.return_logits || l.params.logprobs >= 0;
    if (keep_raw) raw.assign(row, row + V);
    if (l.proc->active()) l.proc->apply(row);
    const int32_t token = l.sampler->sample(row, V);
    take_token(l, token, keep_raw ? raw_outputs(l, raw.data(), token) : RequestOutput{});
}

// What a request asked of its raw row (before penalties): the logits, the token's logprob and
// the top logprobs.
RequestOutput EngineCore::Impl::raw_outputs(const Live& l, const float* row, int32_t token) {
    const int V = int(m.config.vocab_size);
    const GenerationParams& p = l.params;
    RequestOutput out;
    out.id = l.seq.id;
    if (p.return_logits) out.logits.assign(row, row + V);
    if (p.logprobs >= 0) {
        out.logprob = token_logprob(row, V, token);
        if (p.logprobs > 0) out.top = top_logprobs(row, V, p.logprobs);
    }
    return out;
}

// Whether nothing but the sampler reads a request's raw logits (no logits or logprobs asked;
// penalties and bias go to the device as edits): then a step can leave them on the device and
// return a summary (LogitsOut).
static bool sampler_only(const Live& l) {
    const GenerationParams& p = l.params;
    return !p.return_logits && p.logprobs < 0;
}
static bool greedy_only(const Live& l) {
    const SamplingParams& s = l.params.sampling;
    return sampler_only(l) && (s.temperature <= 0.f || s.top_k == 1);
}
// A request's next draw where the logits are: its counter is the sequence's length, so a seed
// gives one stream of draws per prompt. `ahead`: the draw of a step launched before the last
// token reached the sequence (pipelined decode) — one position further.
static SampleRow device_sample_row(const Live& l, int64_t ahead) {
    const SamplingParams& s = l.params.sampling;
    SampleRow r;
    r.temperature = s.temperature;
    r.top_p = s.top_p;
    r.top_k = s.top_k;
    r.min_p = s.min_p;
    r.seed = s.seed;
    r.counter = uint64_t(int64_t(l.seq.tokens.size()) + ahead);
    return r;
}
// The top candidates a request's draw needs (Sampler::decided_by_top), or 0 when it needs the
// whole row of logits.
static int top_needed(const Live& l) {
    if (!sampler_only(l)) return 0;
    if (greedy_only(l)) return 1;
    const int k = l.params.sampling.top_k + 1;  // one more tells whether the row has more than top_k
    return k <= Backend::kMaxTopK && l.sampler->decided_by_top(k) ? k : 0;
}

void EngineCore::Impl::take_token(Live& l, int32_t token, RequestOutput out) {
    const GenerationParams& p = l.params;
    out.id = l.seq.id;
    l.proc->accept(token);
    l.seq.tokens.push_back(token);
    ++counters.generated_tokens;
    out.token = token;
    const bool is_eos = !p.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end();
    const bool stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
    if (is_eos || stop_id) return emit_final(l, FinishReason::Stop, "", std::move(out));
    if (l.dec) out.text = l.stop->push(l.dec->push(token));
    if (l.stop->stopped()) return emit_final(l, FinishReason::Stop, "", std::move(out));
    if (int64_t(l.seq.tokens.size()) >= l.seq.max_len) return emit_final(l, FinishReason::Length, "", std::move(out));
    deliver(l.cb, out);
}

// The plan's batch, how its rows draw (greedy argmax, device sampling, top candidates or whole
// rows), launched; false when the launch failed (its requests are finished with the error). A
// chained step (Scheduler::schedule_ahead) takes its tokens from the step launched before.
bool EngineCore::Impl::launch(Launched& s, bool chain) {
    static constexpr int32_t kChained = 0;  // a chained item's token: chosen on the device
    const int block_size = kv ? int(kv->shape().block_size) : 0;
    BatchBuilder bb(block_size);
    std::vector<const Live*> sampled;  // the step's requests with a logit row, in row order
    for (const StepItem& it : s.plan.items) {
        Live& l = *live.at(it.seq->id);
        if (!l.started) {
            l.started = true;
            l.cached = it.start;
            counters.cached_prompt_tokens += it.start;
        }
        SeqBlocks view = it.seq->kv;  // the scheduler advances the real one in complete()
        bb.add(view, chain ? &kChained : it.seq->tokens.data() + it.start, it.n, it.logits ? 1 : 0);
        if (it.logits) sampled.push_back(&l);
        if (it.seq->computed() < it.seq->n_prompt) counters.prompt_tokens += std::min(it.n, it.seq->n_prompt - it.start);
        s.decode_only = s.decode_only && it.n == 1;
    }
    const Batch batch = bb.finish();
    const int64_t V = m.config.vocab_size;
    // A step whose every sampled row is greedy asks the model for argmaxes only. With device
    // sampling any other step draws where the logits are (the raw rows copied too when a request
    // wants logits or logprobs); without it, a step whose rows all draw from their top
    // candidates (top-k sampling) asks for those. No logits copy in these modes.
    const int64_t rows = int64_t(sampled.size());
    bool greedy = rows > 0, raw_needed = false;
    int top_k = rows > 0 ? 1 : 0;
    for (const Live* l : sampled) {
        greedy = greedy && greedy_only(*l);
        raw_needed = raw_needed || !sampler_only(*l);
        const int need = top_needed(*l);
        top_k = need == 0 || top_k == 0 ? 0 : std::max(top_k, need);
    }
    const bool sample = device_sampling && rows > 0 && !greedy;
    if (sample || greedy) top_k = 0;
    s.greedy = greedy;
    s.sample = sample;
    s.raw_needed = raw_needed;
    s.top_k = top_k;
    LogitsOut out;
    if (greedy || top_k > 0 || sample) {  // penalties and bias are applied where the logits stay
        for (size_t r = 0; r < sampled.size(); ++r)
            if (sampled[r]->proc->active()) sampled[r]->proc->edits(int32_t(r), s.edits);
        out.edits = s.edits.data();
        out.n_edits = int64_t(s.edits.size());
    }
    if (greedy) {
        s.argmax.assign(size_t(rows), 0);
        out.argmax = s.argmax.data();
    } else if (sample) {
        for (const Live* l : sampled) s.sample_rows.push_back(device_sample_row(*l, chain ? 1 : 0));
        s.tokens.assign(size_t(rows), 0);
        out.sample = s.sample_rows.data();
        out.tokens = s.tokens.data();
    } else if (top_k > 0) {
        s.top_values.assign(size_t(rows * top_k), 0.f);
        s.top_ids.assign(size_t(rows * top_k), -1);
        out.top_k = top_k;
        out.top_values = s.top_values.data();
        out.top_ids = s.top_ids.data();
    }
    if (!greedy && top_k == 0 && (!sample || raw_needed)) {
        const size_t logit_bytes = size_t(std::max<int64_t>(rows, 1) * V) * sizeof(float);
        if (logits.capacity() < logit_bytes)
            logits = Arena("step logits", std::max(logit_bytes, 2 * logits.capacity()), m.backend->staging_memory());
        logits.reset();
        s.logits = static_cast<float*>(logits.alloc(logit_bytes));
        out.host = s.logits;
    }
    try {
        m.model->launch(batch, Caches{kv.get(), state.get()}, out, chain);
    } catch (const std::exception& e) {
        TS_LOG_ERROR("forward step failed: {}", e.what());
        fail_items(s.plan, std::string("forward step failed: ") + e.what());
        return false;
    }
    return true;
}

// Waits for a launched step's outputs and hands each live request its token.
void EngineCore::Impl::take_tokens(Launched& s) {
    try {
        m.model->collect();
    } catch (const std::exception& e) {
        TS_LOG_ERROR("forward step failed: {}", e.what());
        fail_items(s.plan, std::string("forward step failed: ") + e.what());
        return;
    }
    const int64_t V = m.config.vocab_size;
    int64_t row = 0;
    for (const StepItem& it : s.plan.items) {
        if (!it.logits) continue;
        const int64_t r = row++;
        if (!it.seq) continue;  // ended while the step was in flight (or its next launch failed)
        const uint64_t id = it.seq->id;  // it.seq dies with its request
        auto f = live.find(id);
        if (f == live.end()) continue;
        try {
            Live& l = *f->second;
            if (s.greedy) take_token(l, s.argmax[size_t(r)], RequestOutput{});
            else if (s.sample) {
                const int32_t token = s.tokens[size_t(r)];
                RequestOutput o = sampler_only(l) ? RequestOutput{} : raw_outputs(l, s.logits + r * V, token);
                take_token(l, token, std::move(o));
            } else if (s.top_k > 0)
                take_token(l, l.sampler->sample_sorted(&s.top_values[size_t(r * s.top_k)], &s.top_ids[size_t(r * s.top_k)], s.top_k),
                           RequestOutput{});
            else sample_row(l, s.logits + r * V);
        } catch (const std::exception& e) {
            auto g = live.find(id);
            if (g != live.end()) emit_final(*g->second, FinishReason::Error, e.what(), RequestOutput{});
        }
    }
}

// The step launched ahead when no request it computes for is left: waited for, its outputs dropped.
void EngineCore::Impl::retire_ahead() {
    std::optional<Launched> a = std::move(ahead);
    ahead.reset();
    try {
        m.model->collect();
    } catch (const std::exception& e) {
        TS_LOG_ERROR("a step launched ahead failed: {}", e.what());
    }
}

// One step: schedule and launch it — or adopt the step launched ahead — then keep the books, launch
// the next step ahead where it can go before this one's tokens are known (pipelined decode), and
// only then wait for this step's tokens.
bool EngineCore::step() {
    Impl& I = *impl_;
    if (I.ahead && std::none_of(I.ahead->plan.items.begin(), I.ahead->plan.items.end(),
                                [](const StepItem& it) { return it.seq != nullptr; }))
        I.retire_ahead();
    Launched cur;
    I.current = &cur.plan;
    struct Clear {
        StepPlan*& p;
        ~Clear() { p = nullptr; }
    } clear{I.current};
    if (I.ahead) {
        cur = std::move(*I.ahead);
        I.ahead.reset();
    } else {
        if (!I.sched->has_work()) return false;
        const int64_t preempt_before = I.sched->n_preemptions();
        cur.plan = I.sched->schedule();
        I.counters.preemptions += I.sched->n_preemptions() - preempt_before;
        if (cur.plan.items.empty()) return false;
        ++I.counters.steps;
        for (const StateInit& s : cur.plan.state_inits) {
            if (s.snapshot >= 0) I.state->copy(s.slot, s.snapshot);
            else I.state->zero(s.slot);
        }
        if (!I.launch(cur, false)) return true;
    }
    // The books and the state snapshots (queued after this step, before the next).
    for (const SnapshotCopy& c : I.sched->complete(cur.plan)) I.state->copy(c.dst, c.src);
    // Only after a decode-only step: launching ahead costs the host a launch (or a recording) before
    // it hands out this step's tokens, and a prompt's first token should not wait for it. Only
    // where the tokens are all the step returns (greedy, or drawn on the device without raw rows)
    // and no penalty or bias depends on them.
    const bool tokens_only = cur.greedy || (cur.sample && !cur.raw_needed);
    if (I.pipeline && cur.decode_only && tokens_only && cur.edits.empty()) {
        Launched next;
        next.plan = I.sched->schedule_ahead(cur.plan);
        if (!next.plan.items.empty()) {
            ++I.counters.steps;
            ++I.counters.steps_ahead;
            if (I.launch(next, true)) I.ahead = std::move(next);
        }
    }
    I.take_tokens(cur);
    if (!cur.decode_only && !I.logged_prefill) {  // the activation arena has grown to a prefill's size
        I.logged_prefill = true;
        MemLog::global().snapshot("after first prefill");
    }
    if (cur.decode_only && I.opts.memlog_every > 0 && ++I.decode_steps % I.opts.memlog_every == 0)
        MemLog::global().snapshot(fmt::format("decode step {}", I.decode_steps));
    return true;
}

EngineStats EngineCore::stats() const {
    const Impl& I = *impl_;
    EngineStats s = I.counters;
    s.waiting = I.sched->n_waiting();
    s.running = I.sched->n_running();
    const BlockPool& bp = I.sched->blocks();
    s.kv_blocks_total = bp.n_blocks();
    s.kv_blocks_used = bp.n_used();
    s.kv_blocks_cached = bp.n_cached();
    s.block_size = bp.block_size();
    s.state_slots_total = I.state ? I.plan.n_slots : 0;
    s.state_slots_used = I.state ? I.plan.n_slots - I.sched->free_slots() : 0;
    s.snapshots_total = I.plan.n_snapshots;
    s.snapshots_used = I.sched->snapshots() ? I.sched->snapshots()->n_used() : 0;
    s.kv_bytes = I.kv ? int64_t(I.kv->shape().bytes()) : 0;
    s.state_bytes = I.state ? I.plan.state_bytes() : 0;
    s.snapshot_bytes = I.plan.snapshot_bytes();
    s.weight_bytes = MemLog::global().get("weights");
    s.max_model_len = I.plan.max_model_len;
    s.max_num_seqs = I.plan.max_num_seqs;
    s.max_num_batched_tokens = I.opts.max_num_batched_tokens;
    return s;
}

}  // namespace tessera
