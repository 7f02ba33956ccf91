// The runtime switch between the SIMD kernels and the scalar fallback.
#include "kernels/cpu/simd.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace tessera::cpu {

namespace {
bool initial_simd() {
    const char* env = std::getenv("TESSERA_CPU_SIMD");
    return simd_compiled() && !(env && std::strcmp(env, "0") == 0);
}
std::atomic<bool> g_simd{initial_simd()};
}  // namespace

bool simd_enabled() { return g_simd.load(std::memory_order_relaxed); }
void set_simd_enabled(bool on) { g_simd.store(on && simd_compiled(), std::memory_order_relaxed); }

}  // namespace tessera::cpu
