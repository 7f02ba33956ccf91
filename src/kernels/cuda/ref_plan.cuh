// Device-side lookups into the per-step plans (AttnPlan / SeqPlan arrays in device memory), shared
// by the reference kernels: which sequence a token belongs to, found on the device so a launch
// never waits for the host to read the plan.
#pragma once
#include <cstdint>

namespace tessera::cuda::ref {

// The sequence s of token t: q_start[s] <= t < q_start[s + 1], by binary search over the
// non-decreasing q_start[n_seqs + 1] (empty sequences before s share its start; the last
// s with q_start[s] <= t is the non-empty one). -1 when no sequence covers t.
__device__ inline int find_seq(const int32_t* q_start, int n_seqs, int64_t t) {
    int lo = 0, hi = n_seqs;  // q_start[i] <= t for i < lo, > t for i >= hi
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (q_start[mid] <= t) lo = mid + 1;
        else hi = mid;
    }
    const int s = lo - 1;
    return s >= 0 && t < q_start[s + 1] ? s : -1;
}

__device__ inline float quiet_nan() { return __int_as_float(0x7fc00000); }

}  // namespace tessera::cuda::ref
