// Results of the kernel benchmarks: one Row per measured case, printed as an aligned table while
// the run goes on, and written as JSON (--json FILE) at the end.
#pragma once
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "device_limits.h"
#include "shapes.h"

namespace tessera::bench {

struct Row {
    std::string name;   // e.g. "gemv 4096x14336"
    std::string dtype;  // weight / cache dtype, or "f32"
    int64_t tokens = 0;
    Cost cost;
    std::string anchor;  // llama.cpp on H200 at this shape ("" if none)
    std::string note;    // e.g. "3 copies" (cold weights), "8.0 experts"
    bool cold = false;   // calls cycle through more memory than the cache holds (copies, slots, routings)
    // Filled by the measurement: seconds per call.
    int runs = 0, inner = 0;
    double median = 0, p10 = 0, p90 = 0;

    double bytes_per_s() const { return median > 0 ? cost.bytes / median : 0; }
    double flops_per_s() const { return median > 0 ? cost.flops / median : 0; }
    // Roofline: the least time the device's limits allow is max(bytes / bandwidth, FLOPs / peak);
    // the binding limit is the one that sets it.
    bool bandwidth_bound(const Limits& l) const {
        return l.flops <= 0 || cost.bytes / l.bandwidth >= cost.flops / l.flops;
    }
    double bound_seconds(const Limits& l) const {
        return std::max(l.bandwidth > 0 ? cost.bytes / l.bandwidth : 0, l.flops > 0 ? cost.flops / l.flops : 0);
    }
    double percent_of(const Limits& l) const { return median > 0 ? 100.0 * bound_seconds(l) / median : 0; }
};

class Report {
public:
    // Rates print in GB/s and GFLOP/s on the CPU, TB/s and TFLOP/s on a GPU.
    Report(std::string binary, std::string device, Limits limits, bool gpu_units)
        : binary_(std::move(binary)),
          device_(std::move(device)),
          limits_(std::move(limits)),
          scale_(gpu_units ? 1e12 : 1e9),
          unit_(gpu_units ? "T" : "G") {}

    void print_header() const {
        std::printf("%s on %s\n", binary_.c_str(), device_.c_str());
        std::printf("limits: %.1f %sB/s (%s); %.1f %sFLOP/s (%s)\n", limits_.bandwidth / scale_, unit_,
                    limits_.bandwidth_source.c_str(), limits_.flops / scale_, unit_, limits_.flops_source.c_str());
        std::printf(
            "times: median [p10, p90] per call; %%lim = the limits' least time for the case (roofline:\n"
            "max(bytes / bandwidth, FLOPs / peak)) / median, suffixed by the binding limit: bw or fl;\n"
            "last column: llama.cpp on H200 (PERF.md) at the same shape, not comparable with CPU figures\n\n");
        std::printf("%-30s %-5s %5s %7s %11s %11s %11s %9s %10s %8s  %-26s %s\n", "case", "dtype", "T", "runs",
                    "median us", "p10 us", "p90 us", (std::string(unit_) + "B/s").c_str(),
                    (std::string(unit_) + "FLOP/s").c_str(), "%lim", "note", "llama.cpp on H200");
    }

    void add(const Row& r) {
        rows_.push_back(r);
        char runs[32];
        std::snprintf(runs, sizeof runs, r.inner > 1 ? "%dx%d" : "%d", r.runs, r.inner);
        std::printf("%-30s %-5s %5lld %7s %11.2f %11.2f %11.2f %9.3f %10.3f %6.1f%s  %-26s %s\n", r.name.c_str(),
                    r.dtype.c_str(), (long long)r.tokens, runs, r.median * 1e6, r.p10 * 1e6, r.p90 * 1e6,
                    r.bytes_per_s() / scale_, r.flops_per_s() / scale_, r.percent_of(limits_),
                    r.bandwidth_bound(limits_) ? "bw" : "fl", r.note.c_str(), r.anchor.c_str());
        std::fflush(stdout);
    }

    void write_json(const std::string& path, const nlohmann::json& options) const {
        nlohmann::json rows = nlohmann::json::array();
        for (const Row& r : rows_)
            rows.push_back({{"name", r.name},
                            {"dtype", r.dtype},
                            {"tokens", r.tokens},
                            {"bytes", r.cost.bytes},
                            {"flops", r.cost.flops},
                            {"bound", r.bandwidth_bound(limits_) ? "bandwidth" : "compute"},
                            {"bound_s", r.bound_seconds(limits_)},
                            {"runs", r.runs},
                            {"calls_per_run", r.inner},
                            {"median_s", r.median},
                            {"p10_s", r.p10},
                            {"p90_s", r.p90},
                            {"bytes_per_s", r.bytes_per_s()},
                            {"flops_per_s", r.flops_per_s()},
                            {"percent_of_limit", r.percent_of(limits_)},
                            {"note", r.note},
                            {"llama_cpp_h200", r.anchor}});
        const nlohmann::json doc = {{"binary", binary_},
                                    {"device", device_},
                                    {"limits",
                                     {{"name", limits_.name},
                                      {"bandwidth_bytes_per_s", limits_.bandwidth},
                                      {"bandwidth_source", limits_.bandwidth_source},
                                      {"flops_per_s", limits_.flops},
                                      {"flops_source", limits_.flops_source},
                                      {"cache_bytes", limits_.cache_bytes}}},
                                    {"options", options},
                                    {"results", rows}};
        std::ofstream f(path);
        if (!f) fail(ErrorKind::Io, "--json {}: cannot open for writing", path);
        f << doc.dump(2) << "\n";
        if (!f) fail(ErrorKind::Io, "--json {}: write failed", path);
    }

private:
    std::string binary_, device_;
    Limits limits_;
    double scale_;
    const char* unit_;
    std::vector<Row> rows_;
};

}  // namespace tessera::bench
