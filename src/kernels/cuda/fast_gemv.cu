// The decode GEMV over packed weights, variant Simt (fast_gemv_plan.h): y[T, N] = x[T, K] · w[N, K]ᵀ
// for 1 ≤ T ≤ 8, Int4 and Int8, x exact in f32 (the tensor-core variant is fast_gemv_mma.cu).
// Each warp owns R consecutive rows and streams them whole: lane l reads 16-byte chunks l, l + 32,
// … of every row (128-bit ld.global.nc.L1::no_allocate, U·R loads in flight per lane), decodes
// the codes in registers (byte_perm into the mantissa of 2²³, one FADD: exact), and multiplies
// them with x staged in shared memory (f32, permuted so each warp read is conflict-free) for all
// T tokens at once. A chunk lies inside one group: the products are summed per chunk, then
// scaled: acc += scale · Σ code·x + bias · Σ x. fp32 throughout; a warp-shuffle sum per output.
// x is staged in K-slices when T · K floats exceed the shared-memory budget.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_plan.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kSmemBytes = 48 * 1024;  // no opt-in attribute needed (stays capture-safe)

template <PackedKind KIND>
constexpr int kChunkCols = KIND == PackedKind::Int4 ? 32 : 16;  // columns per 16-byte chunk

constexpr int pow2_floor(int v) { return v >= 4 ? 4 : v >= 2 ? 2 : 1; }
// Steps (chunks per lane per row) loaded together: about 4 chunks in flight per lane, and one
// step's x slice for TMAX tokens must fit the shared-memory budget.
template <PackedKind KIND, int TMAX, int R>
constexpr int kUnroll = std::min(4 / R, pow2_floor(kSmemBytes / 4 / 32 / (kChunkCols<KIND> * TMAX)));

// Block: kWarps warps × R rows. kslice: columns of x staged at a time (a multiple of 32·U·C).
// Shared memory: T × kslice floats, as float4 index t·(kslice/4) + (step·C/4 + j)·32 + lane
// for column (step·32 + lane)·C + 4j of the slice.
template <PackedKind KIND, int TMAX, int R>
__global__ void __launch_bounds__(kThreads) gemv_kernel(float* __restrict__ y, int64_t ldy, const float* __restrict__ x,
                                                        int64_t ldx, int T, PackedMatrix w, int kslice, bool x_aligned) {
    constexpr int C = kChunkCols<KIND>, F4 = C / 4, U = kUnroll<KIND, TMAX, R>;
    constexpr bool kSumX = KIND == PackedKind::Int4;  // Int8 has no bias term
    extern __shared__ float4 xs[];
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int64_t row0 = (int64_t(blockIdx.x) * kWarps + warp) * R;
    const int64_t nch = w.k / C;
    const PackedLayout lay = packed_layout(w);
    const int cpg = w.group / C;  // chunks per group
    const int slice4 = kslice / 4, slice_chunks = kslice / C;

    const uint8_t* rowp[R];
    const uint16_t* scp[R];
    const uint16_t* bip[R];
    bool rok[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        rok[r] = row0 + r < w.n;
        const int64_t row = rok[r] ? row0 + r : 0;
        rowp[r] = w.codes + lay.code_row(row);
        scp[r] = w.scales + lay.scale_row(row);
        bip[r] = w.biases ? w.biases + lay.scale_row(row) : nullptr;
    }
    float acc[R][TMAX];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < TMAX; ++t) acc[r][t] = 0.f;

    for (int64_t s0 = 0; s0 < nch; s0 += slice_chunks) {
        const int64_t c0 = s0 * C;
        const int64_t scols = w.k - c0 < kslice ? w.k - c0 : kslice;
        __syncthreads();  // the previous slice is no longer read
        for (int i = int(threadIdx.x); i < T * slice4; i += kThreads) {
            const int t = i / slice4, d = i - t * slice4;
            const int step = d / (F4 * 32), rem = d - step * F4 * 32, j = rem >> 5, l = rem & 31;
            const int64_t col = int64_t(step * 32 + l) * C + 4 * j;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (col < scols) {
                const float* p = x + t * ldx + c0 + col;
                if (x_aligned) v = __ldg(reinterpret_cast<const float4*>(p));
                else v = make_float4(__ldg(p), __ldg(p + 1), __ldg(p + 2), __ldg(p + 3));
            }
            xs[i] = v;
        }
        __syncthreads();
        // Steps this slice needs; slice_chunks / 32 is a multiple of U, so st + u stays inside it.
        const int steps = int((scols / C + 31) / 32);
        for (int st = 0; st < steps; st += U) {
            uint4 q[U][R];
            float sc[U][R], bi[U][R];
#pragma unroll
            for (int u = 0; u < U; ++u)
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int64_t ch = s0 + (st + u) * 32 + lane;
                    const bool ok = rok[r] && ch < nch;
                    const int64_t gi = lay.scale_group(ch / cpg);
                    q[u][r] = ok ? load_stream(rowp[r] + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
                    sc[u][r] = ok ? half_bits(__ldg(scp[r] + gi)) : 0.f;
                    if constexpr (kSumX) bi[u][r] = !ok ? 0.f : bip[r] ? half_bits(__ldg(bip[r] + gi)) : -8.f * sc[u][r];
                    else bi[u][r] = 0.f;
                }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                float sp[R][TMAX], sx[TMAX];
#pragma unroll
                for (int t = 0; t < TMAX; ++t) {
                    sx[t] = 0.f;
#pragma unroll
                    for (int r = 0; r < R; ++r) sp[r][t] = 0.f;
                }
                const float4* xb = xs + ((st + u) * F4) * 32 + lane;
#pragma unroll
                for (int wd = 0; wd < 4; ++wd) {
                    constexpr int E = KIND == PackedKind::Int4 ? 8 : 4;  // codes per word
                    float wv[R][E];
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint32_t word = wd == 0 ? q[u][r].x : wd == 1 ? q[u][r].y : wd == 2 ? q[u][r].z : q[u][r].w;
                        decode_word<KIND>(word, wv[r]);
                    }
#pragma unroll
                    for (int t = 0; t < TMAX; ++t) {
                        if (t >= T) break;
                        float xv[E];
#pragma unroll
                        for (int h = 0; h < E / 4; ++h) {
                            const float4 f = xb[t * slice4 + (wd * (E / 4) + h) * 32];
                            xv[4 * h] = f.x;
                            xv[4 * h + 1] = f.y;
                            xv[4 * h + 2] = f.z;
                            xv[4 * h + 3] = f.w;
                        }
#pragma unroll
                        for (int e = 0; e < E; ++e) {
                            if constexpr (kSumX) sx[t] += xv[e];
#pragma unroll
                            for (int r = 0; r < R; ++r) sp[r][t] = fmaf(wv[r][e], xv[e], sp[r][t]);
                        }
                    }
                }
#pragma unroll
                for (int r = 0; r < R; ++r)
#pragma unroll
                    for (int t = 0; t < TMAX; ++t) {
                        acc[r][t] = fmaf(sc[u][r], sp[r][t], acc[r][t]);
                        if constexpr (kSumX) acc[r][t] = fmaf(bi[u][r], sx[t], acc[r][t]);
                    }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < TMAX; ++t) {
            const float v = warp_sum(acc[r][t]);
            if (lane == 0 && rok[r] && t < T) y[t * ldy + row0 + r] = v;
        }
}

template <PackedKind KIND, int TMAX, int R>
cudaError_t launch(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                   cudaStream_t stream) {
    constexpr int C = kChunkCols<KIND>, U = kUnroll<KIND, TMAX, R>;
    const int64_t unit = int64_t(32) * U * C;  // columns one round of U steps covers
    const int64_t whole = (w.k + unit - 1) / unit * unit;
    const int64_t fit = kSmemBytes / (4 * T) / unit * unit;
    const int kslice = int(std::min(whole, fit));
    const size_t smem = size_t(T) * size_t(kslice) * sizeof(float);
    const bool aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    const int64_t blocks = (w.n + int64_t(kWarps) * R - 1) / (int64_t(kWarps) * R);
    gemv_kernel<KIND, TMAX, R><<<dim3(unsigned(blocks)), kThreads, smem, stream>>>(y, ldy, x, ldx, int(T), w, kslice,
                                                                                 aligned);
    return cudaGetLastError();
}

template <PackedKind KIND, int TMAX>
cudaError_t launch_rows(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    // Rows per warp: the most that still gives every SM a block (fewer x stagings per row); at
    // most 2 for 8 tokens (registers).
    const int64_t sms = gemv_sm_count();
    auto blocks = [&](int64_t r) { return (w.n + r * kWarps - 1) / (r * kWarps); };
    if constexpr (TMAX <= 4)
        if (blocks(4) >= sms) return launch<KIND, TMAX, 4>(y, ldy, x, ldx, T, w, stream);
    if (blocks(2) >= sms) return launch<KIND, TMAX, 2>(y, ldy, x, ldx, T, w, stream);
    return launch<KIND, TMAX, 1>(y, ldy, x, ldx, T, w, stream);
}

template <PackedKind KIND>
cudaError_t launch_kind(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    if (T <= 1) return launch_rows<KIND, 1>(y, ldy, x, ldx, T, w, stream);
    if (T <= 2) return launch_rows<KIND, 2>(y, ldy, x, ldx, T, w, stream);
    if (T <= 4) return launch_rows<KIND, 4>(y, ldy, x, ldx, T, w, stream);
    return launch_rows<KIND, 8>(y, ldy, x, ldx, T, w, stream);
}

}  // namespace

// Arguments already checked (fast_gemv.cpp).
cudaError_t launch_gemv_simt(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                             cudaStream_t stream) {
    return w.kind == PackedKind::Int4 ? launch_kind<PackedKind::Int4>(y, ldy, x, ldx, T, w, stream)
                                      : launch_kind<PackedKind::Int8>(y, ldy, x, ldx, T, w, stream);
}

}  // namespace tessera::cuda::fast::detail
