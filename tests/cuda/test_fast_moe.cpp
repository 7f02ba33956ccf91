// The fast MoE (kernels/cuda/fast_moe.h) against the CPU backend and a double-precision
// reference. Router: ids exactly the CPU's (ties to the lower index, NaN first), weights within
// 1e-6 (bit mismatches counted and printed). Grouping: exactly a host model of it. Experts: random
// Q4_0 (and Q4_K: biases) GGUF weights repacked to Int4 (kernels/packed_repack.h) and, for group
// sizes 64/128, random packed weights; every plan (small tiles: f32, bit-identical across plans;
// large tiles: bf16 tensor cores, their own bound; the v2 decode tiles: f32 bound, v2 tensor-core
// tiles of 16/32/64: bf16 bound; the tensor-core decode kernels: bf16 bound, the same bits for
// every down batch; one expert with 17/33/65 rows, just past each tile); 1 token to
// 150, E = 8, 16, 128, 256, k = 1, 2, 8, I = 512 (16 lanes a v2 down pair),
// H = 64·odd, I = 32·odd, experts with no tokens, one expert taking every token, strided and
// misaligned x, y in place, out-of-range ids. The mid kernels (grouped, ≤ 8 rows an item: bf16
// bound, the same bits for both ring depths) in every case above, and on the model shapes —
// the flagship's 256×512×2048 and llama.cpp's Qwen3-30B 128×768×2048, top-8, at 3 to 96 tokens —
// against the CPU backend and (three tokens a case) the double reference, with experts that get
// no token, experts that get every token, tied router scores and an out-of-range id. Every case
// prints its name when it fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
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
#include "kernels/cuda/ref_elementwise.h"
#include "kernels/cuda/stream.h"
#include "kernels/packed_repack.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

std::vector<float> normal_floats(size_t n, uint32_t seed, float scale = 1.f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.f, scale);
    std::vector<float> v(n);
    for (auto& f : v) f = dist(rng);
    return v;
}

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

std::string str(const fast::MoePlan& p) {
    if (p.mid) return "mid grouped/" + std::to_string(p.tile_rows) + ", ring " + std::to_string(p.mid_ring);
    if (p.dp4a_decode) return "dp4a decode per slot, down by token";
    if (p.mma_decode)
        return "mma decode per slot, down by token, batch " + std::to_string(p.mma_down_batch) + ", gate+up batch " +
               std::to_string(p.mma_gate_up_batch) + ", down warps " + std::to_string(p.mma_down_warps) +
               (p.mma_pdl ? ", pdl" : "");
    return std::string(p.v2 ? "v2 " : "") + (p.wgmma ? "wgmma " : "") + (p.large_tiles ? "large tiles " : "") +
           (p.grouped ? "grouped tile " + std::to_string(p.tile_rows) : "per slot") +
           (p.down_by_token ? ", down by token" : ", down by item + combine");
}

// The small tiles (f32 FMAs; every plan gives the same bits) and the large ones (bf16 operands).
const fast::MoePlan kPlans[] = {
    {false, true, 8}, {true, true, 8}, {true, false, 8}, {true, false, 1}, {true, true, 1}, {true, false, 3},
};
const fast::MoePlan kLargePlans[] = {{true, false, 32, true}, {true, false, 64, true}};
// The second generation: f32 decode tiles (within the f32 bound, their own bits) and the
// tensor-core tiles of 16, 32 and 64 rows (bf16 bound).
const fast::MoePlan kV2Plans[] = {{false, true, 8, false, true},
                                  {true, false, 16, true, true},
                                  {true, false, 32, true, true},
                                  {true, false, 64, true, true}};
// The tensor-core decode kernels (bf16 x and act: the large tiles' bound), the down kernel's
// batches of items chosen (0), 4 and 8, by programmatic dependent launch, gate+up batches of 1
// k-tile, down blocks of 16 warps: the same bits.
const fast::MoePlan kMmaDecodePlans[] = {{false, true, 8, false, false, true, 0},
                                         {false, true, 8, false, false, true, 4},
                                         {false, true, 8, false, false, true, 8},
                                         {false, true, 8, false, false, true, 0, true},
                                         {false, true, 8, false, false, true, 4, false, 1},
                                         {false, true, 8, false, false, true, 0, false, 0, 16},
                                         {false, true, 8, false, false, true, 0, true, 0, 16}};

// The wgmma large tiles of 16, 32, 64 and 128 rows (bf16 bound).
std::vector<fast::MoePlan> wgmma_plans() {
    std::vector<fast::MoePlan> plans;
    for (int rows : {16, 32, 64, 128}) {
        fast::MoePlan p{true, false, rows, true};
        p.wgmma = true;
        plans.push_back(p);
    }
    return plans;
}

// The integer-unit decode kernels (x and act in two int8 limbs: within the bf16 bound).
fast::MoePlan dp4a_decode_plan() {
    fast::MoePlan p;
    p.dp4a_decode = true;
    return p;
}

// The mid kernels (the experts' weights as mma.sync's A, an item's ≤ 8 rows as B: the large
// tiles' bound), rings chosen (0), 3 and 4: the same bits.
std::vector<fast::MoePlan> mid_plans() {
    std::vector<fast::MoePlan> plans;
    for (int ring : {0, 3, 4}) {
        plans.push_back(fast::moe_mid_plan());
        plans.back().mid_ring = ring;
    }
    return plans;
}

std::vector<fast::MoePlan> all_plans() {
    std::vector<fast::MoePlan> plans(std::begin(kPlans), std::end(kPlans));
    plans.insert(plans.end(), std::begin(kLargePlans), std::end(kLargePlans));
    plans.insert(plans.end(), std::begin(kV2Plans), std::end(kV2Plans));
    for (const fast::MoePlan& p : wgmma_plans()) plans.push_back(p);
    plans.insert(plans.end(), std::begin(kMmaDecodePlans), std::end(kMmaDecodePlans));
    plans.push_back(dp4a_decode_plan());
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
TopkResult cpu_topk(Backend& cpu, std::vector<float>& logits, int64_t T, int64_t E, int64_t ldl, int k, bool renorm,
                    bool shared = false) {
    const int64_t S = k + shared;
    TopkResult r{std::vector<int32_t>(size_t(T * S)), std::vector<float>(size_t(T * S))};
    Tensor l = reftest::rows_view(logits.data(), T, E + shared, ldl);
    cpu.moe_topk(l, {k, renorm, shared}, r.ids.data(), r.weights.data());
    return r;
}

TopkResult gpu_route(const std::vector<float>& logits, int64_t T, int E, int64_t ldl, int k, bool renorm,
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
void expect_topk_equal(const TopkResult& got, const TopkResult& want, int64_t T, int k, const std::string& what,
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

HostGrouping host_group(const std::vector<int32_t>& ids, int64_t T, int k, int E, int tile) {
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
Routing random_routing(int64_t T, int E, int k, uint32_t seed, std::vector<int32_t> pool = {}) {
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
};

// Row r of a packed matrix: exact values and magnitudes |scale·code| + |bias| [K].
void row_values(const PackedHost& p, int64_t r, float* value, float* mag) {
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
RowRef row_ref(const Stack& s, int64_t r, std::vector<float>& vbuf, std::vector<float>& mbuf) {
    const int64_t K = s.packed.k;
    if (!s.value.empty()) return {s.value.data() + r * K, s.mag.data() + r * K};
    vbuf.resize(size_t(K));
    mbuf.resize(size_t(K));
    row_values(s.packed, r, vbuf.data(), mbuf.data());
    return {vbuf.data(), mbuf.data()};
}

void finish_stack(Stack& s, bool lazy = false) {
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
Stack random_q4_0_stack(int64_t n, int64_t K, uint32_t seed, float scale) {
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

Stack gguf_stack(DType t, int64_t n, int64_t K, uint32_t seed, float scale) {
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
Stack packed_stack(int64_t n, int64_t K, int G, uint32_t seed, float scale) {
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
        std::vector<PackedMatrix> g, u, d;
        for (int e = 0; e < E; ++e) {
            g.push_back(slice(gate, e * I, I));
            u.push_back(slice(up, e * I, I));
            d.push_back(slice(down, e * H, H));
        }
        fast::moe_check_experts(g.data(), u.data(), d.data(), E, H, I);
        d_gate = to_device(g);
        d_up = to_device(u);
        d_down = to_device(d);
    }
    fast::MoePackedExperts view() const {
        return {E, H, I, d_gate.as<PackedMatrix>(), d_up.as<PackedMatrix>(), d_down.as<PackedMatrix>()};
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
Reference reference(const Experts& ex, const std::vector<float>& x, int64_t ldx, int64_t T, const Routing& r, int k,
                    const std::vector<int64_t>& tokens = {}) {
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

void expect_near_reference(const std::vector<float>& y, int64_t ldy, const Reference& ref, int64_t T, int64_t H,
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
double norm_err(const std::vector<float>& a, int64_t lda, const std::vector<float>& b, int64_t ldb, int64_t T,
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
void check_experts(Backend& cpu, Experts& ex, const ExpertCase& c, const Routing& r, uint32_t seed) {
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
        } else if (plan.dp4a_decode) dp4a_decode = y;
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
void check_mid(Backend& cpu, Experts& ex, const std::string& name, int64_t T, int k, const Routing& r, uint32_t seed,
               int64_t poisoned = -1) {
    const int64_t H = ex.H;
    const std::string what = name + " (T=" + std::to_string(T) + " E=" + std::to_string(ex.E) + " k=" +
                             std::to_string(k) + " H=" + std::to_string(H) + " I=" + std::to_string(ex.I) + ")";
    SCOPED_TRACE(what);
    const std::vector<float> x = reftest::random_rows(T, H, H, seed, -1.f, 1.f);
    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    DeviceBuffer d_y(size_t(T * H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, k, ex.E, H, ex.I));
    Stream stream;
    std::vector<uint32_t> bits[4];  // the rings chosen twice, rings 3 and 4
    for (int run = 0; run < 4; ++run) {
        fast::MoePlan plan = fast::moe_mid_plan();
        plan.mid_ring = run < 2 ? 0 : run + 1;
        TS_CUDA_CHECK(cudaMemsetAsync(d_y.data(), 0xff, d_y.size(), stream));  // NaN until written
        fast::moe_experts_packed_plan(plan, d_y.as<float>(), H, d_x.as<float>(), H, T, ex.view(), d_ids.as<int32_t>(),
                                      d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        bits[run] = to_host<uint32_t>(d_y, size_t(T * H));
    }
    EXPECT_EQ(bits[0], bits[1]) << "two launches differ";
    EXPECT_EQ(bits[0], bits[2]) << "ring 3 differs from the rings chosen";
    EXPECT_EQ(bits[0], bits[3]) << "ring 4 differs from the rings chosen";
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

}  // namespace

TEST(FastMoe, RouteMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 1;
    for (int E : {8, 33, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;
            for (int64_t T : {1, 2, 3, 17, 64})
                for (bool renorm : {false, true}) {
                    const int64_t ldl = E + (T % 2 ? 0 : 3);
                    std::vector<float> logits = reftest::random_rows(T, E, ldl, seed++, -6.f, 6.f);
                    const std::string what = "E=" + std::to_string(E) + " k=" + std::to_string(k) + " T=" +
                                             std::to_string(T) + (renorm ? " renormalized" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, renorm), cpu_topk(*cpu, logits, T, E, ldl, k, renorm),
                                      T, k, what);
                    if (HasFailure()) return;
                }
        }
}

// A shared expert as slot k (MoeRouting::shared): the gate column after the E router logits.
TEST(FastMoe, RouteWithASharedExpertMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 900;
    for (int E : {8, 256, 512})
        for (int k : {1, 8, 16})
            for (int64_t T : {1, 2, 17})
                for (bool renorm : {false, true}) {
                    if (k > E) continue;
                    const int64_t ldl = E + 1 + (T % 2 ? 0 : 2);
                    std::vector<float> logits = reftest::random_rows(T, E + 1, ldl, seed++, -6.f, 6.f);
                    logits[size_t(E)] = -120.f;  // σ = 0 (the gate's exp overflows to inf)
                    const std::string what = "shared E=" + std::to_string(E) + " k=" + std::to_string(k) + " T=" +
                                             std::to_string(T) + (renorm ? " renormalized" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, renorm, true),
                                      cpu_topk(*cpu, logits, T, E, ldl, k, renorm, true), T, k + 1, what);
                    if (HasFailure()) return;
                }
}

TEST(FastMoe, RouteTiesGoToTheLowerIndex) {
    // Logits from {0, 1, 2}: most probabilities tie exactly; the ids must match the CPU's order.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    std::mt19937 rng(5);
    for (int E : {8, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;  // the op takes k <= E
            const int64_t T = 33;
            std::vector<float> logits(size_t(T * E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = 1.f;  // token 0: every expert ties
            const TopkResult want = cpu_topk(*cpu, logits, T, E, E, k, true);
            for (int j = 0; j < k; ++j) ASSERT_EQ(want.ids[size_t(j)], j);
            expect_topk_equal(gpu_route(logits, T, E, E, k, true), want, T, k,
                              "ties E=" + std::to_string(E) + " k=" + std::to_string(k));
        }
}

TEST(FastMoe, RouteNanAndInfinityRankAsOnCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t E = 8;
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> logits = {
        0.f,  1.f,  -inf, 2.f,  -inf, 0.5f, 2.f,  -1.f,  // -inf experts get probability 0
        -inf, -inf, -inf, 3.f,  -inf, -inf, -inf, -inf,  // one finite logit: probability 1
        0.f,  1.f,  nan,  2.f,  0.f,  0.f,  0.f,  0.f,   // a NaN poisons the row: NaN ranks first
        -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,  // all -inf: NaN everywhere (as the CPU)
    };
    const int64_t T = int64_t(logits.size()) / E;
    for (int k : {1, 3, 8})
        for (bool renorm : {false, true})
            expect_topk_equal(gpu_route(logits, T, E, E, k, renorm), cpu_topk(*cpu, logits, T, E, E, k, renorm), T, k,
                              "specials k=" + std::to_string(k));
}

// The backend's default routing (exact = false, renormalised): picks ranked on the logits, weights
// from the picks' f32 exponentials. Random logits never tie after rounding, so the ids are the CPU's
// exactly and the weights agree to f32 rounding; exact ties go to the lower index; -inf experts
// weigh 0; a row of -inf is NaN as on the CPU.
TEST(FastMoe, RouteOnLogitsMatchesCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 1200;
    for (int E : {8, 33, 128, 256, 512})
        for (int k : {1, 2, 8, 16}) {
            if (k > E) continue;
            for (int64_t T : {1, 2, 17, 64})
                for (bool shared : {false, true}) {
                    const int64_t ldl = E + shared + (T % 2 ? 0 : 3);
                    std::vector<float> logits = reftest::random_rows(T, E + shared, ldl, seed++, -6.f, 6.f);
                    const std::string what = "logits E=" + std::to_string(E) + " k=" + std::to_string(k) +
                                             " T=" + std::to_string(T) + (shared ? " shared" : "");
                    expect_topk_equal(gpu_route(logits, T, E, ldl, k, true, shared, false),
                                      cpu_topk(*cpu, logits, T, E, ldl, k, true, shared), T, k + shared, what, 2e-6f);
                    if (HasFailure()) return;
                }
        }
    std::mt19937 rng(6);
    for (int E : {8, 256})
        for (int k : {1, 8}) {
            const int64_t T = 33;
            std::vector<float> logits(size_t(T * E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int64_t e = 0; e < E; ++e) logits[size_t(e)] = 1.f;  // token 0: every expert ties
            expect_topk_equal(gpu_route(logits, T, E, E, k, true, false, false), cpu_topk(*cpu, logits, T, E, E, k, true),
                              T, k, "logits, ties E=" + std::to_string(E) + " k=" + std::to_string(k), 2e-6f);
        }
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> specials = {
        0.f,  1.f,  -inf, 2.f,  -inf, 0.5f, 2.f,  -1.f,  // -inf experts weigh 0
        -inf, -inf, -inf, 3.f,  -inf, -inf, -inf, -inf,  // one finite logit: weight 1
        -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf,  // all -inf: NaN everywhere (as the CPU)
    };
    for (int k : {1, 3, 8})
        expect_topk_equal(gpu_route(specials, 3, 8, 8, k, true, false, false), cpu_topk(*cpu, specials, 3, 8, 8, k, true),
                          3, k, "logits, specials k=" + std::to_string(k), 2e-6f);
}

TEST(FastMoe, GroupingMatchesHostModel) {
    REQUIRE_CUDA();
    uint32_t seed = 40;
    struct G {
        int64_t T;
        int E, k;
        std::vector<int32_t> pool;  // empty: every expert
        const char* name;
    };
    const G cases[] = {
        {1, 8, 1, {}, "1 token"},        {1, 256, 8, {}, "1 token top-8 of 256"},
        {3, 128, 8, {}, "3 tokens"},     {17, 8, 2, {}, "17 tokens"},
        {64, 512, 16, {}, "64 tokens, E = 512, k = 16"},
        {64, 8, 1, {3}, "one expert takes every token"},
        {513, 8, 2, {1, 6}, "513 tokens, two experts"},
        {2048, 256, 8, {}, "2048 tokens top-8 of 256"},
    };
    for (const G& c : cases)
        for (int tile : {1, 3, 8, 64}) {
            const std::string what = std::string(c.name) + " tile " + std::to_string(tile);
            SCOPED_TRACE(what);
            Routing r = random_routing(c.T, c.E, c.k, seed++, c.pool);
            if (c.T >= 3) r.ids[1] = c.E;  // out of range: left out of every expert
            const int64_t P = c.T * c.k, MI = fast::moe_max_items(c.T, c.k, c.E, tile);
            const HostGrouping want = host_group(r.ids, c.T, c.k, c.E, tile);
            ASSERT_LE(int64_t(want.item_expert.size()), MI);
            const DeviceBuffer d_ids = to_device(r.ids);
            DeviceBuffer scratch(fast::moe_group_scratch_bytes(c.T, c.k, c.E, tile));
            Stream stream;
            const fast::MoeGrouping g =
                fast::moe_group(d_ids.as<int32_t>(), c.T, c.k, c.E, tile, scratch.data(), stream);
            stream.synchronize();
            auto get = [&](const int32_t* p, size_t n) {
                std::vector<int32_t> v(n);
                if (n) TS_CUDA_CHECK(cudaMemcpy(v.data(), p, n * 4, cudaMemcpyDeviceToHost));
                return v;
            };
            const int32_t n_items = get(g.n_items, 1)[0];
            EXPECT_EQ(g.max_items, MI);
            EXPECT_EQ(n_items, int32_t(want.item_expert.size()));
            EXPECT_EQ(get(g.offsets, size_t(c.E) + 1), want.offsets);
            EXPECT_EQ(get(g.perm, size_t(P)), want.perm);
            EXPECT_EQ(get(g.row_of_slot, size_t(P)), want.row_of_slot);
            const size_t n = size_t(std::max(0, n_items));
            EXPECT_EQ(get(g.item_expert, n), want.item_expert);
            EXPECT_EQ(get(g.item_row0, n), want.item_row0);
            EXPECT_EQ(get(g.item_rows, n), want.item_rows);
            if (HasFailure()) return;
        }
}

TEST(FastMoe, ExpertsQ4_0MatchCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    uint32_t seed = 100;
    {  // E = 8, H = 64·3, I = 32·5
        Experts ex(8, 192, 160, DType::Q4_0, seed);
        check_experts(*cpu, ex, {"generic", 17, 2, 3}, random_routing(17, 8, 2, seed + 10), seed + 11);
        check_experts(*cpu, ex, {"one token", 1, 1, 0}, random_routing(1, 8, 1, seed + 12), seed + 13);
        check_experts(*cpu, ex, {"two tokens", 2, 8, 1}, random_routing(2, 8, 8, seed + 14), seed + 15);
        check_experts(*cpu, ex, {"three tokens, every expert", 3, 8, 0}, random_routing(3, 8, 8, seed + 16),
                      seed + 17);
        check_experts(*cpu, ex, {"one expert takes every token", 64, 1, 0}, random_routing(64, 8, 1, seed + 18, {3}),
                      seed + 19);
        // Just past the tiles: 17, 33 and 65 rows on one expert (tiles of 16, 32, 64 plus one row).
        for (int64_t T : {17, 33, 65})
            check_experts(*cpu, ex, {"one expert, " + std::to_string(T) + " tokens", T, 1, 1},
                          random_routing(T, 8, 1, seed + 60 + uint32_t(T), {5}), seed + 61 + uint32_t(T));
        check_experts(*cpu, ex, {"64 tokens, two experts, in place", 64, 2, 2, true},
                      random_routing(64, 8, 2, seed + 20, {1, 6}), seed + 21);
        // ~37 rows per expert: large tiles of 32 and 64 rows with partial tails.
        check_experts(*cpu, ex, {"150 tokens", 150, 2, 1}, random_routing(150, 8, 2, seed + 22), seed + 23);
    }
    {  // E = 128, k = 8, H = 64·5, I = 32·3: most experts get no token
        Experts ex(128, 320, 96, DType::Q4_0, seed + 30);
        for (int64_t T : {1, 3, 17, 64})
            check_experts(*cpu, ex, {"E = 128 top-8", T, 8, T == 17 ? 1 : 0}, random_routing(T, 128, 8, seed + 31 + T),
                          seed + 32 + T);
    }
    {  // E = 256, k = 8 and k = 2
        Experts ex(256, 64, 32, DType::Q4_0, seed + 40);
        check_experts(*cpu, ex, {"E = 256 top-8, 1 token", 1, 8, 0}, random_routing(1, 256, 8, seed + 41), seed + 42);
        check_experts(*cpu, ex, {"E = 256 top-2", 17, 2, 4}, random_routing(17, 256, 2, seed + 43), seed + 44);
    }
    {  // the flagship's I = 512 (16 chunks a down row: 16 lanes a pair in the v2 down), top-8 of 16
        Experts ex(16, 256, 512, DType::Q4_0, seed + 70);
        for (int64_t T : {1, 2, 8})
            check_experts(*cpu, ex, {"I = 512 top-8", T, 8, 0}, random_routing(T, 16, 8, seed + 71 + uint32_t(T)),
                          seed + 72 + uint32_t(T));
    }
    {  // llama.cpp's anchor I = 768 (6 k-tiles a down row: 48 items of the mma decode down at top-8)
        Experts ex(16, 256, 768, DType::Q4_0, seed + 80);
        for (int64_t T : {1, 2})
            check_experts(*cpu, ex, {"I = 768 top-8", T, 8, 0}, random_routing(T, 16, 8, seed + 81 + uint32_t(T)),
                          seed + 82 + uint32_t(T));
    }
    {  // rows wide enough for 32 lanes per row (H, I ≥ 2048 columns), odd multiples
        Experts ex(4, 64 * 33, 32 * 65, DType::Q4_0, seed + 50);
        check_experts(*cpu, ex, {"wide rows", 3, 2, 1}, random_routing(3, 4, 2, seed + 51), seed + 52);
    }
}

TEST(FastMoe, ExpertsQ4_KWithBiasesMatchCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    Experts ex(8, 768, 256, DType::Q4_K, 300);
    check_experts(*cpu, ex, {"Q4_K", 5, 2, 0}, random_routing(5, 8, 2, 301), 302);
    check_experts(*cpu, ex, {"Q4_K one token top-8", 1, 8, 0}, random_routing(1, 8, 8, 303), 304);
}

TEST(FastMoe, ExpertsGroupSizes64And128) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    for (int G : {64, 128}) {
        Experts ex(16, 128 * 3, 128, DType::F32, 400 + G, G);
        check_experts(*cpu, ex, {"group " + std::to_string(G), 9, 4, 1}, random_routing(9, 16, 4, 401 + G), 402 + G);
    }
}

// The mid kernels on the model shapes (H = 2048, top-8): the flagship's 256 experts of I = 512 and
// llama.cpp's Qwen3-30B-A3B anchor, 128 of I = 768 — 3 to 96 tokens (most experts get no token
// at 3, ~2–6 rows an expert at 64–96), eight experts taking every token (items of 8 rows one after
// another, the other experts none), an out-of-range id, and tied router scores routed on the device.
TEST(FastMoe, MidKernelsOnModelShapes) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    struct Shape {
        const char* name;
        int E;
        int64_t I;
        uint32_t seed;
    };
    const int k = 8;
    const int64_t H = 2048;
    const Shape shapes[] = {{"flagship 256x512x2048", 256, 512, 500}, {"Qwen3-30B 128x768x2048", 128, 768, 600}};
    for (const Shape& sh : shapes) {
        SCOPED_TRACE(sh.name);
        Experts ex(sh.E, H, sh.I, DType::Q4_0, sh.seed, 32, true);
        uint32_t seed = sh.seed + 10;
        for (int64_t T : {3, 5, 17, 64, 96}) {
            check_mid(*cpu, ex, "random top-8", T, k, random_routing(T, sh.E, k, seed), seed + 1);
            seed += 2;
        }
        const std::vector<int32_t> eight = {3, 17, 40, 41, 99, 100, 101, sh.E - 1};
        for (int64_t T : {64, 96}) {
            check_mid(*cpu, ex, "eight experts take every token", T, k, random_routing(T, sh.E, k, seed, eight),
                      seed + 1);
            seed += 2;
        }
        Routing bad = random_routing(17, sh.E, k, seed++);
        bad.ids[size_t(5 * k + 3)] = sh.E;  // token 5 names expert E of E
        check_mid(*cpu, ex, "an out-of-range id", 17, k, bad, seed++, 5);
        {  // logits from {0, 1, 2}, token 0's all equal: ties go to the lower index, as on the CPU
            const int64_t T = 17;
            std::mt19937 rng(seed++);
            std::vector<float> logits(size_t(T * sh.E));
            for (auto& v : logits) v = float(rng() % 3);
            for (int e = 0; e < sh.E; ++e) logits[size_t(e)] = 1.f;
            const TopkResult want = cpu_topk(*cpu, logits, T, sh.E, sh.E, k, true);
            const TopkResult got = gpu_route(logits, T, sh.E, sh.E, k, true, false, false);  // the backend's routing
            expect_topk_equal(got, want, T, k, "tied logits", 2e-6f);
            check_mid(*cpu, ex, "tied router scores", T, k, Routing{got.ids, got.weights}, seed++);
        }
        if (HasFailure()) return;
    }
}

// moe_experts_packed(mid = true), TESSERA_MOE_MID=grouped's call: the mid plan's bits where the pick
// takes the v2 tiles at ≤ 8 rows an expert on average (T·k ≤ 8·E), the pick's own elsewhere.
TEST(FastMoe, MidSwitchTakesTheMidPlanAtFewRowsAnExpert) {
    REQUIRE_CUDA();
    const int E = 16, k = 4;  // 8·E = 128 slots: T ≤ 32 tokens
    Experts ex(E, 256, 128, DType::Q4_0, 700);
    for (int64_t T : {1, 2, 3, 32, 33, 64}) {
        SCOPED_TRACE("T=" + std::to_string(T));
        const Routing r = random_routing(T, E, k, 701 + uint32_t(T));
        const std::vector<float> x = normal_floats(size_t(T * ex.H), 702 + uint32_t(T));
        const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
        DeviceBuffer d_y(size_t(T * ex.H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
        Stream stream;
        std::vector<uint32_t> got, want;
        for (int pass = 0; pass < 2; ++pass) {
            TS_CUDA_CHECK(cudaMemsetAsync(d_y.data(), 0xff, d_y.size(), stream));
            const bool mid_expected = T >= 3 && T * k <= 8 * E;
            const int32_t* ids = d_ids.as<int32_t>();
            if (pass == 0)
                fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), ids,
                                         d_w.as<float>(), k, d_scratch.data(), stream, true, false, true, true);
            else if (mid_expected)
                fast::moe_experts_packed_plan(fast::moe_mid_plan(), d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T,
                                              ex.view(), ids, d_w.as<float>(), k, d_scratch.data(), stream);
            else
                fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), ids,
                                         d_w.as<float>(), k, d_scratch.data(), stream);
            stream.synchronize();
            (pass == 0 ? got : want) = to_host<uint32_t>(d_y, size_t(T * ex.H));
        }
        EXPECT_EQ(got, want);
    }
}

TEST(FastMoe, RouterThenExpertsOnTheDevice) {
    // logits → moe_route → moe_experts_packed with no host round trip, twice: identical bits; the
    // router agrees with the CPU's and the experts with the double reference on those ids.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int64_t T = 17;
    const int E = 128, k = 8;
    Experts ex(E, 192, 96, DType::Q4_0, 9);
    std::vector<float> logits = normal_floats(size_t(T * E), 10, 3.f);
    for (int e = 0; e < 8; ++e) logits[size_t(5 * E + 40 + e)] = 50.f;  // token 5: eight-way tie at the top
    const std::vector<float> x = normal_floats(size_t(T * ex.H), 11);
    const DeviceBuffer d_logits = to_device(logits), d_x = to_device(x);
    DeviceBuffer d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4), d_y(size_t(T * ex.H) * 4),
        d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
    Stream stream;
    std::vector<uint32_t> runs[2];
    for (auto& run : runs) {
        fast::moe_route(d_logits.as<float>(), E, T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(), stream);
        fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), d_ids.as<int32_t>(),
                                 d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        run = to_host<uint32_t>(d_y, size_t(T * ex.H));
    }
    EXPECT_EQ(runs[0], runs[1]) << "two runs differ";
    const TopkResult want = cpu_topk(*cpu, logits, T, E, E, k, true);
    const TopkResult got{to_host<int32_t>(d_ids, size_t(T * k)), to_host<float>(d_w, size_t(T * k))};
    expect_topk_equal(got, want, T, k, "router");
    for (int j = 0; j < k; ++j) EXPECT_EQ(got.ids[size_t(5 * k + j)], 40 + j);
    std::vector<float> y(size_t(T * ex.H));
    std::memcpy(y.data(), runs[0].data(), y.size() * 4);
    const Reference ref = reference(ex, x, ex.H, T, Routing{got.ids, got.weights}, k);
    const fast::MoePlan pick = fast::moe_pick(T, k, E);
    expect_near_reference(y, ex.H, ref, T, ex.H,
                          pick.large_tiles || pick.mma_decode || pick.dp4a_decode ? ref.eps_bf16() : ref.eps_f32);
    // The tensor-core decode kernels on the router's ids (the eight-way tie included).
    fast::moe_experts_packed_plan(kMmaDecodePlans[0], d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                  d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
    stream.synchronize();
    expect_near_reference(to_host<float>(d_y, size_t(T * ex.H)), ex.H, ref, T, ex.H, ref.eps_bf16());
}

TEST(FastMoe, SettledXGivesTheSameBits) {
    // The decode kernels told x was complete before the routing (x_settled: quantized before the
    // PDL wait) after moe_route, on a row of x just written by a kernel before the router's own
    // (an async copy would not do: a PDL wait orders kernels only): the same bits as without, the
    // double reference on the router's ids.
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    const int E = 64, k = 6;
    Experts ex(E, 256, 160, DType::Q4_0, 31);
    for (int64_t T : {1, 2}) {
        SCOPED_TRACE("T " + std::to_string(T));
        const std::vector<float> logits = normal_floats(size_t(T * E), 32 + uint32_t(T), 2.f);
        const std::vector<float> x = normal_floats(size_t(T * ex.H), 34 + uint32_t(T));
        const DeviceBuffer d_logits = to_device(logits), d_x0 = to_device(x),
                           d_zero = to_device(std::vector<float>(size_t(T * ex.H), 0.f));
        DeviceBuffer d_x(size_t(T * ex.H) * 4), d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4),
            d_y(size_t(T * ex.H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
        Stream stream;
        std::vector<uint32_t> runs[2];
        for (int settled : {0, 1}) {
            TS_CUDA_CHECK(cudaMemsetAsync(d_x.data(), 0xff, size_t(T * ex.H) * 4, stream));  // NaN until copied
            // x = x0 + 0 by a kernel
            ref::add(d_x.as<float>(), ex.H, d_x0.as<float>(), ex.H, d_zero.as<float>(), ex.H, T, ex.H, stream);
            fast::moe_route(d_logits.as<float>(), E, T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(),
                            stream);
            fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(), d_ids.as<int32_t>(),
                                     d_w.as<float>(), k, d_scratch.data(), stream, true, settled == 1);
            stream.synchronize();
            runs[settled] = to_host<uint32_t>(d_y, size_t(T * ex.H));
        }
        EXPECT_EQ(runs[0], runs[1]) << "x_settled changed the result";
        const TopkResult got{to_host<int32_t>(d_ids, size_t(T * k)), to_host<float>(d_w, size_t(T * k))};
        std::vector<float> y(size_t(T * ex.H));
        std::memcpy(y.data(), runs[1].data(), y.size() * 4);
        const Reference ref = reference(ex, x, ex.H, T, Routing{got.ids, got.weights}, k);
        expect_near_reference(y, ex.H, ref, T, ex.H, ref.eps_bf16());
    }
}

TEST(FastMoe, RecordsIntoACudaGraph) {
    // The whole chain (router, grouping, experts) for each tile kind, captured once and replayed:
    // the same bits as eager calls (no host round trip, no allocation, fixed launch shapes). Each
    // T with the pick, then with the tensor-core decode kernels (plain and by pdl), then the mid
    // kernels (grouping, gather, two kernels by pdl, combine).
    REQUIRE_CUDA();
    const int E = 128, k = 8;
    Experts ex(E, 192, 96, DType::Q4_0, 21);
    for (int64_t T : {1, 8, 40})
        for (int variant : {0, 1, 2, 3}) {  // the pick, the mma decode kernels, and by pdl; the mid kernels
            const bool mma = variant > 0;      // a plan of its own
            const fast::MoePlan plan = variant == 3   ? fast::moe_mid_plan()
                                       : variant == 2 ? kMmaDecodePlans[3]
                                       : mma          ? kMmaDecodePlans[0]
                                                      : fast::moe_pick(T, k, E);
            SCOPED_TRACE("T=" + std::to_string(T) + " " + str(plan));
            const std::vector<float> logits = normal_floats(size_t(T * E), 22, 2.f),
                                     x = normal_floats(size_t(T * ex.H), 23);
            const DeviceBuffer d_logits = to_device(logits), d_x = to_device(x);
            DeviceBuffer d_ids(size_t(T * k) * 4), d_w(size_t(T * k) * 4), d_y(size_t(T * ex.H) * 4),
                d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
            Stream stream;
            auto chain = [&] {
                fast::moe_route(d_logits.as<float>(), E, T, E, k, true, false, d_ids.as<int32_t>(), d_w.as<float>(), stream);
                if (mma)
                    fast::moe_experts_packed_plan(plan, d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                                  d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
                else
                    fast::moe_experts_packed(d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                             d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
            };
            chain();
            stream.synchronize();
            const std::vector<uint32_t> eager = to_host<uint32_t>(d_y, size_t(T * ex.H));
            TS_CUDA_CHECK(cudaMemsetAsync(d_y.data(), 0, d_y.size(), stream));
            cudaGraph_t graph = nullptr;
            cudaGraphExec_t exec = nullptr;
            TS_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
            chain();
            TS_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
            TS_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
            for (int replay = 0; replay < 2; ++replay) {
                TS_CUDA_CHECK(cudaGraphLaunch(exec, stream));
                stream.synchronize();
                EXPECT_EQ(to_host<uint32_t>(d_y, size_t(T * ex.H)), eager) << "replay " << replay;
            }
            cudaGraphExecDestroy(exec);
            cudaGraphDestroy(graph);
            if (HasFailure()) return;
        }
}

TEST(FastMoe, OutOfRangeIdPoisonsOnlyItsToken) {
    REQUIRE_CUDA();
    const int64_t T = 3;
    const int E = 8, k = 2;
    Experts ex(E, 64, 32, DType::Q4_0, 3);
    const std::vector<float> x = normal_floats(size_t(T * ex.H), 4);
    const Routing r{{0, 1, 2, 8, 5, 4}, {0.5f, 0.5f, 0.5f, 0.5f, 0.3f, 0.7f}};  // token 1 names expert 8 of 8
    const DeviceBuffer d_x = to_device(x), d_ids = to_device(r.ids), d_w = to_device(r.weights);
    DeviceBuffer d_y(size_t(T * ex.H) * 4), d_scratch(fast::moe_experts_scratch_bytes(T, k, E, ex.H, ex.I));
    for (const fast::MoePlan& plan : all_plans()) {
        SCOPED_TRACE(str(plan));
        Stream stream;
        fast::moe_experts_packed_plan(plan, d_y.as<float>(), ex.H, d_x.as<float>(), ex.H, T, ex.view(),
                                      d_ids.as<int32_t>(), d_w.as<float>(), k, d_scratch.data(), stream);
        stream.synchronize();
        const std::vector<float> y = to_host<float>(d_y, size_t(T * ex.H));
        for (int64_t h = 0; h < ex.H; ++h) {
            EXPECT_TRUE(std::isfinite(y[size_t(h)])) << "token 0, h " << h;
            EXPECT_TRUE(std::isnan(y[size_t(ex.H + h)])) << "token 1, h " << h;
            EXPECT_TRUE(std::isfinite(y[size_t(2 * ex.H + h)])) << "token 2, h " << h;
        }
        if (HasFailure()) return;
    }
}

TEST(FastMoe, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float* f = nullptr;
    int32_t* ids = nullptr;
    EXPECT_NO_THROW(fast::moe_route(f, 8, 0, 8, 2, true, false, ids, f, nullptr));  // no tokens
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 9, true, false, ids, f, nullptr), Error);            // k > E
    EXPECT_THROW(fast::moe_route(f, 64, 1, 64, 17, true, false, ids, f, nullptr), Error);         // k > 16
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 0, true, false, ids, f, nullptr), Error);            // k = 0
    EXPECT_THROW(fast::moe_route(f, 513, 1, 513, 2, true, false, ids, f, nullptr), Error);        // E > 512
    EXPECT_THROW(fast::moe_route(f, 8, 1, 8, 2, true, false, ids, f, nullptr), Error);            // null
    float* p = reinterpret_cast<float*>(uintptr_t(4096));
    EXPECT_THROW(fast::moe_route(p, 7, 2, 8, 2, true, false, ids, f, nullptr), Error);            // ldl < E
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 0, p, nullptr), Error);                     // tile 0
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 8, p + 1, nullptr), Error);                 // misaligned scratch

    const PackedMatrix* d = reinterpret_cast<const PackedMatrix*>(p);
    const fast::MoePackedExperts w{8, 64, 32, d, d, d};
    auto run = [&](const fast::MoePlan& plan, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                   fast::MoePackedExperts ww, int k, void* scratch) {
        fast::moe_experts_packed_plan(plan, y, ldy, x, ldx, T, ww, reinterpret_cast<int32_t*>(p), p, k, scratch,
                                      nullptr);
    };
    float* y = p + 4096;  // disjoint from x = p
    EXPECT_NO_THROW(run({}, y, 64, p, 64, 0, w, 2, p));                                  // no tokens
    EXPECT_THROW(run({false, false, 8}, y, 64, p, 64, 2, w, 2, p), Error);               // by item needs grouping
    EXPECT_THROW(run({true, true, 9}, y, 64, p, 64, 2, w, 2, p), Error);                 // tile > 8
    EXPECT_THROW(run({true, false, 16, true}, y, 64, p, 64, 2, w, 2, p), Error);         // large tile of 16
    EXPECT_THROW(run({true, true, 32, true}, y, 64, p, 64, 2, w, 2, p), Error);          // large, by token
    EXPECT_THROW(run({true, true, 8, false, true}, y, 64, p, 64, 2, w, 2, p), Error);    // v2 small, grouped
    EXPECT_THROW(run({true, false, 8, true, true}, y, 64, p, 64, 2, w, 2, p), Error);    // v2 large tile 8
    EXPECT_THROW(run({true, true, 8, false, false, true}, y, 64, p, 64, 2, w, 2, p), Error);   // mma decode, grouped
    EXPECT_THROW(run({false, true, 8, false, true, true}, y, 64, p, 64, 2, w, 2, p), Error);   // mma decode and v2
    EXPECT_THROW(run({false, true, 8, false, false, true, 3}, y, 64, p, 64, 2, w, 2, p), Error);  // batch 3
    EXPECT_THROW(run({false, true, 8, false, false, true, 0, false, 3}, y, 64, p, 64, 2, w, 2, p), Error);
    EXPECT_THROW(run({false, true, 8, false, false, true, 0, false, 0, 12}, y, 64, p, 64, 2, w, 2, p), Error);
    for (const fast::MoePlan base : {fast::MoePlan{true, false, 8, true}, fast::MoePlan{true, false, 256, true},
                                     fast::MoePlan{true, false, 32, false}, fast::MoePlan{true, false, 32, true, true}}) {
        fast::MoePlan bad = base;  // wgmma with tiles of 8 or 256, not large, or with v2
        bad.wgmma = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
    }
    {  // the mid plan: grouped, by item, tile_rows 8, no other kernels, ring 0, 3 or 4
        const fast::MoePlan mid = fast::moe_mid_plan();
        fast::MoePlan bad = mid;
        bad.tile_rows = 16;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.down_by_token = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.grouped = false;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.v2 = bad.large_tiles = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.dp4a_decode = true;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        bad = mid;
        bad.mid_ring = 2;
        EXPECT_THROW(run(bad, y, 64, p, 64, 2, w, 2, p), Error);
        try {  // H = 8192: x's 8 rows staged would take 130 KB of shared memory
            run(mid, p + 65536, 8192, p, 8192, 2, {8, 8192, 32, d, d, d}, 2, p);
            ADD_FAILURE() << "H = 8192 accepted by the mid kernels";
        } catch (const Error& err) {
            EXPECT_NE(std::string(err.what()).find("shared memory"), std::string::npos) << err.what();
        }
    }
    EXPECT_THROW(fast::moe_group(ids, 2, 2, 8, 129, p, nullptr), Error);  // tile > 128
    EXPECT_THROW(run({}, y, 64, p, 63, 2, w, 2, p), Error);                              // ldx < H
    EXPECT_THROW(run({}, p + 1, 64, p, 64, 2, w, 2, p), Error);                          // y overlaps x
    EXPECT_THROW(run({}, y, 64, p, 64, 2, w, 2, reinterpret_cast<char*>(p) + 4), Error); // misaligned scratch
    EXPECT_THROW(run({}, y, 64, p, 64, 2, {8, 48, 32, d, d, d}, 2, p), Error);           // H not a multiple of 32
    EXPECT_THROW(run({}, y, 64, p, 64, 2, {8, 64, 32, nullptr, d, d}, 2, p), Error);     // null descriptors

    // Host descriptors: shape, kind, group, alignment.
    PackedMatrix g;
    g.n = 32;
    g.k = 64;
    g.codes = reinterpret_cast<const uint8_t*>(p);
    g.scales = reinterpret_cast<const uint16_t*>(p);
    PackedMatrix dn = g;
    dn.n = 64;
    dn.k = 32;
    EXPECT_NO_THROW(fast::moe_check_experts(&g, &g, &dn, 1, 64, 32));
    EXPECT_THROW(fast::moe_check_experts(&g, &g, &g, 1, 64, 32), Error);  // down [32, 64], not [64, 32]
    PackedMatrix bad = g;
    bad.kind = PackedKind::Int8;
    EXPECT_THROW(fast::moe_check_experts(&bad, &g, &dn, 1, 64, 32), Error);
    bad = g;
    bad.group = 48;
    EXPECT_THROW(fast::moe_check_experts(&g, &bad, &dn, 1, 64, 32), Error);
    bad = g;
    bad.codes += 8;
    EXPECT_THROW(fast::moe_check_experts(&g, &bad, &dn, 1, 64, 32), Error);
}
