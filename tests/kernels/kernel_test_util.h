// Shared helpers for the CPU kernel tests: seeded random data and owning buffers.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/simd.h"

namespace tessera::test {

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// Runs the test body with the SIMD kernels on or off, restoring the previous setting.
class SimdScope {
public:
    explicit SimdScope(bool on) : prev_(cpu::simd_enabled()) { cpu::set_simd_enabled(on); }
    ~SimdScope() { cpu::set_simd_enabled(prev_); }
private:
    bool prev_;
};

}  // namespace tessera::test
