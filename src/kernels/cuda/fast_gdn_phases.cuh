// The device side of the chunked GDN's phase stamps (fast_gdn_phases.h gives the buffer's layout):
// PrepStamps for a lean prep item (its thread 0 stamps), PassStamps for a state pass's chunks (one
// thread of sequence 0's first column block of each value head). Without TESSERA_GDN_PHASES both are
// empty and every call compiles to nothing.
#pragma once
#include <cstdint>

#include "kernels/cuda/fast_gdn_phases.h"
#include "kernels/cuda/fast_gdn_wy.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"  // global_ns, sm_id

namespace tessera::cuda::fast::detail {

#if TESSERA_GDN_PHASES
struct PrepStamps {
    unsigned long long* rec;
    // Item `item`'s record where the call is stamped and tid is 0: its SM, start and stamp 0.
    __device__ PrepStamps(const wy::ChArgs& a, uint32_t item, int tid)
        : rec(a.phases && tid == 0 && item < kPhaseMaxItems ? a.phases + kPhaseItemWords * item : nullptr) {
        if (!rec) return;
        rec[0] = dev::sm_id();
        rec[1] = dev::global_ns();
        rec[2] = clock64();
    }
    __device__ void operator()(int k) const {  // the end of phase k (1 … 8)
        if (rec) rec[2 + k] = clock64();
    }
    __device__ void end() const {
        if (rec) rec[11] = dev::global_ns();
    }
};
struct PassStamps {
    unsigned long long* rec;  // value head h's chunks, or null
    __device__ PassStamps(const wy::ChArgs& a, int64_t h, bool stamper)
        : rec(a.phases && stamper && blockIdx.x == 0 && blockIdx.z == 0 && uint64_t(h) < kPhaseMaxHeads
                  ? a.phases + kPhasePassBase + 4 * kPhaseMaxChunks * uint64_t(h)
                  : nullptr) {}
    __device__ void at(int c, int k) const {  // word k of chunk c (fast_gdn_phases.h)
        if (rec && uint64_t(c) < kPhaseMaxChunks) rec[4 * c + k] = dev::global_ns();
    }
};
#else
struct PrepStamps {
    __device__ PrepStamps(const wy::ChArgs&, uint32_t, int) {}
    __device__ void operator()(int) const {}
    __device__ void end() const {}
};
struct PassStamps {
    __device__ PassStamps(const wy::ChArgs&, int64_t, bool) {}
    __device__ void at(int, int) const {}
};
#endif

}  // namespace tessera::cuda::fast::detail
