// Argument checks for the reference paged attention (ref_attention.cu holds the device code).
// Only what the host knows is checked here; the plan arrays are device memory, checked there.
#include "kernels/cuda/ref_attention.h"

#include <limits>

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::ref {

namespace {
void check_cache(const PagedCache& c, const char* what, int64_t n_kv, int64_t D) {
    TS_CHECK(c.data != nullptr && c.n_blocks >= 1 && c.block_size >= 1 && c.n_kv == n_kv && c.D == D,
             "attention: {} cache [{}, {}, {}, {}] (data {}) is empty or disagrees with n_kv {} / D {}", what,
             c.n_blocks, c.block_size, c.n_kv, c.D, c.data ? "set" : "null", n_kv, D);
    TS_CHECK(c.n_blocks <= std::numeric_limits<int32_t>::max(), "attention: {} cache has {} blocks (> int32)", what,
             c.n_blocks);
    TS_CHECK(c.head_stride >= D && c.row_stride >= (c.n_kv - 1) * c.head_stride + D &&
                 c.block_stride >= (c.block_size - 1) * c.row_stride + (c.n_kv - 1) * c.head_stride + D,
             "attention: {} cache strides (block {}, row {}, head {}) do not fit [{}, {}, {}, {}]", what,
             c.block_stride, c.row_stride, c.head_stride, c.n_blocks, c.block_size, c.n_kv, D);
}
}  // namespace

void attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs, int64_t T,
               int64_t n_head, const PagedCache& k_cache, const PagedCache& v_cache, const AttnPlan& plan,
               float scale, cudaStream_t stream) {
    const int64_t n_kv = k_cache.n_kv, D = k_cache.D, Dv = v_cache.D;
    TS_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max(), "attention: {} tokens", T);
    TS_CHECK(n_head >= 1 && n_head <= 65535 && n_kv >= 1 && n_head % n_kv == 0,
             "attention: {} query heads are not a multiple of {} kv heads (or exceed 65535)", n_head, n_kv);
    TS_CHECK(D >= 1 && D <= kAttentionMaxHeadDim && Dv >= 1 && Dv <= kAttentionMaxHeadDim,
             "attention: head dims D={} Dv={} must be in [1, {}]", D, Dv, kAttentionMaxHeadDim);
    check_cache(k_cache, "k", n_kv, D);
    check_cache(v_cache, "v", n_kv, Dv);
    TS_CHECK(v_cache.n_blocks == k_cache.n_blocks && v_cache.block_size == k_cache.block_size,
             "attention: k cache [{}, {}, ..] and v cache [{}, {}, ..] have different blocks", k_cache.n_blocks,
             k_cache.block_size, v_cache.n_blocks, v_cache.block_size);
    TS_CHECK(plan.block_size == k_cache.block_size, "attention: plan block_size {} but the cache has {}",
             plan.block_size, k_cache.block_size);
    if (T == 0) return;
    TS_CHECK(plan.n_seqs >= 1 && plan.max_blocks >= 1 && plan.q_start && plan.kv_len && plan.block_table,
             "attention: {} tokens but the plan has {} sequences, {} max blocks or missing arrays", T, plan.n_seqs,
             plan.max_blocks);
    TS_CHECK(out != nullptr && q != nullptr, "attention: null out or q for {} tokens", T);
    TS_CHECK(q_hs >= 0 && q_ts >= 0, "attention: negative q strides ({}, {})", q_ts, q_hs);
    // Output rows must not overlap: each (token, head) is written by one thread block.
    TS_CHECK(out_hs >= Dv && (T == 1 || out_ts >= (n_head - 1) * out_hs + Dv),
             "attention: out strides (token {}, head {}) overlap [{}, {}, {}]", out_ts, out_hs, T, n_head, Dv);
    TS_CUDA_CHECK(detail::launch_attention(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, k_cache, v_cache, plan,
                                           scale, stream));
}

}  // namespace tessera::cuda::ref
