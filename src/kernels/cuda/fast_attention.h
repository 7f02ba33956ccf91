// The kernel pack's paged attention (Backend::attention's semantics, kernels/backend.h): one
// thread block per (query token, kv head, context split) computes all query heads of that kv
// head's group at once, so each key and value row is read once per group instead of once per
// head; keys and values go through shared memory in tiles of 32 (f32 or f16 caches), scores and
// the online softmax in f32. Long contexts are split (flash-decoding) so a single decoding
// sequence still fills the GPU; the splits' partial results (m, l, acc) are merged by a second
// kernel in a fixed order (deterministic). Padding sequences (kv_len 0) get zero rows.
//
// Limits (else the backend keeps the reference kernel): D = Dv ∈ {32, 64, 128, 256},
// at most 8 query heads per kv head. No allocation, no host sync: CUDA-graph safe.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/ref_attention.h"

namespace tessera::cuda::fast {

constexpr int64_t kAttnMaxGroup = 8;
constexpr int64_t kAttnMaxSplits = 256;

// Whether attention() takes these shapes.
bool attention_supported(int64_t n_head, int64_t n_kv, int64_t D, int64_t Dv);
// Context splits for T tokens (max_ctx = plan.max_blocks · block_size bounds every sequence's
// context): enough blocks to fill the GPU, each split at least 128 keys.
int attention_splits(int64_t T, int64_t n_kv, int64_t max_ctx);
// Scratch bytes attention() needs (0 when one split suffices).
size_t attention_scratch(int64_t T, int64_t n_head, int64_t D, int splits);

// out[T, n_head, D] as ref::attention; scratch of attention_scratch(T, n_head, D, splits) bytes.
void attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
               int64_t n_head, const ref::PagedCache& k_cache, const ref::PagedCache& v_cache, const AttnPlan& plan,
               float scale, int splits, void* scratch, cudaStream_t stream);

}  // namespace tessera::cuda::fast
