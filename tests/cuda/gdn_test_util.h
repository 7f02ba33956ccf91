// Shared by the fast Gated DeltaNet tests (test_fast_gdn.cpp, test_fast_gdn_decode.cpp): random
// inputs and slots, and comparisons that name the first and the worst mismatch.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gdntest {

inline std::vector<float> random_floats(size_t n, std::mt19937& rng, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}

inline std::vector<int32_t> starts(const std::vector<int32_t>& lengths) {
    std::vector<int32_t> q(lengths.size() + 1, 0);
    for (size_t s = 0; s < lengths.size(); ++s) q[s + 1] = q[s] + lengths[s];
    return q;
}

// n distinct slots out of n_slots, shuffled; sequences listed in `padding` get -1.
inline std::vector<int32_t> random_slots(size_t n, int64_t n_slots, std::mt19937& rng, const std::vector<int>& padding = {}) {
    std::vector<int32_t> all(static_cast<size_t>(n_slots));
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    all.resize(n);
    for (int p : padding) all[size_t(p)] = -1;
    return all;
}

// Compares got with want: max error <= tol · max(1, max |want|) (NaN anywhere fails). On failure
// names the first offending element and the worst one through where(i).
inline void compare(const std::vector<float>& got, const std::vector<float>& want, double tol, const std::string& what,
             const std::function<std::string(size_t)>& where) {
    ASSERT_EQ(got.size(), want.size()) << what;
    double norm = 1;
    for (float x : want) norm = std::max(norm, double(std::fabs(x)));
    const double limit = tol * norm;
    double worst = 0;
    size_t worst_at = 0, first_at = 0, bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        double err = std::fabs(double(got[i]) - double(want[i]));
        if (std::isnan(err)) err = INFINITY;
        if (err > limit && bad++ == 0) first_at = i;
        if (err > worst) {
            worst = err;
            worst_at = i;
        }
    }
    if (bad == 0) return;
    ADD_FAILURE() << what << ": " << bad << " of " << got.size() << " elements off by more than " << limit << " (tol "
                  << tol << " x max|cpu| " << norm << "); first at " << where(first_at) << ": gpu " << got[first_at]
                  << " cpu " << want[first_at] << "; worst at " << where(worst_at) << ": gpu " << got[worst_at]
                  << " cpu " << want[worst_at] << " (error " << worst << ")";
}

template <typename T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what,
                      const std::function<std::string(size_t)>& where) {
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i)
        if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0 && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements differ, first at " << where(first) << ": " << got[first]
                       << " vs " << want[first];
}

}  // namespace gdntest
