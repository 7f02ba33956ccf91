// The attention block's step from its projections to the cache in one kernel
// (Backend::qk_norm_rope_store, kernels/backend.h): per (token, head), q and k heads normed
// (rms_norm with q_norm / k_norm, each optional) and rotated (RoPE) in place, then k and v
// written into the paged caches at slot[t]. One warp per head row; replaces the six launches of
// rms_norm ×2, rope ×2 and kv_store (k, v). The arithmetic is the reference kernels': the norm's
// inverse in double as ref::rms_norm, cos / sin in double rounded to f32 as ref::rope, f16 caches
// by core/half.h — only the norm's sum of squares is taken in another order (a warp tree).
// Launched with PDL; no allocation, no host sync: CUDA-graph safe.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/ref_misc.h"

namespace tessera::cuda::fast {

constexpr int64_t kQkPrepMaxD = 512;

struct QkPrep {
    int64_t T = 0, nh = 0, nkv = 0, D = 0;
    float* q = nullptr;  // [T, nh, D] at q + t·q_ts + h·q_hs, in place
    int64_t q_ts = 0, q_hs = 0;
    float* k = nullptr;  // [T, nkv, D], in place
    int64_t k_ts = 0, k_hs = 0;
    const float* v = nullptr;  // [T, nkv, D]
    int64_t v_ts = 0, v_hs = 0;
    const float* q_norm = nullptr;  // [D] or null: no norm
    const float* k_norm = nullptr;
    float eps = 1e-6f;
    const int32_t* pos = nullptr;       // [T] device
    const float* inv_freq = nullptr;    // [rot / 2] device
    int rot = 0;                        // rotated dims, even, ≤ D
    bool neox = true;                   // pairs (i, i + rot/2); else (2i, 2i + 1)
    ref::KvCacheRef k_cache, v_cache;   // [n_blocks, block_size, nkv, D], f32 or f16
    const int32_t* slot = nullptr;      // [T] device: block·block_size + row; < 0 (or past the cache) skipped
};

// Whether qk_prep takes these shapes: D a multiple of 32 up to 256, or 512; rot even in [2, D].
bool qk_prep_supported(int64_t D, int rot);
void qk_prep(const QkPrep& a, cudaStream_t stream);

}  // namespace tessera::cuda::fast
