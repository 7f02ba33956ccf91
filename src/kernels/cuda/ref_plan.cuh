// Device-side lookups into the per-step plans (AttnPlan / SeqPlan arrays in device memory), shared
// by the reference kernels and the fast ones that walk the same plans (attention, the GDN conv):
// which sequence a token belongs to, found on the device so a launch never waits for the host to
// read the plan.
#pragma once
#include <cstdint>

#include "kernels/backend.h"  // AttnPlan

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

// Token t's place in an attention plan: its sequence s, the sequence's context len (kv_len) and
// the token's position pos. ok is false for a bad plan row (no sequence covers t, a position
// outside [0, len), or a context past the block table of max_blocks × block_size keys); a
// padding sequence (len 0) is ok with pos = −1.
struct TokenContext {
    int s = -1;
    int64_t pos = -1, len = 0;
    bool ok = false;
};
__device__ inline TokenContext token_context(const AttnPlan& plan, int64_t t, int64_t block_size) {
    TokenContext c;
    c.s = find_seq(plan.q_start, plan.n_seqs, t);
    c.ok = c.s >= 0;
    if (c.ok) {
        const int64_t n_new = int64_t(plan.q_start[c.s + 1]) - plan.q_start[c.s];
        c.len = plan.kv_len[c.s];
        c.pos = c.len - n_new + (t - plan.q_start[c.s]);
        c.ok = c.len == 0 || (c.pos >= 0 && c.pos < c.len && c.len <= int64_t(plan.max_blocks) * block_size);
    }
    return c;
}

// Sequence s's tokens [t0, t0 + n) and slot (-1: a padding sequence, which starts from a zero
// state and writes none back), or false when the plan row is unusable.
struct SeqRange {
    int64_t t0 = 0, n = 0, slot = -1;
};
__device__ inline bool seq_range(const SeqPlan& plan, int s, int64_t T, int64_t n_slots, SeqRange* r) {
    r->t0 = plan.q_start[s];
    const int64_t t1 = plan.q_start[s + 1];
    r->n = t1 - r->t0;
    r->slot = plan.slot[s];
    return r->t0 >= 0 && r->n >= 0 && t1 <= T && r->slot >= -1 && r->slot < n_slots;
}

// Input p of the sequence for channel c: x row t0 + p, or for p < 0 state row K-1+p (the state
// holds inputs -(K-1) .. -1, oldest first; no state: zeros).
__device__ inline float conv_input(const float* x, int64_t xs, const float* st, int64_t C, int64_t K, int64_t t0,
                                   int64_t p, int64_t c) {
    return p >= 0 ? x[(t0 + p) * xs + c] : st ? st[(K - 1 + p) * C + c] : 0.f;
}

__device__ inline float quiet_nan() { return __int_as_float(0x7fc00000); }

}  // namespace tessera::cuda::ref
