// The reference CUDA paged attention: plain, obviously correct kernels that stay as the baseline
// and the proof for the fast kernel pack (Backend::attention's semantics, kernels/backend.h).
// Raw device pointers, element strides; every AttnPlan array lives in device memory and is read
// only on the device (no host sync: the launch depends on T and n_head alone, so it can be
// captured in a CUDA graph). Queued on `stream`; throws Error on bad host-side arguments.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/backend.h"

namespace tessera::cuda::ref {

// One paged cache [n_blocks, block_size, n_kv, D] on the device: f32, or f16 bit patterns.
// Strides in elements; D is contiguous.
struct PagedCache {
    const void* data = nullptr;
    bool f16 = false;
    int64_t n_blocks = 0, block_size = 0, n_kv = 0, D = 0;
    int64_t block_stride = 0, row_stride = 0, head_stride = 0;
};

// out[T, n_head, Dv] = causal softmax(q·kᵀ·scale)·v over the paged caches, GQA: query head h
// reads kv head h / (n_head / n_kv). q [T, n_head, D] at q + t·q_ts + h·q_hs, out [T, n_head, Dv]
// at out + t·out_ts + h·out_hs (D contiguous). k [.., D] and v [.., Dv] share blocks and n_kv;
// D, Dv <= 256. plan.q_start / kv_len / block_table are device pointers (AttnPlan semantics).
// One thread block per (token, head), online softmax over the keys in f32.
// Bad plan data that only the device sees (a token no sequence covers, a position outside
// kv_len or the block table, a block index outside the cache) yields NaN rows for the tokens
// concerned, never an out-of-bounds read.
void attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
               int64_t n_head, const PagedCache& k_cache, const PagedCache& v_cache, const AttnPlan& plan,
               float scale, cudaStream_t stream);

inline constexpr int64_t kAttentionMaxHeadDim = 256;

namespace detail {
// The one entry point into ref_attention.cu (which includes no fmt: nvcc rejects its consteval
// format strings). Arguments are already checked; returns the launch's error.
cudaError_t launch_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                             int64_t q_hs, int64_t T, int64_t n_head, const PagedCache& k_cache,
                             const PagedCache& v_cache, const AttnPlan& plan, float scale, cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::ref
