// MoE experts, computed expert-grouped: each expert's tokens are gathered into one contiguous
// block, run through the matmul row-dot kernels (quant_dot.h, any weight dtype), SwiGLU and the
// down projection, and the expert outputs are summed back per token in a fixed (token, j) order.
//
// Batch invariance (a token's output does not depend on the other tokens of the batch): every
// output element is one row-dot over the full K (the kernels treat each of their <= 4 rows
// alike), whatever slice of N or group of tokens it falls in, and the sum over a token's k
// experts runs in j order. The experts call the row-dot kernels directly (one chunk over all of
// K) rather than cpu::matmul, whose tiles are sized for a dense layer's many tokens.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

namespace {

// Floats per chunk of the gather and of the weighted sum: decode-sized steps run them on the
// calling thread instead of waking the pool for a few microseconds of copying.
constexpr int64_t kCopyGrain = 65536;
// Bytes of weight rows one block of expert_matmul keeps in L1 while the token groups pass.
constexpr size_t kWeightBlockBytes = 16384;

// The step's grouping: slot s = t·k + j is token t's j-th expert ids[s]; expert e owns rows
// [row0[e], row0[e+1]) of the grouped blocks, its tokens in token order.
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
    for (size_t e = 0; e < size_t(E); ++e) g.row0[e + 1] = g.row0[e] + g.count[e];
    g.row_of_slot.resize(size_t(T * k));
    g.token_of_row.resize(size_t(g.n_rows()));
    std::vector<int64_t> next(g.row0.begin(), g.row0.end() - 1);  // [E], E is small
    for (int64_t s = 0; s < T * k; ++s) {  // slots in order, so each expert's rows are in token order
        const int64_t r = next[size_t(ids[s])]++;
        g.row_of_slot[size_t(s)] = r;
        g.token_of_row[size_t(r)] = s / k;
    }
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

// y[rows, n1-n0] = x[rows, K] · m[n0:n1, K]ᵀ (y points at column n0): activations quantized
// once to the kernel's format, then blocks of weight rows stay in L1 while groups of up to 4
// tokens share each weight load. No K blocking: one dot per output element.
void expert_matmul(float* y, int64_t ys, const float* x, int64_t xs, int64_t rows, const MoeMatrix& m, int64_t n0,
                   int64_t n1, int64_t K) {
    const DotKernel* dk = dot_kernel(m.dtype);
    const RowDotFn dot = simd_enabled() ? dk->simd : dk->scalar;
    const char* act = reinterpret_cast<const char*>(x);
    size_t as = size_t(xs) * sizeof(float);
    thread_local std::vector<char> qbuf;
    if (dk->act != ActFormat::F32) {
        as = act_row_bytes(dk->act, K);
        qbuf.resize(size_t(rows) * as);
        for (int64_t r = 0; r < rows; ++r) quantize_act(dk->act, x + r * xs, qbuf.data() + size_t(r) * as, K);
        act = qbuf.data();
    }
    const int64_t nb = std::clamp<int64_t>(int64_t(kWeightBlockBytes / dtype_row_bytes(m.dtype, K)), 1, 64);
    float out[kMaxDotRows];
    for (int64_t b0 = n0; b0 < n1; b0 += nb) {
        const int64_t b1 = std::min(n1, b0 + nb);
        for (int64_t t = 0; t < rows; t += kMaxDotRows) {
            const int R = int(std::min<int64_t>(kMaxDotRows, rows - t));
            for (int64_t n = b0; n < b1; ++n) {
                dot(row_ptr(m, n), act + size_t(t) * as, as, R, K, out);
                for (int r = 0; r < R; ++r) y[(t + r) * ys + (n - n0)] = out[r];
            }
        }
    }
}

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

    // gate/up projections and SwiGLU, per (expert, slice of I), over the expert's token block.
    const std::vector<Item> gu_items = plan_items(g, I);
    pool.parallel_for(int64_t(gu_items.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const Item& it = gu_items[size_t(i)];
            const MoeExpert& ex = experts[it.e];
            const int64_t r0 = g.row0[size_t(it.e)], rows = g.row0[size_t(it.e) + 1] - r0, n = it.n1 - it.n0;
            float* gs = gate + r0 * I + it.n0;
            float* us = up + r0 * I + it.n0;
            expert_matmul(gs, I, xo + r0 * H, H, rows, ex.gate, it.n0, it.n1, H);
            expert_matmul(us, I, xo + r0 * H, H, rows, ex.up, it.n0, it.n1, H);
            swiglu(gs, I, gs, I, us, I, rows, n);  // nested in the pool: runs serially
        }
    });

    // Down projection, per (expert, slice of H), into xo (the gathered x is no longer needed).
    const std::vector<Item> down_items = plan_items(g, H);
    pool.parallel_for(int64_t(down_items.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const Item& it = down_items[size_t(i)];
            const MoeExpert& ex = experts[it.e];
            const int64_t r0 = g.row0[size_t(it.e)], rows = g.row0[size_t(it.e) + 1] - r0;
            expert_matmul(xo + r0 * H + it.n0, H, gate + r0 * I, I, rows, ex.down, it.n0, it.n1, I);
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
