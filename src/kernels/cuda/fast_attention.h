// The kernel pack's paged attention (Backend::attention's semantics, kernels/backend.h): one
// thread block per (query token, kv head, context split) computes all query heads of that kv
// head's group at once, so each key and value row is read once per group instead of once per
// head; keys and values go through shared memory in tiles. Long contexts are split (flash-decoding) so a single decoding
// sequence still fills the GPU; the splits' partial results (m, l, acc) are merged by a second
// kernel in a fixed order (deterministic). Padding sequences (kv_len 0) get zero rows.
//
// Two kernels (AttnKernel):
//   Simt: f32 math throughout (q·k, softmax, p·v), f32 or f16 caches, D = Dv ∈ {32, 64, 128,
//         256}, at most 8 query heads per kv head; keys in tiles of 32 (f16) or 16 (f32).
//   Mma:  the tensor cores (fast_decode_attention.cu): the group's query heads are the mma rows,
//         keys in tiles of 64 streamed two deep by cp.async; q·scale and p rounded to f16 (as the
//         prefill flash kernel), so results are within ~2e-3 of f32. f16 caches, D = Dv ∈ {64,
//         128, 256}, at most 16 query heads per kv head.
// The backend takes Mma where it applies (TESSERA_DECODE_ATTENTION=simt keeps Simt, for A/B),
// else Simt where that applies, else the reference kernel. No allocation, no host sync:
// CUDA-graph safe.
// The splits' merge (AttnMerge): a second kernel (the default), or with Mma fused into the
// attention kernel — the splits of a (token, kv head) in thread-block clusters merging through
// distributed shared memory, the last cluster to end (a ticket on a per-(token, kv head) counter,
// which it resets) merging the clusters' partials in cluster order; deterministic. The two merges
// weigh the splits in different orders and units (log2 vs natural log), so their results differ
// in the last bits (≤ ~1e-6 relative), each deterministic.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/ref_attention.h"

namespace tessera::cuda::fast {

constexpr int64_t kAttnMaxGroup = 8;      // Simt
constexpr int64_t kAttnMaxGroupMma = 16;  // Mma: one m16 row tile
constexpr int64_t kAttnMaxSplits = 256;

enum class AttnKernel : int { Simt = 0, Mma = 1 };

// An output gate the attention kernels apply as they write (Qwen3.5 / Qwen3-Next's gated
// attention): out[t, h, d] = attention · σ(g[t·ts + h·hs + d]), σ as ref::sigmoid_mul computes
// it. g null: no gate.
struct OutGate {
    const float* g = nullptr;
    int64_t ts = 0, hs = 0;
};

// How the splits' partial results meet (Mma only; Simt always merges in the second kernel).
//   fused = false: the combine kernel (fast_attention.cu) after the attention kernel.
//   fused = true: in the attention kernel (fast_decode_attention.cu, fused_merge), in clusters of
//     `cluster` blocks along the splits (2, 4, 8, or 16, a non-portable size; 0: the largest of 8,
//     4, 2 whose clusters are all resident at once; at most the splits), the splits rounded down to
//     a multiple of it. counters: attention_counters(T, n_kv) bytes of device memory, zero before
//     the first launch; every launch leaves it zero (CUDA-graph replays). One launch at a time per
//     counters array.
struct AttnMerge {
    bool fused = false;
    int cluster = 0;
    uint32_t* counters = nullptr;
};

// Whether attention() takes these shapes with that kernel.
bool attention_supported(int64_t n_head, int64_t n_kv, int64_t D, int64_t Dv, AttnKernel kernel = AttnKernel::Simt,
                         bool f16 = true);
// Context splits for T tokens (max_ctx = plan.max_blocks · block_size bounds every sequence's
// context): Simt — enough blocks to fill the GPU about four times, each split at least 32 keys;
// Mma — about one block an SM, each split at least one 64-key tile. A split's keys are cut from
// each token's own context (Mma) or from max_ctx (Simt).
int attention_splits(int64_t T, int64_t n_kv, int64_t max_ctx, AttnKernel kernel = AttnKernel::Simt);
// Scratch bytes attention() needs (0 when one split suffices; the fused merge needs at most this).
size_t attention_scratch(int64_t T, int64_t n_head, int64_t D, int splits);
// Bytes of the fused merge's counters (AttnMerge::counters) for T tokens over n_kv kv heads.
size_t attention_counters(int64_t T, int64_t n_kv);
// The cluster size the fused merge takes for these shapes (AttnMerge::cluster = want; 1: no merge).
int attention_fused_cluster(int64_t T, int64_t n_kv, int64_t D, int splits, int want = 0);

// out[T, n_head, D] as ref::attention; scratch of attention_scratch(T, n_head, D, splits) bytes.
void attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
               int64_t n_head, const ref::PagedCache& k_cache, const ref::PagedCache& v_cache, const AttnPlan& plan,
               float scale, int splits, void* scratch, cudaStream_t stream, AttnKernel kernel = AttnKernel::Simt,
               OutGate gate = {}, AttnMerge merge = {});

}  // namespace tessera::cuda::fast
