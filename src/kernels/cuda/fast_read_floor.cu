// fast_read_floor.h's kernel: a grid-stride loop of 128-bit streamed loads, 4 a thread in flight.
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/fast_device.cuh"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kThreads = 256, kUnroll = 4;

__global__ void __launch_bounds__(kThreads) read_floor_kernel(const uint8_t* __restrict__ p, int64_t n16,
                                                              float* __restrict__ sink) {
    const int64_t stride = int64_t(gridDim.x) * kThreads;
    uint32_t acc = 0;
    int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < n16; i += kUnroll * stride) {
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = dev::load_stream(p + 16 * (i + u * stride));
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = dev::load_stream(p + 16 * i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) *sink = 1.f;  // practically never: the loads cannot be dropped
}


// The decode GEMV's weight reads without its math (a diagnostic, bench_fast_gemv): the grid,
// warps and loads in flight of MmaRows (MT = 1, Int4, G = 32) — a block of kWarps warps on 16 rows,
// warp w on k-tiles w, w + kWarps, …, lane (g, t) reading 16 bytes of chunk t of rows g and g + 8
// and their two f16 scales, two batches of two k-tiles in flight. kTiled reads the same bytes as
// if every (16-row, k-tile) block were stored contiguously: 1 KB of codes (each load instruction
// of a warp 512 contiguous bytes), then its 128 bytes of scales (one 4-byte load a lane).
constexpr int kWarps = 8, kU = 2;

template <bool kTiled>
__global__ void __launch_bounds__(kWarps * 32, 2)
    read_pattern_kernel(const uint8_t* __restrict__ codes, const uint16_t* __restrict__ scales, int64_t row_bytes,
                        float* __restrict__ sink) {
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5), g = lane >> 2, t = lane & 3;
    const int nkt = int(row_bytes / 64), gpr = int(row_bytes / 16);
    const int64_t row0 = int64_t(blockIdx.x) * 16;
    const int nj = warp < nkt ? (nkt - warp + kWarps - 1) / kWarps : 0;
    auto load = [&](uint4 (&q)[2], uint32_t& s, int j) {
        const int kt = warp + kWarps * j;
        if (j >= nj) {
            q[0] = q[1] = make_uint4(0, 0, 0, 0);
            s = 0;
            return;
        }
        if constexpr (kTiled) {
            const int64_t tile = int64_t(blockIdx.x) * nkt + kt;
            q[0] = dev::load_stream(codes + tile * 1024 + 16 * lane);
            q[1] = dev::load_stream(codes + tile * 1024 + 512 + 16 * lane);
            s = __ldg(reinterpret_cast<const uint32_t*>(scales + tile * 64) + lane);
        } else {
            const int ch = kt * 4 + t;
            uint32_t sh[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int64_t r = row0 + g + 8 * h;
                q[h] = dev::load_stream(codes + r * row_bytes + 16 * int64_t(ch));
                sh[h] = __ldg(scales + r * gpr + ch);
            }
            s = sh[0] | sh[1] << 16;
        }
    };
    auto fold = [](const uint4 (&q)[2], uint32_t s) { return q[0].x ^ q[0].y ^ q[0].z ^ q[0].w ^ q[1].x ^ q[1].y ^ q[1].z ^ q[1].w ^ s; };
    uint4 qa[kU][2], qb[kU][2];
    uint32_t sa[kU], sb[kU], acc = 0;
#pragma unroll
    for (int u = 0; u < kU; ++u) load(qa[u], sa[u], u);
    for (int j = 0; j < nj; j += 2 * kU) {
#pragma unroll
        for (int u = 0; u < kU; ++u) load(qb[u], sb[u], j + kU + u);
#pragma unroll
        for (int u = 0; u < kU; ++u) acc ^= fold(qa[u], sa[u]);
        if (j + kU < nj) {
#pragma unroll
            for (int u = 0; u < kU; ++u) load(qa[u], sa[u], j + 2 * kU + u);
#pragma unroll
            for (int u = 0; u < kU; ++u) acc ^= fold(qb[u], sb[u]);
        }
    }
    if (acc == 0x9e3779b9u) *sink = 1.f;
}

}  // namespace

cudaError_t launch_read_floor(const void* p, int64_t n16, int blocks, float* sink, cudaStream_t stream) {
    read_floor_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(static_cast<const uint8_t*>(p), n16, sink);
    return cudaGetLastError();
}

cudaError_t launch_read_pattern(const uint8_t* codes, const uint16_t* scales, int64_t n, int64_t row_bytes, bool tiled,
                                int smem, float* sink, cudaStream_t stream) {
    auto* k = tiled ? read_pattern_kernel<true> : read_pattern_kernel<false>;
    if (cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem); e != cudaSuccess)
        return e;
    k<<<unsigned(n / 16), kWarps * 32, size_t(smem), stream>>>(codes, scales, row_bytes, sink);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
