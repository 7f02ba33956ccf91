// The shared harness of the kernel micro-benchmarks (bench_gemv, bench_gemm, ...): command-line
// options, the device, warm-up and timed runs (median, p10, p90), and the report. A binary is
//   int main(int argc, char** argv) { return run_main(info, argc, argv, [](Bench& b) { ... }); }
// where the body builds each case on b.dev() and calls b.run(row, fn).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/thread_pool.h"
#include "data.h"
#include "device.h"
#include "report.h"
#include "shapes.h"

namespace tessera::bench {

struct FamilyInfo {
    const char* binary;               // "bench_gemv"
    const char* about;                // one line: what it measures
    std::vector<int64_t> tokens;      // default --tokens
    std::vector<std::string> dtypes;  // default --dtypes (empty: the binary takes none)
    std::vector<int64_t> ctx = {};    // default --ctx, context lengths (empty: the binary takes none)
    const char* tokens_help = "token counts";
    const char* dtypes_help = "weight dtypes";
};

struct Options {
    std::string device = "cpu";
    int runs = 20, warmup = 3, threads = 0;
    double max_seconds = 0;      // per case: fewer runs (never < 3) when runs × call time exceeds it
    double min_sample_us = 100;  // a timed run repeats the call until it lasts about this long
    std::vector<std::string> filter;
    std::string json;
    std::vector<int64_t> tokens, ctx;
    std::vector<std::string> dtypes;
    double cpu_bw = 0, cpu_flops = 0;  // overrides of the CPU limits (bytes/s, FLOP/s)
};

inline std::vector<std::string> split_list(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) out.push_back(item);
    return out;
}

inline std::string join(const std::vector<int64_t>& v) {
    std::string s;
    for (int64_t x : v) {
        if (!s.empty()) s += ',';
        s += std::to_string(x);
    }
    return s;
}

inline void print_usage(const FamilyInfo& f) {
    std::string dtypes;
    for (const auto& d : f.dtypes) {
        if (!dtypes.empty()) dtypes += ',';
        dtypes += d;
    }
    const std::string tokens = std::string(f.tokens_help) + " (default " + join(f.tokens) + ")";
    const std::string more =
        (f.dtypes.empty() ? ""
                          : "  --dtypes LIST          " + std::string(f.dtypes_help) + " (default " + dtypes + ")\n") +
        (f.ctx.empty() ? "" : "  --ctx LIST             context lengths (default " + join(f.ctx) + ")\n");
    std::printf(
        "%s: %s\n\nusage: %s [options]\n"
        "  --device cpu|cuda      where to run (default cpu; cuda needs the CUDA backend)\n"
        "  --runs N               timed runs per case, median/p10/p90 over them (default 20)\n"
        "  --warmup N             untimed calls first (default 3)\n"
        "  --max-seconds S        per case: cut runs (>= 3) so runs x call time stays near S (slow CPU shapes)\n"
        "  --min-sample-us U      a run repeats a short call until it lasts ~U us (default 100)\n"
        "  --filter A,B           only cases whose label (\"name dtype T=n\") contains A or B\n"
        "  --tokens LIST          %s\n"
        "%s"
        "  --threads N            CPU threads (default: every core)\n"
        "  --cpu-bw GB/s          CPU bandwidth limit instead of measuring it\n"
        "  --cpu-flops GFLOP/s    CPU compute limit instead of measuring it\n"
        "  --json FILE            also write the results as JSON\n",
        f.binary, f.about, f.binary, tokens.c_str(), more.c_str());
}

// Parses argv; returns false after --help.
inline bool parse_options(const FamilyInfo& f, int argc, char** argv, Options& o) {
    o.tokens = f.tokens;
    o.dtypes = f.dtypes;
    o.ctx = f.ctx;
    auto counts = [](const std::string& opt, const std::string& v) {
        std::vector<int64_t> out;
        for (const auto& t : split_list(v)) {
            const long long n = std::atoll(t.c_str());
            TS_CHECK(n >= 1, "{} {}: '{}' is not a count >= 1", opt, v, t);
            out.push_back(n);
        }
        return out;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            print_usage(f);
            return false;
        }
        TS_CHECK(i + 1 < argc, "{}: {} needs a value (see --help)", f.binary, a);
        const std::string v = argv[++i];
        auto num = [&](double lo) {
            char* end = nullptr;
            const double x = std::strtod(v.c_str(), &end);
            TS_CHECK(end && *end == 0 && x >= lo, "{} {}: expected a number >= {}", a, v, lo);
            return x;
        };
        if (a == "--device")
            o.device = v;
        else if (a == "--runs")
            o.runs = int(num(1));
        else if (a == "--warmup")
            o.warmup = int(num(0));
        else if (a == "--max-seconds")
            o.max_seconds = num(0);
        else if (a == "--min-sample-us")
            o.min_sample_us = num(0);
        else if (a == "--filter")
            o.filter = split_list(v);
        else if (a == "--threads")
            o.threads = int(num(0));
        else if (a == "--json")
            o.json = v;
        else if (a == "--cpu-bw")
            o.cpu_bw = num(0) * 1e9;
        else if (a == "--cpu-flops")
            o.cpu_flops = num(0) * 1e9;
        else if (a == "--tokens")
            o.tokens = counts(a, v);
        else if (a == "--ctx" && !f.ctx.empty())
            o.ctx = counts(a, v);
        else if (a == "--dtypes" && !f.dtypes.empty()) {
            o.dtypes = split_list(v);
            for (const auto& d : o.dtypes) dtype_from_name(d);  // throws on an unknown name
        } else
            fail(ErrorKind::Invalid, "{}: unknown option {} (see --help)", f.binary, a);
    }
    return true;
}

// Value at fraction q of sorted samples (linear interpolation).
inline double percentile(const std::vector<double>& sorted, double q) {
    if (sorted.empty()) return 0;
    const double pos = q * double(sorted.size() - 1);
    const size_t lo = size_t(pos), hi = std::min(lo + 1, sorted.size() - 1);
    return sorted[lo] + (pos - double(lo)) * (sorted[hi] - sorted[lo]);
}

class Bench {
public:
    Bench(const FamilyInfo& f, Options o) : info_(f), opt_(std::move(o)) {
        if (opt_.threads > 0) ThreadPool::set_global_threads(opt_.threads);
        dev_ = make_device(opt_.device, opt_.cpu_bw, opt_.cpu_flops);
        report_ = std::make_unique<Report>(f.binary, dev_->describe(), dev_->limits(), dev_->device() != Device::CPU);
        report_->print_header();
    }

    BenchDevice& dev() { return *dev_; }
    Backend& be() { return dev_->backend(); }
    const Options& opt() const { return opt_; }

    // Whether --filter selects the case "name dtype T=n" (check before building its inputs).
    bool want(const std::string& name, const std::string& dtype, int64_t tokens) const {
        if (opt_.filter.empty()) return true;
        const std::string label = name + " " + dtype + " T=" + std::to_string(tokens);
        for (const auto& f : opt_.filter)
            if (label.find(f) != std::string::npos) return true;
        return false;
    }

    // How many copies of `bytes` of weights to rotate over so each call reads them from memory,
    // not from a cache that held the previous call's: enough to span 4× the last-level cache
    // (2× still left an AMD L3 serving part of the reads).
    int cold_copies(double bytes) const {
        const double cache = double(dev_->limits().cache_bytes);
        return int(std::clamp(std::ceil(4 * cache / std::max(bytes, 1.0)), 1.0, 64.0));
    }

    // Times fn (fn(i): the i-th call, i counts up across warm-up and runs) and reports `row`.
    void run(Row row, const std::function<void(int)>& fn) {
        int calls = 0;
        auto once = [&](int reps) { return dev_->time(reps, [&](int) { fn(calls++); }) / reps; };
        double est = once(1);  // at least one warm-up: first-touch, scratch growth
        for (int w = 1; w < opt_.warmup && est < 1.0; ++w) est = std::min(est, once(1));
        const int inner = std::clamp(int(opt_.min_sample_us * 1e-6 / std::max(est, 1e-9)), 1, 10000);
        int runs = opt_.runs;
        if (opt_.max_seconds > 0)
            runs = std::clamp(int(opt_.max_seconds / (est * inner)), std::min(3, opt_.runs), opt_.runs);
        std::vector<double> t;
        for (int r = 0; r < runs; ++r) t.push_back(once(inner));
        std::sort(t.begin(), t.end());
        // A bandwidth-bound working set the last-level cache holds (activations, small weights)
        // can beat the DRAM limit: say so.
        const Limits& l = dev_->limits();
        if (!row.cold && row.cost.bytes <= double(l.cache_bytes) && row.bandwidth_bound(l))
            row.note += row.note.empty() ? "cache-hot" : ", cache-hot";
        row.runs = runs;
        row.inner = inner;
        row.median = percentile(t, 0.5);
        row.p10 = percentile(t, 0.1);
        row.p90 = percentile(t, 0.9);
        report_->add(row);
    }

    void finish() const {
        if (opt_.json.empty()) return;
        const nlohmann::json o = {{"device", opt_.device},
                                  {"runs", opt_.runs},
                                  {"warmup", opt_.warmup},
                                  {"max_seconds", opt_.max_seconds},
                                  {"min_sample_us", opt_.min_sample_us},
                                  {"threads", ThreadPool::global().size()},
                                  {"tokens", opt_.tokens},
                                  {"ctx", opt_.ctx},
                                  {"dtypes", opt_.dtypes},
                                  {"filter", opt_.filter}};
        report_->write_json(opt_.json, o);
        std::printf("\nwrote %s\n", opt_.json.c_str());
    }

private:
    FamilyInfo info_;
    Options opt_;
    std::unique_ptr<BenchDevice> dev_;
    std::unique_ptr<Report> report_;
};

// main() of a benchmark binary: exit 0, 1 on an error, 2 when the device is not available
// (e.g. --device cuda before the CUDA backend exists).
inline int run_main(const FamilyInfo& f, int argc, char** argv, const std::function<void(Bench&)>& body) {
    try {
        Options o;
        if (!parse_options(f, argc, argv, o)) return 0;
        Bench b(f, std::move(o));
        body(b);
        b.finish();
        return 0;
    } catch (const Error& e) {
        std::fprintf(stderr, "%s: error: %s\n", f.binary, e.what());
        return e.kind() == ErrorKind::Unsupported ? 2 : 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: %s\n", f.binary, e.what());
        return 1;
    }
}

}  // namespace tessera::bench
