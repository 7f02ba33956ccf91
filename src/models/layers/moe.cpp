#include "models/layers/moe.h"

#include <climits>

#include <fmt/format.h>

#include "core/views.h"
#include "runtime/weight_store.h"

namespace tessera {

SwiGluMlp SwiGluMlp::load(WeightStore& w, const std::string& gate, const std::string& up, const std::string& down,
                          int64_t F, int64_t H) {
    SwiGluMlp m;
    m.gate_up = StackedLinear::load(w, {{gate, F, {}}, {up, F, {}}}, H);
    m.down = w.matrix(down, H, F);
    return m;
}

void SwiGluMlp::forward(Backend& be, Arena& arena, const Tensor& x, const Tensor& out) const {
    const int64_t T = x.dim(0), F = down.dim(1);
    Tensor gu = arena.tensor(DType::F32, {T, 2 * F});  // [gate x | up x]
    Tensor g = col_view(gu, 0, F), u = col_view(gu, F, F);
    gate_up.apply(be, gu, x);
    be.swiglu(g, g, u);
    be.matmul(out, g, down);
}

namespace {
// Expert e of a stacked [E, rows, cols] tensor, rows [r0, r0 + n).
Tensor expert_slice(const Tensor& t, int64_t e, int64_t r0, int64_t n) {
    Tensor v = t;
    v.data = static_cast<char*>(t.data) + e * t.stride[0] + r0 * t.stride[1];
    v.ndim = 2;
    v.shape = {n, t.shape[2], 0, 0};
    v.stride = {t.stride[1], t.stride[2], 0, 0};
    return v;
}
}  // namespace

MoeBlock MoeBlock::load(WeightStore& w, const ModelConfig& c, int64_t il) {
    const std::string p = fmt::format("blk.{}.", il);
    const int64_t H = c.hidden, E = c.n_experts, I = c.expert_ffn;
    TS_CHECK(E > 0 && I > 0, "{}: layer {} is an MoE layer with {} experts of {} rows (expected at least one)",
             w.source().describe(), il, E, I);
    const TensorSource& src = w.source();
    MoeBlock m;
    // The experts' host matrices, placed together at the end (with the shared expert where it runs
    // as one more expert): a device backend may keep each matrix's experts in one stack.
    std::vector<Tensor> gate, up, down;
    if (src.has(p + "ffn_gate_up_exps.weight")) {
        const Tensor gu = src.get(p + "ffn_gate_up_exps.weight", {E, 2 * I, H});
        const Tensor d = src.get(p + "ffn_down_exps.weight", {E, H, I});
        for (int64_t e = 0; e < E; ++e) {
            gate.push_back(expert_slice(gu, e, 0, I));
            up.push_back(expert_slice(gu, e, I, I));
            down.push_back(expert_slice(d, e, 0, H));
        }
    } else if (src.has(p + "ffn_gate_exps.weight")) {
        const Tensor g = src.get(p + "ffn_gate_exps.weight", {E, I, H});
        const Tensor u = src.get(p + "ffn_up_exps.weight", {E, I, H});
        const Tensor d = src.get(p + "ffn_down_exps.weight", {E, H, I});
        for (int64_t e = 0; e < E; ++e) {
            gate.push_back(expert_slice(g, e, 0, I));
            up.push_back(expert_slice(u, e, 0, I));
            down.push_back(expert_slice(d, e, 0, H));
        }
    } else {
        for (int64_t e = 0; e < E; ++e) {
            gate.push_back(src.get(fmt::format("{}ffn_gate_exps.{}.weight", p, e), {I, H}));
            up.push_back(src.get(fmt::format("{}ffn_up_exps.{}.weight", p, e), {I, H}));
            down.push_back(src.get(fmt::format("{}ffn_down_exps.{}.weight", p, e), {H, I}));
        }
    }
    // The experts' file dtypes (expert 0's: one dtype each, as moe_experts requires).
    const DType gate_dt = gate[0].dtype, up_dt = up[0].dtype, down_dt = down[0].dtype;
    auto place_experts = [&] {
        m.experts.gate = w.place_all(gate, WeightUse::Expert);
        m.experts.up = w.place_all(up, WeightUse::Expert);
        m.experts.down = w.place_all(down, WeightUse::Expert);
    };
    const std::string router = p + "ffn_gate_inp.weight";
    if (c.shared_expert_ffn <= 0) {
        place_experts();
        m.router = w.matrix(router, E, H);
        return m;
    }
    const int64_t S = c.shared_expert_ffn;
    const std::string sg = p + "ffn_gate_shexp.weight", su = p + "ffn_up_shexp.weight", sd = p + "ffn_down_shexp.weight";
    const std::string gate_inp = p + "ffn_gate_inp_shexp.weight";
    const MoeLimits lim = w.backend() ? w.backend()->moe_limits() : MoeLimits{INT_MAX, INT_MAX};
    m.shared_is_expert = S == I && E + 1 <= lim.experts && c.n_experts_used + 1 <= lim.slots &&
                         src.get(sg).dtype == gate_dt && src.get(su).dtype == up_dt && src.get(sd).dtype == down_dt &&
                         src.get(router).dtype == src.get(gate_inp).dtype;
    if (m.shared_is_expert) {
        m.router = w.stack_rows({{router, E, {}}, {gate_inp, 1, {}}}, H);
        TS_ASSERT(!m.router.empty());  // the dtypes agree
        gate.push_back(src.get(sg, {S, H}));
        up.push_back(src.get(su, {S, H}));
        down.push_back(src.get(sd, {H, S}));
        place_experts();
        return m;
    }
    place_experts();
    m.router = w.matrix(router, E, H);
    m.shared = SwiGluMlp::load(w, sg, su, sd, S, H);
    m.shared_gate = w.matrix(gate_inp, 1, H);
    return m;
}

int64_t MoeBlock::activation_floats(const ModelConfig& c) {
    return (c.n_experts + 1) + 2 * (c.n_experts_used + 1) + 2 * c.shared_expert_ffn + c.hidden + 1;
}

void MoeBlock::forward(Backend& be, Arena& arena, const ModelConfig& c, const Tensor& x, const Tensor& out) const {
    const int64_t T = x.dim(0);
    const MoeRouting r{int(c.n_experts_used), c.norm_topk, shared_is_expert};
    Tensor logits = arena.tensor(DType::F32, {T, router.dim(0)});
    Tensor weights = arena.tensor(DType::F32, {T, r.slots()});
    auto* ids = static_cast<int32_t*>(arena.alloc(size_t(T * r.slots()) * sizeof(int32_t)));
    be.matmul(logits, x, router);
    be.moe_topk(logits, r, ids, weights.ptr<float>());
    be.moe_experts(out, x, experts, ids, weights.ptr<float>(), r.slots());
    if (shared.empty()) return;
    Tensor s = arena.tensor(DType::F32, {T, c.hidden});
    Tensor sg = arena.tensor(DType::F32, {T, 1});
    shared.forward(be, arena, x, s);
    be.matmul(sg, x, shared_gate);
    be.sigmoid_mul(s, s, sg);
    be.add(out, out, s);
}

}  // namespace tessera
