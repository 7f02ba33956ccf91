// The /metrics text: valid Prometheus exposition format, histogram buckets, engine gauges and
// the memory log.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "server/metrics.h"

using namespace tessera;
using namespace tessera::server;

namespace {

// Checks the exposition format: every sample line is `name{labels} value`, its family has a
// # HELP and a # TYPE line before it; returns the samples by their full name with labels.
std::map<std::string, double> parse_exposition(const std::string& text) {
    std::map<std::string, double> samples;
    std::set<std::string> typed, helped;
    const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})? (-?[0-9.e+-]+|\+Inf|NaN)$)");
    const std::regex type(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram)$)");
    const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
    std::istringstream in(text);
    std::string line;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_match(line, m, type)) {
            EXPECT_TRUE(helped.count(m[1])) << "TYPE before HELP: " << line;
            EXPECT_TRUE(typed.insert(m[1]).second) << "family typed twice: " << line;
        } else if (std::regex_match(line, m, help)) {
            helped.insert(m[1]);
        } else {
            EXPECT_TRUE(std::regex_match(line, m, sample)) << "bad line: '" << line << "'";
            std::string family = m[1];
            for (const char* suffix : {"_bucket", "_sum", "_count"})
                if (!typed.count(family) && family.size() > strlen(suffix) &&
                    family.compare(family.size() - strlen(suffix), std::string::npos, suffix) == 0)
                    family = family.substr(0, family.size() - strlen(suffix));
            EXPECT_TRUE(typed.count(family)) << "sample without # TYPE: " << line;
            EXPECT_EQ(family.rfind("tessera_", 0), 0u) << line;
            samples[std::string(m[1]) + std::string(m[2])] = std::stod(m[3]);
        }
    }
    return samples;
}

}  // namespace

TEST(Metrics, HistogramIsCumulative) {
    Histogram h({0.1, 1.0});
    for (double v : {0.05, 0.1, 0.5, 3.0}) h.observe(v);
    const auto s = parse_exposition(h.render("tessera_x_seconds", "x"));
    EXPECT_EQ(s.at("tessera_x_seconds_bucket{le=\"0.1\"}"), 2);  // le is inclusive
    EXPECT_EQ(s.at("tessera_x_seconds_bucket{le=\"1\"}"), 3);
    EXPECT_EQ(s.at("tessera_x_seconds_bucket{le=\"+Inf\"}"), 4);
    EXPECT_EQ(s.at("tessera_x_seconds_count"), 4);
    EXPECT_DOUBLE_EQ(s.at("tessera_x_seconds_sum"), 3.65);
}

TEST(Metrics, RenderHasEverything) {
    ServerMetrics m;
    m.count_finish("stop");
    m.count_finish("stop");
    m.count_finish("length");
    m.count_http(200);
    m.count_http(404);
    m.ttft.observe(0.2);
    m.itl.observe(0.01);
    m.e2e.observe(1.5);
    EngineStats st;
    st.waiting = 2;
    st.running = 3;
    st.kv_blocks_total = 100;
    st.kv_blocks_used = 7;
    st.kv_blocks_cached = 5;
    st.state_slots_total = 8;
    st.state_slots_used = 1;
    st.snapshots_total = 4;
    st.snapshots_used = 2;
    st.prompt_tokens = 1000;
    st.generated_tokens = 50;
    st.cached_prompt_tokens = 64;
    const auto s = parse_exposition(m.render(st, {{"weights", 1234}, {"kv \"pool\"", 5}}));
    EXPECT_EQ(s.at("tessera_requests_total{finish_reason=\"stop\"}"), 2);
    EXPECT_EQ(s.at("tessera_requests_total{finish_reason=\"length\"}"), 1);
    EXPECT_EQ(s.at("tessera_requests_total{finish_reason=\"cancelled\"}"), 0);
    EXPECT_EQ(s.at("tessera_http_responses_total{code=\"404\"}"), 1);
    EXPECT_EQ(s.at("tessera_requests_waiting"), 2);
    EXPECT_EQ(s.at("tessera_requests_running"), 3);
    EXPECT_EQ(s.at("tessera_kv_blocks_total"), 100);
    EXPECT_EQ(s.at("tessera_kv_blocks_used"), 7);
    EXPECT_EQ(s.at("tessera_kv_blocks_cached"), 5);
    EXPECT_EQ(s.at("tessera_state_slots_total"), 8);
    EXPECT_EQ(s.at("tessera_state_slots_used"), 1);
    EXPECT_EQ(s.at("tessera_snapshots_total"), 4);
    EXPECT_EQ(s.at("tessera_snapshots_used"), 2);
    EXPECT_EQ(s.at("tessera_prompt_tokens_total"), 1000);
    EXPECT_EQ(s.at("tessera_generation_tokens_total"), 50);
    EXPECT_EQ(s.at("tessera_prefix_cache_hit_tokens_total"), 64);
    EXPECT_EQ(s.at("tessera_time_to_first_token_seconds_count"), 1);
    EXPECT_EQ(s.at("tessera_inter_token_latency_seconds_count"), 1);
    EXPECT_EQ(s.at("tessera_e2e_request_latency_seconds_bucket{le=\"1\"}"), 0);
    EXPECT_EQ(s.at("tessera_e2e_request_latency_seconds_bucket{le=\"2.5\"}"), 1);
    EXPECT_EQ(s.at("tessera_memory_bytes{kind=\"weights\"}"), 1234);
    EXPECT_EQ(s.at("tessera_memory_bytes{kind=\"kv \\\"pool\\\"\"}"), 5);
}

TEST(Metrics, EscapeLabel) { EXPECT_EQ(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd"); }
