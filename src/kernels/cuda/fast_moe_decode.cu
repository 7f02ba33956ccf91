// The fast MoE's second-generation small tiles (decode, per slot, f32). Both kernels put many
// 16-byte weight loads in flight per lane before any use, and read their activations from shared
// memory staged once per block (padded: chunk c of 32 floats at 36·c, so lanes reading
// consecutive chunks hit distinct banks).
//   gate_up: block = (8 warps × 4 outputs, slot s); a warp's 8 rows (4 gate, 4 up) × 2 chunks a
//            lane = 16 loads in flight; SwiGLU in the epilogue → act [T·k, I] f32.
//   down:    block = (8 warps × 2 outputs h, token t); a warp's k·2 (slot, row) pairs, L lanes a
//            pair (8 pairs of a lane group in flight, 2 chunks a lane); the token's k act rows in
//            shared memory; y[t, h] = Σ_j weights[t, j]·o_j in slot order (no atomics).
// Each matrix is read in the order its descriptor names (row-major or 16-row tiles: PackedLayout).
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_moe.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr unsigned kFull = 0xffffffffu;
constexpr int kChunk = 32;     // Int4 columns per 16-byte chunk
constexpr int kPadChunk = 36;  // floats per staged chunk (bank spread)
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kGuRows = 4;     // gate_up: outputs per warp
constexpr int kDownRows = 2;   // down: outputs per warp
constexpr int kMaxSmem = 160 * 1024;

// Stages n floats of src into padded chunks of dst (the whole block).
__device__ __forceinline__ void stage(float* dst, const float* __restrict__ src, int64_t n) {
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[(i / kChunk) * kPadChunk + i % kChunk] = __ldg(src + i);
}

// Σ over one chunk: sp += codes·x, sx += x, for the 32 staged floats at xs (16-byte aligned).
__device__ __forceinline__ void chunk_dot(const uint4& w, const float* xs, float& sp, float& sx) {
#pragma unroll
    for (int wd = 0; wd < 4; ++wd) {
        float wv[8];
        decode_word<PackedKind::Int4>(wd == 0 ? w.x : wd == 1 ? w.y : wd == 2 ? w.z : w.w, wv);
        const float4 a = *reinterpret_cast<const float4*>(xs + wd * 8);
        const float4 b = *reinterpret_cast<const float4*>(xs + wd * 8 + 4);
        const float xv[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            sx += xv[i];
            sp = fmaf(wv[i], xv[i], sp);
        }
    }
}

// Row r of a matrix: its codes, scales and biases (chunk 0, group 0), and its matrix's
// PackedLayout::chunk and scale_group in 32-bit math (offsets within a row fit; the layout's
// fields, ≤ 1024, copied): no 64-bit multiply a load.
struct RowRef {
    const uint8_t* codes;
    const uint16_t* scales;
    const uint16_t* biases;  // null: bias = −8·scale
    int cpg;                 // chunks per scale group
    PackedRowSteps st;       // chunk and scale_group of its matrix (32-bit)
};

// lay = packed_layout(m), computed once per matrix.
__device__ __forceinline__ RowRef row_ref(const PackedMatrix& m, const PackedLayout& lay, int64_t r) {
    const int64_t so = lay.scale_row(r);
    return {m.codes + lay.code_row(r), m.scales + so, m.biases ? m.biases + so : nullptr, m.group / kChunk,
            packed_row_steps(lay)};
}

// One chunk of a row in flight: its codes and raw f16 scale and bias.
struct ChunkLoad {
    uint4 w;
    uint16_t s, b;
};
__device__ __forceinline__ ChunkLoad load_chunk(const RowRef& r, int64_t ch, bool ok) {
    if (!ok) return {make_uint4(0, 0, 0, 0), 0, 0};
    const int c = int(ch), gi = r.st.scale_group(int(unsigned(c) / unsigned(r.cpg)));
    return {load_stream(r.codes + r.st.chunk(c)), __ldg(r.scales + gi), r.biases ? __ldg(r.biases + gi) : uint16_t(0)};
}
// acc += scale·Σcode·x + bias·Σx for a loaded chunk (sp, sx its sums).
__device__ __forceinline__ float chunk_acc(const ChunkLoad& c, bool has_bias, float sp, float sx, float acc) {
    const float sc = half_bits(c.s), bi = has_bias ? half_bits(c.b) : -8.f * sc;
    return fmaf(bi, sx, fmaf(sc, sp, acc));
}

__global__ void __launch_bounds__(kThreads)
    gate_up_kernel(float* __restrict__ act, const float* __restrict__ x, int64_t ldx, int64_t H, int64_t I, int E,
                   const PackedMatrix* __restrict__ gates, const PackedMatrix* __restrict__ ups,
                   const int32_t* __restrict__ ids, int k) {
    constexpr int R = 2 * kGuRows, U = 2;
    extern __shared__ __align__(16) float xs[];
    const int64_t s = blockIdx.y;
    const int e = ids[s];
    const int lane = int(threadIdx.x & 31);
    const int64_t i0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kGuRows;
    const bool valid = e >= 0 && e < E;
    const int64_t nch = H / kChunk;

    RowRef rows[R];
    bool ok[R];
    const PackedMatrix gm = gates[valid ? e : 0], um = ups[valid ? e : 0];
    const PackedLayout gl = packed_layout(gm), ul = packed_layout(um);
#pragma unroll
    for (int r = 0; r < kGuRows; ++r) {
        ok[r] = ok[kGuRows + r] = valid && i0 + r < I;
        const int64_t i = ok[r] ? i0 + r : 0;
        rows[r] = row_ref(gm, gl, i);
        rows[kGuRows + r] = row_ref(um, ul, i);
    }
    float acc[R] = {};
    ChunkLoad w[U][R];
    auto issue = [&](int64_t c0) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) w[u][r] = load_chunk(rows[r], c0 + int64_t(u) * 32, ok[r] && c0 + u * 32 < nch);
    };
    issue(lane);  // in flight while x is staged
    stage(xs, x + (s / k) * ldx, H);
    __syncthreads();
    if (!valid) {
        if (lane == 0)
            for (int r = 0; r < kGuRows && i0 + r < I; ++r) act[s * I + i0 + r] = quiet_nan();
        return;
    }
    if (i0 >= I) return;
    const bool has_bias = gm.biases != nullptr, has_bias_u = um.biases != nullptr;
    for (int64_t c0 = lane; c0 < nch; c0 += 32 * U) {
        if (c0 != lane) issue(c0);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t ch = c0 + int64_t(u) * 32;
            if (ch >= nch) break;
            const float* xc = xs + ch * kPadChunk;
            float sx = 0.f;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                float sp = 0.f, sxr = 0.f;
                chunk_dot(w[u][r].w, xc, sp, sxr);
                if (r == 0) sx = sxr;  // the same x for every row (row 0 is in range whenever any is)
                acc[r] = chunk_acc(w[u][r], r < kGuRows ? has_bias : has_bias_u, sp, sx, acc[r]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] = warp_sum(acc[r]);
    if (lane < kGuRows && ok[lane]) {
        float gv = acc[0], uv = acc[kGuRows];
#pragma unroll
        for (int r = 1; r < kGuRows; ++r)
            if (lane == r) gv = acc[r], uv = acc[kGuRows + r];
        act[s * I + i0 + lane] = gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
    }
}

// L lanes a (slot, row) pair; G = 32 / L groups a warp; batches of NB pairs of a group in flight.
template <int L>
__global__ void __launch_bounds__(kThreads)
    down_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ act, int64_t H, int64_t I, int E,
                const PackedMatrix* __restrict__ downs, const int32_t* __restrict__ ids,
                const float* __restrict__ weights, int k) {
    constexpr int G = 32 / L, NP = (kMoeMaxTopK * kDownRows + G - 1) / G;  // pairs a group, at most
    constexpr int NB = NP < 8 ? NP : 8;
    static_assert(NP % NB == 0, "batches");
    extern __shared__ __align__(16) float as[];
    const int64_t t = blockIdx.y;
    const int lane = int(threadIdx.x & 31), gid = lane / L, q = lane % L;
    const int64_t h0 = (int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5)) * kDownRows;
    const int64_t nch = I / kChunk;
    const int npairs = k * kDownRows;
    const unsigned gmask = L == 32 ? kFull : ((1u << L) - 1u) << (lane & ~(L - 1));

    // Pair p = j·kDownRows + r (slot j, output h0 + r) of this group: p = gid + G·b.
    float o[NP];
#pragma unroll
    for (int b = 0; b < NP; ++b) o[b] = 0.f;
    RowRef rows[NB];
    bool ok[NB], bad[NB], bias[NB];
    ChunkLoad w[NB];
    auto batch = [&](int b0) {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            const int p = gid + G * (b0 + b), j = p / kDownRows, r = p % kDownRows;
            const int e = p < npairs ? ids[t * k + j] : 0;
            bad[b] = p < npairs && (e < 0 || e >= E);
            ok[b] = p < npairs && !bad[b] && h0 + r < H;
            const PackedMatrix& m = downs[ok[b] ? e : 0];
            rows[b] = row_ref(m, packed_layout(m), ok[b] ? h0 + r : 0);
            bias[b] = m.biases != nullptr;
        }
    };
    auto issue = [&](int64_t ch) {
#pragma unroll
        for (int b = 0; b < NB; ++b) w[b] = load_chunk(rows[b], ch, ok[b] && ch < nch);
    };
    batch(0);
    issue(q);  // in flight while the token's act rows are staged
    stage(as, act + t * k * I, int64_t(k) * I);
    __syncthreads();
#pragma unroll
    for (int b0 = 0; b0 < NP; b0 += NB) {
        if (b0 > 0) {
            if (gid + G * b0 >= npairs) break;  // uniform over the group
            batch(b0);
        }
        for (int64_t ch = q; ch < nch; ch += L) {
            if (b0 > 0 || ch != q) issue(ch);
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                const int j = (gid + G * (b0 + b)) / kDownRows;
                float sp = 0.f, sx = 0.f;
                if (ok[b]) {
                    chunk_dot(w[b].w, as + (int64_t(j) * nch + ch) * kPadChunk, sp, sx);
                    o[b0 + b] = chunk_acc(w[b], bias[b], sp, sx, o[b0 + b]);
                }
            }
        }
#pragma unroll
        for (int b = 0; b < NB; ++b)
            if (bad[b]) o[b0 + b] = quiet_nan();
    }
    // Group sums (every lane of a group ends with its pairs' values).
#pragma unroll
    for (int b = 0; b < NP; ++b)
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) o[b] += __shfl_xor_sync(gmask, o[b], off);
    if (h0 >= H) return;  // the whole warp
    // y[t, h0 + r] = Σ_j weights[t, j]·o(j, r) in slot order: pair p lives in group p % G, entry p / G.
    float sum[kDownRows];
#pragma unroll
    for (int j = 0; j < kMoeMaxTopK; ++j) {
        if (j >= k) break;
        const float wj = weights[t * k + j];
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
            const int p = j * kDownRows + r;
            const float v = __fmul_rn(wj, __shfl_sync(kFull, o[p / G], (p % G) * L));
            sum[r] = j == 0 ? v : __fadd_rn(sum[r], v);
        }
    }
    if (lane == 0)
#pragma unroll
        for (int r = 0; r < kDownRows; ++r)
            if (h0 + r < H) y[t * ldy + h0 + r] = sum[r];
}

unsigned blocks_of(int64_t n, int64_t per) { return unsigned((n + per - 1) / per); }

template <typename K>
cudaError_t allow_smem(K kernel) {
    static const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmem);
    return err;
}

size_t staged_bytes(int64_t n) { return size_t(n / kChunk) * kPadChunk * sizeof(float); }

}  // namespace

size_t moe_decode_smem_bytes(int64_t H, int64_t I, int k) {
    return std::max(staged_bytes(H), staged_bytes(int64_t(k) * I));
}
size_t moe_decode_smem_limit() { return kMaxSmem; }

cudaError_t launch_moe_decode_gate_up(float* act, const float* x, int64_t ldx, int64_t T, const MoePackedExperts& w,
                                      const int32_t* ids, int k, cudaStream_t stream) {
    if (const cudaError_t err = allow_smem(gate_up_kernel); err != cudaSuccess) return err;
    const dim3 grid(blocks_of(w.I, int64_t(kWarps) * kGuRows), unsigned(T * k));
    gate_up_kernel<<<grid, kThreads, staged_bytes(w.H), stream>>>(act, x, ldx, w.H, w.I, w.E, w.gate, w.up, ids, k);
    return cudaGetLastError();
}

cudaError_t launch_moe_decode_down(float* y, int64_t ldy, const float* act, int64_t T, const MoePackedExperts& w,
                                   const int32_t* ids, const float* weights, int k, cudaStream_t stream) {
    const dim3 grid(blocks_of(w.H, int64_t(kWarps) * kDownRows), unsigned(T));
    const size_t smem = staged_bytes(int64_t(k) * w.I);
    const int64_t nch = w.I / kChunk;
    if (nch >= 32) {
        if (const cudaError_t err = allow_smem(down_kernel<32>); err != cudaSuccess) return err;
        down_kernel<32><<<grid, kThreads, smem, stream>>>(y, ldy, act, w.H, w.I, w.E, w.down, ids, weights, k);
    } else if (nch >= 16) {
        if (const cudaError_t err = allow_smem(down_kernel<16>); err != cudaSuccess) return err;
        down_kernel<16><<<grid, kThreads, smem, stream>>>(y, ldy, act, w.H, w.I, w.E, w.down, ids, weights, k);
    } else {
        if (const cudaError_t err = allow_smem(down_kernel<8>); err != cudaSuccess) return err;
        down_kernel<8><<<grid, kThreads, smem, stream>>>(y, ldy, act, w.H, w.I, w.E, w.down, ids, weights, k);
    }
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
