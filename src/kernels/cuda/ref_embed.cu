// Embedding gather: one block per token, its threads striding over the row; each element is
// decoded on its own from its block, with the same f32 operations as formats/quants.cpp and
// quants_k.cpp (products rounded one by one where the CPU codec turns FMA contraction off).
#include "kernels/cuda/ref_embed.h"

#include "core/half.h"
#include "core/quant_blocks.h"
#include "kernels/cuda/ref_reduce.cuh"

namespace tessera::cuda::ref::detail {

namespace {

// Element c of a row of each dtype, as f32.
struct F32Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const { return reinterpret_cast<const float*>(row)[c]; }
};
struct F16Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        return f16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
    }
};
struct Bf16Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        return bf16_to_f32(reinterpret_cast<const uint16_t*>(row)[c]);
    }
};
// y[j] = d*((qs[j]&15)-8), y[j+16] = d*((qs[j]>>4)-8)
struct Q4_0Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        const BlockQ4_0& b = reinterpret_cast<const BlockQ4_0*>(row)[c / QK4_0];
        const int j = int(c % QK4_0), half = QK4_0 / 2;
        const int q = j < half ? (b.qs[j] & 0x0F) : (b.qs[j - half] >> 4);
        return float(q - 8) * f16_to_f32(b.d);
    }
};
// y = d*q
struct Q8_0Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(row)[c / QK8_0];
        return float(b.qs[c % QK8_0]) * f16_to_f32(b.d);
    }
};
// 8 sub-blocks of 32 in pairs sharing 32 bytes of qs (low nibbles, then high): y = d*sc*q - dmin*m
struct Q4_KRow {
    __device__ static void scale_min(int j, const uint8_t* q, int* sc, int* m) {  // formats/quants.h q4_k_scale_min
        if (j < 4) {
            *sc = q[j] & 63;
            *m = q[j + 4] & 63;
        } else {
            *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
            *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
        }
    }
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        const BlockQ4_K& b = reinterpret_cast<const BlockQ4_K*>(row)[c / QK_K];
        const int e = int(c % QK_K), pair = e / 64, l = e % 32;
        const bool high = (e % 64) >= 32;
        int sc, m;
        scale_min(2 * pair + (high ? 1 : 0), b.scales, &sc, &m);
        const float d = f16_to_f32(b.d) * float(sc), mn = f16_to_f32(b.dmin) * float(m);
        const uint8_t qb = b.qs[32 * pair + l];
        const int q = high ? (qb >> 4) : (qb & 0xF);
        return __fsub_rn(__fmul_rn(d, float(q)), mn);  // no FMA: the CPU codec rounds each step
    }
};
// Two halves of 128; each quarter of a half takes 32 elements: y = d*sc*(q - 32)
struct Q6_KRow {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        const BlockQ6_K& b = reinterpret_cast<const BlockQ6_K*>(row)[c / QK_K];
        const int e = int(c % QK_K), n = e / 128, quarter = (e % 128) / 32, l = e % 32;
        const uint8_t* ql = b.ql + 64 * n;
        const uint8_t* qh = b.qh + 32 * n;
        const int8_t* sc = b.scales + 8 * n;
        const uint8_t lo = ql[l + (quarter & 1) * 32];
        const int low4 = quarter < 2 ? (lo & 0xF) : (lo >> 4);
        const int q = (low4 | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
        return f16_to_f32(b.d) * float(sc[l / 16 + 2 * quarter]) * float(q);
    }
};
// E2M1 codes times two, scaled by half the block's E8M0 power of two
__constant__ int8_t kMxfp4Lut[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
struct Mxfp4Row {
    __device__ float operator()(const uint8_t* row, int64_t c) const {
        const BlockMXFP4& b = reinterpret_cast<const BlockMXFP4*>(row)[c / QK_MXFP4];
        const int j = int(c % QK_MXFP4), half = QK_MXFP4 / 2;
        const int q = j < half ? (b.qs[j] & 0x0F) : (b.qs[j - half] >> 4);
        const uint32_t bits = b.e < 2 ? uint32_t(0x00200000) << b.e : uint32_t(b.e - 1) << 23;
        return float(kMxfp4Lut[q]) * bits_to_f32(bits);
    }
};

// y[T, H] = Row(table[ids[t]]); bad ids give a NaN row
template <typename Row>
__global__ void embed_kernel(float* y, int64_t ldy, const uint8_t* table, int64_t table_stride, int64_t n_rows,
                             const int32_t* ids, int64_t T, int64_t H) {
    for (int64_t t = blockIdx.x; t < T; t += gridDim.x) {
        const int32_t id = ids[t];
        float* yr = y + t * ldy;
        if (id < 0 || id >= n_rows) {
            for (int64_t c = threadIdx.x; c < H; c += blockDim.x) yr[c] = NAN;
            continue;
        }
        const uint8_t* row = table + int64_t(id) * table_stride;
        for (int64_t c = threadIdx.x; c < H; c += blockDim.x) yr[c] = Row{}(row, c);
    }
}

template <typename Row>
cudaError_t launch(float* y, int64_t ldy, const void* table, int64_t table_stride, int64_t n_rows,
                   const int32_t* ids, int64_t T, int64_t H, cudaStream_t stream) {
    embed_kernel<Row><<<grid_for(T, 1), kRowThreads, 0, stream>>>(y, ldy, static_cast<const uint8_t*>(table),
                                                                   table_stride, n_rows, ids, T, H);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_embed(float* y, int64_t ldy, const void* table, DType dtype, int64_t table_stride,
                         int64_t n_rows, const int32_t* ids, int64_t T, int64_t H, cudaStream_t stream) {
    switch (dtype) {
        case DType::F32: return launch<F32Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::F16: return launch<F16Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::BF16: return launch<Bf16Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::Q4_0: return launch<Q4_0Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::Q8_0: return launch<Q8_0Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::Q4_K: return launch<Q4_KRow>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::Q6_K: return launch<Q6_KRow>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        case DType::MXFP4: return launch<Mxfp4Row>(y, ldy, table, table_stride, n_rows, ids, T, H, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::ref::detail
