// Prometheus text rendering of the server's and the engine's metrics.
#include "server/metrics.h"

#include <fmt/format.h>

namespace tessera::server {
namespace {

std::vector<double> latency_buckets() {
    return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
            0.75,  1.0,    2.5,   5.0,  7.5,   10.0, 20.0,  40.0, 80.0, 160.0, 320.0, 640.0};
}

void metric(std::string& out, const char* name, const char* type, const char* help, int64_t v) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} {2}\n{0} {3}\n", name, help, type, v);
}

}  // namespace

std::string escape_label(const std::string& v) {
    std::string o;
    for (char c : v) {
        if (c == '\\') o += "\\\\";
        else if (c == '"') o += "\\\"";
        else if (c == '\n') o += "\\n";
        else o += c;
    }
    return o;
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
    size_t i = 0;
    while (i < bounds_.size() && v > bounds_[i]) ++i;
    std::lock_guard<std::mutex> lock(mu_);
    counts_[i]++;
    sum_ += v;
    count_++;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out = fmt::format("# HELP {0} {1}\n# TYPE {0} histogram\n", name, help);
    uint64_t cum = 0;
    for (size_t i = 0; i < bounds_.size(); ++i) {
        cum += counts_[i];
        out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
    }
    cum += counts_.back();
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, cum, name, sum_, name, count_);
    return out;
}

ServerMetrics::ServerMetrics() : ttft(latency_buckets()), itl(latency_buckets()), e2e(latency_buckets()) {
    for (const char* r : {"stop", "length", "tool_calls", "cancelled", "error", "timeout"}) finished_[r] = 0;
}

void ServerMetrics::count_finish(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    finished_[reason]++;
}

void ServerMetrics::count_http(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    http_[status]++;
}

std::string ServerMetrics::render(const EngineStats& s, const std::map<std::string, int64_t>& memory) const {
    std::string out;
    {
        std::lock_guard<std::mutex> lock(mu_);
        out += "# HELP tessera_requests_total Generation requests finished, by finish reason.\n"
               "# TYPE tessera_requests_total counter\n";
        for (const auto& [r, n] : finished_)
            out += fmt::format("tessera_requests_total{{finish_reason=\"{}\"}} {}\n", escape_label(r), n);
        out += "# HELP tessera_http_responses_total HTTP responses, by status code.\n"
               "# TYPE tessera_http_responses_total counter\n";
        for (const auto& [code, n] : http_) out += fmt::format("tessera_http_responses_total{{code=\"{}\"}} {}\n", code, n);
    }
    metric(out, "tessera_prompt_tokens_total", "counter", "Prompt tokens processed (prefilled or taken from the prefix cache).", s.prompt_tokens);
    metric(out, "tessera_generation_tokens_total", "counter", "Tokens generated.", s.generated_tokens);
    metric(out, "tessera_prefix_cache_hit_tokens_total", "counter", "Prompt tokens reused from the prefix cache.", s.cached_prompt_tokens);
    metric(out, "tessera_preemptions_total", "counter", "Sequences preempted (recomputed) when KV blocks ran out.", s.preemptions);
    metric(out, "tessera_engine_steps_total", "counter", "Engine steps run.", s.steps);
    metric(out, "tessera_engine_steps_ahead_total", "counter",
           "Decode steps launched before the step before them had its tokens (pipelined decode).", s.steps_ahead);
    metric(out, "tessera_engine_requests_finished_total", "counter", "Requests the engine finished normally.", s.requests_finished);
    metric(out, "tessera_engine_requests_cancelled_total", "counter", "Requests the engine cancelled.", s.requests_cancelled);
    metric(out, "tessera_engine_requests_failed_total", "counter", "Requests that failed in the engine.", s.requests_failed);
    metric(out, "tessera_requests_waiting", "gauge", "Requests waiting to be scheduled.", s.waiting);
    metric(out, "tessera_requests_running", "gauge", "Requests running.", s.running);
    metric(out, "tessera_kv_blocks_total", "gauge", "KV cache blocks in the pool.", s.kv_blocks_total);
    metric(out, "tessera_kv_blocks_used", "gauge", "KV cache blocks held by requests.", s.kv_blocks_used);
    metric(out, "tessera_kv_blocks_cached", "gauge", "Free KV blocks that still hold reusable prefix-cache content.", s.kv_blocks_cached);
    metric(out, "tessera_kv_block_size_tokens", "gauge", "Tokens per KV block.", s.block_size);
    metric(out, "tessera_state_slots_total", "gauge", "Recurrent-state slots (hybrid models).", s.state_slots_total);
    metric(out, "tessera_state_slots_used", "gauge", "Recurrent-state slots held by requests.", s.state_slots_used);
    metric(out, "tessera_snapshots_total", "gauge", "Recurrent-state snapshot slots for prefix caching.", s.snapshots_total);
    metric(out, "tessera_snapshots_used", "gauge", "Recurrent-state snapshots held.", s.snapshots_used);
    metric(out, "tessera_max_model_len", "gauge", "Context length a request may use.", s.max_model_len);
    metric(out, "tessera_max_num_seqs", "gauge", "Sequences that may run at once.", s.max_num_seqs);
    out += ttft.render("tessera_time_to_first_token_seconds", "Time from submitting a request to its first token.");
    out += itl.render("tessera_inter_token_latency_seconds", "Time between consecutive tokens of a request.");
    out += e2e.render("tessera_e2e_request_latency_seconds", "Time from submitting a request to its final event.");
    out += "# HELP tessera_memory_bytes Memory by kind, from the memory log.\n# TYPE tessera_memory_bytes gauge\n";
    for (const auto& [k, v] : memory) out += fmt::format("tessera_memory_bytes{{kind=\"{}\"}} {}\n", escape_label(k), v);
    return out;
}

}  // namespace tessera::server
