// Dequantization to bf16: one thread per output element, a grid-stride loop over rows * cols.
// Every multiply and add is an explicit round-to-nearest intrinsic (__fmul_rn / __fsub_rn), which
// nvcc never contracts into an FMA, so each value is bit-identical to the CPU codecs (compiled
// with fp-contract off).
#include "kernels/cuda/ref_dequant.h"

#include "core/half.h"
#include "core/quant_blocks.h"

namespace tessera::cuda::ref::detail {

namespace {

// Element j (0..31) of a Q4_0 block: d * ((nibble) - 8); low nibbles hold 0..15, high 16..31.
struct DequantQ4_0 {
    static constexpr int kBlockElems = QK4_0;
    using Block = BlockQ4_0;
    __device__ static float value(const Block& b, int j) {
        const int q = j < QK4_0 / 2 ? (b.qs[j] & 0x0F) : (b.qs[j - QK4_0 / 2] >> 4);
        return __fmul_rn(float(q - 8), f16_to_f32(b.d));
    }
};

struct DequantQ8_0 {
    static constexpr int kBlockElems = QK8_0;
    using Block = BlockQ8_0;
    __device__ static float value(const Block& b, int j) { return __fmul_rn(float(b.qs[j]), f16_to_f32(b.d)); }
};

// MXFP4: E2M1 code times two, times half the E8M0 power of two (mxfp4_e8m0_to_f32_half).
struct DequantMxfp4 {
    static constexpr int kBlockElems = QK_MXFP4;
    using Block = BlockMXFP4;
    __device__ static float value(const Block& b, int j) {
        constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
        const int q = j < QK_MXFP4 / 2 ? (b.qs[j] & 0x0F) : (b.qs[j - QK_MXFP4 / 2] >> 4);
        const uint32_t bits = b.e < 2 ? uint32_t(0x00200000) << b.e : uint32_t(b.e - 1) << 23;
        return __fmul_rn(float(kValues[q]), bits_to_f32(bits));
    }
};

// Q4_K: element j of the 256 sits in sub-block sb = j / 32 (6-bit scale sc, min m); 64-element
// chunk c = j / 64 holds the low nibbles of qs[32c, 32c + 32) then their high nibbles.
// value = (d * sc) * q - (dmin * m)   (quants_k.cpp: d1 * q - m1).
struct DequantQ4_K {
    static constexpr int kBlockElems = QK_K;
    using Block = BlockQ4_K;
    __device__ static float value(const Block& b, int j) {
        const int sb = j / 32, c = j / 64, l = j % 32;
        const uint8_t* s = b.scales;
        uint8_t sc, m;  // ggml get_scale_min_k4
        if (sb < 4) {
            sc = s[sb] & 63;
            m = s[sb + 4] & 63;
        } else {
            sc = uint8_t((s[sb + 4] & 0xF) | ((s[sb - 4] >> 6) << 4));
            m = uint8_t((s[sb + 4] >> 4) | ((s[sb] >> 6) << 4));
        }
        const uint8_t byte = b.qs[32 * c + l];
        const int q = (sb % 2 == 0) ? (byte & 0xF) : (byte >> 4);
        const float d1 = __fmul_rn(f16_to_f32(b.d), float(sc));
        const float m1 = __fmul_rn(f16_to_f32(b.dmin), float(m));
        return __fsub_rn(__fmul_rn(d1, float(q)), m1);
    }
};

// Q6_K: two halves of 128 (ql += 64, qh += 32, scales += 8 each); in a half, element
// 32·quad + l (quad 0..3, l 0..31) takes ql[l] (quads 0, 2) or ql[l + 32] (1, 3), low nibble
// for quads 0, 1 and high for 2, 3, the 2 bits of qh[l] at 2·quad, and scale sc[l/16 + 2·quad].
// value = (d * sc) * (q - 32).
struct DequantQ6_K {
    static constexpr int kBlockElems = QK_K;
    using Block = BlockQ6_K;
    __device__ static float value(const Block& b, int j) {
        const int half = j / 128, quad = (j % 128) / 32, l = j % 32;
        const uint8_t* ql = b.ql + 64 * half;
        const uint8_t* qh = b.qh + 32 * half;
        const int8_t* sc = b.scales + 8 * half;
        const uint8_t lo = ql[l + 32 * (quad & 1)];
        const int low = quad < 2 ? (lo & 0xF) : (lo >> 4);
        const int q = (low | (((qh[l] >> (2 * quad)) & 3) << 4)) - 32;
        return __fmul_rn(__fmul_rn(f16_to_f32(b.d), float(sc[l / 16 + 2 * quad])), float(q));
    }
};

// Plain element types: a block of one.
struct DequantF32 {
    static constexpr int kBlockElems = 1;
    using Block = float;
    __device__ static float value(const Block& b, int) { return b; }
};
struct DequantF16 {
    static constexpr int kBlockElems = 1;
    using Block = uint16_t;
    __device__ static float value(const Block& b, int) { return f16_to_f32(b); }
};
struct DequantBF16 {
    static constexpr int kBlockElems = 1;
    using Block = uint16_t;
    __device__ static float value(const Block& b, int) { return bf16_to_f32(b); }
};

// out[rows, cols] = bf16(D::value(block, j)); src rows are cols / kBlockElems blocks each.
template <typename D>
__global__ void dequantize_kernel(uint16_t* out, const typename D::Block* src, int64_t rows, int64_t cols) {
    const int64_t n = rows * cols;
    const int64_t step = int64_t(gridDim.x) * blockDim.x;
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
        // Rows hold whole blocks, so element i is element i % kBlockElems of block i / kBlockElems.
        out[i] = f32_to_bf16(D::value(src[i / D::kBlockElems], int(i % D::kBlockElems)));
    }
}

template <typename D>
cudaError_t launch(uint16_t* out, const void* src, int64_t rows, int64_t cols, cudaStream_t stream) {
    constexpr int threads = 256;
    int64_t blocks = (rows * cols + threads - 1) / threads;
    if (blocks > 65536) blocks = 65536;  // the grid-stride loop covers the rest
    dequantize_kernel<D><<<unsigned(blocks), threads, 0, stream>>>(
        out, static_cast<const typename D::Block*>(src), rows, cols);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_dequantize_to_bf16(uint16_t* out, const void* src, DType type, int64_t rows, int64_t cols,
                                      cudaStream_t stream) {
    switch (type) {
        case DType::F32: return launch<DequantF32>(out, src, rows, cols, stream);
        case DType::F16: return launch<DequantF16>(out, src, rows, cols, stream);
        case DType::BF16: return launch<DequantBF16>(out, src, rows, cols, stream);
        case DType::Q4_0: return launch<DequantQ4_0>(out, src, rows, cols, stream);
        case DType::Q8_0: return launch<DequantQ8_0>(out, src, rows, cols, stream);
        case DType::Q4_K: return launch<DequantQ4_K>(out, src, rows, cols, stream);
        case DType::Q6_K: return launch<DequantQ6_K>(out, src, rows, cols, stream);
        case DType::MXFP4: return launch<DequantMxfp4>(out, src, rows, cols, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::ref::detail
