// Device helpers shared by the kernel pack's .cu files: streamed 128-bit weight loads, f16 bits,
// exact code decoding, warp reductions, the decode GEMVs' register pipeline, flags between blocks.
// Header-only, device code only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast::dev {

// 16 bytes of weights read once: through L2, not kept in L1.
__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

// 8 consecutive floats of x (activations: through L1): two 16-byte loads when p is 16-byte
// aligned, else eight.
__device__ __forceinline__ void load8(const float* p, bool aligned, float (&v)[8]) {
    if (aligned) {
        const float4 a = __ldg(reinterpret_cast<const float4*>(p));
        const float4 b = __ldg(reinterpret_cast<const float4*>(p + 4));
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = __ldg(p + e);
    }
}

__device__ __forceinline__ float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// Byte k of `bytes` (0..255) as 2²³ + byte, an exact float; subtracting 2²³ leaves the byte.
__device__ __forceinline__ float byte_f(uint32_t bytes, uint32_t k) {
    return __uint_as_float(__byte_perm(bytes, 0x4B000000u, 0x7440u | k));
}

// The 8 (Int4: 0..15) or 4 (Int8: −128..127) codes of one 32-bit word as floats, in column order.
template <PackedKind KIND>
__device__ __forceinline__ void decode_word(uint32_t word, float* out) {
    if constexpr (KIND == PackedKind::Int4) {
        const uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;  // columns 2j, 2j + 1
#pragma unroll
        for (uint32_t j = 0; j < 4; ++j) {
            out[2 * j] = byte_f(lo, j) - 8388608.f;
            out[2 * j + 1] = byte_f(hi, j) - 8388608.f;
        }
    } else {
        const uint32_t u = word ^ 0x80808080u;  // int8 + 128
#pragma unroll
        for (uint32_t j = 0; j < 4; ++j) out[j] = byte_f(u, j) - 8388736.f;  // 2²³ + 128
    }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// A warp's nj k-tiles through registers in two batches of U, one loading while the other is
// computed, swapping roles without register copies (the row-tile decode GEMVs). cur holds tiles
// 0 … U − 1 already (loaded by the caller, before its pdl::wait); load(tile, j) must mask j ≥ nj,
// compute(tile, j) runs for j < nj only.
template <int U, typename Tile, typename Load, typename Compute>
__device__ __forceinline__ void ping_pong_tiles(int nj, Tile (&cur)[U], Tile (&nxt)[U], Load&& load,
                                                Compute&& compute) {
    auto step = [&](Tile(&ld)[U], int jl, Tile(&cp)[U], int jc) {
#pragma unroll
        for (int u = 0; u < U; ++u) load(ld[u], jl + u);
#pragma unroll
        for (int u = 0; u < U; ++u)
            if (jc + u < nj) compute(cp[u], jc + u);
    };
    for (int j = 0; j < nj; j += 2 * U) {
        step(nxt, j + U, cur, j);
        if (j + U < nj) step(cur, j + 2 * U, nxt, j + U);
    }
}

// Exclusive prefix sum of v over a block of 32·WARPS threads, in thread order; *total gets the
// block's sum. `sums` (shared, WARPS + 1 entries) may still be read by a previous scan on entry
// (a barrier comes first).
template <int WARPS, typename T>
__device__ T block_exclusive_scan(T v, T* sums, T* total) {
    const int lane = int(threadIdx.x & 31), warp = int(threadIdx.x >> 5);
    T incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    __syncthreads();
    if (lane == 31) sums[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const T s = lane < WARPS ? sums[lane] : T(0);
        T si = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T n = __shfl_up_sync(0xffffffffu, si, o);
            if (lane >= o) si += n;
        }
        if (lane < WARPS) sums[lane] = si - s;  // exclusive per warp
        if (lane == WARPS - 1) sums[WARPS] = si;
    }
    __syncthreads();
    *total = sums[WARPS];
    return sums[warp] + incl - v;
}

// ---- a flag one block raises and blocks of another kernel wait for (GPU scope) ----

// Stores v with release semantics: the calling thread's earlier writes — and, behind a block
// barrier that each writer crossed after its own __threadfence(), its block's — are visible to a
// thread whose flag_acquire reads v.
__device__ __forceinline__ void flag_release(uint32_t* f, uint32_t v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(v) : "memory");
}
// Adds v with release semantics (as flag_release orders what came before): a counter many blocks raise.
__device__ __forceinline__ void flag_add_release(uint32_t* f, uint32_t v) {
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(f), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t flag_acquire(const uint32_t* f) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
    return v;
}
// Orders generic-proxy accesses of global memory with the async proxy's (TMA): after a writer's
// stores, and between a reader's flag_acquire and its bulk copies of what the flag guards.
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

}  // namespace tessera::cuda::fast::dev
