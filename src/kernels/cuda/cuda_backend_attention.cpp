// CudaBackend's attention and KV-cache ops: kv_store, qk_norm_rope_store and attention /
// attention_gated over the paged caches — the kernel pack's where it takes the shapes
// (attention_fast), else the reference kernels.
#include "core/status.h"
#include "kernels/cuda/cuda_backend_args.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_switches.h"
#include "kernels/cuda/fast_attention.h"
#include "kernels/cuda/fast_flash_attention.h"
#include "kernels/cuda/fast_qk_prep.h"
#include "kernels/cuda/ref_attention.h"
#include "kernels/cuda/ref_misc.h"

namespace tessera::cuda {

using detail::check_device;
using detail::Heads;
using detail::heads_of;
using detail::decode_attention_simt;
using detail::decode_merge_env;
using detail::flash_cp_async;
using detail::flash_overlap_by_kv;
using detail::flash_mma;
using detail::reference_op;

namespace {
ref::KvCacheRef kv_ref(const Tensor& c, const char* what) {
    check_device(c, "kv_store", what);
    TS_CHECK(c.ndim == 4, "cuda kv_store: {} cache {} must be [n_blocks, block_size, n_kv, D]", what, c.describe());
    ref::KvCacheRef r;
    r.data = c.data;
    r.dtype = c.dtype;
    r.n_blocks = c.shape[0];
    r.block_size = c.shape[1];
    r.n_kv = c.shape[2];
    r.D = c.shape[3];
    r.block_stride = c.stride[0];
    r.row_stride = c.stride[1];
    r.head_stride = c.stride[2];
    return r;
}

ref::PagedCache paged_ref(const Tensor& c, const char* what) {
    check_device(c, "attention", what);
    TS_CHECK(c.ndim == 4 && (c.dtype == DType::F32 || c.dtype == DType::F16),
             "cuda attention: {} cache {} must be f32/f16 [n_blocks, block_size, n_kv, D]", what, c.describe());
    const int64_t es = c.dtype == DType::F16 ? 2 : 4;
    ref::PagedCache r;
    r.data = c.data;
    r.f16 = c.dtype == DType::F16;
    r.n_blocks = c.shape[0];
    r.block_size = c.shape[1];
    r.n_kv = c.shape[2];
    r.D = c.shape[3];
    r.block_stride = c.stride[0] / es;
    r.row_stride = c.stride[1] / es;
    r.head_stride = c.stride[2] / es;
    return r;
}
}  // namespace

void CudaBackend::kv_store(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                           const int32_t* slot) {
    const Heads K = heads_of(k, "kv_store", "k"), V = heads_of(v, "kv_store", "v");
    TS_CHECK(K.T == V.T, "cuda kv_store: k has {} tokens, v {}", K.T, V.T);
    ref::kv_store(kv_ref(k_cache, "k"), kv_ref(v_cache, "v"), K.p, K.ts, K.hs, V.p, V.ts, V.hs, K.T, slot,
                  stream_.get());
}

void CudaBackend::qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                     const Tensor& k_norm, float eps, const int32_t* pos, const RopeParams& rp,
                                     const Tensor& k_cache, const Tensor& v_cache, const int32_t* slot) {
    const Heads Q = heads_of(q, "qk_norm_rope_store", "q"), K = heads_of(k, "qk_norm_rope_store", "k"),
                V = heads_of(v, "qk_norm_rope_store", "v");
    const int rot = rp.rot_dims > 0 ? rp.rot_dims : int(Q.D);
    if (kernels_ != CudaKernels::Fast || reference_op("qk_norm_rope_store") || !fast::qk_prep_supported(Q.D, rot))
        return Backend::qk_norm_rope_store(q, k, v, q_norm, k_norm, eps, pos, rp, k_cache, v_cache, slot);
    TS_CHECK(K.T == Q.T && V.T == Q.T && K.n == V.n && K.D == Q.D && V.D == Q.D,
             "cuda qk_norm_rope_store: q {}, k {}, v {} do not fit", q.describe(), k.describe(), v.describe());
    for (const Tensor* w : {&q_norm, &k_norm})
        if (!w->empty()) {
            check_device(*w, "qk_norm_rope_store", "norm");
            TS_CHECK(w->dtype == DType::F32 && w->numel() == Q.D && w->is_contiguous(),
                     "cuda qk_norm_rope_store: norm weight {} for heads of {}", w->describe(), Q.D);
        }
    fast::QkPrep a;
    a.T = Q.T, a.nh = Q.n, a.nkv = K.n, a.D = Q.D;
    a.q = Q.p, a.q_ts = Q.ts, a.q_hs = Q.hs;
    a.k = K.p, a.k_ts = K.ts, a.k_hs = K.hs;
    a.v = V.p, a.v_ts = V.ts, a.v_hs = V.hs;
    a.q_norm = q_norm.empty() ? nullptr : q_norm.ptr<float>();
    a.k_norm = k_norm.empty() ? nullptr : k_norm.ptr<float>();
    a.eps = eps;
    a.pos = pos;
    a.inv_freq = rope_freqs(rp, rot);
    a.rot = rot;
    a.neox = rp.style == RopeStyle::NeoX;
    a.k_cache = kv_ref(k_cache, "k");
    a.v_cache = kv_ref(v_cache, "v");
    a.slot = slot;
    fast::qk_prep(a, stream_.get());
}

bool CudaBackend::attention_fast(const Tensor& out, const Tensor& q, const Tensor* gate, const Tensor& k_cache,
                                 const Tensor& v_cache, const AttnPlan& plan, float scale) {
    const Heads O = heads_of(out, "attention", "out"), Q = heads_of(q, "attention", "q");
    TS_CHECK(O.T == Q.T && O.n == Q.n, "cuda attention: out {} vs q {}", out.describe(), q.describe());
    const ref::PagedCache kc = paged_ref(k_cache, "k"), vc = paged_ref(v_cache, "v");
    if (kernels_ != CudaKernels::Fast || reference_op("attention") || kc.f16 != vc.f16) return false;
    fast::OutGate g;
    if (gate) {
        const Heads G = heads_of(*gate, "attention_gated", "gate");
        TS_CHECK(G.T == O.T && G.n == O.n && G.D == O.D, "cuda attention_gated: gate {} for out {}", gate->describe(),
                 out.describe());
        g = {G.p, G.ts, G.hs};
    }
    const bool f16 = kc.f16 && vc.f16;
    if (fast::flash_attention_supported(Q.n, kc.n_kv, kc.D, vc.D, f16) && fast::use_flash_attention(Q.T, plan.n_seqs)) {
        fast::FlashVariant v = fast::flash_variant(Q.T, Q.n, kc.D, !flash_mma(), !flash_cp_async());
        if (flash_overlap_by_kv()) v = fast::flash_schedule(v, int64_t(plan.max_blocks) * plan.block_size);
        fast::flash_attention(O.p, O.ts, O.hs, Q.p, Q.ts, Q.hs, Q.T, Q.n, kc, vc, plan, scale, v, stream_.get(), g);
        return true;
    }
    const fast::AttnKernel kernel =
        !decode_attention_simt() && fast::attention_supported(Q.n, kc.n_kv, kc.D, vc.D, fast::AttnKernel::Mma, f16)
            ? fast::AttnKernel::Mma
            : fast::AttnKernel::Simt;
    if (!fast::attention_supported(Q.n, kc.n_kv, kc.D, vc.D, kernel, f16)) return false;
    const int splits = fast::attention_splits(Q.T, kc.n_kv, int64_t(plan.max_blocks) * plan.block_size, kernel);
    void* sc = splits > 1 ? scratch(5, fast::attention_scratch(Q.T, Q.n, kc.D, splits)) : nullptr;
    fast::AttnMerge merge;
    const int merge_env = decode_merge_env();
    if (kernel == fast::AttnKernel::Mma && splits > 1 && (merge_env >= 0 || (merge_env == -2 && Q.T >= 8))) {
        merge.fused = true;
        merge.cluster = merge_env >= 0 ? merge_env : 0;
        merge.counters = static_cast<uint32_t*>(zeroed_scratch(fast::attention_counters(Q.T, kc.n_kv)));
    }
    fast::attention(O.p, O.ts, O.hs, Q.p, Q.ts, Q.hs, Q.T, Q.n, kc, vc, plan, scale, splits, sc, stream_.get(), kernel,
                    g, merge);
    return true;
}

void CudaBackend::attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                            const AttnPlan& plan, float scale) {
    if (attention_fast(out, q, nullptr, k_cache, v_cache, plan, scale)) return;
    const Heads O = heads_of(out, "attention", "out"), Q = heads_of(q, "attention", "q");
    const ref::PagedCache kc = paged_ref(k_cache, "k"), vc = paged_ref(v_cache, "v");
    ref::attention(O.p, O.ts, O.hs, Q.p, Q.ts, Q.hs, Q.T, Q.n, kc, vc, plan, scale, stream_.get());
}

void CudaBackend::attention_gated(const Tensor& out, const Tensor& q, const Tensor& gate, const Tensor& k_cache,
                                  const Tensor& v_cache, const AttnPlan& plan, float scale) {
    if (attention_fast(out, q, &gate, k_cache, v_cache, plan, scale)) return;
    Backend::attention_gated(out, q, gate, k_cache, v_cache, plan, scale);
}
}  // namespace tessera::cuda
