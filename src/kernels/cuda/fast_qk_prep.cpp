// Argument checks for the fused q/k norm + RoPE + KV store (fast_qk_prep.cu holds the kernel).
#include "kernels/cuda/fast_qk_prep.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda::fast {

namespace detail {
cudaError_t launch_qk_prep(const QkPrep& a, cudaStream_t stream);
}

bool qk_prep_supported(int64_t D, int rot) {
    const bool d_ok = D > 0 && D % 32 == 0 && (D <= 256 || D == kQkPrepMaxD);  // the instantiated widths
    return d_ok && rot >= 2 && rot % 2 == 0 && rot <= D;
}

void qk_prep(const QkPrep& a, cudaStream_t stream) {
    TS_CHECK(qk_prep_supported(a.D, a.rot), "fast qk_prep: head dim {} with {} rotated dims (needs D a multiple of 32 "
             "up to 256, or {}; rotated dims even and ≤ D)", a.D, a.rot, kQkPrepMaxD);
    TS_CHECK(a.T >= 0 && a.nh >= 1 && a.nkv >= 1, "fast qk_prep: {} tokens, {} q heads, {} kv heads", a.T, a.nh,
             a.nkv);
    for (const ref::KvCacheRef* c : {&a.k_cache, &a.v_cache}) {
        TS_CHECK(c->dtype == DType::F32 || c->dtype == DType::F16, "fast qk_prep: caches must be f32 or f16, got {}",
                 dtype_name(c->dtype));
        const int64_t es = c->dtype == DType::F16 ? 2 : 4;
        TS_CHECK(c->data && c->n_kv == a.nkv && c->D == a.D && c->block_size > 0 && c->row_stride % es == 0 &&
                     c->block_stride % es == 0 && c->head_stride % es == 0,
                 "fast qk_prep: cache [{}, {}, {}, {}] for {} kv heads of {}", c->n_blocks, c->block_size, c->n_kv,
                 c->D, a.nkv, a.D);
    }
    TS_CHECK(a.k_cache.n_blocks == a.v_cache.n_blocks && a.k_cache.block_size == a.v_cache.block_size,
             "fast qk_prep: k and v caches have different blocks");
    if (a.T == 0) return;
    TS_CHECK(a.q && a.k && a.v && a.pos && a.inv_freq && a.slot, "fast qk_prep: null q, k, v, pos, inv_freq or slot");
    TS_CUDA_CHECK(detail::launch_qk_prep(a, stream));
}

}  // namespace tessera::cuda::fast
