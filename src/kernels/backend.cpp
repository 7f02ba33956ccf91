// Backend-neutral helpers shared by every backend: host-memory defaults and the RoPE frequency
// schedule.
#include "kernels/backend.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "core/status.h"
#include "core/views.h"

namespace tessera {

MemoryResource& Backend::memory() { return host_memory(); }
void Backend::copy_in(void* dst, const void* host_src, size_t bytes) {
    if (bytes) std::memcpy(dst, host_src, bytes);
}
void Backend::copy_out(void* host_dst, const void* src, size_t bytes) {
    if (bytes) std::memcpy(host_dst, src, bytes);
}
void Backend::copy_out_queued(void* host_dst, const void* src, size_t bytes) { copy_out(host_dst, src, bytes); }
void Backend::copy(void* dst, const void* src, size_t bytes) {
    if (bytes) std::memmove(dst, src, bytes);
}
void Backend::zero(void* dst, size_t bytes) {
    if (bytes) std::memset(dst, 0, bytes);
}
Tensor Backend::place_weight(const Tensor& host, WeightUse) { return host; }
std::vector<Tensor> Backend::place_weights(const std::vector<Tensor>& hosts, WeightUse use) {
    std::vector<Tensor> placed;
    placed.reserve(hosts.size());
    for (const Tensor& h : hosts) placed.push_back(place_weight(h, use));
    return placed;
}
bool Backend::device_memory(int64_t*, int64_t*) { return false; }
MemoryResource& Backend::staging_memory() { return host_memory(); }
std::unique_ptr<Backend::Recording> Backend::record(const std::function<void()>&) { return nullptr; }

void rope_inv_freq(const RopeParams& p, float* inv_freq) {
    const int dim = p.rot_dims, half = dim / 2;
    if (p.inv_freq) {
        std::copy(p.inv_freq, p.inv_freq + half, inv_freq);
        return;
    }
    for (int i = 0; i < half; ++i) {
        // HF: 1 / base ** (arange(0, dim, 2).float() / dim), all f32.
        const float e = float(2 * i) / float(dim);
        inv_freq[i] = 1.f / std::pow(p.theta, e);
    }
    if (p.linear_factor != 1.f)
        for (int i = 0; i < half; ++i) inv_freq[i] /= p.linear_factor;
    if (p.llama3_factor > 1.f) {
        // HF _compute_llama3_parameters.
        const float factor = p.llama3_factor, lo = p.llama3_low_freq_factor, hi = p.llama3_high_freq_factor;
        const float old_ctx = float(p.llama3_original_ctx);
        const float low_freq_wavelen = old_ctx / lo, high_freq_wavelen = old_ctx / hi;
        for (int i = 0; i < half; ++i) {
            const float f = inv_freq[i];
            const float wavelen = float(2.0 * M_PI) / f;
            float out = wavelen > low_freq_wavelen ? f / factor : f;
            if (!(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen)) {
                const float smooth = (old_ctx / wavelen - lo) / (hi - lo);
                out = (1.f - smooth) * out / factor + smooth * out;
            }
            inv_freq[i] = out;
        }
    }
}

void Backend::add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& delta, const Tensor& w, float eps) {
    if (delta.ndim == 3) {  // parts, in order
        for (int64_t p = 0; p < delta.dim(0); ++p)
            add(x, x, delta.slice_rows(p, p + 1).view({delta.dim(1), delta.dim(2)}));
    } else {
        add(x, x, delta);
    }
    rms_norm(y, x, w, eps);
}

void Backend::qk_norm_rope_store(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& q_norm,
                                 const Tensor& k_norm, float eps, const int32_t* pos, const RopeParams& rp,
                                 const Tensor& k_cache, const Tensor& v_cache, const int32_t* slot) {
    if (!q_norm.empty()) rms_norm(q, q, q_norm, eps);
    if (!k_norm.empty()) rms_norm(k, k, k_norm, eps);
    rope(q, pos, rp);
    rope(k, pos, rp);
    kv_store(k_cache, v_cache, k, v, slot);
}

void Backend::attention_gated(const Tensor& out, const Tensor& q, const Tensor& gate, const Tensor& k_cache,
                              const Tensor& v_cache, const AttnPlan& plan, float scale) {
    attention(out, q, k_cache, v_cache, plan, scale);
    sigmoid_mul(out, out, gate);
}

// Hybrid-model ops a backend has not implemented yet: a clear error, not a crash.
namespace {
[[noreturn]] void unsupported(const Backend& be, const char* op) {
    fail(ErrorKind::Unsupported, "backend {} does not implement {} yet", be.name(), op);
}
}  // namespace
void Backend::sigmoid_mul(const Tensor&, const Tensor&, const Tensor&) { unsupported(*this, "sigmoid_mul"); }
void Backend::top_k(const Tensor&, int, float*, int32_t*) { unsupported(*this, "top_k"); }
void Backend::edit_logits(const Tensor&, const LogitEdit*, int64_t) { unsupported(*this, "edit_logits"); }
void Backend::sample(const Tensor&, const SampleRow*, int32_t*) { unsupported(*this, "sample"); }
void Backend::l2_norm(const Tensor&, float, float) { unsupported(*this, "l2_norm"); }
void Backend::rms_norm_gated(const Tensor&, const Tensor&, const Tensor&, const Tensor&, float) {
    unsupported(*this, "rms_norm_gated");
}
void Backend::conv1d_silu(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const SeqPlan&) {
    unsupported(*this, "conv1d_silu");
}
void Backend::conv1d_silu_qk_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                                  const SeqPlan& plan, int64_t n_qk, int64_t dim, float eps, float q_scale) {
    check_conv1d_silu_qk_norm(y, n_qk, dim);
    conv1d_silu(y, x, w, conv_state, plan);
    l2_norm(head_view(y, 0, n_qk, dim, dim), eps, q_scale);       // q: [T, n_qk, dim]
    l2_norm(head_view(y, n_qk * dim, n_qk, dim, dim), eps, 1.0f);  // k
}
void check_conv1d_silu_qk_norm(const Tensor& y, int64_t n_qk, int64_t dim) {
    TS_CHECK(y.ndim == 2 && y.dtype == DType::F32 && n_qk >= 1 && dim >= 1 && 2 * n_qk * dim <= y.dim(1),
             "conv1d_silu_qk_norm: {} heads of {} (q and k) in y {}", n_qk, dim, y.describe());
}
void Backend::gdn_gates(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
    unsupported(*this, "gdn_gates");
}
void Backend::gated_delta_rule(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                               const Tensor&, const Tensor&, const SeqPlan&, const GdnParams&) {
    unsupported(*this, "gated_delta_rule");
}
bool Backend::fuses_gdn_decode(const GdnParams&, int64_t, int64_t, int64_t) const { return false; }
void Backend::gdn_decode_step(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                              const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, float,
                              const SeqPlan&, const GdnParams&, const Tensor*, const Tensor*) {
    unsupported(*this, "gdn_decode_step");
}
int Backend::gdn_decode_out_parts(const GdnParams&, int64_t, int64_t, int64_t, int64_t, const Tensor&) const {
    return 0;
}
MoeLimits Backend::moe_limits() const { return {INT_MAX, INT_MAX}; }
void Backend::moe_topk(const Tensor&, const MoeRouting&, int32_t*, float*) { unsupported(*this, "moe_topk"); }
void Backend::moe_experts(const Tensor&, const Tensor&, const MoeWeights&, const int32_t*, const float*, int) {
    unsupported(*this, "moe_experts");
}

void check_sample_row(const SampleRow& p, int64_t r) {
    TS_CHECK(std::isfinite(p.temperature), "sample: row {} temperature {} is not finite", r, p.temperature);
    TS_CHECK(p.top_p > 0.f && p.top_p <= 1.f, "sample: row {} top_p {} must be in (0, 1]", r, p.top_p);
    TS_CHECK(p.min_p >= 0.f && p.min_p <= 1.f, "sample: row {} min_p {} must be in [0, 1]", r, p.min_p);
}

}  // namespace tessera
