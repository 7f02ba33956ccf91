// Server metrics in the Prometheus text exposition format: request counters by finish reason,
// latency histograms measured in the server (time to first token, inter-token latency, end to
// end), and the engine's gauges and counters (queue, KV blocks, state slots, snapshots, tokens,
// prefix-cache hits) plus the memory log as tessera_memory_bytes{kind="..."}.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_core.h"

namespace tessera::server {

// A cumulative histogram with fixed upper bounds (seconds); thread-safe.
class Histogram {
public:
    explicit Histogram(std::vector<double> bounds);
    void observe(double v);
    // "# HELP", "# TYPE" and the _bucket / _sum / _count lines.
    std::string render(const std::string& name, const std::string& help) const;

private:
    std::vector<double> bounds_;
    mutable std::mutex mu_;
    std::vector<uint64_t> counts_;  // per bucket, the last one is +Inf (not cumulative)
    double sum_ = 0;
    uint64_t count_ = 0;
};

class ServerMetrics {
public:
    ServerMetrics();

    // A generation request ended: "stop", "length", "tool_calls", "cancelled", "error", "timeout".
    void count_finish(const std::string& reason);
    void count_http(int status);  // every HTTP response, by status code

    Histogram ttft, itl, e2e;

    std::string render(const EngineStats& s, const std::map<std::string, int64_t>& memory) const;

private:
    mutable std::mutex mu_;
    std::map<std::string, uint64_t> finished_;
    std::map<int, uint64_t> http_;
};

std::string escape_label(const std::string& v);  // \ " and newline escaped as Prometheus wants

}  // namespace tessera::server
