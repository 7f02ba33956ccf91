// Packed rows to f32: one block per output row, each thread a word of codes (8 Int4 or 4 Int8
// columns) at a time; w = scale · code + bias (one FMA, as the GEMV's per-group form).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_embed.h"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kThreads = 256;

using dev::half_bits;

__device__ __forceinline__ void put(float* p, float v) { *p = v; }
__device__ __forceinline__ void put(uint16_t* p, float v) { *p = __bfloat16_as_ushort(__float2bfloat16_rn(v)); }

// Out: float, or uint16_t for bf16 bits (rounded to nearest even once, from the f32 value).
template <typename Out>
__global__ void dequant_rows_kernel(Out* __restrict__ y, int64_t ldy, PackedMatrix w, const int32_t* __restrict__ ids) {
    const int64_t i = blockIdx.x;
    Out* out = y + i * ldy;
    const int64_t row = ids ? int64_t(ids[i]) : i;
    const bool int4 = w.kind == PackedKind::Int4;
    const int per_word = int4 ? 8 : 4;
    const int64_t words = w.k / per_word;
    if (row < 0 || row >= w.n) {
        for (int64_t c = threadIdx.x; c < w.k; c += kThreads) put(out + c, __int_as_float(0x7fc00000));
        return;
    }
    const PackedLayout lay = packed_layout(w);
    const uint8_t* codes = w.codes + lay.code_row(row);
    const uint16_t* sc = w.scales + lay.scale_row(row);
    const uint16_t* bi = w.biases ? w.biases + lay.scale_row(row) : nullptr;
    for (int64_t wd = threadIdx.x; wd < words; wd += kThreads) {
        // Word wd is word wd % 4 of 16-byte chunk wd / 4 (either order, packed_weight.h).
        const uint32_t word = *reinterpret_cast<const uint32_t*>(codes + lay.chunk(wd >> 2) + 4 * (wd & 3));
        const int64_t c0 = wd * per_word, g = lay.scale_group(c0 / w.group);  // a word never straddles groups
        const float s = half_bits(sc[g]);
        if (int4) {
            const float b = bi ? half_bits(bi[g]) : -8.f * s;
#pragma unroll
            for (int e = 0; e < 8; ++e) put(out + c0 + e, __fmaf_rn(s, float((word >> (4 * e)) & 0xF), b));
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) put(out + c0 + e, s * float(int8_t((word >> (8 * e)) & 0xFF)));
        }
    }
}

}  // namespace

cudaError_t launch_dequant_rows(float* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids, int64_t rows,
                                cudaStream_t stream) {
    dequant_rows_kernel<float><<<dim3(unsigned(rows)), kThreads, 0, stream>>>(y, ldy, w, ids);
    return cudaGetLastError();
}

cudaError_t launch_dequant_rows_bf16(uint16_t* y, int64_t ldy, const PackedMatrix& w, const int32_t* ids, int64_t rows,
                                     cudaStream_t stream) {
    dequant_rows_kernel<uint16_t><<<dim3(unsigned(rows)), kThreads, 0, stream>>>(y, ldy, w, ids);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
