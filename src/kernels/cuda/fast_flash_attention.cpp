// Argument checks, dispatch rules and launch of the tensor-core prefill attention
// (fast_flash_attention.cu).
#include "kernels/cuda/fast_flash_attention.h"

#include <limits>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::fast {

namespace {
constexpr int64_t kSms = 132;       // H200
constexpr int64_t kMaxSlots = 65535;  // gridDim.y
}  // namespace

bool flash_attention_supported(int64_t n_head, int64_t n_kv, int64_t D, int64_t Dv, bool f16) {
    return f16 && n_kv >= 1 && n_head >= n_kv && n_head % n_kv == 0 && D == Dv && (D == 64 || D == 128 || D == 256);
}

bool use_flash_attention(int64_t T, int64_t n_seqs) {
    return T >= 16 && n_seqs >= 1 && T >= 16 * n_seqs && (T + 63) / 64 + n_seqs <= kMaxSlots;
}

FlashVariant flash_variant(int64_t T, int64_t n_head, int64_t /*D*/, bool wgmma, bool tma) {
    // The warpgroup MMA with 128-row tiles and a producer warpgroup, its K / V by TMA (H200, D 256, 16
    // heads, session 15: 1.14 ms at 8K against 1.78 by cp.async and 2.58 for Rows128x2, the best
    // mma.sync kernel; 18.3 against 25.1 and 38.0 ms at 32K; 50 against 75 and 98 us at 1K, where the
    // 128-row grid is 128 blocks; wgmma false: the mma.sync pick, tma false: cp.async, for A/B);
    // 64-row tiles when 128-row ones would leave more than half the SMs idle (short prompts, few heads).
    if ((T + 127) / 128 * n_head < kSms / 2) return FlashVariant::Rows64;
    if (!wgmma) return FlashVariant::Rows128x2;
    return tma ? FlashVariant::WgmmaTma : FlashVariant::Wgmma;
}

FlashVariant flash_schedule(FlashVariant v, int64_t kv_bound) {
    if (kv_bound < kFlashOverlapMinKv) return v;
    if (v == FlashVariant::WgmmaTma) return FlashVariant::WgmmaTmaOverlap;
    if (v == FlashVariant::Wgmma) return FlashVariant::WgmmaOverlap;
    return v;
}

void flash_attention(float* out, int64_t out_ts, int64_t out_hs, const float* q, int64_t q_ts, int64_t q_hs,
                     int64_t T, int64_t n_head, const ref::PagedCache& kc, const ref::PagedCache& vc,
                     const AttnPlan& plan, float scale, FlashVariant variant, cudaStream_t stream, OutGate gate) {
    TS_CHECK(flash_attention_supported(n_head, kc.n_kv, kc.D, vc.D, kc.f16 && vc.f16),
             "flash attention: {} heads over {} kv heads with D={} Dv={}, {} caches (needs f16 caches, D = Dv in "
             "64/128/256, whole groups)", n_head, kc.n_kv, kc.D, vc.D, kc.f16 && vc.f16 ? "f16" : "f32");
    TS_CHECK(vc.n_kv == kc.n_kv && vc.n_blocks == kc.n_blocks && vc.block_size == kc.block_size && kc.data && vc.data,
             "flash attention: k and v caches disagree ([{}, {}, {}] vs [{}, {}, {}]) or are null", kc.n_blocks,
             kc.block_size, kc.n_kv, vc.n_blocks, vc.block_size, vc.n_kv);
    TS_CHECK(plan.block_size == kc.block_size && kc.block_size >= 1,
             "flash attention: plan block_size {} but the cache has {}", plan.block_size, kc.block_size);
    TS_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max() && kc.n_blocks <= std::numeric_limits<int32_t>::max(),
             "flash attention: {} tokens, {} cache blocks", T, kc.n_blocks);
    if (T == 0) return;
    TS_CHECK(plan.n_seqs >= 1 && plan.max_blocks >= 1 && plan.q_start && plan.kv_len && plan.block_table,
             "flash attention: {} tokens but the plan has {} sequences or missing arrays", T, plan.n_seqs);
    TS_CHECK((T + 63) / 64 + plan.n_seqs <= kMaxSlots, "flash attention: {} tokens over {} sequences: too many tiles",
             T, plan.n_seqs);
    TS_CHECK(int64_t(plan.max_blocks) * kc.block_size <= std::numeric_limits<int32_t>::max(),
             "flash attention: contexts of {} blocks of {}", plan.max_blocks, kc.block_size);
    TS_CHECK(out && q, "flash attention: null out or q");
    TS_CHECK(out_hs >= kc.D && (T == 1 || out_ts >= (n_head - 1) * out_hs + kc.D),
             "flash attention: out strides (token {}, head {}) overlap", out_ts, out_hs);
    TS_CHECK(reinterpret_cast<uintptr_t>(kc.data) % 16 == 0 && reinterpret_cast<uintptr_t>(vc.data) % 16 == 0 &&
                 kc.block_stride % 8 == 0 && kc.row_stride % 8 == 0 && kc.head_stride % 8 == 0 &&
                 vc.block_stride % 8 == 0 && vc.row_stride % 8 == 0 && vc.head_stride % 8 == 0,
             "flash attention: cache rows must be 16-byte aligned");
    TS_CHECK(!gate.g || (gate.hs >= kc.D && (T == 1 || gate.ts >= (n_head - 1) * gate.hs + kc.D)),
             "flash attention: gate strides (token {}, head {}) overlap", gate.ts, gate.hs);
    TS_CUDA_CHECK(detail::launch_flash_attention(out, out_ts, out_hs, q, q_ts, q_hs, T, n_head, kc, vc, plan, scale,
                                                 int(variant), gate, stream));
}

}  // namespace tessera::cuda::fast
