// Argument checks and launch geometry for the fast paged attention (fast_attention.cu).
#include "kernels/cuda/fast_attention.h"

#include <algorithm>
#include <limits>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::fast {

namespace detail {
cudaError_t launch_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                             int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                             const AttnPlan& plan, float scale, int splits, float* partial, OutGate gate,
                             cudaStream_t stream);
cudaError_t launch_decode_attention_mma(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts,
                                        int64_t q_hs, int64_t T, int64_t n_head, const ref::PagedCache& kc,
                                        const ref::PagedCache& vc, const AttnPlan& plan, float scale, int splits,
                                        float* partial, OutGate gate, const AttnMerge& merge, cudaStream_t stream);
int decode_fused_cluster(int64_t T, int64_t n_kv, int64_t D, int splits, int want);
}  // namespace detail

bool attention_supported(int64_t n_head, int64_t n_kv, int64_t D, int64_t Dv, AttnKernel kernel, bool f16) {
    if (!(n_kv >= 1 && n_head >= 1 && n_head % n_kv == 0 && D == Dv)) return false;
    if (kernel == AttnKernel::Mma) return f16 && n_head / n_kv <= kAttnMaxGroupMma && (D == 64 || D == 128 || D == 256);
    return n_head / n_kv <= kAttnMaxGroup && (D == 32 || D == 64 || D == 128 || D == 256);
}

int attention_splits(int64_t T, int64_t n_kv, int64_t max_ctx, AttnKernel kernel) {
    if (kernel == AttnKernel::Mma) {
        // A block holds 136 KiB of shared memory at D = 256 (one an SM) and streams its tiles two
        // deep: about one block an SM, each split at least one 64-key tile.
        constexpr int64_t kTargetBlocks = 132, kMinKeys = 64;
        const int64_t have = std::max<int64_t>(T * n_kv, 1);
        const int64_t want = (kTargetBlocks + have - 1) / have;
        const int64_t most = std::max<int64_t>((max_ctx + kMinKeys - 1) / kMinKeys, 1);
        return int(std::clamp<int64_t>(std::min(want, most), 1, kAttnMaxSplits));
    }
    // A decoding sequence's context is split until there are about four blocks per SM (a block
    // holds ~41 KB of shared memory: five fit), each split at least one key tile: the blocks'
    // tile loops are latency-bound, so parallel splits beat long loops; the combine reads
    // splits × (D + 2) floats per head, a few µs even at the most splits.
    constexpr int64_t kTargetBlocks = 4 * 132, kMinKeys = 32;
    const int64_t have = std::max<int64_t>(T * n_kv, 1);
    const int64_t want = (kTargetBlocks + have - 1) / have;
    const int64_t most = std::max<int64_t>((max_ctx + kMinKeys - 1) / kMinKeys, 1);
    return int(std::clamp<int64_t>(std::min(want, most), 1, kAttnMaxSplits));
}

size_t attention_scratch(int64_t T, int64_t n_head, int64_t D, int splits) {
    if (splits <= 1) return 0;
    return size_t(T * n_head) * size_t(splits) * size_t(D + 2) * sizeof(float);
}

size_t attention_counters(int64_t T, int64_t n_kv) { return size_t(std::max<int64_t>(T * n_kv, 1)) * sizeof(uint32_t); }

int attention_fused_cluster(int64_t T, int64_t n_kv, int64_t D, int splits, int want) {
    return detail::decode_fused_cluster(T, n_kv, D, splits, want);
}

void attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
               int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc, const AttnPlan& plan, float scale,
               int splits, void* scratch, cudaStream_t stream, AttnKernel kernel, OutGate gate, AttnMerge merge) {
    const bool mma = kernel == AttnKernel::Mma;
    TS_CHECK(attention_supported(n_head, kc.n_kv, kc.D, vc.D, kernel, kc.f16 && vc.f16),
             "fast attention ({}): {} heads over {} kv heads with D={} Dv={}, {} cache (needs D = Dv in {}, ≤ {} "
             "heads per kv head{})", mma ? "mma" : "simt", n_head, kc.n_kv, kc.D, vc.D, kc.f16 ? "f16" : "f32",
             mma ? "64/128/256" : "32/64/128/256", mma ? kAttnMaxGroupMma : kAttnMaxGroup, mma ? ", f16 cache" : "");
    TS_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max() && splits >= 1 && splits <= kAttnMaxSplits,
             "fast attention: {} tokens, {} splits", T, splits);
    TS_CHECK(vc.n_kv == kc.n_kv && vc.n_blocks == kc.n_blocks && vc.block_size == kc.block_size && kc.data && vc.data,
             "fast attention: k and v caches disagree ([{}, {}, {}] vs [{}, {}, {}]) or are null", kc.n_blocks,
             kc.block_size, kc.n_kv, vc.n_blocks, vc.block_size, vc.n_kv);
    TS_CHECK(kc.f16 == vc.f16, "fast attention: k and v caches of different dtypes");
    TS_CHECK(plan.block_size == kc.block_size, "fast attention: plan block_size {} but the cache has {}",
             plan.block_size, kc.block_size);
    if (T == 0) return;
    TS_CHECK(plan.n_seqs >= 1 && plan.max_blocks >= 1 && plan.q_start && plan.kv_len && plan.block_table,
             "fast attention: {} tokens but the plan has {} sequences or missing arrays", T, plan.n_seqs);
    TS_CHECK(out && q && (splits == 1 || scratch), "fast attention: null out, q or scratch");
    TS_CHECK(out_hs >= kc.D && (T == 1 || out_ts >= (n_head - 1) * out_hs + kc.D),
             "fast attention: out strides (token {}, head {}) overlap", out_ts, out_hs);
    const int64_t es = kc.f16 ? 2 : 4;
    TS_CHECK(reinterpret_cast<uintptr_t>(kc.data) % 16 == 0 && reinterpret_cast<uintptr_t>(vc.data) % 16 == 0 &&
                 (kc.block_stride * es) % 16 == 0 && (kc.row_stride * es) % 16 == 0 && (kc.head_stride * es) % 16 == 0 &&
                 (vc.block_stride * es) % 16 == 0 && (vc.row_stride * es) % 16 == 0 && (vc.head_stride * es) % 16 == 0,
             "fast attention: cache rows must be 16-byte aligned");
    TS_CHECK(!gate.g || (gate.hs >= kc.D && (T == 1 || gate.ts >= (n_head - 1) * gate.hs + kc.D)),
             "fast attention: gate strides (token {}, head {}) overlap", gate.ts, gate.hs);
    TS_CHECK(!merge.fused || !mma || splits == 1 || merge.counters,
             "fast attention: the fused merge of {} splits needs counters", splits);
    TS_CHECK(merge.cluster == 0 || merge.cluster == 2 || merge.cluster == 4 || merge.cluster == 8 ||
                 merge.cluster == 16,
             "fast attention: fused merge clusters of {} blocks (2, 4, 8, 16 or 0)", merge.cluster);
    if (mma)
        TS_CUDA_CHECK(detail::launch_decode_attention_mma(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan,
                                                          scale, splits, static_cast<float*>(scratch), gate,
                                                          merge, stream));
    else
        TS_CUDA_CHECK(detail::launch_attention(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale,
                                               splits, static_cast<float*>(scratch), gate, stream));
}

}  // namespace tessera::cuda::fast
