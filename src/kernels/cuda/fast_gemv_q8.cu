// Kernels of the int8-x decode GEMV (fast_gemv_q8.h): x quantized per 32 columns, then one warp
// per row (R rows when K is short) streaming 16-byte chunks of codes, dp4a per 32-bit word.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gemv_q8.h"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr uint32_t kLow = 0x0F0F0F0Fu;

__device__ __forceinline__ int dot4(uint32_t a, uint32_t b, int c) { return __dp4a(int(a), int(b), c); }

// Step 1: warp (t, g) = item → 32 int8 codes of x[t, 32g .. 32g + 31] and (dx, dx·Σq).
// Int4 layout: plane A (bytes 0..15 of each group) [T, K/2], then plane B (bytes 16..31).
template <PackedKind KIND>
__global__ void __launch_bounds__(kThreads) quantize_x_kernel(const float* __restrict__ x, int64_t ldx, int T,
                                                              int64_t K, uint8_t* __restrict__ codes,
                                                              float2* __restrict__ stats) {
    const int64_t ng = K / 32, item = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (item >= int64_t(T) * ng) return;
    const int lane = int(threadIdx.x & 31);
    const int64_t t = item / ng, g = item - t * ng;
    const float v = x[t * ldx + g * 32 + lane];
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const int q = amax > 0.f ? __float2int_rn(v * (127.f / amax)) : 0;
    int qs = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) qs += __shfl_xor_sync(0xffffffffu, qs, o);
    const int slot = gemv_q8_x_slot(KIND, lane);
    if constexpr (KIND == PackedKind::Int4) {
        uint8_t* plane = codes + (slot < 16 ? 0 : int64_t(T) * (K / 2));
        plane[t * (K / 2) + g * 16 + (slot & 15)] = uint8_t(int8_t(q));
    } else {
        codes[t * K + g * 32 + slot] = uint8_t(int8_t(q));
    }
    const float dx = amax / 127.f;
    if (lane == 0) stats[t * ng + g] = make_float2(dx, dx * float(qs));
}

// Step 2: rows row0 .. row0 + R − 1 for warp (blockIdx.x, warp); all T ≤ TT tokens at once.
template <PackedKind KIND, int TT, int R>
__global__ void __launch_bounds__(kThreads) gemv_q8_kernel(float* __restrict__ y, int64_t ldy,
                                                           const uint8_t* __restrict__ xq,
                                                           const float2* __restrict__ xs, int T, PackedMatrix w) {
    constexpr int U = 8 / R;  // chunks in flight per lane and row
    constexpr bool kInt4 = KIND == PackedKind::Int4;
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    const int64_t row0 = (int64_t(blockIdx.x) * kWarps + warp) * R;
    if (row0 >= w.n) return;  // uniform over the warp
    const int64_t nch = kInt4 ? w.k / 32 : w.k / 16;
    const int64_t ng = w.k / 32, plane = kInt4 ? w.k / 2 : w.k;
    const PackedLayout lay = packed_layout(w);
    const int cpg = w.group / (kInt4 ? 32 : 16);  // chunks per weight group
    const uint8_t* xb_base = xq + int64_t(T) * (w.k / 2);

    const uint8_t* rowp[R];
    const uint16_t* scp[R];
    const uint16_t* bip[R];
    bool rok[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
        rok[r] = row0 + r < w.n;
        const int64_t row = rok[r] ? row0 + r : row0;
        rowp[r] = w.codes + lay.code_row(row);
        scp[r] = w.scales + lay.scale_row(row);
        bip[r] = w.biases ? w.biases + lay.scale_row(row) : nullptr;
    }
    float acc[R][TT];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < TT; ++t) acc[r][t] = 0.f;

    for (int64_t base = 0; base < nch; base += 32 * U) {
        uint4 q[R][U];
        float sc[R][U], bi[R][U];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const int64_t ch = base + u * 32 + lane;
                const bool ok = rok[r] && ch < nch;
                q[r][u] = ok ? load_stream(rowp[r] + lay.chunk(ch)) : make_uint4(0, 0, 0, 0);
                const int64_t gi = lay.scale_group(ch / cpg);
                sc[r][u] = ok ? half_bits(__ldg(scp[r] + gi)) : 0.f;
                if constexpr (kInt4) bi[r][u] = !ok ? 0.f : bip[r] ? half_bits(__ldg(bip[r] + gi)) : -8.f * sc[r][u];
                else bi[r][u] = 0.f;
            }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t ch = base + u * 32 + lane;
            if (ch >= nch) break;
#pragma unroll
            for (int t = 0; t < TT; ++t) {
                if (t >= T) break;
                if constexpr (kInt4) {
                    const uint4 xa = __ldg(reinterpret_cast<const uint4*>(xq + t * plane + ch * 16));
                    const uint4 xb = __ldg(reinterpret_cast<const uint4*>(xb_base + t * plane + ch * 16));
                    const float2 st = __ldg(xs + t * ng + ch);
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint4 c = q[r][u];
                        int s = dot4(c.x & kLow, xa.x, 0);
                        s = dot4((c.x >> 4) & kLow, xa.y, s);
                        s = dot4(c.y & kLow, xa.z, s);
                        s = dot4((c.y >> 4) & kLow, xa.w, s);
                        s = dot4(c.z & kLow, xb.x, s);
                        s = dot4((c.z >> 4) & kLow, xb.y, s);
                        s = dot4(c.w & kLow, xb.z, s);
                        s = dot4((c.w >> 4) & kLow, xb.w, s);
                        acc[r][t] = fmaf(sc[r][u], st.x * float(s), fmaf(bi[r][u], st.y, acc[r][t]));
                    }
                } else {
                    const uint4 xa = __ldg(reinterpret_cast<const uint4*>(xq + t * plane + ch * 16));
                    const float dx = __ldg(xs + t * ng + ch / 2).x;
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint4 c = q[r][u];
                        int s = dot4(c.x, xa.x, 0);
                        s = dot4(c.y, xa.y, s);
                        s = dot4(c.z, xa.z, s);
                        s = dot4(c.w, xa.w, s);
                        acc[r][t] = fmaf(sc[r][u], dx * float(s), acc[r][t]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < TT; ++t) {
            float v = acc[r][t];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0 && rok[r] && t < T) y[t * ldy + row0 + r] = v;
        }
}

template <PackedKind KIND, int TT, int R>
cudaError_t launch(float* y, int64_t ldy, const uint8_t* xq, const float2* xs, int64_t T, const PackedMatrix& w,
                   cudaStream_t stream) {
    const int64_t blocks = (w.n + int64_t(kWarps) * R - 1) / (int64_t(kWarps) * R);
    gemv_q8_kernel<KIND, TT, R><<<dim3(unsigned(blocks)), kThreads, 0, stream>>>(y, ldy, xq, xs, int(T), w);
    return cudaGetLastError();
}

template <PackedKind KIND, int TT>
cudaError_t launch_rows(float* y, int64_t ldy, const uint8_t* xq, const float2* xs, int64_t T, const PackedMatrix& w,
                        cudaStream_t stream) {
    // Rows per warp: enough chunks in flight per lane (8) when a row is short.
    const int64_t nch = KIND == PackedKind::Int4 ? w.k / 32 : w.k / 16, per_lane = (nch + 31) / 32;
    if (per_lane >= 8) return launch<KIND, TT, 1>(y, ldy, xq, xs, T, w, stream);
    if (per_lane >= 4) return launch<KIND, TT, 2>(y, ldy, xq, xs, T, w, stream);
    return launch<KIND, TT, 4>(y, ldy, xq, xs, T, w, stream);
}

template <PackedKind KIND>
cudaError_t launch_kind(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                        void* scratch, cudaStream_t stream) {
    auto* xq = static_cast<uint8_t*>(scratch);
    const size_t codes = (size_t(T * w.k) + 255) / 256 * 256;
    auto* xs = reinterpret_cast<float2*>(xq + codes);
    const int64_t items = T * (w.k / 32);
    quantize_x_kernel<KIND><<<dim3(unsigned((items + kWarps - 1) / kWarps)), kThreads, 0, stream>>>(x, ldx, int(T), w.k,
                                                                                                     xq, xs);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
    if (T <= 1) return launch_rows<KIND, 1>(y, ldy, xq, xs, T, w, stream);
    if (T <= 2) return launch_rows<KIND, 2>(y, ldy, xq, xs, T, w, stream);
    if (T <= 4) return launch_rows<KIND, 4>(y, ldy, xq, xs, T, w, stream);
    return launch_rows<KIND, 8>(y, ldy, xq, xs, T, w, stream);
}

}  // namespace

// Arguments already checked (fast_gemv_q8.cpp).
cudaError_t launch_gemv_q8(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                           void* scratch, cudaStream_t stream) {
    return w.kind == PackedKind::Int4 ? launch_kind<PackedKind::Int4>(y, ldy, x, ldx, T, w, scratch, stream)
                                      : launch_kind<PackedKind::Int8>(y, ldy, x, ldx, T, w, scratch, stream);
}

}  // namespace tessera::cuda::fast::detail
