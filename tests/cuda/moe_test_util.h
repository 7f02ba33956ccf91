// Shared by the fast MoE's tests (test_fast_moe.cpp, test_fast_moe_experts.cpp): uploads, the
// plan lists, the CPU router and a host model of the grouping, random routings, random GGUF and
// packed expert stacks on the device (row-major or in 16-row tiles; lazy for the model shapes),
// the double-precision reference with its bound, and the checks of every plan against them.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/status.h"
#include "core/tensor.h"
#include "formats/quants.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/cuda/stream.h"
#include "kernels/packed_repack.h"

#include "ref_test_util.h"

namespace tessera::cuda::moetest {

using reftest::normal_floats;

// A pageable upload may return before its DMA lands; the tests' streams do not wait for it.
template <typename T>
DeviceBuffer to_device(const std::vector<T>& v) {
    DeviceBuffer b(std::max<size_t>(v.size(), 1) * sizeof(T));
    if (!v.empty()) b.upload(v.data(), v.size() * sizeof(T));
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    return b;
}
template <typename T>
std::vector<T> to_host(const DeviceBuffer& b, size_t n) {
    std::vector<T> v(n);
    if (n) b.download(v.data(), n * sizeof(T));
    return v;
}

inline std::string str(const fast::MoePlan& p) {
    if (p.mid)
        return "mid grouped/" + std::to_string(p.tile_rows) + ", ring " + std::to_string(p.mid_ring) +
               ", row tiles a warp " + std::to_string(p.mid_gate_up_tiles) + " / " + std::to_string(p.mid_down_tiles);
    if (p.dp4a_decode) return "dp4a decode per slot, down by token, down warps " + std::to_string(p.mma_down_warps);
    if (p.mma_decode)
        return "mma decode per slot, down by token, batch " + std::to_string(p.mma_down_batch) + ", gate+up batch " +
               std::to_string(p.mma_gate_up_batch) + ", down warps " + std::to_string(p.mma_down_warps) +
               (p.mma_pdl ? ", pdl" : "");
    return std::string(p.v2 ? "v2 " : "") + (p.wgmma ? "wgmma " : "") + (p.wgmma_tma ? "tma/" + std::to_string(p.wgmma_tma) + " " : "") + (p.wgmma_mt == 2 ? "mt2 " : "") +
           (p.large_tiles ? "large tiles " : "") +
           (p.grouped ? "grouped tile " + std::to_string(p.tile_rows) : "per slot") +
           (p.down_by_token ? ", down by token" : ", down by item + combine");
}

// The small tiles (f32 FMAs; every plan gives the same bits) and the large ones (bf16 operands).
inline const fast::MoePlan kPlans[] = {
    {false, true, 8}, {true, true, 8}, {true, false, 8}, {true, false, 1}, {true, true, 1}, {true, false, 3},
};
inline const fast::MoePlan kLargePlans[] = {{true, false, 32, true}, {true, false, 64, true}};
// The second generation: f32 decode tiles (within the f32 bound, their own bits) and the
// tensor-core tiles of 16, 32 and 64 rows (bf16 bound).
inline const fast::MoePlan kV2Plans[] = {{false, true, 8, false, true},
                                  {true, false, 16, true, true},
                                  {true, false, 32, true, true},
                                  {true, false, 64, true, true}};
// The tensor-core decode kernels (bf16 x and act: the large tiles' bound), the down kernel's
// batches of items chosen (0), 4 and 8, by programmatic dependent launch, gate+up batches of 1
// k-tile, down blocks of 16 warps: the same bits.
inline const fast::MoePlan kMmaDecodePlans[] = {{false, true, 8, false, false, true, 0},
                                         {false, true, 8, false, false, true, 4},
                                         {false, true, 8, false, false, true, 8},
                                         {false, true, 8, false, false, true, 0, true},
                                         {false, true, 8, false, false, true, 4, false, 1},
                                         {false, true, 8, false, false, true, 0, false, 0, 16},
                                         {false, true, 8, false, false, true, 0, true, 0, 16}};

// The wgmma large tiles of 16, 32, 64 and 128 rows (bf16 bound), and their warp-specialised form
// at 16, 32 and 64, alone and in clusters of 2 (the plain tiles' bits; the plain tiles themselves
// where the experts are not tiled).
inline std::vector<fast::MoePlan> wgmma_plans() {
    std::vector<fast::MoePlan> plans;
    for (int rows : {16, 32, 64, 128}) {
        fast::MoePlan p{true, false, rows, true};
        p.wgmma = true;
        plans.push_back(p);
        if (rows == 128) continue;
        for (int cluster : {1, 2}) {
            p.wgmma_tma = cluster;
            plans.push_back(p);
        }
        p.wgmma_tma = 1;
        p.wgmma_gather = true;  // A's rows gathered in the gate+up tiles
        plans.push_back(p);
        p.wgmma_gather = false;
        if (rows <= 32) {  // two m-tiles a warpgroup, A's rows staged or gathered
            p.wgmma_mt = 2;
            plans.push_back(p);
            p.wgmma_gather = true;
            plans.push_back(p);
            p.wgmma_mt = 0, p.wgmma_gather = false;
        }
    }
    return plans;
}

// The integer-unit decode kernels (x and act in two int8 limbs: within the bf16 bound), down in
// blocks of 16 warps (0: the default) or 8.
inline fast::MoePlan dp4a_decode_plan(int down_warps = 0) {
    fast::MoePlan p;
    p.dp4a_decode = true;
    p.mma_down_warps = down_warps;
    return p;
}

// The mid kernels (the experts' weights as mma.sync's A, an item's ≤ 8 rows as B: the large
// tiles' bound), rings chosen (0), 3 and 4, and gate+up's 2 and down's 4 row tiles a warp (blocks
// whose warps have fewer live row tiles than the others where N / 16 is not a multiple of 8 or
// 16): the same bits.
inline std::vector<fast::MoePlan> mid_plans() {
    std::vector<fast::MoePlan> plans;
    for (int ring : {0, 3, 4}) {
        plans.push_back(fast::moe_mid_plan());
        plans.back().mid_ring = ring;
    }
    plans.push_back(fast::moe_mid_plan());
    plans.back().mid_gate_up_tiles = 2;
    plans.back().mid_down_tiles = 4;
    return plans;
}

inline std::vector<fast::MoePlan> all_plans() {
    std::vector<fast::MoePlan> plans(std::begin(kPlans), std::end(kPlans));
    plans.insert(plans.end(), std::begin(kLargePlans), std::end(kLargePlans));
    plans.insert(plans.end(), std::begin(kV2Plans), std::end(kV2Plans));
    for (const fast::MoePlan& p : wgmma_plans()) plans.push_back(p);
    plans.insert(plans.end(), std::begin(kMmaDecodePlans), std::end(kMmaDecodePlans));
    plans.push_back(dp4a_decode_plan());
    plans.push_back(dp4a_decode_plan(8));
    for (const fast::MoePlan& p : mid_plans()) plans.push_back(p);
    return plans;
}

// ---- router ----------------------------------------------------------------------------------

struct TopkResult {
    std::vector<int32_t> ids;
    std::vector<float> weights;
};

// With `shared`, logits rows hold E + 1 values (the shared expert's gate last) and each token
// gets k + 1 slots.
inline TopkResult cpu_topk(Backend& cpu, std::vector<float>& logits, int64_t T, int64_t E, int64_t ldl, int k,
                           bool renorm, bool shared = false) {
    const int64_t S = k + shared;
    TopkResult r{std::vector<int32_t>(size_t(T * S)), std::vector<float>(size_t(T * S))};
    Tensor l = reftest::rows_view(logits.data(), T, E + shared, ldl);
    cpu.moe_topk(l, {k, renorm, shared}, r.ids.data(), r.weights.data());
    return r;
}

inline TopkResult gpu_route(const std::vector<float>& logits, int64_t T, int E, int64_t ldl, int k, bool renorm,
                            bool shared = false, bool exact = true) {
    const int64_t S = k + shared;
    const DeviceBuffer d_l = to_device(logits);
    DeviceBuffer d_ids(size_t(T * S) * 4 + 4), d_w(size_t(T * S) * 4 + 4);
    Stream stream;
    fast::moe_route(d_l.as<float>(), ldl, T, E, k, renorm, shared, d_ids.as<int32_t>(), d_w.as<float>(), stream,
                    exact);
    stream.synchronize();
    return {to_host<int32_t>(d_ids, size_t(T * S)), to_host<float>(d_w, size_t(T * S))};
}

// ids exactly; weights within 1e-6 (the device's double exp rounded to f32 and the C library's
// expf may differ by an ulp where expf is not correctly rounded) or `tol`. Bit mismatches are printed.
inline void expect_topk_equal(const TopkResult& got, const TopkResult& want, int64_t T, int k, const std::string& what,
                              float tol = 1e-6f) {
    SCOPED_TRACE(what);
    int bad = 0, inexact = 0;
    for (int64_t i = 0; i < T * k; ++i) {
        const float g = got.weights[size_t(i)], w = want.weights[size_t(i)];
        const bool ok = got.ids[size_t(i)] == want.ids[size_t(i)] &&
                        (std::isnan(w) ? std::isnan(g) : std::fabs(g - w) <= tol);
        if (ok && !std::isnan(w) && std::memcmp(&g, &w, 4) != 0) ++inexact;
        if (!ok && ++bad <= 5)
            ADD_FAILURE() << "[" << i / k << ", " << i % k << "]: got expert " << got.ids[size_t(i)] << " weight " << g
                          << ", want expert " << want.ids[size_t(i)] << " weight " << w;
    }
    EXPECT_EQ(bad, 0);
    if (inexact) std::printf("  note: %s: %d of %lld weights differ from the CPU in the last bits\n", what.c_str(),
                             inexact, (long long)(T * k));
}

// ---- grouping: a host model --------------------------------------------------------------------

struct HostGrouping {
    std::vector<int32_t> offsets, perm, row_of_slot, item_expert, item_row0, item_rows;
};

inline HostGrouping host_group(const std::vector<int32_t>& ids, int64_t T, int k, int E, int tile) {
    const int64_t P = T * k;
    HostGrouping g;
    std::vector<int32_t> count(size_t(E), 0);
    for (int32_t e : ids)
        if (e >= 0 && e < E) ++count[size_t(e)];
    g.offsets.assign(size_t(E) + 1, 0);
    for (int e = 0; e < E; ++e) g.offsets[size_t(e) + 1] = g.offsets[size_t(e)] + count[size_t(e)];
    g.perm.assign(size_t(P), -1);
    g.row_of_slot.assign(size_t(P), -1);
    std::vector<int32_t> next(g.offsets.begin(), g.offsets.end() - 1);
    for (int64_t s = 0; s < P; ++s) {
        const int32_t e = ids[size_t(s)];
        if (e < 0 || e >= E) continue;
        const int32_t r = next[size_t(e)]++;
        g.perm[size_t(r)] = int32_t(s);
        g.row_of_slot[size_t(s)] = r;
    }
    for (int e = 0; e < E; ++e)
        for (int32_t r = g.offsets[size_t(e)]; r < g.offsets[size_t(e) + 1]; r += tile) {
            g.item_expert.push_back(e);
            g.item_row0.push_back(r);
            g.item_rows.push_back(std::min(tile, g.offsets[size_t(e) + 1] - r));
        }
    return g;
}

// k distinct experts per token drawn from `pool` (all of [0, E) when empty), random weights.
struct Routing {
    std::vector<int32_t> ids;
    std::vector<float> weights;
};
inline Routing random_routing(int64_t T, int E, int k, uint32_t seed, std::vector<int32_t> pool = {}) {
    if (pool.empty()) {
        pool.resize(size_t(E));
        std::iota(pool.begin(), pool.end(), 0);
    }
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.05f, 1.f);
    Routing r;
    for (int64_t t = 0; t < T; ++t) {
        std::shuffle(pool.begin(), pool.end(), rng);
        for (int j = 0; j < k; ++j) {
            r.ids.push_back(pool[size_t(j) % pool.size()]);
            r.weights.push_back(u(rng));
        }
    }
    return r;
}

// ---- experts ---------------------------------------------------------------------------------

// E experts stacked: gate, up [E·I, H], down [E·H, I]; GGUF bytes (when from a GGUF type), the
// packed form, its exact f32 values and |scale·code| + |bias| per element (what the kernel sums) —
// or, for a lazy stack (the model shapes' ~800 M weights), no f32 copies: rows unpacked on demand.
struct Stack {
    DType gguf = DType::F32;  // F32: built packed directly (no CPU counterpart)
    std::vector<uint8_t> bytes;
    PackedHost packed;
    std::vector<float> value, mag;  // [n, K], or empty (lazy)
    DeviceBuffer codes, scales, biases;
    bool tiled = false;  // the device arrays in 16-row tiles (`packed` stays row-major)
};

// Row r of a packed matrix: exact values and magnitudes |scale·code| + |bias| [K].
inline void row_values(const PackedHost& p, int64_t r, float* value, float* mag) {
    const int64_t K = p.k, gpr = K / p.group;
    unpack_row_f32(p, r, value);
    for (int64_t c = 0; c < K; ++c) {
        const float sc = f16_to_f32(p.scales[size_t(r * gpr + c / p.group)]);
        const uint8_t byte = p.codes[size_t(r * (K / 2) + c / 2)];
        const float code = float((c % 2) ? (byte >> 4) : (byte & 0xF));
        const float b = p.biases.empty() ? -8.f * sc : f16_to_f32(p.biases[size_t(r * gpr + c / p.group)]);
        mag[c] = std::fabs(sc * code) + std::fabs(b);
    }
}

// Row r of a stack as (values, magnitudes): the stored arrays, or (lazy) unpacked into the buffers.
struct RowRef {
    const float* value;
    const float* mag;
};
inline RowRef row_ref(const Stack& s, int64_t r, std::vector<float>& vbuf, std::vector<float>& mbuf) {
    const int64_t K = s.packed.k;
    if (!s.value.empty()) return {s.value.data() + r * K, s.mag.data() + r * K};
    vbuf.resize(size_t(K));
    mbuf.resize(size_t(K));
    row_values(s.packed, r, vbuf.data(), mbuf.data());
    return {vbuf.data(), mbuf.data()};
}

inline void finish_stack(Stack& s, bool lazy = false) {
    const int64_t n = s.packed.n, K = s.packed.k;
    if (!lazy) {
        s.value.resize(size_t(n * K));
        s.mag.resize(size_t(n * K));
        for (int64_t r = 0; r < n; ++r) row_values(s.packed, r, s.value.data() + r * K, s.mag.data() + r * K);
    }
    s.codes = to_device(s.packed.codes);
    s.scales = to_device(s.packed.scales);
    if (!s.packed.biases.empty()) s.biases = to_device(s.packed.biases);
}

// Random Q4_0 blocks drawn directly (scales ∈ scale·[0.5, 1) / 8, codes uniform): a lazy stack of
// the model shapes without hundreds of millions of normal draws.
inline Stack random_q4_0_stack(int64_t n, int64_t K, uint32_t seed, float scale) {
    Stack s;
    s.gguf = DType::Q4_0;
    const int64_t blocks = n * K / QK4_0;
    s.bytes.resize(size_t(blocks) * sizeof(BlockQ4_0));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.5f, 1.f);
    for (int64_t b = 0; b < blocks; ++b) {
        BlockQ4_0 blk;
        blk.d = f32_to_f16(scale * u(rng) / 8.f);
        for (int i = 0; i < QK4_0 / 2; i += 4) {
            const uint32_t v = rng();
            std::memcpy(blk.qs + i, &v, 4);
        }
        std::memcpy(s.bytes.data() + size_t(b) * sizeof(BlockQ4_0), &blk, sizeof(BlockQ4_0));
    }
    s.packed = repack(Tensor(s.bytes.data(), DType::Q4_0, {n, K}));
    finish_stack(s, true);
    return s;
}

inline Stack gguf_stack(DType t, int64_t n, int64_t K, uint32_t seed, float scale) {
    Stack s;
    s.gguf = t;
    const std::vector<float> w = normal_floats(size_t(n * K), seed, scale);
    s.bytes.resize(dtype_row_bytes(t, K) * size_t(n));
    quantize_tensor(t, w.data(), s.bytes.data(), n, K);
    s.packed = repack(Tensor(s.bytes.data(), t, {n, K}));
    finish_stack(s);
    return s;
}

// Random packed Int4 with group G and f16 biases (MLX-like), no GGUF counterpart.
inline Stack packed_stack(int64_t n, int64_t K, int G, uint32_t seed, float scale) {
    Stack s;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(0.5f, 1.f);
    s.packed.kind = PackedKind::Int4;
    s.packed.n = n;
    s.packed.k = K;
    s.packed.group = G;
    s.packed.codes.resize(size_t(n * K / 2));
    for (auto& b : s.packed.codes) b = uint8_t(rng());
    s.packed.scales.resize(size_t(n * (K / G)));
    s.packed.biases.resize(s.packed.scales.size());
    for (size_t i = 0; i < s.packed.scales.size(); ++i) {
        const float sc = scale * u(rng) / 8.f;
        s.packed.scales[i] = f32_to_f16(sc);
        s.packed.biases[i] = f32_to_f16(-sc * (7.f + 2.f * u(rng) - 1.f));
    }
    finish_stack(s);
    return s;
}

struct Experts {
    int E = 0;
    int64_t H = 0, I = 0;
    Stack gate, up, down;
    DeviceBuffer d_gate, d_up, d_down;  // [E] descriptors
    fast::MoeTiling tiling;             // what moe_check_experts found (view() passes it on)

    // GGUF experts of type t, or (t = F32) random packed ones with group G. lazy: random Q4_0
    // blocks (t must be Q4_0), rows unpacked on demand (random_q4_0_stack).
    Experts(int E_, int64_t H_, int64_t I_, DType t, uint32_t seed, int G = 32, bool lazy = false)
        : E(E_), H(H_), I(I_) {
        const float sh = 1.f / std::sqrt(float(H)), si = 1.f / std::sqrt(float(I));
        if (lazy) {
            TS_CHECK(t == DType::Q4_0, "lazy test experts are Q4_0");
            gate = random_q4_0_stack(E * I, H, seed, sh);
            up = random_q4_0_stack(E * I, H, seed + 1, sh);
            down = random_q4_0_stack(E * H, I, seed + 2, si);
        } else if (t == DType::F32) {
            gate = packed_stack(E * I, H, G, seed, sh);
            up = packed_stack(E * I, H, G, seed + 1, sh);
            down = packed_stack(E * H, I, G, seed + 2, si);
        } else {
            gate = gguf_stack(t, E * I, H, seed, sh);
            up = gguf_stack(t, E * I, H, seed + 1, sh);
            down = gguf_stack(t, E * H, I, seed + 2, si);
        }
        describe();
    }
    // The device arrays again in 16-row tiles where the expert slices fit (packed_tiles_fit: n a
    // multiple of 16, k of 128, G ≤ 128; per matrix), the descriptors marked: the same values in
    // the order the backend places. Returns how many of gate, up and down were tiled.
    int tile() {
        const int n = tile_stack(gate, I) + tile_stack(up, I) + tile_stack(down, H);
        describe();
        return n;
    }
    fast::MoePackedExperts view() const {
        return {E, H, I, d_gate.as<PackedMatrix>(), d_up.as<PackedMatrix>(), d_down.as<PackedMatrix>(), tiling};
    }
    MoeWeights cpu_view() {
        MoeWeights w;
        const size_t rh = dtype_row_bytes(gate.gguf, H), ri = dtype_row_bytes(down.gguf, I);
        for (int e = 0; e < E; ++e) {
            w.gate.push_back(Tensor(gate.bytes.data() + size_t(e * I) * rh, gate.gguf, {I, H}));
            w.up.push_back(Tensor(up.bytes.data() + size_t(e * I) * rh, up.gguf, {I, H}));
            w.down.push_back(Tensor(down.bytes.data() + size_t(e * H) * ri, down.gguf, {H, I}));
        }
        return w;
    }

private:
    void describe() {
        std::vector<PackedMatrix> g, u, d;
        for (int e = 0; e < E; ++e) {
            g.push_back(slice(gate, e * I, I));
            u.push_back(slice(up, e * I, I));
            d.push_back(slice(down, e * H, H));
        }
        tiling = fast::moe_check_experts(g.data(), u.data(), d.data(), E, H, I);
        d_gate = to_device(g);
        d_up = to_device(u);
        d_down = to_device(d);
    }
    // Expert e's rows [e·n, (e + 1)·n) of a stack tiled whole are whole row tiles at the row-major
    // offsets (a row tile is 16 rows' bytes either way): slice() serves both orders.
    static int tile_stack(Stack& s, int64_t n) {
        if (s.tiled || !packed_tiles_fit(s.packed.kind, n, s.packed.k, s.packed.group)) return 0;
        PackedHost t = s.packed;
        tile_packed(t);
        s.codes = to_device(t.codes);
        s.scales = to_device(t.scales);
        if (!t.biases.empty()) s.biases = to_device(t.biases);
        s.tiled = true;
        return 1;
    }
    static PackedMatrix slice(const Stack& s, int64_t row0, int64_t n) {
        PackedMatrix m;
        m.kind = PackedKind::Int4;
        m.n = n;
        m.k = s.packed.k;
        m.group = s.packed.group;
        const int64_t gpr = m.k / m.group;
        m.codes = s.codes.as<uint8_t>() + row0 * (m.k / 2);
        m.scales = s.scales.as<uint16_t>() + row0 * gpr;
        m.biases = s.packed.biases.empty() ? nullptr : s.biases.as<uint16_t>() + row0 * gpr;
        m.tiles = s.tiled;
        return m;
    }
};

// y [T, H] in double from the exact packed values, and a bound on any f32 evaluation of the
// kernels' form: each dot Σ_c (scale·Σcode·x + bias·Σx) in f32 is off by at most ~n·2⁻²⁴ of
// Σ (|scale·code| + |bias|)·|x| (the bias terms cancel, so their magnitudes count); silu has
// |silu'| ≤ 1.1, so errors δg, δu move act by ≤ 1.1·δg·|u| + |silu(g)|·δu (+ ulps of act); the down
// dot and the k-term sum add theirs. Bound: 4·2⁻²⁴·(H + I + k + 8)·Σ_j |w_j| Σ_i mag_down·(2|act| +
// 1.1·G·|u| + |silu g|·U), G, U = Σ mag·|x| of gate and up (as test_ref_moe.cpp, with magnitudes).
// The large tiles round x, the dequantized weights and act to bf16 (2⁻⁹ relative each): every
// term above then carries ≤ 2·2⁻⁹ more, so their bound takes eps = 4·2⁻⁹ + the f32 one.
// `bound` holds the bound divided by eps. `checked`: the tokens computed (empty: all of them).
struct Reference {
    std::vector<double> y, bound;
    std::vector<char> checked;
    double eps_f32 = 0;
    double eps_bf16() const { return 4 * std::ldexp(1.0, -9) + eps_f32; }
};

// The reference for `tokens` only (empty: every token).
inline Reference reference(const Experts& ex, const std::vector<float>& x, int64_t ldx, int64_t T, const Routing& r,
                           int k, const std::vector<int64_t>& tokens = {}) {
    const int64_t H = ex.H, I = ex.I;
    Reference ref;
    ref.y.assign(size_t(T * H), 0.0);
    ref.bound.assign(size_t(T * H), 0.0);
    ref.eps_f32 = 4.0 * std::ldexp(1.0, -24) * double(H + I + k + 8);
    if (!tokens.empty()) {
        ref.checked.assign(size_t(T), 0);
        for (int64_t t : tokens) ref.checked[size_t(t)] = 1;
    }
    std::vector<double> act(size_t(I), 0.0), act_err(size_t(I), 0.0);
    std::vector<float> vb[3], mb[3];  // lazy stacks' rows
    for (int64_t t = 0; t < T; ++t) {
        if (!ref.checked.empty() && !ref.checked[size_t(t)]) continue;
        const float* xt = x.data() + t * ldx;
        for (int j = 0; j < k; ++j) {
            const int e = r.ids[size_t(t * k + j)];
            const double w = r.weights[size_t(t * k + j)];
            if (e < 0 || e >= ex.E) continue;
            for (int64_t i = 0; i < I; ++i) {
                const RowRef gr = row_ref(ex.gate, e * I + i, vb[0], mb[0]);
                const RowRef ur = row_ref(ex.up, e * I + i, vb[1], mb[1]);
                double g = 0, u = 0, G = 0, U = 0;
                for (int64_t h = 0; h < H; ++h) {
                    g += double(gr.value[h]) * xt[h];
                    u += double(ur.value[h]) * xt[h];
                    G += double(gr.mag[h]) * std::fabs(xt[h]);
                    U += double(ur.mag[h]) * std::fabs(xt[h]);
                }
                const double silu = g / (1.0 + std::exp(-g));
                act[size_t(i)] = silu * u;
                act_err[size_t(i)] = 2 * std::fabs(act[size_t(i)]) + 1.1 * G * std::fabs(u) + std::fabs(silu) * U;
            }
            for (int64_t h = 0; h < H; ++h) {
                const RowRef dr = row_ref(ex.down, e * H + h, vb[2], mb[2]);
                double o = 0, b = 0;
                for (int64_t i = 0; i < I; ++i) {
                    o += double(dr.value[i]) * act[size_t(i)];
                    b += double(dr.mag[i]) * act_err[size_t(i)];
                }
                ref.y[size_t(t * H + h)] += w * o;
                ref.bound[size_t(t * H + h)] += std::fabs(w) * b;
            }
        }
    }
    return ref;
}

inline void expect_near_reference(const std::vector<float>& y, int64_t ldy, const Reference& ref, int64_t T, int64_t H,
                                  double eps) {
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            if (!ref.checked.empty() && !ref.checked[size_t(t)]) break;
            const double g = y[size_t(t * ldy + h)], want = ref.y[size_t(t * H + h)];
            const double bound = ref.bound[size_t(t * H + h)] * eps + 1e-30;
            if (!(std::fabs(g - want) <= bound) && ++bad <= 5)
                ADD_FAILURE() << "y[" << t << ", " << h << "] = " << g << ", reference " << want << ", error "
                              << std::fabs(g - want) << " > bound " << bound;
        }
    EXPECT_EQ(bad, 0) << "elements outside the bound of the double reference (eps " << eps << ")";
}

// max|a − b| / max|b| over [T, H] (but token `skip`).
inline double norm_err(const std::vector<float>& a, int64_t lda, const std::vector<float>& b, int64_t ldb, int64_t T,
                       int64_t H, int64_t skip = -1) {
    double d = 0, m = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            if (t == skip) break;
            const double va = a[size_t(t * lda + h)], vb = b[size_t(t * ldb + h)];
            d = std::max(d, std::fabs(va - vb));
            m = std::max(m, std::fabs(vb));
        }
    return d / std::max(m, 1e-30);
}

// `record` captured once into a CUDA graph on `stream` and replayed `replays` times: after each,
// y's first n words (zeroed before the capture) must be `want` (the eager bits).
template <class F>
void expect_graph_replays(Stream& stream, F&& record, DeviceBuffer& y, size_t n,
                          const std::vector<uint32_t>& want, int replays) {
    TS_CUDA_CHECK(cudaMemsetAsync(y.data(), 0, n * 4, stream));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    record();
    TS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    TS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < replays; ++replay) {
        TS_CUDA_CHECK(cudaGraphLaunch(exec, stream));
        stream.synchronize();
        EXPECT_EQ(to_host<uint32_t>(y, n), want) << "replay " << replay;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
}

struct ExpertCase {
    std::string name;
    int64_t T;
    int k;
    int64_t pad;       // extra floats per x and y row (odd: x rows misaligned for float4)
    bool in_place = false;
};

// Runs every plan on the same inputs: each within the bound of the double reference, the small
// tiles' plans bit-identical (the same per-row sums and slot order), and (GGUF experts) the CPU
// backend on the ORIGINAL GGUF bytes within 3e-2 normalised of the small and the large tiles (its
// q8_0 activations: ~2⁻⁸ relative per element; the large tiles' bf16: ~2⁻⁹ per operand).
inline void check_experts(Backend& cpu, Experts& ex, const ExpertCase& c, const Routing& r, uint32_t seed) {
    const int64_t T = c.T, H = ex.H, ldx = H + c.pad, ldy = c.in_place ? ldx : H + 2 * c.pad;
    const int k = c.k;
    const std::string what = c.name + " (T=" + std::to_string(T) + " E=" + std::to_string(ex.E) + " k=" +
                             std::to_string(k) + " H=" + std::to_string(H) + " I=" + std::to_string(ex.I) +
                             (c.pad ? " strided" : "") + (c.in_place ? " in place" : "") + ")";
    SCOPED_TRACE(what);
    const std::vector<float> x = reftest::random_rows(T, H, ldx, seed, -1.f, 1.f);
    const Reference ref = reference(ex, x, ldx, T, r, k);
    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    DeviceBuffer d_scratch(fast::moe_experts_scratch_bytes(T, k, ex.E, H, ex.I));
    std::vector<float> first, large, v2_small, v2_large, mma_decode, dp4a_decode, mid;
    for (const fast::MoePlan& plan : all_plans()) {
        SCOPED_TRACE(str(plan));
        std::vector<float> y0 = c.in_place ? x : std::vector<float>(size_t(T * ldy), reftest::kPad);
        DeviceBuffer d_y = to_device(y0);
        Stream stream;
        fast::moe_experts_packed_plan(plan, d_y.as<float>(), ldy, c.in_place ? d_y.as<float>() : d_x.as<float>(), ldx,
                                      T, ex.view(), d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        const std::vector<float> y = to_host<float>(d_y, y0.size());
        expect_near_reference(y, ldy, ref, T, H,
                              plan.large_tiles || plan.mma_decode || plan.dp4a_decode || plan.mid ? ref.eps_bf16()
                                                                                                  : ref.eps_f32);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t h = H; h < ldy; ++h)
                if (y[size_t(t * ldy + h)] != y0[size_t(t * ldy + h)]) {
                    ADD_FAILURE() << "padding y[" << t << ", " << h << "] written";
                    t = T;
                    break;
                }
        if (plan.mid) {
            if (mid.empty()) mid = y;
            else reftest::expect_same_bytes(y, mid, "mid kernels' rings differ: " + str(plan));
        } else if (plan.dp4a_decode) {
            if (dp4a_decode.empty()) dp4a_decode = y;  // each (slot, k-tile) item on one warp: any block size
            else reftest::expect_same_bytes(y, dp4a_decode, "dp4a decode down blocks differ: " + str(plan));
        }
        else if (plan.mma_decode) {
            if (mma_decode.empty()) mma_decode = y;
            else reftest::expect_same_bytes(y, mma_decode, "mma decode down batches differ: " + str(plan));
        } else if (plan.v2) (plan.large_tiles ? v2_large : v2_small) = y;
        else if (plan.large_tiles) large = y;
        else if (first.empty()) first = y;
        else reftest::expect_same_bytes(y, first, "plans differ: " + str(plan) + " vs " + str(kPlans[0]));
        if (::testing::Test::HasFailure()) {
            std::printf("  failing case: %s, plan %s\n", what.c_str(), str(plan).c_str());
            return;
        }
    }
    if (ex.gate.gguf == DType::F32) return;
    std::vector<float> ycpu(size_t(T * H), 0.f), xc = x;
    cpu.moe_experts(reftest::rows_view(ycpu.data(), T, H, H), reftest::rows_view(xc.data(), T, H, ldx), ex.cpu_view(),
                    r.ids.data(), r.weights.data(), k);
    EXPECT_LE(norm_err(first, ldy, ycpu, H, T, H), 3e-2) << "small tiles vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(large, ldy, ycpu, H, T, H), 3e-2) << "large tiles vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(v2_small, ldy, ycpu, H, T, H), 3e-2) << "v2 small tiles vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(v2_large, ldy, ycpu, H, T, H), 3e-2) << "v2 large tiles vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(mma_decode, ldy, ycpu, H, T, H), 3e-2) << "mma decode vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(dp4a_decode, ldy, ycpu, H, T, H), 3e-2) << "dp4a decode vs the CPU backend on the GGUF weights";
    EXPECT_LE(norm_err(mid, ldy, ycpu, H, T, H), 3e-2) << "mid kernels vs the CPU backend on the GGUF weights";
}

// The mid kernels on one routing (k slots a token): two launches and the forced rings give the same
// bits; token `poisoned` (an out-of-range id) is NaN, every other token finite; three tokens within
// the bound of the double reference; the others within 3e-2 normalised of the CPU backend on the
// GGUF bytes (its q8_0 activations: ~2⁻⁸ relative per element).
inline void check_mid(Backend& cpu, Experts& ex, const std::string& name, int64_t T, int k, const Routing& r,
                      uint32_t seed, int64_t poisoned = -1) {
    const int64_t H = ex.H;
    const std::string what = name + " (T=" + std::to_string(T) + " E=" + std::to_string(ex.E) + " k=" +
                             std::to_string(k) + " H=" + std::to_string(H) + " I=" + std::to_string(ex.I) + ")";
    SCOPED_TRACE(what);
    const std::vector<float> x = reftest::random_rows(T, H, H, seed, -1.f, 1.f);
    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    DeviceBuffer d_y(size_t(T * H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, k, ex.E, H, ex.I));
    Stream stream;
    struct Run {
        int ring, gate_up_tiles, down_tiles;  // MoePlan's mid_ring, mid_gate_up_tiles, mid_down_tiles
        const char* what;                     // how it may differ from the first run
    };
    const Run runs[] = {{0, 0, 0, "the plan's own choices"},
                        {0, 0, 0, "a second launch"},
                        {3, 0, 0, "ring 3"},
                        {4, 0, 0, "ring 4"},
                        {0, 0, 2, "down with 2 row tiles a warp"},
                        {0, 0, 4, "down with 4 row tiles a warp"},
                        {3, 2, 0, "gate+up with 2 row tiles a warp, ring 3"},
                        {4, 2, 0, "gate+up with 2 row tiles a warp, ring 4"}};
    std::vector<uint32_t> bits[std::size(runs)];
    for (size_t i = 0; i < std::size(runs); ++i) {
        fast::MoePlan plan = fast::moe_mid_plan();
        plan.mid_ring = runs[i].ring;
        plan.mid_gate_up_tiles = runs[i].gate_up_tiles;
        plan.mid_down_tiles = runs[i].down_tiles;
        TS_CUDA_CHECK(cudaMemsetAsync(d_y.data(), 0xff, d_y.size(), stream));  // NaN until written
        fast::moe_experts_packed_plan(plan, d_y.as<float>(), H, d_x.as<float>(), H, T, ex.view(), d_ids.as<int32_t>(),
                                      d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        bits[i] = to_host<uint32_t>(d_y, size_t(T * H));
        if (i > 0) {
            EXPECT_EQ(bits[0], bits[i]) << runs[i].what << " differs from " << runs[0].what;
        }
    }
    std::vector<float> y(size_t(T * H));
    std::memcpy(y.data(), bits[0].data(), y.size() * 4);
    int64_t wrong = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            const float v = y[size_t(t * H + h)];
            wrong += t == poisoned ? !std::isnan(v) : !std::isfinite(v);
        }
    EXPECT_EQ(wrong, 0) << "values not NaN for the bad id's token (" << poisoned << ") or not finite elsewhere";

    std::vector<int64_t> tokens;
    for (int64_t t : {int64_t(0), T / 2, T - 1}) {
        if (t == poisoned) t = t + 1 < T ? t + 1 : t - 1;
        if (t >= 0 && t != poisoned && std::find(tokens.begin(), tokens.end(), t) == tokens.end()) tokens.push_back(t);
    }
    const Reference ref = reference(ex, x, H, T, r, k, tokens);
    expect_near_reference(y, H, ref, T, H, ref.eps_bf16());

    Routing rc = r;  // the CPU takes valid ids only: the bad one's token is left out of the comparison
    for (int32_t& e : rc.ids)
        if (e < 0 || e >= ex.E) e = 0;
    std::vector<float> ycpu(size_t(T * H), 0.f), xc = x;
    cpu.moe_experts(reftest::rows_view(ycpu.data(), T, H, H), reftest::rows_view(xc.data(), T, H, H), ex.cpu_view(),
                    rc.ids.data(), rc.weights.data(), k);
    EXPECT_LE(norm_err(y, H, ycpu, H, T, H, poisoned), 3e-2) << "mid kernels vs the CPU backend on the GGUF weights";
    if (::testing::Test::HasFailure()) std::printf("  failing case: %s\n", what.c_str());
}

}  // namespace tessera::cuda::moetest
