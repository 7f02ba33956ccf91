// bench_gdn: Gated DeltaNet at the flagship's shape (16 key / 32 value heads × 128, conv K 4), one
// sequence. The recurrence alone (gated_delta_rule: the recurrent step at 1 token; recurrent vs
// chunked WY form over a prompt), each op of the layer's core between its matmuls (conv1d_silu,
// l2_norm q and k, gdn_gates, gated_delta_rule, rms_norm_gated), and that whole sequence as the
// model runs it (Chunked mode): the decode path at 1 token, the prefill path at 1024.
#include <cmath>

#include "harness.h"
#include "core/views.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

constexpr int64_t nk = Flagship::gdn_nk, nv = Flagship::gdn_nv, dk = Flagship::gdn_dk, dv = Flagship::gdn_dv;
constexpr int64_t Kc = Flagship::conv_k, C = 2 * nk * dk + nv * dv;  // conv channels: q | k | v

// One GDN layer's activations and parameters for T tokens of one sequence. Call i uses state
// slot i % slots: a decode step reads its recurrent state cold, as each of the model's 30 GDN
// layers does once per token.
struct Layer {
    Tensor mixed, qkv, q, k, v, z, b, a, beta, g, o, conv_w, conv_state, state, neg_exp_a, dt_bias, norm;
    std::vector<SeqPlan> plans;  // [slots]

    Layer(Scope& sc, int64_t T, int slots) {
        auto rnd = [&](size_t n, float lo, float hi, uint64_t seed) { return random_f32(n, lo, hi, seed); };
        mixed = sc.tensor(DType::F32, {T, C}, rnd(size_t(T * C), -1.f, 1.f, 1).data());  // [T, C] before the conv
        // After the conv: q, k unit-norm (q scaled) as gated_delta_rule expects them; v random.
        std::vector<float> qkv_h = rnd(size_t(T * C), -1.f, 1.f, 2);
        for (int64_t t = 0; t < T; ++t) {
            std::vector<float> qk(qkv_h.begin() + t * C, qkv_h.begin() + t * C + 2 * nk * dk);
            normalize_rows(qk, dk, 1.f);
            for (int64_t i = 0; i < nk * dk; ++i) qk[size_t(i)] /= std::sqrt(float(dk));
            std::copy(qk.begin(), qk.end(), qkv_h.begin() + t * C);
        }
        qkv = sc.tensor(DType::F32, {T, C}, qkv_h.data());
        q = head_view(qkv, 0, nk, dk, dk);            // [T, nk, dk]
        k = head_view(qkv, nk * dk, nk, dk, dk);      // [T, nk, dk]
        v = head_view(qkv, 2 * nk * dk, nv, dv, dv);  // [T, nv, dv]
        z = sc.tensor(DType::F32, {T, nv, dv}, rnd(size_t(T * nv * dv), -1.f, 1.f, 3).data());
        b = sc.tensor(DType::F32, {T, nv}, rnd(size_t(T * nv), -2.f, 2.f, 4).data());
        a = sc.tensor(DType::F32, {T, nv}, rnd(size_t(T * nv), -2.f, 2.f, 5).data());
        beta = sc.tensor(DType::F32, {T, nv}, rnd(size_t(T * nv), 0.f, 1.f, 6).data());
        g = sc.tensor(DType::F32, {T, nv}, rnd(size_t(T * nv), -2.f, -0.01f, 7).data());  // log decay < 0
        o = sc.tensor(DType::F32, {T, nv, dv});
        conv_w = sc.tensor(DType::F32, {C, Kc}, rnd(size_t(C * Kc), -0.5f, 0.5f, 8).data());
        conv_state = sc.tensor(DType::F32, {slots, Kc - 1, C});
        state = sc.tensor(DType::F32, {slots, nv, dk, dv});
        neg_exp_a = sc.tensor(DType::F32, {nv}, rnd(size_t(nv), -2.f, -0.1f, 9).data());
        dt_bias = sc.tensor(DType::F32, {nv}, rnd(size_t(nv), -1.f, 1.f, 10).data());
        norm = sc.tensor(DType::F32, {dv}, rnd(size_t(dv), 0.5f, 1.5f, 11).data());
        const int32_t* q_start = sc.ints({0, int32_t(T)});
        for (int s = 0; s < slots; ++s) plans.push_back(SeqPlan{1, q_start, sc.ints({s})});
    }
    const SeqPlan& plan(int i) const { return plans[size_t(i) % plans.size()]; }

    void rule(Backend& be, GdnMode mode, int i) const {
        GdnParams p;
        p.n_k_heads = int(nk);
        p.n_v_heads = int(nv);
        p.mode = mode;
        be.gated_delta_rule(o, q, k, v, g, beta, state, plan(i), p);
    }
    // The layer's core between its input and output matmuls, in GatedDeltaNet::forward's order.
    void path(Backend& be, int i) const {
        be.conv1d_silu(qkv, mixed, conv_w, conv_state, plan(i));
        be.l2_norm(q, 1e-6f, 1.0f / std::sqrt(float(dk)));
        be.l2_norm(k, 1e-6f, 1.0f);
        be.gdn_gates(beta, g, b, a, neg_exp_a, dt_bias);
        rule(be, GdnMode::Chunked, i);
        be.rms_norm_gated(o, o, z, norm, 1e-6f);
    }
};

// Work of each op from first principles (shapes.h's helpers; the conv reads K taps per output).
Cost conv_cost(int64_t T) {
    Cost c = elementwise_cost(T * C, 1, 1, 2 * Kc + 4);
    c.bytes += double(2 * (Kc - 1) * C + Kc * C) * 4;  // conv state in and out, weights
    return c;
}
Cost l2_cost(int64_t T) {
    return elementwise_cost(T * nk * dk, 1, 1, 3);
}  // one of q, k
Cost gates_cost(int64_t T) {
    return elementwise_cost(T * nv, 2, 2, 10);
}
Cost norm_cost(int64_t T) {
    return elementwise_cost(T * nv * dv, 2, 1, 8);
}
Cost path_cost(int64_t T) {
    const Cost parts[] = {conv_cost(T), l2_cost(T), l2_cost(T), gates_cost(T), gdn_cost(T, nk, nv, dk, dv),
                          norm_cost(T)};
    Cost sum;
    for (const Cost& p : parts) {
        sum.bytes += p.bytes;
        sum.flops += p.flops;
    }
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    const FamilyInfo info{
        "bench_gdn",
        "Gated DeltaNet 16/32 heads x 128: recurrence (recurrent, chunked), each core op, the fused path",
        {1, 1024},
        {}};
    return run_main(info, argc, argv, [](Bench& b) {
        Backend& be = b.be();
        for (int64_t T : b.opt().tokens) {
            Scope sc(b.dev());
            // Enough state slots to read the state cold (one sequence's 2 MiB state would stay cached).
            const int slots = b.cold_copies(double(nv * dk * dv * 4));
            std::unique_ptr<Layer> l;
            auto layer = [&]() -> Layer& {
                if (!l) l = std::make_unique<Layer>(sc, T, slots);
                return *l;
            };
            const std::string cold = slots > 1 ? ", " + std::to_string(slots) + " slots" : "";
            const std::string anchor = T == 1 ? anchor::gdn1 : T == 1024 ? anchor::gdn1024 : "";
            const Cost rule = gdn_cost(T, nk, nv, dk, dv);
            if (T == 1 && b.want("gdn recurrence", "f32", T))
                b.run({"gdn recurrence", "f32", T, rule, anchor, "1 step" + cold, slots > 1},
                      [&](int i) { layer().rule(be, GdnMode::Recurrent, i); });
            if (T > 1 && b.want("gdn recurrence recurrent", "f32", T))
                b.run({"gdn recurrence recurrent", "f32", T, rule, anchor, "token by token"},
                      [&](int i) { layer().rule(be, GdnMode::Recurrent, i); });
            if (T > 1 && b.want("gdn recurrence chunked", "f32", T))
                b.run({"gdn recurrence chunked", "f32", T, rule, anchor, "WY, chunk 64"},
                      [&](int i) { layer().rule(be, GdnMode::Chunked, i); });
            if (b.want("gdn conv1d_silu", "f32", T))
                b.run({"gdn conv1d_silu", "f32", T, conv_cost(T), "", "C 8192, K 4"}, [&](int i) {
                    be.conv1d_silu(layer().qkv, layer().mixed, layer().conv_w, layer().conv_state, layer().plan(i));
                });
            if (b.want("gdn l2_norm q", "f32", T))
                b.run({"gdn l2_norm q", "f32", T, l2_cost(T), "", ""},
                      [&](int) { be.l2_norm(layer().q, 1e-6f, 1.0f / std::sqrt(float(dk))); });
            if (b.want("gdn gates", "f32", T))
                b.run({"gdn gates", "f32", T, gates_cost(T), "", ""}, [&](int) {
                    Layer& x = layer();
                    be.gdn_gates(x.beta, x.g, x.b, x.a, x.neg_exp_a, x.dt_bias);
                });
            if (b.want("gdn rms_norm_gated", "f32", T))
                b.run({"gdn rms_norm_gated", "f32", T, norm_cost(T), "", ""},
                      [&](int) { be.rms_norm_gated(layer().o, layer().o, layer().z, layer().norm, 1e-6f); });
            const char* path = T == 1 ? "gdn decode path (6 ops)" : "gdn prefill path (6 ops)";
            if (b.want(path, "f32", T))
                b.run({path, "f32", T, path_cost(T), "", "conv..norm" + cold, slots > 1},
                      [&](int i) { layer().path(be, i); });
        }
    });
}
