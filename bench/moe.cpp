// bench_moe: the sparse MoE block through Backend::moe_topk (the router) and moe_experts (SwiGLU
// experts gate/up/down, grouped by expert) at llama.cpp's Qwen3-30B-A3B shape (128 experts top-8,
// 768x2048 each) and the flagship's (256 top-8, 512x2048), at 1, 8 and 512 tokens. Routings are
// random and change every call, so the bytes are those of the experts each call selects, read cold.
#include <algorithm>
#include <numeric>
#include <random>

#include "harness.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

struct MoeShape {
    const char* name;
    int64_t E, I, H;
    int k;
};

struct Routing {
    std::vector<int32_t> ids;  // [T, k] distinct experts per token
    std::vector<float> w;      // [T, k] summing to 1
    int64_t distinct = 0;      // experts selected by any token
};

Routing random_routing(int64_t T, int k, int64_t E, std::mt19937_64& rng) {
    Routing r;
    std::vector<int32_t> pool(size_t(E), 0);
    std::vector<char> used(size_t(E), 0);
    for (int64_t t = 0; t < T; ++t) {
        std::iota(pool.begin(), pool.end(), 0);
        for (int j = 0; j < k; ++j) {  // partial Fisher-Yates: k distinct experts
            std::swap(pool[size_t(j)], pool[size_t(j) + size_t(rng() % uint64_t(E - j))]);
            r.ids.push_back(pool[size_t(j)]);
            r.w.push_back(1.f / float(k));
            used[size_t(pool[size_t(j)])] = 1;
        }
    }
    r.distinct = std::count(used.begin(), used.end(), 1);
    return r;
}

std::string moe_anchor(const MoeShape& s, const std::string& dt, int64_t T) {
    if (s.E != 128 || dt != "q4_0") return "";
    return T == 1 ? anchor::moe1_q4_0 : T == 512 ? anchor::moe512_q4_0 : "";
}

void bench_router(Bench& b, const MoeShape& s, int64_t T) {
    const std::string name = "moe_topk " + std::to_string(s.E) + " top-" + std::to_string(s.k);
    if (!b.want(name, "f32", T)) return;
    Scope sc(b.dev());
    const auto lh = random_f32(size_t(T * s.E), -4.f, 4.f, 3);
    const Tensor logits = sc.tensor(DType::F32, {T, s.E}, lh.data());
    int32_t* ids = const_cast<int32_t*>(sc.ints(std::vector<int32_t>(size_t(T * s.k))));
    float* w = const_cast<float*>(sc.floats(std::vector<float>(size_t(T * s.k))));
    // Reads the logits, writes ids and weights; softmax ≈ 5 FLOPs per logit (exp, sum, scale).
    Cost c = elementwise_cost(T * s.E, 1, 0, 5);
    c.bytes += double(T * s.k) * 8;
    b.run({name, "f32", T, c, "", ""}, [&](int) { b.be().moe_topk(logits, {s.k, true}, ids, w); });
}

void bench_experts(Bench& b, const MoeShape& s, const std::string& dt, const std::vector<int64_t>& todo) {
    const DType t = dtype_from_name(dt);
    const std::string name = std::string("moe ") + s.name;
    Scope sc(b.dev());
    // Stacked [E, I, H] gate and up, [E, H, I] down; one view per expert.
    const auto gate_h = random_weight(t, s.E * s.I, s.H, 1), up_h = random_weight(t, s.E * s.I, s.H, 2);
    const auto down_h = random_weight(t, s.E * s.H, s.I, 3);
    const Tensor gate = sc.weight(t, s.E * s.I, s.H, gate_h.data()).view({s.E, s.I, s.H});
    const Tensor up = sc.weight(t, s.E * s.I, s.H, up_h.data()).view({s.E, s.I, s.H});
    const Tensor down = sc.weight(t, s.E * s.H, s.I, down_h.data()).view({s.E, s.H, s.I});
    MoeWeights mw;
    for (int64_t e = 0; e < s.E; ++e) {
        mw.gate.push_back(gate.slice_rows(e, e + 1));
        mw.up.push_back(up.slice_rows(e, e + 1));
        mw.down.push_back(down.slice_rows(e, e + 1));
    }
    std::mt19937_64 rng(7);
    for (int64_t T : todo) {
        constexpr int kRoutings = 16;
        std::vector<const int32_t*> ids;
        std::vector<const float*> ws;
        double distinct = 0;
        for (int i = 0; i < kRoutings; ++i) {
            const Routing r = random_routing(T, s.k, s.E, rng);
            ids.push_back(sc.ints(r.ids));
            ws.push_back(sc.floats(r.w));
            distinct += double(r.distinct) / kRoutings;
        }
        const auto xh = random_f32(size_t(T * s.H), -1.f, 1.f, 4);
        const Tensor x = sc.tensor(DType::F32, {T, s.H}, xh.data()), y = sc.tensor(DType::F32, {T, s.H});
        char note[32];
        std::snprintf(note, sizeof note, "%.1f experts", distinct);
        Row row{name, dt, T, moe_cost(t, T, s.k, distinct, s.I, s.H), moe_anchor(s, dt, T), note};
        row.cold = true;  // 16 random routings over all E experts
        b.run(row,
              [&](int i) { b.be().moe_experts(y, x, mw, ids[size_t(i % kRoutings)], ws[size_t(i % kRoutings)], s.k); });
    }
}

}  // namespace

int main(int argc, char** argv) {
    const FamilyInfo info{"bench_moe",
                          "MoE router (moe_topk) and SwiGLU experts (moe_experts, gate+up+down) with random routings",
                          {1, 8, 512},
                          {"q4_0"}};
    return run_main(info, argc, argv, [](Bench& b) {
        const MoeShape shapes[] = {{"128x768x2048 top-8", 128, 768, 2048, 8},  // Qwen3-30B-A3B (llama.cpp's)
                                   {"256x512x2048 top-8", Flagship::experts, Flagship::expert_ff, Flagship::hidden,
                                    int(Flagship::top_k)}};  // the flagship
        for (const MoeShape& s : shapes) {
            for (int64_t T : b.opt().tokens) bench_router(b, s, T);
            for (const std::string& dt : b.opt().dtypes) {
                std::vector<int64_t> todo;
                for (int64_t T : b.opt().tokens)
                    if (b.want(std::string("moe ") + s.name, dt, T)) todo.push_back(T);
                if (!todo.empty()) bench_experts(b, s, dt, todo);
            }
        }
    });
}
