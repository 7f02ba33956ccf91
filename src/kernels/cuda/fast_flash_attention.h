// Tensor-core flash attention for prefill over the paged f16 KV cache (Backend::attention's
// semantics, kernels/backend.h): a block per (tile of query rows of one sequence, query head);
// K/V tiles of 64 keys stream from the paged cache by cp.async, S = q·kᵀ and o += p·v run on
// mma.sync m16n8k16 (f16 operands, f32 accumulators), the online softmax in f32 registers.
// Causal masking only on the tiles that cross the diagonal; keys past a tile's last query are
// never read.
//
// Precision: q·scale·log2(e) is rounded to f16 (the cache is f16, so both mma operands must be;
// values past ±65504 saturate there — q is a normed projection in practice), p is rounded to f16
// for p·v. Everything else (scores, m, l, o) is f32.
//
// Query tiles never straddle sequences: the grid has ceil(T / BM) + n_seqs tile slots per head (an
// upper bound of Σ ceil(n_new / BM)), and each block finds its (sequence, tile) from q_start on
// the device, heaviest tiles first. So the launch depends on T and n_seqs alone: no host sync, no
// allocation (CUDA-graph safe). Padding sequences (kv_len 0) get zero rows; bad plan data seen on
// the device (a block outside the cache, more new tokens than kv_len, tokens outside q_start)
// gives NaN rows.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fast_attention.h"  // OutGate
#include "kernels/cuda/ref_attention.h"

namespace tessera::cuda::fast {

// Block shapes: query rows per block (16 per warp).
enum class FlashVariant : int {
    Rows64 = 0,   // 4 warps, 64 query rows: 2 blocks per SM at D = 256
    Rows128 = 1,  // 8 warps, 128 query rows: 1 block per SM at D = 256
    Rows128x2 = 2,  // Rows128 with two K/V buffers (next tile loads during the whole tile; 192 KiB at D = 256)
    Wgmma = 3,      // 128 query rows on the warpgroup MMA: a producer warpgroup loads K/V, two consumer
                    // warpgroups, mbarriers between them (fast_flash_attention_wgmma.cu; the pick on sm_90a)
    WgmmaOverlap = 4,   // Wgmma with S of the next tile under p·v of the last (H200: within 1 % of Wgmma)
    WgmmaTma = 5,         // Wgmma with a producer warp issuing TMA boxes of the cache's blocks (where a block
                          // holds 8, 16, 32 or a multiple of 64 keys; elsewhere it runs as Wgmma)
    WgmmaTmaOverlap = 6,  // WgmmaOverlap with the TMA producer (likewise)
};

// Whether flash_attention() takes these shapes: f16 caches, D = Dv ∈ {64, 128, 256}, GQA.
bool flash_attention_supported(int64_t n_head, int64_t n_kv, int64_t D, int64_t Dv, bool f16);
// Whether a supported call of T tokens over n_seqs sequences should take flash attention rather
// than fast::attention (pure; the backend's rule): prefill-sized, ≥ 16 new tokens per sequence on
// average. Decode steps (a token per sequence) keep the flash-decoding kernel.
bool use_flash_attention(int64_t T, int64_t n_seqs);
// The block shape the backend uses for these shapes (pure; wgmma false: the mma.sync kernels only,
// TESSERA_FLASH=mma; tma false: the wgmma kernel's cp.async producer, TESSERA_FLASH_LOADS=cp.async).
FlashVariant flash_variant(int64_t T, int64_t n_head, int64_t D, bool wgmma = true, bool tma = true);
// The overlap schedule (S of the next key tile under p·v of the last) for `v` where the keys a query
// tile walks are long: the Wgmma / WgmmaTma variant's overlapped form from kv_bound (an upper bound
// on any sequence's keys: the plan's max_blocks · block_size) ≥ kFlashOverlapMinKv, else v (pure).
// bench_fast_attention, session 15: a 32K prompt 17,565 against 18,300 µs, 8K 1,168.6 against
// 1,143.2 — the crossover between them not measured; opt-in (TESSERA_FLASH_SCHEDULE=kv) until an
// end-to-end A/B at 8K and 32K.
constexpr int64_t kFlashOverlapMinKv = 16384;
FlashVariant flash_schedule(FlashVariant v, int64_t kv_bound);

// out[T, n_head, D] as ref::attention, q [T, n_head, D] f32 (strides in elements), caches f16;
// with a gate, out · σ(gate) (OutGate).
void flash_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                     int64_t T, int64_t n_head, const ref::PagedCache& k_cache, const ref::PagedCache& v_cache,
                     const AttnPlan& plan, float scale, FlashVariant variant, cudaStream_t stream, OutGate gate = {});

namespace detail {
cudaError_t launch_flash_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                   int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                   const ref::PagedCache& vc, const AttnPlan& plan, float scale, int variant,
                                   OutGate gate, cudaStream_t stream);
cudaError_t launch_flash_attention_wgmma(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                         int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                         const ref::PagedCache& vc, const AttnPlan& plan, float scale, OutGate gate,
                                         int sched, bool tma, cudaStream_t stream);  // sched 0 serial, 1 overlap
}  // namespace detail

}  // namespace tessera::cuda::fast
