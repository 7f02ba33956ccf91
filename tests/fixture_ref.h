// The transformers fixtures (tests/fixtures/<model>/reference.json + logits_*.bin) as the C++
// tests read them, and the error measure they are compared with. Shared by the CPU model tests
// and the CUDA model tests (TESSERA_SOURCE_DIR is defined for both binaries).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::fixtures {

struct FixtureRef {
    std::string dir;
    nlohmann::json json;
    std::vector<int32_t> ids(const char* tag) const { return json["prompts"][tag]["ids"].get<std::vector<int32_t>>(); }
    // The recorded logits of prompt `tag`, [n_tokens, vocab] row-major.
    std::vector<float> logits(const char* tag) const {
        const auto& l = json["prompts"][tag]["logits"];
        std::ifstream f(dir + "/" + l["file"].get<std::string>(), std::ios::binary);
        const size_t n = l["shape"][0].get<size_t>() * l["shape"][1].get<size_t>();
        std::vector<float> v(n);
        f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * 4));
        EXPECT_TRUE(f.good()) << "short read of " << l["file"];
        return v;
    }
};

inline FixtureRef load_fixture(const std::string& name) {
    FixtureRef r;
    r.dir = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + name;
    std::ifstream f(r.dir + "/reference.json");
    EXPECT_TRUE(f.good()) << "missing fixture " << r.dir;
    r.json = nlohmann::json::parse(f);
    return r;
}

// max |got - want| over the rows, relative to max |want|.
inline double rel_err(const float* got, const float* want, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; ++i) {
        d = std::max(d, double(std::fabs(got[i] - want[i])));
        m = std::max(m, double(std::fabs(want[i])));
    }
    return d / m;
}

}  // namespace tessera::fixtures
