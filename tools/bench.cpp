// `tessera bench`: end-to-end prefill and decode speed and cache memory of a model on this
// machine, through the engine (batch > 1 = that many concurrent requests). Prints a markdown table
// (and JSON with --json): per context length and batch, the median over --repeat runs after a
// warm-up. Prompts are random token ids; generation ignores EOS, so every run decodes --gen tokens.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "core/memlog.h"
#include "core/status.h"
#include "engine/engine_core.h"
#include "engine/pool_plan.h"
#include "engine/sampler.h"

namespace tessera::cli {
namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

std::vector<int64_t> parse_list(const std::string& s, const char* what) {
    std::vector<int64_t> v;
    for (int32_t x : parse_id_list(s)) {
        TS_CHECK(x >= 1, "--{}: values must be >= 1", what);
        v.push_back(x);
    }
    TS_CHECK(!v.empty(), "--{}: empty list", what);
    return v;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t peak_rss_bytes() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return int64_t(u.ru_maxrss) * 1024;  // Linux reports KiB
}

struct Measure {
    double prefill_tps = 0, decode_tps = 0, ttft_s = 0;
    int64_t cache_bytes = 0;  // the most KV blocks + state slots in use at once during the run
};

// B concurrent requests of `ctx` random prompt tokens, each generating `gen` tokens.
Measure run_once(EngineCore& core, int64_t ctx, int64_t batch, int64_t gen, const SamplingParams& sp, uint64_t seed) {
    const int64_t V = core.config().vocab_size;
    std::mt19937_64 rng(seed);
    struct Track {
        Clock::time_point first, last;
        int64_t n = 0;
        bool done = false;
    };
    std::vector<Track> tracks(static_cast<size_t>(batch));
    const EngineStats s0 = core.stats();
    const int64_t block_bytes = s0.kv_blocks_total ? s0.kv_bytes / s0.kv_blocks_total : 0;
    const int64_t slot_bytes = s0.state_slots_total ? s0.state_bytes / s0.state_slots_total : 0;
    const auto t0 = Clock::now();
    for (int64_t b = 0; b < batch; ++b) {
        Request r;
        r.prompt.resize(size_t(ctx));
        for (auto& t : r.prompt) t = int32_t(rng() % uint64_t(V));
        r.params.sampling = sp;
        r.params.sampling.seed = seed + uint64_t(b);
        r.params.max_tokens = gen;
        r.params.ignore_eos = true;
        Track* tr = &tracks[size_t(b)];
        r.on_output = [tr](const RequestOutput& o) {
            const auto now = Clock::now();
            if (o.token >= 0) {
                if (tr->n++ == 0) tr->first = now;
                tr->last = now;
            }
            if (o.finish != FinishReason::None) tr->done = true;
        };
        core.add(std::move(r));
    }
    // The cache a run needs is its peak over every step: measured once every prompt was in, it
    // missed the requests that had already finished by then (short generations behind chunked
    // prefills) and the generated tokens' blocks.
    Measure m;
    while (core.step()) {
        const EngineStats s = core.stats();
        m.cache_bytes = std::max(m.cache_bytes, s.kv_blocks_used * block_bytes + s.state_slots_used * slot_bytes);
    }
    Clock::time_point all_first = t0, last = t0;
    for (const Track& t : tracks) {
        TS_CHECK(t.done && t.n == gen, "bench: a request ended after {} of {} tokens", t.n, gen);
        all_first = std::max(all_first, t.first);
        last = std::max(last, t.last);
    }
    m.ttft_s = secs(t0, all_first);
    m.prefill_tps = double(ctx * batch) / m.ttft_s;
    // Decode: tokens after each request's first, over the time from the last first token to the end.
    const double decode_s = secs(all_first, last);
    m.decode_tps = gen > 1 && decode_s > 0 ? double((gen - 1) * batch) / decode_s : 0;
    return m;
}

class Progress {
public:
    explicit Progress(int total) : total_(total), tty_(isatty(fileno(stderr))) {}
    void step(const std::string& what) {
        ++done_;
        if (tty_) std::fprintf(stderr, "\r\033[Kbench [%d/%d] %s", done_, total_, what.c_str());
        else std::fprintf(stderr, "bench [%d/%d] %s\n", done_, total_, what.c_str());
    }
    ~Progress() {
        if (tty_) std::fprintf(stderr, "\r\033[K");
    }

private:
    int total_, done_ = 0;
    bool tty_;
};

int run_bench(const Args& args) {
    apply_common_options(args);
    const std::vector<int64_t> ctxs = parse_list(args.get("ctx", "2048,4096,8192,16384,32768"), "ctx");
    const std::vector<int64_t> batches = parse_list(args.get("batch", "1"), "batch");
    const int64_t gen = args.get_int("gen", 128), repeat = args.get_int("repeat", 3);
    TS_CHECK(gen >= 1 && gen <= 1 << 20, "--gen must be >= 1");
    TS_CHECK(repeat >= 1 && repeat <= 100, "--repeat must be in [1, 100]");
    const int64_t max_ctx = *std::max_element(ctxs.begin(), ctxs.end());
    const int64_t max_batch = *std::max_element(batches.begin(), batches.end());

    EngineOptions o;
    o.model_path = args.model_path(true);
    o.device = args.get("device", "auto");
    o.max_model_len = max_ctx + gen;
    o.max_num_seqs = max_batch;
    o.max_num_batched_tokens = args.get_int("prefill-chunk", 512);
    o.prefix_caching = false;  // every run prefills its whole prompt
    o.kv_dtype = args.get("kv-dtype", "f16");
    if (args.has("memory-budget")) o.memory_budget = args.get_int("memory-budget", 0);
    if (args.flag("memlog")) MemLog::global().set_enabled(true);
    o.sampling = args.get("sampling", o.sampling);
    o.pipeline = args.get("pipeline", o.pipeline);
    SamplingParams sp;  // greedy unless asked
    sp.temperature = args.get_float("temperature", 0.f);
    sp.top_p = args.get_float("top-p", 1.f);
    sp.top_k = int(args.get_int("top-k", 0));
    sp.min_p = args.get_float("min-p", 0.f);
    Sampler check(sp);  // throws on values out of range
    EngineCore core(o);

    // Warm-up: each row once, whole, so one-time costs are out of the timed runs — kernel plans,
    // cuBLAS heuristics, lazily loaded kernels and scratch for the largest prefill step (a
    // 64-token warm-up left ~30 % of the first 2K row's prefill time in them on the GPU), and
    // the decode graph of every batch size and block-table width the row's steps take (recorded
    // at its first step: ~5 ms at 8K on the H200; a warm-up of two tokens a request never ran
    // the concurrent rows' full-width steps, so the timed run recorded them).
    for (int64_t ctx : ctxs)
        for (int64_t batch : batches) run_once(core, ctx, batch, gen, sp, 1);
    struct Row {
        int64_t ctx, batch;
        Measure m;
    };
    std::vector<Row> rows;
    Progress progress(int(ctxs.size() * batches.size() * size_t(repeat)));
    for (int64_t ctx : ctxs)
        for (int64_t batch : batches) {
            std::vector<Measure> ms;
            for (int64_t r = 0; r < repeat; ++r) {
                progress.step(fmt::format("ctx {} batch {} run {}", ctx, batch, r + 1));
                ms.push_back(run_once(core, ctx, batch, gen, sp, uint64_t(100 + r)));
            }
            auto med = [&](double Measure::*f) {
                std::vector<double> v;
                for (const Measure& m : ms) v.push_back(m.*f);
                return median(v);
            };
            Measure m;
            m.prefill_tps = med(&Measure::prefill_tps);
            m.decode_tps = med(&Measure::decode_tps);
            m.ttft_s = med(&Measure::ttft_s);
            m.cache_bytes = ms.back().cache_bytes;
            rows.push_back({ctx, batch, m});
        }

    const EngineStats st = core.stats();
    const int64_t peak = peak_rss_bytes();
    // Device memory (0 on the CPU): arenas and pools at their peak, placed weights, op scratch.
    const MemLog& ml = MemLog::global();
    const int64_t dev_peak = ml.get("device_allocated_peak") > 0
                                 ? ml.get("device_allocated_peak") + ml.get("weights_device") + ml.get("device_scratch")
                                 : 0;
    const std::string sampling =
        sp.temperature <= 0.f ? "greedy"
                              : fmt::format("temperature {} top_p {} top_k {} min_p {}, {} sampling", sp.temperature,
                                            sp.top_p, sp.top_k, sp.min_p, o.sampling);
    std::printf("model: %s (%s), device %s, gen %lld, %s, pipeline %s, median of %lld after a warm-up\n\n",
                core.model_name().c_str(), core.config().arch.c_str(), o.device.c_str(), (long long)gen,
                sampling.c_str(), o.pipeline.c_str(), (long long)repeat);
    std::printf("| context | batch | prefill tok/s | TTFT s | decode tok/s | KV + state | peak RSS |\n");
    std::printf("|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const Row& r : rows)
        std::printf("| %lld | %lld | %.1f | %.3f | %.1f | %s | %s |\n", (long long)r.ctx, (long long)r.batch,
                    r.m.prefill_tps, r.m.ttft_s, r.m.decode_tps, format_bytes(r.m.cache_bytes).c_str(),
                    format_bytes(peak).c_str());
    std::printf("\nweights %s; pools: KV %s, state %s; activations peak %s", format_bytes(st.weight_bytes).c_str(),
                format_bytes(st.kv_bytes).c_str(), format_bytes(st.state_bytes).c_str(),
                format_bytes(MemLog::global().get("activations_peak")).c_str());
    if (dev_peak > 0)
        std::printf("; device memory peak %s (weights as placed: %s)", format_bytes(dev_peak).c_str(),
                    format_bytes(MemLog::global().get("weights_device")).c_str());
    std::printf("\n");

    if (args.has("json")) {
        nlohmann::ordered_json j;
        j["model"] = o.model_path;
        j["arch"] = core.config().arch;
        j["device"] = o.device;
        j["gen"] = gen;
        j["repeat"] = repeat;
        j["prefill_chunk"] = o.max_num_batched_tokens;
        j["sampling"] = {{"temperature", sp.temperature}, {"top_p", sp.top_p}, {"top_k", sp.top_k},
                         {"min_p", sp.min_p}, {"where", o.sampling}};
        j["pipeline"] = o.pipeline;
        j["steps_ahead"] = st.steps_ahead;
        j["weights_bytes"] = st.weight_bytes;
        j["kv_pool_bytes"] = st.kv_bytes;
        j["state_pool_bytes"] = st.state_bytes;
        j["peak_rss_bytes"] = peak;
        j["device_peak_bytes"] = dev_peak;
        j["rows"] = nlohmann::ordered_json::array();
        for (const Row& r : rows)
            j["rows"].push_back({{"ctx", r.ctx},
                                 {"batch", r.batch},
                                 {"prefill_tok_s", r.m.prefill_tps},
                                 {"ttft_s", r.m.ttft_s},
                                 {"decode_tok_s", r.m.decode_tps},
                                 {"kv_state_bytes", r.m.cache_bytes}});
        std::ofstream f(args.get("json"));
        TS_CHECK(bool(f), "--json {}: cannot write", args.get("json"));
        f << j.dump(2) << "\n";
    }
    return 0;
}

std::vector<Option> bench_options() {
    auto o = common_model_options();
    for (const Option& x : std::vector<Option>{
             {"ctx", true, "prompt lengths, comma-separated (default 2048,4096,8192,16384,32768)"},
             {"batch", true, "concurrent requests, comma-separated (default 1)"},
             {"gen", true, "tokens generated per request (default 128)"},
             {"repeat", true, "measured runs per row; the median is reported (default 3)"},
             {"prefill-chunk", true, "tokens per engine step (default 512)"},
             {"kv-dtype", true, "f16 | f32 (default f16)"},
             {"memory-budget", true, "cache budget in bytes (default: what the runs need)"},
             {"temperature", true, "sampling temperature (default 0: greedy)"},
             {"top-p", true, "nucleus sampling mass (default 1: off)"},
             {"top-k", true, "top-k sampling (default 0: off)"},
             {"min-p", true, "min-p sampling (default 0: off)"},
             {"sampling", true, "auto | host | device: where sampled requests draw (default auto)"},
             {"pipeline", true, "auto | on | off: pipelined greedy decode (default auto: on a GPU)"},
             {"json", true, "also write the results as JSON to this file"}})
        o.push_back(x);
    return o;
}

}  // namespace

TESSERA_VERB("bench", "measure prefill / decode speed and cache memory (markdown table, --json)", bench_options(),
             run_bench);

}  // namespace tessera::cli
