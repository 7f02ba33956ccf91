// MoE experts, computed expert-grouped: each expert's tokens are gathered into one contiguous
// block, run through cpu::matmul (any weight dtype), SwiGLU and the down projection, and the
// expert outputs are summed back per token in a fixed (token, j) order.
//
// Batch invariance (a token's output does not depend on the other tokens of the batch):
// - every output row is a dot over full K rows of the weights, whatever slice of N or tile of
//   tokens it falls in, and the final sum over a token's k experts runs in j order;
// - cpu::matmul picks a different K blocking for T == 1 than for T > 1 (a different f32
//   summation order), so an expert that receives one token runs it as a pair (a copy of the
//   row, output ignored); every expert block then takes the same T > 1 path.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/quant_dot.h"

namespace tessera::cpu {

namespace {

// Floats per chunk of the gather and of the weighted sum: decode-sized steps run them on the
// calling thread instead of waking the pool for a few microseconds of copying.
constexpr int64_t kCopyGrain = 65536;

// The step's grouping: slot s = t·k + j is token t's j-th expert ids[s]; expert e owns rows
// [row0[e], row0[e+1]) of the grouped blocks, its tokens in token order (+1 padding row when it
// has a single token).
struct Grouping {
    std::vector<int64_t> count;         // [E] tokens routed to each expert
    std::vector<int64_t> row0;          // [E + 1]
    std::vector<int64_t> row_of_slot;   // [T·k] grouped row holding slot s's expert output
    std::vector<int64_t> token_of_row;  // [n_rows] the token each grouped row was gathered from
    int64_t n_rows() const { return row0.back(); }
};

// Reused across calls (grows to the largest step): the grouping and the activation blocks.
struct Scratch {
    Grouping g;
    std::vector<float> xo;  // [n_rows, H]: gathered x, then the down-projection outputs
    std::vector<float> gu;  // [2, n_rows, I]: gate (then SwiGLU) and up projections
};

void build_grouping(Grouping& g, const int32_t* ids, int64_t T, int k, int E) {
    g.count.assign(size_t(E), 0);
    for (int64_t s = 0; s < T * k; ++s) {
        TS_CHECK(ids[s] >= 0 && ids[s] < E, "moe_experts: ids[{}, {}] = {} is outside the {} experts", s / k, s % k,
                 ids[s], E);
        ++g.count[size_t(ids[s])];
    }
    g.row0.assign(size_t(E) + 1, 0);
    for (size_t e = 0; e < size_t(E); ++e) g.row0[e + 1] = g.row0[e] + (g.count[e] == 1 ? 2 : g.count[e]);
    g.row_of_slot.resize(size_t(T * k));
    g.token_of_row.resize(size_t(g.n_rows()));
    std::vector<int64_t> next(g.row0.begin(), g.row0.end() - 1);  // [E], E is small
    for (int64_t s = 0; s < T * k; ++s) {  // slots in order, so each expert's rows are in token order
        const int64_t r = next[size_t(ids[s])]++;
        g.row_of_slot[size_t(s)] = r;
        g.token_of_row[size_t(r)] = s / k;
    }
    for (size_t e = 0; e < size_t(E); ++e)  // the pad row repeats the single token
        if (g.count[e] == 1) g.token_of_row[size_t(g.row0[e]) + 1] = g.token_of_row[size_t(g.row0[e])];
}

// One task: output rows [n0, n1) of one expert's matmul.
struct Item {
    int e;
    int64_t n0, n1;
};

// Splits each active expert's N output rows into slices, about 4 tasks per thread overall,
// giving experts with more tokens more slices. Slices keep at least 16 rows.
std::vector<Item> plan_items(const Grouping& g, int64_t N) {
    const int E = int(g.count.size());
    double total = 0;
    for (int e = 0; e < E; ++e)
        if (g.count[size_t(e)]) total += 4.0 + double(g.row0[size_t(e) + 1] - g.row0[size_t(e)]);
    const double target = 4.0 * ThreadPool::global().size();
    const int64_t max_slices = std::max<int64_t>(1, N / 16);
    std::vector<Item> items;
    for (int e = 0; e < E; ++e) {
        if (!g.count[size_t(e)]) continue;
        const double cost = 4.0 + double(g.row0[size_t(e) + 1] - g.row0[size_t(e)]);
        const int64_t n_slices = std::clamp<int64_t>(int64_t(target * cost / total + 0.5), 1, max_slices);
        for (int64_t s = 0; s < n_slices; ++s) items.push_back({e, N * s / n_slices, N * (s + 1) / n_slices});
    }
    return items;
}

const char* row_ptr(const MoeMatrix& m, int64_t r) { return static_cast<const char*>(m.data) + size_t(r) * m.stride; }

}  // namespace

void moe_experts(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t H, int64_t I,
                 const MoeExpert* experts, int E, const int32_t* ids, const float* weights, int k) {
    TS_CHECK(E > 0 && k >= 1, "moe_experts: need at least one expert and k >= 1 (E = {}, k = {})", E, k);
    for (int e = 0; e < E; ++e)
        for (const MoeMatrix* m : {&experts[e].gate, &experts[e].up, &experts[e].down}) {
            const int64_t K = m == &experts[e].down ? I : H;
            if (!dot_kernel(m->dtype))
                fail(ErrorKind::Unsupported, "moe_experts: expert {} weights of dtype {} are not supported on cpu", e,
                     dtype_name(m->dtype));
            TS_CHECK(K % dtype_info(m->dtype).block_elems == 0,
                     "moe_experts: expert {} rows of {} elements are not whole {} blocks", e, K, dtype_name(m->dtype));
        }
    if (T == 0) return;
    thread_local Scratch sc;
    Grouping& g = sc.g;
    build_grouping(g, ids, T, k, E);
    const int64_t R = g.n_rows();
    sc.xo.resize(size_t(R * H));
    sc.gu.resize(size_t(2 * R * I));
    float* xo = sc.xo.data();  // [R, H]
    float* gate = sc.gu.data();  // [R, I]
    float* up = gate + R * I;    // [R, I]
    ThreadPool& pool = ThreadPool::global();

    // Gather: xo[r] = x[token_of_row[r]].
    pool.parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            std::memcpy(xo + r * H, x + g.token_of_row[size_t(r)] * xs, size_t(H) * sizeof(float));
    }, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(H, 1)));

    // gate/up projections and SwiGLU, per (expert, slice of I). cpu::matmul runs serially here
    // (nested in the pool), over the expert's whole token block.
    const std::vector<Item> gu_items = plan_items(g, I);
    pool.parallel_for(int64_t(gu_items.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const Item& it = gu_items[size_t(i)];
            const MoeExpert& ex = experts[it.e];
            const int64_t r0 = g.row0[size_t(it.e)], rows = g.row0[size_t(it.e) + 1] - r0, n = it.n1 - it.n0;
            float* gs = gate + r0 * I + it.n0;
            float* us = up + r0 * I + it.n0;
            matmul(gs, I, xo + r0 * H, H, row_ptr(ex.gate, it.n0), ex.gate.stride, ex.gate.dtype, rows, n, H);
            matmul(us, I, xo + r0 * H, H, row_ptr(ex.up, it.n0), ex.up.stride, ex.up.dtype, rows, n, H);
            swiglu(gs, I, gs, I, us, I, rows, n);
        }
    });

    // Down projection, per (expert, slice of H), into xo (the gathered x is no longer needed).
    const std::vector<Item> down_items = plan_items(g, H);
    pool.parallel_for(int64_t(down_items.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const Item& it = down_items[size_t(i)];
            const MoeExpert& ex = experts[it.e];
            const int64_t r0 = g.row0[size_t(it.e)], rows = g.row0[size_t(it.e) + 1] - r0;
            matmul(xo + r0 * H + it.n0, H, gate + r0 * I, I, row_ptr(ex.down, it.n0), ex.down.stride, ex.down.dtype,
                   rows, it.n1 - it.n0, I);
        }
    });

    // Weighted sum back in token order: y[t] = Σ_j weights[t, j] · xo[row_of_slot[t·k + j]], j ascending.
    pool.parallel_for(T, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            float* yt = y + t * ys;
            for (int j = 0; j < k; ++j) {
                const float w = weights[t * k + j];
                const float* o = xo + g.row_of_slot[size_t(t * k + j)] * H;
                if (j == 0)
                    for (int64_t c = 0; c < H; ++c) yt[c] = w * o[c];
                else
                    for (int64_t c = 0; c < H; ++c) yt[c] += w * o[c];
            }
        }
    }, std::max<int64_t>(1, kCopyGrain / std::max<int64_t>(H * k, 1)));
}

}  // namespace tessera::cpu
