// The MoE decode kernels' shared pieces (fast_moe_decode_mma.cu, fast_moe_decode_dp4a.cu): the
// gate+up kernels' slot prologue, and the down kernels' epilogue — a block's 16 outputs of one
// token from its (slot, k-tile) partials, summed in a fixed order (each slot's k-tiles in order,
// weighted, then the slots in order; no atomics: deterministic). Device code only.
#pragma once

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::dev {

// One matrix (gate, up or down) of every expert, as the decode kernels find expert e's: from the
// stack where MoeTiling found one (expert e's codes, scales and biases right after expert e − 1's:
// e's pointers are arithmetic, so the way to its weights has no descriptor load), else from e's
// descriptor. Built on the host by expert_stack (fast_moe_decode_dp4a.cu).
struct ExpertStack {
    const PackedMatrix* desc;  // device [E]
    PackedMatrix m0;           // expert 0's, where stacked (else m0.codes is null)
    int64_t code_step, scale_step;  // bytes of codes, halves of scales (biases) an expert
};
__device__ __forceinline__ PackedMatrix expert_matrix(const ExpertStack& st, int e) {
    if (st.m0.codes == nullptr) return st.desc[e];
    PackedMatrix m = st.m0;
    m.codes += e * st.code_step;
    m.scales += e * st.scale_step;
    if (m.biases) m.biases += e * st.scale_step;
    return m;
}

// A gate+up block's start, launched with PDL: waits for ids and x (the kernels before), lets the
// down kernel start (it reads act only after this grid ends), and returns slot s's expert — or,
// for an id outside [0, E), writes NaN to the block's ROWS outputs of act (from i0) and returns
// -1: the whole block then returns. Call from every thread.
template <int ROWS>
__device__ __forceinline__ int slot_expert(const int32_t* __restrict__ ids, int64_t s, int E, float* __restrict__ act,
                                           int I, int i0) {
    pdl::wait();
    pdl::trigger();
    const int e = ids[s];
    if (e < 0 || e >= E) {
        if (threadIdx.x < ROWS) act[s * I + i0 + int(threadIdx.x)] = quiet_nan();
        return -1;
    }
    return e;
}

// part [k·nkt][ROWS] (shared): slot j's partial of k-tile kt at (j·nkt + kt)·ROWS. Thread (er, ej)
// = (threadIdx.x % ROWS, threadIdx.x / ROWS) with wj its slot's routing weight; slot_out [k][ROWS]
// shared scratch; out = the token's row of y at the block's first output. Call from every thread
// after part is complete (it begins with a barrier).
template <int ROWS>
__device__ __forceinline__ void sum_slots_in_order(const float* part, int nkt, int k, float wj,
                                                   float (*slot_out)[ROWS], float* out) {
    const int er = int(threadIdx.x) % ROWS, ej = int(threadIdx.x) / ROWS;
    __syncthreads();
    if (ej < k) {
        const float* p = part + ej * nkt * ROWS + er;
        float o = p[0];
        for (int kt = 1; kt < nkt; ++kt) o += p[kt * ROWS];
        slot_out[ej][er] = __fmul_rn(wj, o);
    }
    __syncthreads();
    if (threadIdx.x < ROWS) {
        float v[kMoeMaxTopK];
#pragma unroll
        for (int j = 0; j < kMoeMaxTopK; ++j) v[j] = j < k ? slot_out[j][er] : 0.f;
        float sum = v[0];
#pragma unroll
        for (int j = 1; j < kMoeMaxTopK; ++j)
            if (j < k) sum = __fadd_rn(sum, v[j]);
        out[er] = sum;
    }
}

}  // namespace tessera::cuda::fast::dev
