// Normalisation reference kernels: one block per row (or head), grid-stride over rows. The sum
// of squares is reduced in f32; the per-row scale is finished in double like the CPU ops
// (kernels/cpu/norm.cpp, gdn_norm.cpp) and the outputs are formed in the same order.
#include "kernels/cuda/ref_norm.h"

#include "kernels/cuda/pdl.cuh"
#include "kernels/cuda/ref_reduce.cuh"

namespace tessera::cuda::ref::detail {

namespace {

__device__ inline float silu(float v) { return v / (1.f + expf(-v)); }

// The columns c = threadIdx.x + i·blockDim.x of [0, n), in increasing i, in batches of kBatch:
// load(j, c) for a batch's columns, then use(j, c) for them — so a batch's loads are in flight
// together even where a store in use() may alias the next loads (y = x), instead of one memory
// latency a column. The order of the columns a thread sees is that of a plain strided loop.
// (For rows of hidden size; the per-head norms' rows of D ≤ 256 columns, one a thread, ran 1.5–2×
// slower this way on the H200 — l2_norm 38 against 25 us, rms_norm_gated 133 against 64 in a
// 2K prefill — and keep the plain loop.)
constexpr int kBatch = 8;
template <typename Load, typename Use>
__device__ __forceinline__ void for_columns(int64_t n, Load load, Use use) {
    const int64_t step = blockDim.x;
    for (int64_t base = threadIdx.x; base < n; base += kBatch * step) {
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
            if (base + j * step < n) load(j, base + j * step);
#pragma unroll
        for (int j = 0; j < kBatch; ++j)
            if (base + j * step < n) use(j, base + j * step);
    }
}

// yr[c] = xr[c] · inv · w[c] for a row (yr may be xr), a batch of columns loaded before stored.
__device__ __forceinline__ void scale_row(float* yr, const float* xr, const float* w, float inv, int64_t cols) {
    float xv[kBatch], wv[kBatch];
    for_columns(
        cols, [&](int j, int64_t c) { xv[j] = xr[c], wv[j] = w[c]; },
        [&](int j, int64_t c) { yr[c] = xv[j] * inv * wv[j]; });
}

// y[rows, cols] = x · rsqrt(mean(x²) + eps) · w. Every thread reads an element before it
// writes it, and the reduction's barriers order all reads before any write: y may alias x.
__global__ void rms_norm_kernel(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t rows,
                                int64_t cols, float eps) {
    __shared__ float scratch[32];
    pdl::wait();  // launched with PDL (pdl.cuh): x comes from the kernel before
    pdl::trigger();
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* xr = x + r * ldx;
        float* yr = y + r * ldy;
        const float ss = block_sum_squares(xr, cols, scratch);
        const float inv = rms_inverse(ss, cols, eps);
        scale_row(yr, xr, w, inv, cols);
    }
}

// rms_norm_kernel's arithmetic on head rows r = t·n + h of [T, n, D] views with their own token
// and head strides.
__global__ void rms_norm_heads_kernel(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                      int64_t x_head, const float* w, int64_t T, int64_t n_heads, int64_t D,
                                      float eps) {
    __shared__ float scratch[32];
    for (int64_t r = blockIdx.x; r < T * n_heads; r += gridDim.x) {
        const int64_t t = r / n_heads, h = r % n_heads;
        const float* xr = x + t * x_tok + h * x_head;
        float* yr = y + t * y_tok + h * y_head;
        const float ss = block_sum_squares(xr, D, scratch);
        const float inv = rms_inverse(ss, D, eps);
        scale_row(yr, xr, w, inv, D);
    }
}

// x += d, then rms_norm_kernel's arithmetic on the new x: each thread adds, squares and scales
// the same columns block_sum_squares gives it, so the result is bit for bit add + rms_norm.
__global__ void add_rms_norm_kernel(float* x, int64_t ldx, const float* d, int64_t ldd, float* y, int64_t ldy,
                                    const float* w, int64_t rows, int64_t cols, float eps) {
    __shared__ float scratch[32];
    pdl::wait();
    pdl::trigger();
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* xr = x + r * ldx;
        const float* dr = d + r * ldd;
        float* yr = y + r * ldy;
        float ss = 0.f;
        float xv[kBatch], dv[kBatch];
        for_columns(
            cols, [&](int j, int64_t c) { xv[j] = xr[c], dv[j] = dr[c]; },
            [&](int j, int64_t c) {
                const float v = xv[j] + dv[j];
                xr[c] = v;
                ss += v * v;
            });
        ss = block_sum(ss, scratch);
        const float inv = rms_inverse(ss, cols, eps);
        scale_row(yr, xr, w, inv, cols);
    }
}

// add_rms_norm_kernel with the row in registers (cols ≤ NV·THREADS): each thread keeps its x + d
// values and its weights (loaded before the wait: weights are no kernel's output), so the scaling
// needs no second read of x and w — one memory latency less on the decode path. With THREADS =
// kRowThreads, the same columns per thread in the same order, the same expressions: bit for bit
// the same result. The delta may come in `parts` parts part_stride floats apart (the GDN decode
// step's fused out-projection): x ← ((x + d[0]) + d[1]) + …, PB parts' loads in flight together.
template <int THREADS, int NV, int PB>
__global__ void __launch_bounds__(THREADS) add_rms_norm_regs_kernel(float* x, int64_t ldx, const float* d, int64_t ldd,
                                                                    int64_t part_stride, int parts, float* y,
                                                                    int64_t ldy, const float* w, int64_t rows,
                                                                    int64_t cols, float eps) {
    __shared__ float scratch[32];
    float wv[NV];
#pragma unroll
    for (int i = 0; i < NV; ++i) {
        const int64_t c = threadIdx.x + int64_t(i) * THREADS;
        wv[i] = c < cols ? w[c] : 0.f;
    }
    pdl::wait();
    pdl::trigger();
    for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
        float* xr = x + r * ldx;
        const float* dr = d + r * ldd;
        float* yr = y + r * ldy;
        float xv[NV];
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t c = threadIdx.x + int64_t(i) * THREADS;
            xv[i] = c < cols ? xr[c] : 0.f;
        }
        for (int p0 = 0; p0 < parts; p0 += PB) {
            float dv[PB][NV];
#pragma unroll
            for (int q = 0; q < PB; ++q)
#pragma unroll
                for (int i = 0; i < NV; ++i) {
                    const int64_t c = threadIdx.x + int64_t(i) * THREADS;
                    dv[q][i] = p0 + q < parts && c < cols ? dr[(p0 + q) * part_stride + c] : 0.f;
                }
#pragma unroll
            for (int q = 0; q < PB; ++q)
                if (p0 + q < parts)
#pragma unroll
                    for (int i = 0; i < NV; ++i) xv[i] = xv[i] + dv[q][i];
        }
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t c = threadIdx.x + int64_t(i) * THREADS;
            if (c >= cols) continue;
            xr[c] = xv[i];
            ss += xv[i] * xv[i];
        }
        ss = block_sum(ss, scratch);
        const float inv = rms_inverse(ss, cols, eps);
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t c = threadIdx.x + int64_t(i) * THREADS;
            if (c < cols) yr[c] = xv[i] * inv * wv[i];
        }
    }
}
// The parts' form: 1024 threads a row, 8 parts' loads in flight.
constexpr int kPartThreads = 1024, kPartBatch = 8;

// x[T, n_heads, D] in place: x · rsqrt(Σ x² + eps) · scale per head
__global__ void l2_norm_kernel(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads,
                               int64_t D, float eps, float scale) {
    __shared__ float scratch[32];
    for (int64_t r = blockIdx.x; r < T * n_heads; r += gridDim.x) {
        float* row = x + (r / n_heads) * tok_stride + (r % n_heads) * head_stride;
        const float ss = block_sum_squares(row, D, scratch);
        const float inv = float(1.0 / sqrt(double(ss) + double(eps)));
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) row[i] = row[i] * inv * scale;
    }
}

// The same with a warp a row, for D ≤ 32·NV (the GDN's D = 128: 4 values a lane): a block of
// kRowThreads holds 8 rows and needs no barrier, where the block-a-row kernel above left half its
// threads idle and waited on two barriers a row (49 µs for 2,048 tokens × 16 heads in a prefill).
template <int NV>
__global__ void l2_norm_warp_kernel(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads,
                                    int64_t D, float eps, float scale) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    for (int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < T * n_heads; r += warps) {
        float* row = x + (r / n_heads) * tok_stride + (r % n_heads) * head_stride;
        float v[NV], ss = 0.f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t c = lane + 32 * i;
            v[i] = c < D ? row[c] : 0.f;
            ss += v[i] * v[i];
        }
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float inv = float(1.0 / sqrt(double(ss) + double(eps)));
#pragma unroll
        for (int i = 0; i < NV; ++i)
            if (lane + 32 * i < D) row[lane + 32 * i] = v[i] * inv * scale;
    }
}

// y[T, n_heads, D] = w ⊙ (x · rsqrt(mean(x²) + eps)) ⊙ silu(z)
__global__ void rms_norm_gated_kernel(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                      int64_t x_head, const float* z, int64_t z_tok, int64_t z_head, const float* w,
                                      int64_t T, int64_t n_heads, int64_t D, float eps) {
    __shared__ float scratch[32];
    for (int64_t r = blockIdx.x; r < T * n_heads; r += gridDim.x) {
        const int64_t t = r / n_heads, h = r % n_heads;
        const float* xr = x + t * x_tok + h * x_head;
        const float* zr = z + t * z_tok + h * z_head;
        float* yr = y + t * y_tok + h * y_head;
        const float ss = block_sum_squares(xr, D, scratch);
        const float inv = rms_inverse(ss, D, eps);
        for (int64_t i = threadIdx.x; i < D; i += blockDim.x) yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
    }
}

// The same with a warp a row, for D ≤ 32·NV (as l2_norm_warp_kernel; 125 µs for 2,048 tokens × 32
// heads in a prefill with a block a row). y may be x or z: each value is read before its store.
template <int NV>
__global__ void rms_norm_gated_warp_kernel(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                           int64_t x_head, const float* z, int64_t z_tok, int64_t z_head,
                                           const float* w, int64_t T, int64_t n_heads, int64_t D, float eps) {
    const int lane = threadIdx.x & 31;
    const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
    for (int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; r < T * n_heads; r += warps) {
        const int64_t t = r / n_heads, h = r % n_heads;
        const float* xr = x + t * x_tok + h * x_head;
        const float* zr = z + t * z_tok + h * z_head;
        float* yr = y + t * y_tok + h * y_head;
        float v[NV], g[NV], ss = 0.f;
#pragma unroll
        for (int i = 0; i < NV; ++i) {
            const int64_t c = lane + 32 * i;
            v[i] = c < D ? xr[c] : 0.f;
            g[i] = c < D ? zr[c] : 0.f;
            ss += v[i] * v[i];
        }
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float inv = rms_inverse(ss, D, eps);
#pragma unroll
        for (int i = 0; i < NV; ++i)
            if (lane + 32 * i < D) yr[lane + 32 * i] = w[lane + 32 * i] * (v[i] * inv) * silu(g[i]);
    }
}

}  // namespace

cudaError_t launch_rms_norm(float* y, int64_t ldy, const float* x, int64_t ldx, const float* w, int64_t rows,
                            int64_t cols, float eps, cudaStream_t stream) {
    return pdl::launch(rms_norm_kernel, grid_for(rows, 1), kRowThreads, 0, stream, y, ldy, x, ldx, w, rows, cols, eps);
}

cudaError_t launch_rms_norm_heads(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                  int64_t x_head, const float* w, int64_t T, int64_t n_heads, int64_t D, float eps,
                                  cudaStream_t stream) {
    rms_norm_heads_kernel<<<grid_for(T * n_heads, 1), kRowThreads, 0, stream>>>(y, y_tok, y_head, x, x_tok, x_head, w,
                                                                                T, n_heads, D, eps);
    return cudaGetLastError();
}

cudaError_t launch_add_rms_norm(float* x, int64_t ldx, const float* d, int64_t ldd, float* y, int64_t ldy,
                                const float* w, int64_t rows, int64_t cols, float eps, cudaStream_t stream, int parts,
                                int64_t part_stride) {
    const unsigned grid = grid_for(rows, 1);
    auto regs = [&](auto kernel, int threads) {
        return pdl::launch(kernel, grid, threads, 0, stream, x, ldx, d, ldd, part_stride, parts, y, ldy, w, rows, cols,
                           eps);
    };
    if (parts > 1) {
        if (cols <= 2 * kPartThreads) return regs(add_rms_norm_regs_kernel<kPartThreads, 2, kPartBatch>, kPartThreads);
        if (cols <= 4 * kPartThreads) return regs(add_rms_norm_regs_kernel<kPartThreads, 4, kPartBatch>, kPartThreads);
        return regs(add_rms_norm_regs_kernel<kPartThreads, 16, 1>, kPartThreads);  // 64 registers
    }
    if (cols <= 8 * kRowThreads) return regs(add_rms_norm_regs_kernel<kRowThreads, 8, 1>, kRowThreads);
    if (cols <= 32 * kRowThreads) return regs(add_rms_norm_regs_kernel<kRowThreads, 32, 1>, kRowThreads);
    return pdl::launch(add_rms_norm_kernel, grid, kRowThreads, 0, stream, x, ldx, d, ldd, y, ldy, w, rows, cols, eps);
}

cudaError_t launch_l2_norm(float* x, int64_t tok_stride, int64_t head_stride, int64_t T, int64_t n_heads, int64_t D,
                           float eps, float scale, cudaStream_t stream) {
    constexpr int kRowsPerBlock = kRowThreads / 32;
    if (D <= 128) {
        l2_norm_warp_kernel<4><<<grid_for(T * n_heads, kRowsPerBlock), kRowThreads, 0, stream>>>(
            x, tok_stride, head_stride, T, n_heads, D, eps, scale);
        return cudaGetLastError();
    }
    if (D <= 256) {
        l2_norm_warp_kernel<8><<<grid_for(T * n_heads, kRowsPerBlock), kRowThreads, 0, stream>>>(
            x, tok_stride, head_stride, T, n_heads, D, eps, scale);
        return cudaGetLastError();
    }
    l2_norm_kernel<<<grid_for(T * n_heads, 1), kRowThreads, 0, stream>>>(x, tok_stride, head_stride, T, n_heads, D,
                                                                         eps, scale);
    return cudaGetLastError();
}

cudaError_t launch_rms_norm_gated(float* y, int64_t y_tok, int64_t y_head, const float* x, int64_t x_tok,
                                  int64_t x_head, const float* z, int64_t z_tok, int64_t z_head, const float* w,
                                  int64_t T, int64_t n_heads, int64_t D, float eps, cudaStream_t stream) {
    constexpr int kRowsPerBlock = kRowThreads / 32;
    if (D <= 128) {
        rms_norm_gated_warp_kernel<4><<<grid_for(T * n_heads, kRowsPerBlock), kRowThreads, 0, stream>>>(
            y, y_tok, y_head, x, x_tok, x_head, z, z_tok, z_head, w, T, n_heads, D, eps);
        return cudaGetLastError();
    }
    if (D <= 256) {
        rms_norm_gated_warp_kernel<8><<<grid_for(T * n_heads, kRowsPerBlock), kRowThreads, 0, stream>>>(
            y, y_tok, y_head, x, x_tok, x_head, z, z_tok, z_head, w, T, n_heads, D, eps);
        return cudaGetLastError();
    }
    rms_norm_gated_kernel<<<grid_for(T * n_heads, 1), kRowThreads, 0, stream>>>(
        y, y_tok, y_head, x, x_tok, x_head, z, z_tok, z_head, w, T, n_heads, D, eps);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::ref::detail
