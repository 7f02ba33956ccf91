// make_cpu_backend(): checks each op's Tensors (dtype, device, shapes, strides) and calls the
// raw-pointer kernels in cpu_kernels.h.
#include <algorithm>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera {

namespace {

// A tensor seen as evenly strided rows [rows, cols] with a contiguous last dim.
struct Rows {
    char* data;
    int64_t rows, cols, stride;  // stride in bytes
    template <typename T> T* as() const { return reinterpret_cast<T*>(data); }
    int64_t fstride() const { return stride / int64_t(sizeof(float)); }
};

// Whether t's rows (all but the last dimension, flattened) are evenly strided, as as_rows needs.
bool evenly_strided(const Tensor& t) {
    for (int i = 0; i + 2 < t.ndim; ++i)
        if (t.shape[i] > 1 && t.stride[i] != t.stride[i + 1] * t.shape[i + 1]) return false;
    return true;
}

Rows as_rows(const Tensor& t, const char* op, const char* what) {
    TS_CHECK(t.device == Device::CPU, "{}: {} is on {}, the cpu backend needs host memory", op, what,
             device_name(t.device));
    TS_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, what);
    const auto& info = dtype_info(t.dtype);
    if (t.ndim == 0) return {static_cast<char*>(t.data), 1, 1, int64_t(info.block_bytes)};
    const int n = t.ndim;
    TS_CHECK(info.quantized || t.shape[n - 1] <= 1 || t.stride[n - 1] == info.block_bytes,
             "{}: {} {} must be contiguous along its last dimension", op, what, t.describe());
    TS_CHECK(evenly_strided(t), "{}: {} {} has rows that are not evenly strided", op, what, t.describe());
    const int64_t stride = n >= 2 ? t.stride[n - 2] : int64_t(t.row_bytes());
    TS_CHECK(stride % info.block_bytes == 0 || info.quantized, "{}: {} row stride {} is not a whole element", op,
             what, stride);
    return {static_cast<char*>(t.data), t.rows(), t.cols(), stride};
}

Rows f32_rows(const Tensor& t, const char* op, const char* what) {
    TS_CHECK(t.dtype == DType::F32, "{}: {} must be f32, got {}", op, what, t.describe());
    return as_rows(t, op, what);
}

void check_same(const Rows& a, const Rows& b, const char* op, const char* an, const char* bn) {
    TS_CHECK(a.rows == b.rows && a.cols == b.cols, "{}: {} is [{}, {}] but {} is [{}, {}]", op, an, a.rows, a.cols,
             bn, b.rows, b.cols);
}

// [T, n_heads, D] f32 with a contiguous last dim.
cpu::HeadsView heads_view(const Tensor& t, const char* op, const char* what) {
    TS_CHECK(t.device == Device::CPU && t.dtype == DType::F32 && t.ndim == 3,
             "{}: {} must be an f32 [T, n_heads, D] cpu tensor, got {}", op, what, t.describe());
    TS_CHECK(t.shape[2] <= 1 || t.stride[2] == 4, "{}: {} {} must be contiguous along D", op, what, t.describe());
    TS_CHECK(t.stride[0] % 4 == 0 && t.stride[1] % 4 == 0, "{}: {} strides must be whole floats", op, what);
    TS_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, what);
    return {static_cast<float*>(t.data), t.shape[0], t.shape[1], t.shape[2], t.stride[0] / 4, t.stride[1] / 4};
}

// [n_blocks, block_size, n_kv, D] f32 or f16.
cpu::KvCacheView cache_view(const Tensor& t, const char* op, const char* what) {
    TS_CHECK(t.device == Device::CPU && t.ndim == 4 && (t.dtype == DType::F32 || t.dtype == DType::F16),
             "{}: {} must be an f32/f16 [n_blocks, block_size, n_kv, D] cpu tensor, got {}", op, what, t.describe());
    TS_CHECK(t.shape[3] <= 1 || t.stride[3] == int64_t(dtype_info(t.dtype).block_bytes),
             "{}: {} {} must be contiguous along D", op, what, t.describe());
    TS_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, what);
    return {t.data, t.dtype, t.shape[0], t.shape[1], t.shape[2], t.shape[3], t.stride[0], t.stride[1], t.stride[2]};
}

bool overlaps(const Rows& a, const Rows& b) {
    if (a.rows == 0 || b.rows == 0) return false;
    const char* a_end = a.data + (a.rows - 1) * a.stride + a.cols * 4;
    const char* b_end = b.data + (b.rows - 1) * b.stride + b.cols * 4;
    return a.data < b_end && b.data < a_end;
}

class CpuBackend final : public Backend {
public:
    Device device() const override { return Device::CPU; }
    std::string name() const override { return "cpu"; }

    void matmul(const Tensor& y, const Tensor& x, const Tensor& w) override {
        const Rows yr = f32_rows(y, "matmul", "y"), xr = f32_rows(x, "matmul", "x"), wr = as_rows(w, "matmul", "w");
        TS_CHECK(xr.cols == wr.cols, "matmul: x {} and w {} disagree on K", x.shape_str(), w.shape_str());
        TS_CHECK(yr.rows == xr.rows && yr.cols == wr.rows, "matmul: y is {}, expected [{}, {}] for x {} · w {}ᵀ",
                 y.shape_str(), xr.rows, wr.rows, x.shape_str(), w.shape_str());
        TS_CHECK(!overlaps(yr, xr), "matmul: y must not alias x");
        cpu::matmul(yr.as<float>(), yr.fstride(), xr.as<float>(), xr.fstride(), wr.data, size_t(wr.stride), w.dtype,
                    xr.rows, wr.rows, xr.cols);
    }

    void embed(const Tensor& y, const Tensor& table, const int32_t* ids) override {
        const Rows yr = f32_rows(y, "embed", "y"), tr = as_rows(table, "embed", "table");
        TS_CHECK(yr.cols == tr.cols, "embed: y {} and table {} disagree on the width", y.shape_str(),
                 table.shape_str());
        for (int64_t t = 0; t < yr.rows; ++t)
            TS_CHECK(ids[t] >= 0 && ids[t] < tr.rows, "embed: token id {} at {} is outside the table of {} rows",
                     ids[t], t, tr.rows);
        ThreadPool::global().parallel_for(yr.rows, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t)
                cpu::convert_row(table.dtype, tr.data + ids[t] * tr.stride, yr.as<float>() + t * yr.fstride(), yr.cols);
        });
    }

    void rms_norm(const Tensor& y, const Tensor& x, const Tensor& w, float eps) override {
        if (x.ndim == 3 && (!evenly_strided(x) || !evenly_strided(y))) {  // heads of a stacked projection
            const cpu::HeadsView yh = heads_view(y, "rms_norm", "y"), xh = heads_view(x, "rms_norm", "x");
            TS_CHECK(yh.T == xh.T && yh.n_heads == xh.n_heads && yh.D == xh.D, "rms_norm: y {} but x {}",
                     y.shape_str(), x.shape_str());
            TS_CHECK(w.dtype == DType::F32 && w.numel() == xh.D && w.is_contiguous() && w.device == Device::CPU,
                     "rms_norm: weight must be f32 [{}] on cpu, got {}", xh.D, w.describe());
            return cpu::rms_norm_heads(yh, xh, w.ptr<float>(), eps);
        }
        const Rows yr = f32_rows(y, "rms_norm", "y"), xr = f32_rows(x, "rms_norm", "x");
        check_same(yr, xr, "rms_norm", "y", "x");
        TS_CHECK(w.dtype == DType::F32 && w.numel() == xr.cols && w.is_contiguous() && w.device == Device::CPU,
                 "rms_norm: weight must be f32 [{}] on cpu, got {}", xr.cols, w.describe());
        cpu::rms_norm(yr.as<float>(), yr.fstride(), xr.as<float>(), xr.fstride(), w.ptr<float>(), xr.rows, xr.cols,
                      eps);
    }

    void rope(const Tensor& x, const int32_t* pos, const RopeParams& p) override {
        const cpu::HeadsView h = heads_view(x, "rope", "x");
        RopeParams q = p;
        if (q.rot_dims == 0) q.rot_dims = int(h.D);
        cpu::rope(h.data, h.T, h.tok_stride, h.n_heads, h.head_stride, h.D, pos, q);
    }

    void swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) override {
        const Rows yr = f32_rows(y, "swiglu", "y"), g = f32_rows(gate, "swiglu", "gate"), u = f32_rows(up, "swiglu", "up");
        check_same(yr, g, "swiglu", "y", "gate");
        check_same(yr, u, "swiglu", "y", "up");
        cpu::swiglu(yr.as<float>(), yr.fstride(), g.as<float>(), g.fstride(), u.as<float>(), u.fstride(), yr.rows,
                    yr.cols);
    }

    void add(const Tensor& y, const Tensor& a, const Tensor& b) override {
        const Rows yr = f32_rows(y, "add", "y"), ar = f32_rows(a, "add", "a"), br = f32_rows(b, "add", "b");
        check_same(yr, ar, "add", "y", "a");
        check_same(yr, br, "add", "y", "b");
        cpu::add(yr.as<float>(), yr.fstride(), ar.as<float>(), ar.fstride(), br.as<float>(), br.fstride(), yr.rows,
                 yr.cols);
    }

    void add_bias(const Tensor& y, const Tensor& bias) override {
        const Rows yr = f32_rows(y, "add_bias", "y");
        TS_CHECK(bias.dtype == DType::F32 && bias.numel() == yr.cols && bias.is_contiguous() &&
                     bias.device == Device::CPU,
                 "add_bias: bias must be f32 [{}] on cpu, got {}", yr.cols, bias.describe());
        cpu::add_bias(yr.as<float>(), yr.fstride(), bias.ptr<float>(), yr.rows, yr.cols);
    }

    void kv_store(const Tensor& k_cache, const Tensor& v_cache, const Tensor& k, const Tensor& v,
                  const int32_t* slot) override {
        const cpu::KvCacheView kc = cache_view(k_cache, "kv_store", "k_cache"), vc = cache_view(v_cache, "kv_store", "v_cache");
        const cpu::HeadsView kh = heads_view(k, "kv_store", "k"), vh = heads_view(v, "kv_store", "v");
        TS_CHECK(kc.n_blocks == vc.n_blocks && kc.block_size == vc.block_size,
                 "kv_store: k_cache {} and v_cache {} have different blocks", k_cache.shape_str(), v_cache.shape_str());
        TS_CHECK(kh.T == vh.T && kh.n_heads == kc.n_kv && vh.n_heads == vc.n_kv && kh.D == kc.D && vh.D == vc.D,
                 "kv_store: k {} / v {} do not match the caches {} / {}", k.shape_str(), v.shape_str(),
                 k_cache.shape_str(), v_cache.shape_str());
        cpu::kv_store(kc, vc, kh, vh, slot);
    }

    void attention(const Tensor& out, const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                   const AttnPlan& plan, float scale) override {
        const cpu::HeadsView o = heads_view(out, "attention", "out"), qh = heads_view(q, "attention", "q");
        const cpu::KvCacheView kc = cache_view(k_cache, "attention", "k_cache"),
                               vc = cache_view(v_cache, "attention", "v_cache");
        TS_CHECK(kc.n_blocks == vc.n_blocks && kc.block_size == vc.block_size && kc.n_kv == vc.n_kv,
                 "attention: k_cache {} and v_cache {} differ", k_cache.shape_str(), v_cache.shape_str());
        TS_CHECK(qh.D == kc.D, "attention: q head dim {} but k_cache head dim {}", qh.D, kc.D);
        TS_CHECK(o.T == qh.T && o.n_heads == qh.n_heads && o.D == vc.D, "attention: out {} expected [{}, {}, {}]",
                 out.shape_str(), qh.T, qh.n_heads, vc.D);
        TS_CHECK(kc.n_kv > 0 && qh.n_heads % kc.n_kv == 0, "attention: {} query heads not a multiple of {} kv heads",
                 qh.n_heads, kc.n_kv);
        cpu::check_attn_plan(plan, qh.T, kc.n_blocks, kc.block_size);
        cpu::attention(o, qh, kc, vc, plan, scale);
    }

    void softmax(const Tensor& x) override {
        const Rows xr = f32_rows(x, "softmax", "x");
        cpu::softmax(xr.as<float>(), xr.fstride(), xr.rows, xr.cols);
    }

    void argmax(const Tensor& x, int32_t* out) override {
        const Rows xr = f32_rows(x, "argmax", "x");
        TS_CHECK(xr.cols > 0, "argmax: rows of x {} are empty", x.shape_str());
        cpu::argmax(xr.as<float>(), xr.fstride(), xr.rows, xr.cols, out);
    }

    void edit_logits(const Tensor& x, const LogitEdit* edits, int64_t n) override {
        const Rows xr = f32_rows(x, "edit_logits", "x");
        float* p = xr.as<float>();
        for (int64_t i = 0; i < n; ++i) {
            const LogitEdit& e = edits[i];
            TS_CHECK(e.row >= 0 && e.row < xr.rows && e.id >= 0 && e.id < xr.cols,
                     "edit_logits: edit {} at ({}, {}) outside [{}, {}]", i, e.row, e.id, xr.rows, xr.cols);
            float& v = p[e.row * xr.fstride() + e.id];
            v = apply_logit_edit(v, e);
        }
    }

    void top_k(const Tensor& x, int k, float* values, int32_t* ids) override {
        const Rows xr = f32_rows(x, "top_k", "x");
        TS_CHECK(k >= 1 && k <= kMaxTopK, "top_k: k = {} out of [1, {}]", k, kMaxTopK);
        TS_CHECK(values && ids, "top_k: null outputs");
        cpu::top_k(xr.as<float>(), xr.fstride(), xr.rows, xr.cols, k, values, ids);
    }

    void sample(const Tensor& x, const SampleRow* rows, int32_t* ids) override {
        const Rows xr = f32_rows(x, "sample", "x");
        TS_CHECK(xr.rows == 0 || (rows && ids), "sample: null rows or ids for x {}", x.shape_str());
        cpu::sample(xr.as<float>(), xr.fstride(), xr.rows, xr.cols, rows, ids);
    }

    // ---- Gated DeltaNet ----
    void l2_norm(const Tensor& x, float eps, float scale) override {
        cpu::l2_norm(heads_view(x, "l2_norm", "x"), eps, scale);
    }

    void rms_norm_gated(const Tensor& y, const Tensor& x, const Tensor& z, const Tensor& w, float eps) override {
        const char* op = "rms_norm_gated";
        const cpu::HeadsView yh = heads_view(y, op, "y"), xh = heads_view(x, op, "x"), zh = heads_view(z, op, "z");
        TS_CHECK(y.shape == x.shape && z.shape == x.shape, "rms_norm_gated: y {}, x {} and z {} must have one shape",
                 y.shape_str(), x.shape_str(), z.shape_str());
        TS_CHECK(w.dtype == DType::F32 && w.device == Device::CPU && w.numel() == xh.D && w.is_contiguous(),
                 "rms_norm_gated: w must be f32 [{}] on cpu, got {}", xh.D, w.describe());
        TS_CHECK(gdn_same(y, x) || gdn_same(y, z) || (!gdn_overlap(y, x) && !gdn_overlap(y, z)),
                 "rms_norm_gated: y must be x or z itself, or overlap neither");
        cpu::rms_norm_gated(yh, xh, zh, w.ptr<float>(), eps);
    }

    void conv1d_silu(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                     const SeqPlan& plan) override {
        const char* op = "conv1d_silu";
        const Rows yr = f32_rows(y, op, "y"), xr = f32_rows(x, op, "x");
        check_same(yr, xr, op, "y", "x");
        TS_CHECK(!overlaps(yr, xr), "conv1d_silu: y must not overlap x (the conv reads earlier inputs)");
        const int64_t C = xr.cols;
        TS_CHECK(w.dtype == DType::F32 && w.device == Device::CPU && w.ndim == 2 && w.shape[0] == C &&
                     w.shape[1] >= 1 && w.is_contiguous(),
                 "conv1d_silu: w must be a contiguous f32 [{}, K] cpu tensor (x is {}), got {}", C, x.shape_str(),
                 w.describe());
        const int64_t K = w.shape[1];
        const int64_t slot_stride = gdn_state_view(conv_state, op, "conv_state", {K - 1, C});
        TS_CHECK(!gdn_overlap(conv_state, x) && !gdn_overlap(conv_state, y), "conv1d_silu: conv_state overlaps x or y");
        cpu::check_seq_plan(plan, xr.rows, conv_state.shape[0], op);
        cpu::conv1d_silu(yr.as<float>(), yr.fstride(), xr.as<float>(), xr.fstride(), w.ptr<float>(), C, K,
                         conv_state.ptr<float>(), slot_stride, plan);
    }

    void gdn_gates(const Tensor& beta, const Tensor& g, const Tensor& b, const Tensor& a, const Tensor& neg_exp_a,
                   const Tensor& dt_bias) override {
        const char* op = "gdn_gates";
        const Rows br = f32_rows(beta, op, "beta"), gr = f32_rows(g, op, "g"), bi = f32_rows(b, op, "b"),
                   ai = f32_rows(a, op, "a");
        check_same(br, bi, op, "beta", "b");
        check_same(gr, bi, op, "g", "b");
        check_same(ai, bi, op, "a", "b");
        const int64_t nv = bi.cols;
        for (const Tensor* t : {&neg_exp_a, &dt_bias})
            TS_CHECK(t->dtype == DType::F32 && t->device == Device::CPU && t->numel() == nv && t->is_contiguous(),
                     "gdn_gates: {} must be f32 [{}] on cpu, got {}", t == &dt_bias ? "dt_bias" : "neg_exp_a", nv,
                     t->describe());
        TS_CHECK((gdn_same(beta, b) || !gdn_overlap(beta, b)) && (gdn_same(g, a) || !gdn_overlap(g, a)) &&
                     !gdn_overlap(beta, a) && !gdn_overlap(g, b) && !gdn_overlap(beta, g),
                 "gdn_gates: beta may only be b itself and g only a itself; outputs must not overlap otherwise");
        cpu::gdn_gates(br.as<float>(), br.fstride(), gr.as<float>(), gr.fstride(), bi.as<float>(), bi.fstride(),
                       ai.as<float>(), ai.fstride(), neg_exp_a.ptr<float>(), dt_bias.ptr<float>(), bi.rows, nv);
    }

    void gated_delta_rule(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                          const Tensor& beta, const Tensor& state, const SeqPlan& plan, const GdnParams& p) override {
        const char* op = "gated_delta_rule";
        const cpu::HeadsView oh = heads_view(o, op, "o"), qh = heads_view(q, op, "q"), kh = heads_view(k, op, "k"),
                             vh = heads_view(v, op, "v");
        const int64_t nk = p.n_k_heads, nv = p.n_v_heads, T = qh.T;
        TS_CHECK(nk > 0 && nv > 0 && nv % nk == 0, "gated_delta_rule: {} value heads are not a multiple of {} key heads",
                 nv, nk);
        TS_CHECK(p.mode != GdnMode::Chunked || (p.chunk >= 1 && p.chunk <= 256),
                 "gated_delta_rule: chunk {} must be in [1, 256]", p.chunk);
        TS_CHECK(kh.T == T && vh.T == T && oh.T == T && qh.n_heads == nk && kh.n_heads == nk && vh.n_heads == nv &&
                     oh.n_heads == nv && kh.D == qh.D && oh.D == vh.D && qh.D > 0 && vh.D > 0,
                 "gated_delta_rule: q {} and k {} must be [T, {}, dk], v {} and o {} [T, {}, dv]", q.shape_str(),
                 k.shape_str(), nk, v.shape_str(), o.shape_str(), nv);
        const Rows gr = f32_rows(g, op, "g"), br = f32_rows(beta, op, "beta");
        TS_CHECK(gr.rows == T && gr.cols == nv && br.rows == T && br.cols == nv,
                 "gated_delta_rule: g {} and beta {} must be [{}, {}]", g.shape_str(), beta.shape_str(), T, nv);
        const int64_t slot_stride = gdn_state_view(state, op, "state", {nv, qh.D, vh.D});
        for (const Tensor* t : {&q, &k, &v, &g, &beta, &state})
            TS_CHECK(!gdn_overlap(o, *t), "gated_delta_rule: o {} overlaps an input", o.shape_str());
        for (const Tensor* t : {&q, &k, &v, &g, &beta})
            TS_CHECK(!gdn_overlap(state, *t), "gated_delta_rule: state overlaps an input");
        cpu::check_seq_plan(plan, T, state.shape[0], op);
        cpu::gated_delta_rule(oh, qh, kh, vh, gr.as<float>(), gr.fstride(), br.as<float>(), br.fstride(),
                              state.ptr<float>(), slot_stride, plan, p);
    }

    // An f32 cpu state [n_slots, inner...] whose inner dims are contiguous; returns the slot stride in floats.
    static int64_t gdn_state_view(const Tensor& t, const char* op, const char* what,
                                  std::initializer_list<int64_t> inner) {
        std::vector<int64_t> want = {-1};
        want.insert(want.end(), inner);
        bool ok = t.dtype == DType::F32 && t.device == Device::CPU && t.ndim == int(want.size()) && t.shape[0] >= 0;
        for (int i = 1; ok && i < t.ndim; ++i) ok = t.shape[i] == want[size_t(i)];
        std::string dims;
        for (int64_t d : inner) dims += fmt::format(", {}", d);
        TS_CHECK(ok, "{}: {} must be an f32 [n_slots{}] cpu tensor, got {}", op, what, dims, t.describe());
        int64_t expect = 4;
        for (int i = t.ndim - 1; i >= 1; --i) {
            TS_CHECK(t.shape[i] <= 1 || t.stride[i] == expect, "{}: {} {} must be contiguous within a slot", op, what,
                     t.describe());
            expect *= t.shape[i];
        }
        TS_CHECK(t.stride[0] % 4 == 0 && (t.shape[0] <= 1 || t.stride[0] >= expect),
                 "{}: {} {} has overlapping or misaligned slots", op, what, t.describe());
        TS_CHECK(t.data != nullptr || t.numel() == 0, "{}: {} has no data", op, what);
        return t.stride[0] / 4;
    }
    // Bytes [begin, end) a tensor with non-negative strides spans (empty when it has no elements).
    static std::pair<const char*, const char*> gdn_span(const Tensor& t) {
        const char* b = static_cast<const char*>(t.data);
        if (t.numel() == 0 || !b) return {b, b};
        int64_t end = int64_t(dtype_info(t.dtype).block_bytes);
        for (int i = 0; i < t.ndim; ++i) end += (t.shape[i] - 1) * t.stride[i];
        return {b, b + end};
    }
    static bool gdn_overlap(const Tensor& a, const Tensor& b) {
        const auto [a0, a1] = gdn_span(a);
        const auto [b0, b1] = gdn_span(b);
        return a0 != a1 && b0 != b1 && a0 < b1 && b0 < a1;
    }
    static bool gdn_same(const Tensor& a, const Tensor& b) {
        return a.data == b.data && a.ndim == b.ndim && a.shape == b.shape && a.stride == b.stride;
    }
    // ---- end Gated DeltaNet ----

    // ---- MoE and gating ----
    void sigmoid_mul(const Tensor& y, const Tensor& x, const Tensor& gate) override {
        const char* op = "sigmoid_mul";
        if (gate.ndim == 3 && (!evenly_strided(gate) || !evenly_strided(x) || !evenly_strided(y))) {
            // [T, heads, D] views, e.g. the output gate inside a stacked q | gate | k | v projection
            const cpu::HeadsView yh = heads_view(y, op, "y"), xh = heads_view(x, op, "x"), gh = heads_view(gate, op, "gate");
            TS_CHECK(yh.T == xh.T && yh.n_heads == xh.n_heads && yh.D == xh.D && gh.T == xh.T &&
                         gh.n_heads == xh.n_heads && gh.D == xh.D,
                     "sigmoid_mul: y {}, x {} and gate {} must be the same [T, heads, D]", y.shape_str(),
                     x.shape_str(), gate.shape_str());
            return cpu::sigmoid_mul_heads(yh, xh, gh);
        }
        const Rows yr = f32_rows(y, op, "y"), xr = f32_rows(x, op, "x"), gr = f32_rows(gate, op, "gate");
        check_same(yr, xr, op, "y", "x");
        const bool per_row = gr.cols == 1 && xr.cols != 1;
        TS_CHECK(gr.rows == xr.rows && (per_row || gr.cols == xr.cols),
                 "sigmoid_mul: gate is {}, expected [{}, {}] like x {} or [{}, 1]", gate.shape_str(), xr.rows, xr.cols,
                 x.shape_str(), xr.rows);
        auto same = [](const Rows& a, const Rows& b) { return a.data == b.data && a.stride == b.stride; };
        TS_CHECK(same(yr, xr) || !overlaps(yr, xr), "sigmoid_mul: y must be x itself or not overlap it");
        TS_CHECK((same(yr, gr) && !per_row) || !overlaps(yr, gr), "sigmoid_mul: y must not overlap gate");
        cpu::sigmoid_mul(yr.as<float>(), yr.fstride(), xr.as<float>(), xr.fstride(), gr.as<float>(), gr.fstride(),
                         per_row, xr.rows, xr.cols);
    }

    void moe_topk(const Tensor& logits, const MoeRouting& r, int32_t* ids, float* weights) override {
        const Rows lr = f32_rows(logits, "moe_topk", "logits");
        const int64_t E = lr.cols - (r.shared ? 1 : 0);
        TS_CHECK(r.k >= 1 && r.k <= E, "moe_topk: k = {} must be in [1, {}] for logits {}{}", r.k, E,
                 logits.shape_str(), r.shared ? " (the last column the shared expert's gate)" : "");
        TS_CHECK(lr.rows == 0 || (ids && weights), "moe_topk: ids and weights must not be null");
        cpu::moe_topk(lr.as<float>(), lr.fstride(), lr.rows, E, r, ids, weights);
    }

    void moe_experts(const Tensor& y, const Tensor& x, const MoeWeights& w, const int32_t* ids, const float* weights,
                     int k) override {
        const char* op = "moe_experts";
        const Rows yr = f32_rows(y, op, "y"), xr = f32_rows(x, op, "x");
        check_same(yr, xr, op, "y", "x");
        const int E = w.n_experts();
        TS_CHECK(E > 0 && w.up.size() == size_t(E) && w.down.size() == size_t(E),
                 "moe_experts: {} gate, {} up and {} down expert weights; expected the same number, at least one",
                 w.gate.size(), w.up.size(), w.down.size());
        TS_CHECK(k >= 1, "moe_experts: k = {} must be at least 1", k);
        TS_CHECK(xr.rows == 0 || (ids && weights), "moe_experts: ids and weights must not be null");
        const int64_t H = xr.cols, I = w.gate[0].rows();
        std::vector<cpu::MoeExpert> ex(static_cast<size_t>(E));  // [E]
        for (int e = 0; e < E; ++e) {
            try {
                auto matrix = [&](const Tensor& t, const char* what, int64_t rows, int64_t cols) {
                    const Rows r = as_rows(t, op, what);
                    TS_CHECK(r.rows == rows && r.cols == cols, "{} is {}, expected [{}, {}] (x is {})", what,
                             t.shape_str(), rows, cols, x.shape_str());
                    return cpu::MoeMatrix{r.data, size_t(r.stride), t.dtype};
                };
                ex[size_t(e)] = {matrix(w.gate[size_t(e)], "gate", I, H), matrix(w.up[size_t(e)], "up", I, H),
                                 matrix(w.down[size_t(e)], "down", H, I)};
            } catch (const Error& err) {
                throw err.with_context(fmt::format("moe_experts: expert {}", e));
            }
        }
        cpu::moe_experts(yr.as<float>(), yr.fstride(), xr.as<float>(), xr.fstride(), xr.rows, H, I, ex.data(), E, ids,
                         weights, k);
    }
    // ---- end MoE and gating ----
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace tessera
