// The fast MoE's expert kernels over Int4 packed weights (small tiles, decode). A group of L lanes
// (8 or 32) computes the dot products of a few weight rows with up to NT token vectors: lane q
// streams 16-byte chunks q, q + L, … of each row (ld.global.nc.L1::no_allocate, U chunks per row
// in flight), decodes the 32 codes of a chunk in registers (byte_perm into the mantissa of 2²³:
// exact), and multiplies them with x read through L1 (f32). Per chunk (inside one scale group):
// acc += scale · Σ code·x + bias · Σ x. The L lanes' partial sums meet in an xor-butterfly.
//   gate_up:       item (an expert and ≤ NT of its rows) × block of I rows: gate and up rows of the
//                  same output share x; SwiGLU in the epilogue → act [rows, I].
//   down_by_token: token × block of H rows; the warp's 32/L lane groups take the token's k slots
//                  (strided), and the slot results are summed in slot order through shuffles.
//   down_by_item:  item × block of H rows → out [rows, H]; combine sums each token's slots in order.
// Each matrix is read in the order its descriptor names (row-major or 16-row tiles: PackedLayout).
#include <cuda_fp16.h>

#include <cmath>

#include "core/half.h"
#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kChunk = 32;  // Int4 columns per 16-byte chunk

// One packed row: its codes, its group scales and biases (null: −8·scale; chunk 0, group 0),
// chunks per group, and its matrix's PackedLayout::chunk and scale_group in 32-bit math (offsets
// within a row fit; the layout's fields, ≤ 1024, copied): no 64-bit multiply a load.
struct Row {
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;
    int cpg;
    PackedRowSteps st;       // chunk and scale_group of its matrix (32-bit)
};

// lay = packed_layout(m), computed once per matrix.
__device__ __forceinline__ Row row_of(const PackedMatrix& m, const PackedLayout& lay, int64_t r) {
    const int64_t so = lay.scale_row(r);
    return {m.codes + lay.code_row(r), m.scales + so, m.biases ? m.biases + so : nullptr, m.group / kChunk,
            packed_row_steps(lay)};
}

// The lane mask of this lane's group of L.
template <int L>
__device__ __forceinline__ unsigned group_mask() {
    if constexpr (L == 32) return kFull;
    else return ((1u << L) - 1u) << (threadIdx.x & 31 & ~unsigned(L - 1));
}

// acc[r][t] += this lane's share of rows[r] · x_t (nch chunks), t < nt ≤ NT; rows may be invalid
// (ok[r] false: they contribute 0). Lane q of the group takes chunks q, q + L, ….
template <int L, int NR, int NT, int U>
__device__ __forceinline__ void rows_dot(const Row (&rows)[NR], const bool (&ok)[NR], int64_t nch,
                                         const float* const (&xr)[NT], int nt, bool x_aligned, int q,
                                         float (&acc)[NR][NT]) {
    for (int64_t c0 = q; c0 < nch; c0 += int64_t(L) * U) {
        uint4 w[U][NR];
        float sc[U][NR], bi[U][NR];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < NR; ++r) {
                const int64_t ch = c0 + int64_t(u) * L;
                const bool in = ok[r] && ch < nch;
                const int c = int(ch);
                w[u][r] = in ? load_stream(rows[r].codes + rows[r].st.chunk(c)) : make_uint4(0, 0, 0, 0);
                const int gi = rows[r].st.scale_group(int(unsigned(c) / unsigned(rows[r].cpg)));
                sc[u][r] = in ? half_bits(__ldg(rows[r].scales + gi)) : 0.f;
                bi[u][r] = !in ? 0.f : rows[r].biases ? half_bits(__ldg(rows[r].biases + gi)) : -8.f * sc[u][r];
            }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t ch = c0 + int64_t(u) * L;
            if (ch >= nch) break;
            float sp[NR][NT], sx[NT];
#pragma unroll
            for (int t = 0; t < NT; ++t) {
                sx[t] = 0.f;
#pragma unroll
                for (int r = 0; r < NR; ++r) sp[r][t] = 0.f;
            }
#pragma unroll
            for (int wd = 0; wd < 4; ++wd) {
                float wv[NR][8];
#pragma unroll
                for (int r = 0; r < NR; ++r) {
                    const uint4& v = w[u][r];
                    decode_word<PackedKind::Int4>(wd == 0 ? v.x : wd == 1 ? v.y : wd == 2 ? v.z : v.w, wv[r]);
                }
#pragma unroll
                for (int t = 0; t < NT; ++t) {
                    if (t >= nt) break;
                    const float* xp = xr[t] + ch * kChunk + wd * 8;
                    float xv[8];
                    if (x_aligned) {
                        const float4 a = __ldg(reinterpret_cast<const float4*>(xp));
                        const float4 b = __ldg(reinterpret_cast<const float4*>(xp) + 1);
                        xv[0] = a.x, xv[1] = a.y, xv[2] = a.z, xv[3] = a.w;
                        xv[4] = b.x, xv[5] = b.y, xv[6] = b.z, xv[7] = b.w;
                    } else {
#pragma unroll
                        for (int i = 0; i < 8; ++i) xv[i] = __ldg(xp + i);
                    }
#pragma unroll
                    for (int i = 0; i < 8; ++i) {
                        sx[t] += xv[i];
#pragma unroll
                        for (int r = 0; r < NR; ++r) sp[r][t] = fmaf(wv[r][i], xv[i], sp[r][t]);
                    }
                }
            }
#pragma unroll
            for (int r = 0; r < NR; ++r)
#pragma unroll
                for (int t = 0; t < NT; ++t) acc[r][t] = fmaf(bi[u][r], sx[t], fmaf(sc[u][r], sp[r][t], acc[r][t]));
        }
    }
}

// Sums acc over the group's L lanes (every lane ends with the same bits).
template <int L, int NR, int NT>
__device__ __forceinline__ void group_sum(float (&acc)[NR][NT]) {
    const unsigned mask = group_mask<L>();
#pragma unroll
    for (int o = L / 2; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < NR; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[r][t] += __shfl_xor_sync(mask, acc[r][t], o);
}

// The item a block works on: expert, first row, rows (tokens). False: no item (past n_items).
struct Item {
    int e, r0, n;
};
__device__ __forceinline__ bool item_of(int64_t i, const int32_t* ids, const MoeGrouping& g, bool grouped, Item* it) {
    if (!grouped) {
        *it = {ids[i], int(i), 1};
        return true;
    }
    if (i >= *g.n_items) return false;
    *it = {g.item_expert[i], g.item_row0[i], g.item_rows[i]};
    return true;
}

constexpr int kThreads = 256;
constexpr int kDownWarps = 4;  // down_by_token: 4 warps of kDownRows rows
constexpr int kDownRows = 2;

template <int L>
constexpr int kUnroll = L == 32 ? 2 : 4;

// Rows per lane group: 2 for one token (more loads in flight), 1 for NT tokens (registers).
template <int NT>
constexpr int kRowsPerGroup = NT == 1 ? 2 : 1;

template <int L, int NT>
__global__ void __launch_bounds__(kThreads)
    gate_up_kernel(float* __restrict__ act, const float* __restrict__ x, int64_t ldx, bool x_aligned, int64_t H,
                   int64_t I, int E, const PackedMatrix* __restrict__ gates, const PackedMatrix* __restrict__ ups,
                   const int32_t* __restrict__ ids, int k, MoeGrouping g, bool grouped) {
    constexpr int R = kRowsPerGroup<NT>, GB = kThreads / L;
    Item it;
    if (!item_of(blockIdx.x, ids, g, grouped, &it)) return;
    const int gid = int(threadIdx.x) / L, q = int(threadIdx.x) % L;
    const int64_t i0 = (int64_t(blockIdx.y) * GB + gid) * R;
    if (i0 >= I) return;  // the whole group
    if (it.e < 0 || it.e >= E) {
        if (q == 0)
            for (int t = 0; t < it.n; ++t)
                for (int r = 0; r < R && i0 + r < I; ++r) act[(it.r0 + t) * I + i0 + r] = quiet_nan();
        return;
    }
    const PackedMatrix gm = gates[it.e], um = ups[it.e];
    const PackedLayout gl = packed_layout(gm), ul = packed_layout(um);
    const float* xr[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        const int s = t < it.n ? (grouped ? g.perm[it.r0 + t] : it.r0 + t) : 0;
        xr[t] = x + int64_t(s / k) * ldx;
    }
    Row rows[2 * R];
    bool ok[2 * R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        ok[r] = ok[R + r] = i0 + r < I;
        const int64_t i = ok[r] ? i0 + r : i0;
        rows[r] = row_of(gm, gl, i);
        rows[R + r] = row_of(um, ul, i);
    }
    float acc[2 * R][NT] = {};
    rows_dot<L, 2 * R, NT, kUnroll<L>>(rows, ok, H / kChunk, xr, it.n, x_aligned, q, acc);
    group_sum<L, 2 * R, NT>(acc);
    if (q != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (t >= it.n) break;
#pragma unroll
        for (int r = 0; r < R; ++r)
            if (ok[r]) {
                const float gv = acc[r][t], uv = acc[R + r][t];
                act[(it.r0 + t) * I + i0 + r] = gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
            }
    }
}

template <int L>
__global__ void __launch_bounds__(kDownWarps * 32)
    down_by_token_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ act, int64_t H, int64_t I,
                         int E, const PackedMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                         const float* __restrict__ weights, int k, const int32_t* __restrict__ row_of_slot) {
    constexpr int R = kDownRows, G = 32 / L, J = (kMoeMaxTopK + G - 1) / G;  // J: slots per group
    const int lane = int(threadIdx.x & 31), gid = lane / L, q = lane % L;
    const int64_t t = blockIdx.x;
    const int64_t h0 = (int64_t(blockIdx.y) * kDownWarps + (threadIdx.x >> 5)) * R;
    if (h0 >= H) return;  // the whole warp
    float o[J][R];
#pragma unroll
    for (int jj = 0; jj < J; ++jj) {
        const int j = gid + jj * G;
#pragma unroll
        for (int r = 0; r < R; ++r) o[jj][r] = 0.f;
        if (j >= k) continue;  // uniform over the group
        const int64_t s = t * k + j;
        const int e = ids[s];
        const int row = row_of_slot ? row_of_slot[s] : int(s);
        if (e < 0 || e >= E || row < 0) {
#pragma unroll
            for (int r = 0; r < R; ++r) o[jj][r] = quiet_nan();
            continue;
        }
        const PackedMatrix dm = downs[e];
        const PackedLayout dl = packed_layout(dm);
        Row rows[R];
        bool ok[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            ok[r] = h0 + r < H;
            rows[r] = row_of(dm, dl, ok[r] ? h0 + r : h0);
        }
        const float* xr[1] = {act + int64_t(row) * I};
        float acc[R][1] = {};
        rows_dot<L, R, 1, kUnroll<L>>(rows, ok, I / kChunk, xr, 1, true, q, acc);
        group_sum<L, R, 1>(acc);
#pragma unroll
        for (int r = 0; r < R; ++r) o[jj][r] = acc[r][0];
    }
    // y[t, h] = Σ_j weights[t, j] · o_j in slot order: slot j lives in group j % G, entry j / G.
    float sum[R];
#pragma unroll
    for (int j = 0; j < kMoeMaxTopK; ++j) {
        if (j >= k) break;
        const float w = weights[t * k + j];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float v = __fmul_rn(w, __shfl_sync(kFull, o[j / G][r], (j % G) * L));
            sum[r] = j == 0 ? v : __fadd_rn(sum[r], v);  // no contraction: the same bits as combine
        }
    }
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < R; ++r)
            if (h0 + r < H) y[t * ldy + h0 + r] = sum[r];
}

template <int L, int NT>
__global__ void __launch_bounds__(kThreads)
    down_by_item_kernel(float* __restrict__ out, const float* __restrict__ act, int64_t H, int64_t I, int E,
                        const PackedMatrix* __restrict__ downs, MoeGrouping g) {
    constexpr int R = kRowsPerGroup<NT>, GB = kThreads / L;
    Item it;
    if (!item_of(blockIdx.x, nullptr, g, true, &it)) return;
    const int gid = int(threadIdx.x) / L, q = int(threadIdx.x) % L;
    const int64_t h0 = (int64_t(blockIdx.y) * GB + gid) * R;
    if (h0 >= H) return;
    if (it.e < 0 || it.e >= E) return;  // items name valid experts only
    const PackedMatrix dm = downs[it.e];
    const PackedLayout dl = packed_layout(dm);
    const float* xr[NT];
#pragma unroll
    for (int t = 0; t < NT; ++t) xr[t] = act + int64_t(it.r0 + (t < it.n ? t : 0)) * I;
    Row rows[R];
    bool ok[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        ok[r] = h0 + r < H;
        rows[r] = row_of(dm, dl, ok[r] ? h0 + r : h0);
    }
    float acc[R][NT] = {};
    rows_dot<L, R, NT, kUnroll<L>>(rows, ok, I / kChunk, xr, it.n, true, q, acc);
    group_sum<L, R, NT>(acc);
    if (q != 0) return;
#pragma unroll
    for (int t = 0; t < NT; ++t) {
        if (t >= it.n) break;
#pragma unroll
        for (int r = 0; r < R; ++r)
            if (ok[r]) out[int64_t(it.r0 + t) * H + h0 + r] = acc[r][t];
    }
}

// y[t] = Σ_j w_j · out[row of slot j] over the token's k slots in slot order, a thread CPT columns
// (4 or 8): every slot of a batch of KB loaded before the batch's first sum (one round trip a batch,
// not a slot; session 43 — the thread a column before issued a slot's load after the last one's add),
// the same operations a column as ever, whatever CPT and KB. H is a multiple of CPT (of 32:
// moe_experts_packed), out's rows 16-byte aligned (bf16: 8-byte, 16 with CPT 8). Launched with PDL
// (pdl.cuh): out, and the grouping's row_of_slot, come from the kernels before. Out: float, or
// uint16_t for bf16 rows (MoePlan::wgmma_out16), each value widened exactly.
constexpr int kCombineThreads = 128;
template <int CPT>
__device__ __forceinline__ void combine_load(const float* p, float (&v)[CPT]) {
#pragma unroll
    for (int c = 0; c < CPT; c += 4) {
        const float4 q = __ldcs(reinterpret_cast<const float4*>(p + c));
        v[c] = q.x, v[c + 1] = q.y, v[c + 2] = q.z, v[c + 3] = q.w;
    }
}
template <int CPT>
__device__ __forceinline__ void combine_load(const uint16_t* p, float (&v)[CPT]) {
    uint32_t w[CPT / 2];  // bf16 pairs, the first in the low half
    if constexpr (CPT == 4) {
        const uint2 q = __ldcs(reinterpret_cast<const uint2*>(p));
        w[0] = q.x, w[1] = q.y;
    } else {
        static_assert(CPT == 8);
        const uint4 q = __ldcs(reinterpret_cast<const uint4*>(p));
        w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    }
#pragma unroll
    for (int c = 0; c < CPT / 2; ++c) {
        v[2 * c] = bf16_to_f32(uint16_t(w[c]));
        v[2 * c + 1] = bf16_to_f32(uint16_t(w[c] >> 16));
    }
}
template <class Out, int CPT, int KB>
__global__ void __launch_bounds__(kCombineThreads)
    combine_kernel(float* __restrict__ y, int64_t ldy, const Out* __restrict__ out, int64_t H,
                   const float* __restrict__ weights, int k, const int32_t* __restrict__ row_of_slot, bool vec4) {
    pdl::wait();
    pdl::trigger();
    const int64_t t = blockIdx.x, h = CPT * (int64_t(blockIdx.y) * kCombineThreads + threadIdx.x);
    if (h >= H) return;
    const float nan = quiet_nan();
    float sum[CPT] = {};  // (each column's first product replaces it)
    for (int j0 = 0; j0 < k; j0 += KB) {
        int row[KB];
        float w[KB];
#pragma unroll
        for (int b = 0; b < KB; ++b) {  // the batch's rows and weights first: their loads together
            const int j = j0 + b;
            row[b] = j < k ? row_of_slot[t * k + j] : -1;
            w[b] = j < k ? weights[t * k + j] : 0.f;
        }
        float v[KB][CPT];
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            if (j0 + b < k && row[b] >= 0) {
                combine_load<CPT>(out + int64_t(row[b]) * H + h, v[b]);
            } else {
#pragma unroll
                for (int c = 0; c < CPT; ++c) v[b][c] = nan;
            }
        }
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            if (j0 + b >= k) break;
#pragma unroll
            for (int c = 0; c < CPT; ++c) {
                const float p = __fmul_rn(w[b], v[b][c]);
                sum[c] = j0 + b == 0 ? p : __fadd_rn(sum[c], p);
            }
        }
    }
    float* yt = y + t * ldy + h;
#pragma unroll
    for (int c = 0; c < CPT; c += 4) {
        if (vec4) *reinterpret_cast<float4*>(yt + c) = make_float4(sum[c], sum[c + 1], sum[c + 2], sum[c + 3]);
        else yt[c] = sum[c], yt[c + 1] = sum[c + 1], yt[c + 2] = sum[c + 2], yt[c + 3] = sum[c + 3];
    }
}

// Lanes per row: 32 when a row has at least 64 chunks (2048 columns), else 8.
int lanes_for(int64_t K) { return K / kChunk >= 64 ? 32 : 8; }

unsigned blocks_of(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

}  // namespace

cudaError_t launch_moe_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                               const int32_t* ids, int k, const MoeGrouping* g, int tile_rows, cudaStream_t stream) {
    const bool grouped = g != nullptr;
    const MoeGrouping gv = grouped ? *g : MoeGrouping{};
    const unsigned items = grouped ? unsigned(g->max_items) : unsigned(T * k);
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const bool one = !grouped || tile_rows == 1;
    const int L = lanes_for(w.H);
    const int64_t rows_per_block = int64_t(kThreads / L) * (one ? kRowsPerGroup<1> : kRowsPerGroup<8>);
    const dim3 grid(items, blocks_of(w.I, rows_per_block));
#define TS_GATE_UP(LL, NTT)                                                                                  \
    gate_up_kernel<LL, NTT><<<grid, kThreads, 0, stream>>>(act, x, ldx, aligned, w.H, w.I, w.E, w.gate, w.up, ids, \
                                                           k, gv, grouped)
    if (L == 32) {
        if (one) TS_GATE_UP(32, 1);
        else TS_GATE_UP(32, 8);
    } else {
        if (one) TS_GATE_UP(8, 1);
        else TS_GATE_UP(8, 8);
    }
#undef TS_GATE_UP
    return cudaGetLastError();
}

cudaError_t launch_moe_down_by_token(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                                     const int32_t* ids, const float* weights, int k, const MoeGrouping* g,
                                     cudaStream_t stream) {
    const dim3 grid(unsigned(T), blocks_of(w.H, int64_t(kDownWarps) * kDownRows));
    const int32_t* ros = g ? g->row_of_slot : nullptr;
    if (lanes_for(w.I) == 32)
        down_by_token_kernel<32><<<grid, kDownWarps * 32, 0, stream>>>(y, ldy, act, w.H, w.I, w.E, w.down, ids,
                                                                      weights, k, ros);
    else
        down_by_token_kernel<8><<<grid, kDownWarps * 32, 0, stream>>>(y, ldy, act, w.H, w.I, w.E, w.down, ids,
                                                                     weights, k, ros);
    return cudaGetLastError();
}

cudaError_t launch_moe_down_by_item(float* out, const float* act, int64_t T, const MoePackedExperts& w, int k,
                                    const MoeGrouping& g, int tile_rows, cudaStream_t stream) {
    (void)T, (void)k;
    const bool one = tile_rows == 1;
    const int L = lanes_for(w.I);
    const int64_t rows_per_block = int64_t(kThreads / L) * (one ? kRowsPerGroup<1> : kRowsPerGroup<8>);
    const dim3 grid(unsigned(g.max_items), blocks_of(w.H, rows_per_block));
#define TS_DOWN_ITEM(LL, NTT) \
    down_by_item_kernel<LL, NTT><<<grid, kThreads, 0, stream>>>(out, act, w.H, w.I, w.E, w.down, g)
    if (L == 32) {
        if (one) TS_DOWN_ITEM(32, 1);
        else TS_DOWN_ITEM(32, 8);
    } else {
        if (one) TS_DOWN_ITEM(8, 1);
        else TS_DOWN_ITEM(8, 8);
    }
#undef TS_DOWN_ITEM
    return cudaGetLastError();
}

namespace {
// The combine's form (cols a thread 4 or 8, slots a batch 8, 12 or 16; 0: the default) for Out.
template <class Out>
cudaError_t launch_combine(float* y, int64_t ldy, const Out* out, int64_t T, int64_t H, const float* weights, int k,
                           const MoeGrouping& g, int cols, int batch, cudaStream_t stream) {
    if (!cols) cols = H % moe_combine_cols(sizeof(Out) == 2) == 0 ? moe_combine_cols(sizeof(Out) == 2) : 4;
    batch = batch ? batch : moe_combine_batch(k);
    const uintptr_t align = uintptr_t(cols) * sizeof(Out) >= 16 ? 16 : uintptr_t(cols) * sizeof(Out);
    if ((cols != 4 && cols != 8) || (batch != 8 && batch != 12 && batch != 16) || H % cols != 0 ||
        reinterpret_cast<uintptr_t>(out) % align != 0 || k < 1 || k > kMoeMaxTopK)
        return cudaErrorInvalidValue;
    const dim3 grid(unsigned(T), blocks_of(H, int64_t(cols) * kCombineThreads));
    const bool vec4 = reinterpret_cast<uintptr_t>(y) % 16 == 0 && ldy % 4 == 0;
    auto go = [&](auto kernel) {
        return pdl::launch(kernel, grid, dim3(kCombineThreads), 0, stream, y, ldy, out, H, weights, k, g.row_of_slot,
                           vec4);
    };
    if (cols == 4) return batch == 8 ? go(combine_kernel<Out, 4, 8>) : batch == 12 ? go(combine_kernel<Out, 4, 12>)
                                                                                    : go(combine_kernel<Out, 4, 16>);
    return batch == 8 ? go(combine_kernel<Out, 8, 8>) : batch == 12 ? go(combine_kernel<Out, 8, 12>)
                                                                    : go(combine_kernel<Out, 8, 16>);
}
}  // namespace

cudaError_t launch_moe_combine(float* y, int64_t ldy, const float* out, int64_t T, int64_t H, const float* weights,
                               int k, const MoeGrouping& g, cudaStream_t stream, int cols, int batch) {
    return launch_combine(y, ldy, out, T, H, weights, k, g, cols, batch, stream);
}

cudaError_t launch_moe_combine_bf16(float* y, int64_t ldy, const void* out16, int64_t T, int64_t H,
                                    const float* weights, int k, const MoeGrouping& g, cudaStream_t stream, int cols,
                                    int batch) {
    return launch_combine(y, ldy, static_cast<const uint16_t*>(out16), T, H, weights, k, g, cols, batch, stream);
}

}  // namespace tessera::cuda::fast::detail
