// Row codecs for f32/f16/bf16, Q4_0, Q8_0 and MXFP4, the dtype dispatch, and the threaded
// whole-tensor helpers. The K-quants are in quants_k.cpp.
#include "formats/quants.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"

// Bit-exactness with ggml/gguf-py needs every multiply and add rounded on its own (no FMA).
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace tessera {

namespace {

// Float -> int32 truncation as x86 cvttss2si does it (NaN and out-of-range give INT32_MIN), so a
// degenerate block (e.g. a scale whose inverse overflows) is defined behaviour and still matches
// ggml and numpy on x86.
int32_t trunc_i32(float v) {
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return INT32_MIN;
    return int32_t(v);
}

// C roundf (half away from zero) then the same truncation.
int32_t round_i32(float v) { return trunc_i32(std::round(v)); }

int64_t whole_blocks(DType t, int64_t n) {
    const auto& info = dtype_info(t);
    TS_CHECK(n >= 0 && n % info.block_elems == 0, "{} row of {} elements is not a multiple of the block size {}",
             info.name, n, info.block_elems);
    return n / info.block_elems;
}

}  // namespace

const int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float mxfp4_e8m0_to_f32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? uint32_t(0x00200000) << e : uint32_t(e - 1) << 23;
    return bits_to_f32(bits);
}

// ---- Q4_0: y[j] = d*((qs[j]&15)-8), y[j+16] = d*((qs[j]>>4)-8) ------------------------------

void dequantize_blocks_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK4_0) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[j] = float((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + QK4_0 / 2] = float((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void quantize_blocks_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK4_0) {
        float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude (first one wins)
        for (int j = 0; j < QK4_0; ++j) {
            if (amax < std::fabs(x[j])) {
                amax = std::fabs(x[j]);
                max = x[j];
            }
        }
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const int32_t q0 = std::min<int32_t>(15, int8_t(trunc_i32(x[j] * id + 8.5f)));
            const int32_t q1 = std::min<int32_t>(15, int8_t(trunc_i32(x[j + QK4_0 / 2] * id + 8.5f)));
            y[i].qs[j] = uint8_t(uint8_t(q0) | (uint8_t(q1) << 4));
        }
    }
}

// ---- Q8_0: y = d*q -----------------------------------------------------------------------

void dequantize_blocks_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK8_0) {
        const float d = f16_to_f32(x[i].d);
        for (int j = 0; j < QK8_0; ++j) y[j] = float(x[i].qs[j]) * d;
    }
}

void quantize_blocks_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[i].d = f32_to_f16(d);
        for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = int8_t(round_i32(x[j] * id));
    }
}

// ---- MXFP4: y[j] = lut[qs[j]&15]*2^(e-128), y[j+16] = lut[qs[j]>>4]*2^(e-128) ------------------

void dequantize_blocks_mxfp4(const BlockMXFP4* x, float* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, y += QK_MXFP4) {
        const float d = mxfp4_e8m0_to_f32_half(x[i].e);
        for (int j = 0; j < QK_MXFP4 / 2; ++j) {
            y[j] = float(kMxfp4Values[x[i].qs[j] & 0x0F]) * d;
            y[j + QK_MXFP4 / 2] = float(kMxfp4Values[x[i].qs[j] >> 4]) * d;
        }
    }
}

namespace {
int mxfp4_best_index(float x, float d) {
    int best = 0;
    float best_err = std::fabs(float(kMxfp4Values[0]) * d - x);
    for (int i = 1; i < 16; ++i) {
        const float err = std::fabs(float(kMxfp4Values[i]) * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}
}  // namespace

void quantize_blocks_mxfp4(const float* x, BlockMXFP4* y, int64_t nb) {
    for (int64_t i = 0; i < nb; ++i, x += QK_MXFP4) {
        float amax = 0.0f;
        for (int j = 0; j < QK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
        // ggml: (uint8_t)(floor(log2(amax)) - 2 + 127); clamped here so subnormal blocks stay defined.
        int e = 0;
        if (amax > 0.0f) e = std::clamp(int(std::floor(std::log2(amax))) - 2 + 127, 0, 255);
        const float d = mxfp4_e8m0_to_f32_half(uint8_t(e));
        y[i].e = uint8_t(e);
        for (int j = 0; j < QK_MXFP4 / 2; ++j) {
            const int q0 = mxfp4_best_index(x[j], d), q1 = mxfp4_best_index(x[j + QK_MXFP4 / 2], d);
            y[i].qs[j] = uint8_t(q0 | (q1 << 4));
        }
    }
}

// ---- dispatch ------------------------------------------------------------------------------

bool can_dequantize(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q4_0: case DType::Q8_0:
        case DType::Q4_K: case DType::Q6_K: case DType::MXFP4:
            return true;
        default:
            return false;
    }
}

bool can_quantize(DType t) { return can_dequantize(t); }

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    if (!can_dequantize(t)) fail(ErrorKind::Unsupported, "dequantize: dtype {} is not supported", dtype_name(t));
    const int64_t nb = whole_blocks(t, n);
    switch (t) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * 4); break;
        case DType::F16: {
            const auto* s = static_cast<const uint8_t*>(src);
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, s + 2 * i, 2);
                dst[i] = f16_to_f32(h);
            }
            break;
        }
        case DType::BF16: {
            const auto* s = static_cast<const uint8_t*>(src);
            for (int64_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, s + 2 * i, 2);
                dst[i] = bf16_to_f32(h);
            }
            break;
        }
        case DType::Q4_0: dequantize_blocks_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb); break;
        case DType::Q8_0: dequantize_blocks_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb); break;
        case DType::Q4_K: dequantize_blocks_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb); break;
        case DType::Q6_K: dequantize_blocks_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb); break;
        case DType::MXFP4: dequantize_blocks_mxfp4(static_cast<const BlockMXFP4*>(src), dst, nb); break;
        default: TS_ASSERT(false);
    }
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    if (!can_quantize(t)) fail(ErrorKind::Unsupported, "quantize: dtype {} is not supported", dtype_name(t));
    const int64_t nb = whole_blocks(t, n);
    switch (t) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * 4); break;
        case DType::F16: {
            auto* d = static_cast<uint8_t*>(dst);
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_f16(src[i]);
                std::memcpy(d + 2 * i, &h, 2);
            }
            break;
        }
        case DType::BF16: {
            auto* d = static_cast<uint8_t*>(dst);
            for (int64_t i = 0; i < n; ++i) {
                const uint16_t h = f32_to_bf16(src[i]);
                std::memcpy(d + 2 * i, &h, 2);
            }
            break;
        }
        case DType::Q4_0: quantize_blocks_q4_0(src, static_cast<BlockQ4_0*>(dst), nb); break;
        case DType::Q8_0: quantize_blocks_q8_0(src, static_cast<BlockQ8_0*>(dst), nb); break;
        case DType::Q4_K: quantize_blocks_q4_k(src, static_cast<BlockQ4_K*>(dst), nb); break;
        case DType::Q6_K: quantize_blocks_q6_k(src, static_cast<BlockQ6_K*>(dst), nb); break;
        case DType::MXFP4: quantize_blocks_mxfp4(src, static_cast<BlockMXFP4*>(dst), nb); break;
        default: TS_ASSERT(false);
    }
}

// ---- whole tensors ------------------------------------------------------------------------

namespace {

// Contiguous rows are one long row of whole blocks: split it into chunks of blocks so even a
// single huge row (an embedding, a 1-D tensor) uses every thread.
template <typename Fn>
void for_block_chunks(DType t, int64_t rows, int64_t cols, Fn&& fn) {
    TS_CHECK(rows >= 0 && cols >= 0, "tensor [{}, {}]: negative dimension", rows, cols);
    const auto& info = dtype_info(t);
    const int64_t blocks_per_row = whole_blocks(t, cols);
    const int64_t nb = rows * blocks_per_row;
    const int64_t grain = std::max<int64_t>(1, 4096 / info.block_elems);  // ~4K elements a chunk
    ThreadPool::global().parallel_for(nb, [&](int64_t b0, int64_t b1) { fn(b0, b1); }, grain);
}

}  // namespace

void dequantize_tensor(DType t, const void* src, float* dst, int64_t rows, int64_t cols) {
    if (!can_dequantize(t)) fail(ErrorKind::Unsupported, "dequantize: dtype {} is not supported", dtype_name(t));
    const auto& info = dtype_info(t);
    const auto* s = static_cast<const uint8_t*>(src);
    for_block_chunks(t, rows, cols, [&](int64_t b0, int64_t b1) {
        dequantize_row(t, s + b0 * info.block_bytes, dst + b0 * info.block_elems, (b1 - b0) * info.block_elems);
    });
}

void quantize_tensor(DType t, const float* src, void* dst, int64_t rows, int64_t cols) {
    if (!can_quantize(t)) fail(ErrorKind::Unsupported, "quantize: dtype {} is not supported", dtype_name(t));
    const auto& info = dtype_info(t);
    auto* d = static_cast<uint8_t*>(dst);
    for_block_chunks(t, rows, cols, [&](int64_t b0, int64_t b1) {
        quantize_row(t, src + b0 * info.block_elems, d + b0 * info.block_bytes, (b1 - b0) * info.block_elems);
    });
}

namespace {
void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
    bool same = a.ndim == b.ndim;
    for (int i = 0; same && i < a.ndim; ++i) same = a.shape[i] == b.shape[i];
    TS_CHECK(same, "{}: source {} and destination {} differ in shape", what, a.shape_str(), b.shape_str());
    TS_CHECK(a.device == Device::CPU && b.device == Device::CPU, "{}: tensors must be on the CPU", what);
}
}  // namespace

void dequantize_tensor(const Tensor& src, const Tensor& dst) {
    check_same_shape(src, dst, "dequantize_tensor");
    TS_CHECK(dst.dtype == DType::F32 && dst.is_contiguous(), "dequantize_tensor: destination must be contiguous f32, got {}",
             dst.describe());
    if (src.is_contiguous()) {
        dequantize_tensor(src.dtype, src.data, dst.ptr<float>(), src.rows(), src.cols());
        return;
    }
    if (!can_dequantize(src.dtype)) fail(ErrorKind::Unsupported, "dequantize: dtype {} is not supported", dtype_name(src.dtype));
    const int64_t cols = src.cols();
    const auto& info = dtype_info(src.dtype);
    TS_CHECK(info.quantized || src.stride[src.ndim - 1] == info.block_bytes,
             "dequantize_tensor: {} has a strided last dimension", src.describe());
    ThreadPool::global().parallel_for(src.rows(), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) dequantize_row(src.dtype, src.row_ptr(r), dst.ptr<float>() + r * cols, cols);
    });
}

void quantize_tensor(const Tensor& src, const Tensor& dst) {
    check_same_shape(src, dst, "quantize_tensor");
    TS_CHECK(src.dtype == DType::F32 && src.is_contiguous(), "quantize_tensor: source must be contiguous f32, got {}",
             src.describe());
    TS_CHECK(dst.is_contiguous(), "quantize_tensor: destination {} must be contiguous", dst.describe());
    quantize_tensor(dst.dtype, src.ptr<float>(), dst.data, src.rows(), src.cols());
}

}  // namespace tessera
