// Argument checks for the reference MoE (ref_moe.cu holds the device code).
#include "kernels/cuda/ref_moe.h"

#include <climits>
#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::ref {

void moe_topk(const float* logits, int64_t T, int64_t E, int k, bool renormalize, bool shared, int32_t* ids,
              float* weights, cudaStream_t stream) {
    TS_CHECK(T >= 0 && T <= INT32_MAX, "moe_topk: bad token count T = {}", T);
    TS_CHECK(E >= 1 && E <= kMoeTopkMaxExperts, "moe_topk: E = {} experts, expected 1..{}", E, kMoeTopkMaxExperts);
    TS_CHECK(k >= 1 && k <= E, "moe_topk: k = {} must be in [1, {}] (the number of experts)", k, E);
    if (T == 0) return;
    TS_CHECK(logits && ids && weights, "moe_topk: null pointer (logits [{}, {}], ids / weights [{}, {}])", T,
             E + shared, T, k + shared);
    TS_CUDA_CHECK(detail::launch_moe_topk(logits, T, E, k, renormalize, shared, ids, weights, stream));
}

namespace {

void moe_experts_any(bool weight_bf16, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H,
                     int64_t I, int E, const void* const* gate, const void* const* up, const void* const* down,
                     const int32_t* ids, const float* weights, int k, float* scratch, cudaStream_t stream) {
    TS_CHECK(T >= 0 && H >= 0 && I >= 0, "moe_experts: bad shape T={} H={} I={}", T, H, I);
    TS_CHECK(E >= 1 && k >= 1, "moe_experts: need at least one expert and k >= 1 (E = {}, k = {})", E, k);
    TS_CHECK(ldx >= H && ldy >= H, "moe_experts: row strides ldx={} ldy={} smaller than H={}", ldx, ldy, H);
    // Grid limits: T·k blocks along x, ceil(I / 8) and ceil(H / 8) along y.
    TS_CHECK(T * k <= INT32_MAX && I <= 8 * int64_t(65535) && H <= 8 * int64_t(65535),
             "moe_experts: T·k = {} or I = {} or H = {} is too large for the reference kernels", T * k, I, H);
    if (T == 0 || H == 0) return;
    TS_CHECK(y && x && gate && up && down && ids && weights && (I == 0 || scratch),
             "moe_experts: null pointer (T={} H={} I={} E={} k={})", T, H, I, E, k);
    // y may be x itself (x is read only by the first kernel); any other overlap would race.
    const auto* yb = reinterpret_cast<const char*>(y);
    const auto* xb = reinterpret_cast<const char*>(x);
    const size_t y_bytes = size_t((T - 1) * ldy + H) * sizeof(float), x_bytes = size_t((T - 1) * ldx + H) * sizeof(float);
    TS_CHECK((y == x && ldy == ldx) || yb + y_bytes <= xb || xb + x_bytes <= yb,
             "moe_experts: y must be x itself or not overlap it");
    TS_CUDA_CHECK(detail::launch_moe_experts(weight_bf16, y, ldy, x, ldx, T, H, I, E, gate, up, down, ids, weights,
                                             k, scratch, stream));
}

}  // namespace

void moe_experts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H, int64_t I, int E,
                 const uint16_t* const* gate, const uint16_t* const* up, const uint16_t* const* down,
                 const int32_t* ids, const float* weights, int k, float* scratch, cudaStream_t stream) {
    moe_experts_any(true, y, ldy, x, ldx, T, H, I, E, reinterpret_cast<const void* const*>(gate),
                    reinterpret_cast<const void* const*>(up), reinterpret_cast<const void* const*>(down), ids,
                    weights, k, scratch, stream);
}

void moe_experts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H, int64_t I, int E,
                 const float* const* gate, const float* const* up, const float* const* down, const int32_t* ids,
                 const float* weights, int k, float* scratch, cudaStream_t stream) {
    moe_experts_any(false, y, ldy, x, ldx, T, H, I, E, reinterpret_cast<const void* const*>(gate),
                    reinterpret_cast<const void* const*>(up), reinterpret_cast<const void* const*>(down), ids,
                    weights, k, scratch, stream);
}

}  // namespace tessera::cuda::ref
