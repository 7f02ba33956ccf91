// The reference matmul path (dequantize to bf16 on the device, then cuBLAS) against the CPU:
// dequantization bit-exact with formats/quants.h for every weight dtype; the bf16 and f32 GEMMs
// within stated error bounds of a double-precision product of the dequantized weights, the CPU
// backend's matmul within its own bound of the same product. Awkward shapes: T = 1..17, 64, 65,
// 513; N = 1, 3, 257; K off the 32-grid for float weights; strided x and y rows.
// Without a GPU (CI) every test that needs one skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/status.h"
#include "core/tensor.h"
#include "formats/quants.h"
#include "kernels/backend.h"
#include "kernels/cuda/cublas_handle.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/ref_dequant.h"
#include "kernels/cuda/ref_matmul.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;


namespace {

using reftest::normal_floats;

const DType kWeightTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                              DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::MXFP4};

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

// w [rows, cols] f32 -> the bytes of `type` (the CPU codecs, bit-exact with gguf-py).
std::vector<uint8_t> quantize(DType type, const std::vector<float>& w, int64_t rows, int64_t cols) {
    std::vector<uint8_t> q(dtype_row_bytes(type, cols) * size_t(rows));
    quantize_tensor(type, w.data(), q.data(), rows, cols);
    return q;
}

// The CPU's dequantization of `bytes` [rows, cols] of `type`.
std::vector<float> dequantize(DType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols) {
    std::vector<float> w(size_t(rows * cols));
    const size_t rb = dtype_row_bytes(type, cols);
    for (int64_t r = 0; r < rows; ++r) dequantize_row(type, bytes.data() + size_t(r) * rb, w.data() + r * cols, cols);
    return w;
}

bool bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }

// Dequantizes `bytes` [rows, cols] of `type` on the device; expects f32_to_bf16 of the CPU's
// dequantize_row for every element (any NaN for a NaN: payloads may differ).
void check_dequant_exact(DType type, const std::vector<uint8_t>& bytes, int64_t rows, int64_t cols,
                         const char* what) {
    SCOPED_TRACE(std::string(dtype_name(type)) + " " + what + " [" + std::to_string(rows) + ", " +
                 std::to_string(cols) + "]");
    const std::vector<float> want = dequantize(type, bytes, rows, cols);
    DeviceBuffer src(bytes.size()), out(size_t(rows * cols) * 2);
    src.upload(bytes.data(), bytes.size());
    TS_CUDA_CHECK(cudaDeviceSynchronize());  // pageable uploads may still be landing; `stream` would not wait
    Stream stream;
    ref::dequantize_to_bf16(out.as<uint16_t>(), src.data(), type, rows, cols, stream);
    stream.synchronize();
    std::vector<uint16_t> got(size_t(rows * cols));
    out.download(got.data(), out.size());
    int64_t bad = 0;
    for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t w = f32_to_bf16(want[size_t(i)]), g = got[size_t(i)];
        const bool ok = bf16_is_nan(w) ? bf16_is_nan(g) : g == w;
        if (!ok && ++bad <= 5)
            ADD_FAILURE() << "element [" << i / cols << ", " << i % cols << "]: got 0x" << std::hex << g << " want 0x"
                          << w << " (f32 " << std::dec << want[size_t(i)] << ")";
    }
    EXPECT_EQ(bad, 0) << "of " << rows * cols << " elements";
}

// Activation block of the CPU's quantized-weight kernels (kernels/cpu/quant_dot.cpp): q8_0
// blocks of 32 for Q4_0 / Q8_0 / MXFP4, q8_K super-blocks of 256 for Q4_K / Q6_K, none (f32
// activations) for float weights.
int cpu_act_block(DType type) {
    switch (type) {
        case DType::Q4_0: case DType::Q8_0: case DType::MXFP4: return 32;
        case DType::Q4_K: case DType::Q6_K: return 256;
        default: return 0;
    }
}

struct Case {
    int64_t T, N, K, ldx, ldy;
};

std::string describe(DType type, const Case& c) {
    return std::string(dtype_name(type)) + " T=" + std::to_string(c.T) + " N=" + std::to_string(c.N) +
           " K=" + std::to_string(c.K) + " ldx=" + std::to_string(c.ldx) + " ldy=" + std::to_string(c.ldy);
}

// T = 1..17, 64, 65, 513 against N = 1, 3, 257; K cycles through `ks`; every other case has
// padded x and y rows.
std::vector<Case> cases(const std::vector<int64_t>& ks) {
    std::vector<int64_t> ts;
    for (int64_t t = 1; t <= 17; ++t) ts.push_back(t);
    for (int64_t t : {64, 65, 513}) ts.push_back(t);
    std::vector<Case> out;
    size_t i = 0;
    for (int64_t T : ts)
        for (int64_t N : {1, 3, 257}) {
            const int64_t K = ks[i % ks.size()];
            const bool pad = i % 2 == 1;
            out.push_back({T, N, K, K + (pad ? 3 : 0), N + (pad ? 5 : 0)});
            ++i;
        }
    return out;
}

std::vector<int64_t> k_values(DType type) {
    const int blk = dtype_info(type).block_elems;
    if (blk == 1) return {1, 7, 100, 333, 256};  // float weights: K off the 32-grid too
    if (blk == 32) return {32, 96, 160, 512};
    return {256, 512};
}

// What one case compares, computed in double from the dequantized weights wd [N, K] and x.
struct Reference {
    std::vector<double> y;       // [T, N]  Σ_k wd[n, k] · x[t, k]
    std::vector<double> abs;     // [T, N]  Σ_k |wd[n, k] · x[t, k]|
    std::vector<double> cpu_q;   // [T, N]  Σ_k |wd[n, k]| · δ(t, k): the CPU's activation rounding
};

// δ(t, k): the CPU rounds x to q8 blocks, q = round(x / d) with d = amax(block) / 127 kept in
// f32, so |x - q·d| <= d / 2 (+ f32 rounding of d: 0.51 covers it).
Reference reference(const std::vector<float>& wd, const std::vector<float>& x, const Case& c, int act_block) {
    Reference r;
    r.y.assign(size_t(c.T * c.N), 0.0);
    r.abs.assign(size_t(c.T * c.N), 0.0);
    r.cpu_q.assign(size_t(c.T * c.N), 0.0);
    std::vector<double> delta(size_t(c.K), 0.0);
    for (int64_t t = 0; t < c.T; ++t) {
        const float* xt = x.data() + t * c.ldx;
        if (act_block)
            for (int64_t b = 0; b < c.K; b += act_block) {
                double amax = 0;
                for (int64_t k = b; k < b + act_block; ++k) amax = std::max(amax, std::fabs(double(xt[k])));
                for (int64_t k = b; k < b + act_block; ++k) delta[size_t(k)] = 0.51 * amax / 127.0;
            }
        for (int64_t n = 0; n < c.N; ++n) {
            const float* wn = wd.data() + n * c.K;
            double s = 0, a = 0, q = 0;
            for (int64_t k = 0; k < c.K; ++k) {
                const double p = double(wn[k]) * double(xt[k]);
                s += p;
                a += std::fabs(p);
                q += std::fabs(double(wn[k])) * delta[size_t(k)];
            }
            r.y[size_t(t * c.N + n)] = s;
            r.abs[size_t(t * c.N + n)] = a;
            r.cpu_q[size_t(t * c.N + n)] = q;
        }
    }
    return r;
}

// Checks got [T, N] (row stride ldy) against the reference: |got - y| <= rel · abs + extra
// elementwise, the padding of each row still `pad_value`, and (when frob_max > 0) the relative
// Frobenius error at most frob_max.
void check_result(const std::vector<float>& got, const Reference& r, const Case& c, double rel, bool add_cpu_q,
                  double frob_max, float pad_value, const char* who) {
    SCOPED_TRACE(who);
    int64_t bad = 0;
    double err2 = 0, ref2 = 0;
    for (int64_t t = 0; t < c.T; ++t) {
        for (int64_t n = 0; n < c.N; ++n) {
            const size_t i = size_t(t * c.N + n);
            const double g = got[size_t(t * c.ldy + n)], err = std::fabs(g - r.y[i]);
            const double bound = rel * (r.abs[i] + (add_cpu_q ? r.cpu_q[i] : 0.0)) + (add_cpu_q ? r.cpu_q[i] : 0.0) +
                                 1e-30;
            err2 += err * err;
            ref2 += r.y[i] * r.y[i];
            if (!(err <= bound) && ++bad <= 5)
                ADD_FAILURE() << "y[" << t << ", " << n << "] = " << g << ", reference " << r.y[i] << ", error " << err
                              << " > bound " << bound;
        }
        for (int64_t n = c.N; n < c.ldy; ++n)
            if (got[size_t(t * c.ldy + n)] != pad_value && ++bad <= 5)
                ADD_FAILURE() << "padding y[" << t << ", " << n << "] overwritten";
    }
    EXPECT_EQ(bad, 0);
    if (frob_max > 0 && ref2 > 0) {
        EXPECT_LE(std::sqrt(err2 / ref2), frob_max) << "relative Frobenius error";
    }
}

}  // namespace

TEST(CudaRefDequant, QuantizedWeightsMatchCpuBitExact) {
    REQUIRE_CUDA();
    uint32_t seed = 1;
    for (DType type : kWeightTypes) {
        const int64_t rows = 5, cols = 512;
        const std::vector<float> w = normal_floats(size_t(rows * cols), seed++, 0.05f);
        check_dequant_exact(type, quantize(type, w, rows, cols), rows, cols, "quantized normal weights");
    }
}

TEST(CudaRefDequant, RandomBlockBytesMatchCpu) {
    // Raw random bytes reach every code, scale / min packing and f16 scale (NaN and infinity too).
    REQUIRE_CUDA();
    uint32_t seed = 100;
    for (DType type : kWeightTypes) {
        const int64_t rows = 7, cols = 768;
        check_dequant_exact(type, random_bytes(dtype_row_bytes(type, cols) * size_t(rows), seed++), rows, cols,
                            "random bytes");
    }
}

TEST(CudaRefDequant, LargerThanOneGridPass) {
    // 4097 × 4128 elements > 65536 blocks × 256 threads: the grid-stride loop's second pass.
    REQUIRE_CUDA();
    const int64_t rows = 4097, cols = 4128;
    check_dequant_exact(DType::Q4_0, random_bytes(dtype_row_bytes(DType::Q4_0, cols) * size_t(rows), 7), rows, cols,
                        "one grid pass and more");
}

TEST(CudaRefDequant, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    uint16_t* out = nullptr;
    EXPECT_NO_THROW(ref::dequantize_to_bf16(out, nullptr, DType::Q4_0, 0, 64, nullptr));  // empty
    EXPECT_THROW(ref::dequantize_to_bf16(out, nullptr, DType::Q4_0, 2, 64, nullptr), Error);  // null
    EXPECT_THROW(ref::dequantize_to_bf16(out, nullptr, DType::Q4_0, 2, 48, nullptr), Error);  // not whole blocks
    EXPECT_THROW(ref::dequantize_to_bf16(out, nullptr, DType::Q4_K, 2, 128, nullptr), Error);
    EXPECT_THROW(ref::dequantize_to_bf16(out, nullptr, DType::I32, 2, 4, nullptr), Error);  // not a weight dtype
    EXPECT_FALSE(ref::can_dequantize_to_bf16(DType::I8));
}

// bf16 GEMM error bound: x and w are each rounded to bf16 (unit roundoff 2^-8), so every product
// is off by at most (2·2^-8 + 2^-16)·|w·x|; cuBLAS accumulates in f32 (at most ~K·2^-24 of
// Σ|w·x| in any summation order; 4× that allows for tensor cores that truncate rather than
// round when they add). Hence |y - ref| <= (2^-7 + 2^-15 + (K+2)·2^-22)·Σ_k|w·x|,
// a bound that holds for every element whatever the data. The Frobenius check (≤ 1e-2; random
// rounding errors average to ≈ 2^-8 · 0.8) catches an error that is systematic but in-bound.
// The CPU for float weights keeps x in f32: (K+4)·2^-23 of Σ|w·x|. For quantized weights it
// rounds x to q8 blocks (see reference()), adding Σ_k |w|·δ.
TEST(CudaRefMatmul, Bf16AgainstDoubleReferenceAndCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    CublasHandle handle;
    Stream stream;
    uint32_t seed = 1000;
    const float kPad = -12345.f;
    for (DType type : kWeightTypes) {
        for (const Case& c : cases(k_values(type))) {
            SCOPED_TRACE(describe(type, c));
            const std::vector<float> w32 = normal_floats(size_t(c.N * c.K), seed++, 0.1f);
            const std::vector<uint8_t> wq = quantize(type, w32, c.N, c.K);
            const std::vector<float> wd = dequantize(type, wq, c.N, c.K);
            const std::vector<float> x = normal_floats(size_t(c.T * c.ldx), seed++);
            const Reference r = reference(wd, x, c, cpu_act_block(type));

            // Device: dequantize, then the GEMM, on one stream.
            DeviceBuffer d_wq(wq.size()), d_wbf(size_t(c.N * c.K) * 2), d_x(x.size() * 4),
                d_scratch(size_t(c.T * c.K) * 2), d_y(size_t(c.T * c.ldy) * 4);
            d_wq.upload(wq.data(), wq.size());
            d_x.upload(x.data(), d_x.size());
            std::vector<float> y(size_t(c.T * c.ldy), kPad);
            d_y.upload(y.data(), d_y.size());
            TS_CUDA_CHECK(cudaDeviceSynchronize());  // pageable uploads may still be landing; `stream` would not wait
            ref::dequantize_to_bf16(d_wbf.as<uint16_t>(), d_wq.data(), type, c.N, c.K, stream);
            ref::matmul_bf16(d_y.as<float>(), c.ldy, d_x.as<float>(), c.ldx, d_wbf.as<uint16_t>(), c.T, c.N, c.K,
                             handle, d_scratch.as<uint16_t>(), stream);
            stream.synchronize();
            d_y.download(y.data(), d_y.size());
            const double gpu_rel = std::ldexp(1.0, -7) + std::ldexp(1.0, -15) + double(c.K + 2) * std::ldexp(1.0, -22);
            check_result(y, r, c, gpu_rel, false, 1e-2, kPad, "cuda matmul_bf16");

            // CPU backend on the same inputs.
            std::vector<float> ycpu(size_t(c.T * c.ldy), kPad);
            Tensor ty(ycpu.data(), DType::F32, {c.T, c.N}), tx(const_cast<float*>(x.data()), DType::F32, {c.T, c.K}),
                tw(const_cast<uint8_t*>(wq.data()), type, {c.N, c.K});
            ty.stride[0] = c.ldy * 4;
            tx.stride[0] = c.ldx * 4;
            cpu->matmul(ty, tx, tw);
            const bool quantized_act = cpu_act_block(type) != 0;
            check_result(ycpu, r, c, double(c.K + 4) * std::ldexp(1.0, -23), quantized_act, 0, kPad, "cpu matmul");
            if (HasFailure()) return;  // one failing case says enough
        }
    }
}

// Pure f32 (no TF32: TF32 rounds inputs to 10 mantissa bits, ~2^-11, and would break this
// bound): |y - ref| <= (K+4)·2^-23 · Σ_k|w·x|, the same bound the CPU's f32 kernel meets.
TEST(CudaRefMatmul, F32AgainstDoubleReferenceAndCpu) {
    REQUIRE_CUDA();
    const std::unique_ptr<Backend> cpu = make_cpu_backend();
    CublasHandle handle;
    Stream stream;
    uint32_t seed = 5000;
    const float kPad = -12345.f;
    for (const Case& c : cases(k_values(DType::F32))) {
        SCOPED_TRACE(describe(DType::F32, c));
        const std::vector<float> w = normal_floats(size_t(c.N * c.K), seed++, 0.1f);
        const std::vector<float> x = normal_floats(size_t(c.T * c.ldx), seed++);
        const Reference r = reference(w, x, c, 0);
        DeviceBuffer d_w(w.size() * 4), d_x(x.size() * 4), d_y(size_t(c.T * c.ldy) * 4);
        d_w.upload(w.data(), d_w.size());
        d_x.upload(x.data(), d_x.size());
        std::vector<float> y(size_t(c.T * c.ldy), kPad);
        d_y.upload(y.data(), d_y.size());
        TS_CUDA_CHECK(cudaDeviceSynchronize());  // pageable uploads may still be landing; `stream` would not wait
        ref::matmul_f32(d_y.as<float>(), c.ldy, d_x.as<float>(), c.ldx, d_w.as<float>(), c.T, c.N, c.K, handle,
                        stream);
        stream.synchronize();
        d_y.download(y.data(), d_y.size());
        const double rel = double(c.K + 4) * std::ldexp(1.0, -23);
        check_result(y, r, c, rel, false, 0, kPad, "cuda matmul_f32");

        std::vector<float> ycpu(size_t(c.T * c.ldy), kPad);
        Tensor ty(ycpu.data(), DType::F32, {c.T, c.N}), tx(const_cast<float*>(x.data()), DType::F32, {c.T, c.K}),
            tw(const_cast<float*>(w.data()), DType::F32, {c.N, c.K});
        ty.stride[0] = c.ldy * 4;
        tx.stride[0] = c.ldx * 4;
        cpu->matmul(ty, tx, tw);
        check_result(ycpu, r, c, rel, false, 0, kPad, "cpu matmul");
        if (HasFailure()) return;
    }
}

TEST(CudaRefMatmul, HandleFollowsTheStreamAndEmptyShapesAreNoOps) {
    REQUIRE_CUDA();
    CublasHandle handle;  // bound to the default stream
    Stream s1, s2;
    const int64_t T = 3, N = 2, K = 5;
    const std::vector<float> w = normal_floats(size_t(N * K), 1), x = normal_floats(size_t(T * K), 2);
    DeviceBuffer d_w(w.size() * 4), d_x(x.size() * 4), d_y(size_t(T * N) * 4);
    d_w.upload(w.data(), d_w.size());
    d_x.upload(x.data(), d_x.size());
    TS_CUDA_CHECK(cudaDeviceSynchronize());
    for (cudaStream_t s : {s1.get(), s2.get(), s1.get()}) {
        d_y.fill(0xff, d_y.size(), 0, s);
        ref::matmul_f32(d_y.as<float>(), N, d_x.as<float>(), K, d_w.as<float>(), T, N, K, handle, s);
        EXPECT_EQ(handle.stream(), s);
        TS_CUDA_CHECK(cudaStreamSynchronize(s));
        std::vector<float> y(size_t(T * N));
        d_y.download(y.data(), d_y.size());
        for (int64_t t = 0; t < T; ++t)
            for (int64_t n = 0; n < N; ++n) {
                double want = 0;
                for (int64_t k = 0; k < K; ++k) want += double(w[size_t(n * K + k)]) * x[size_t(t * K + k)];
                EXPECT_NEAR(y[size_t(t * N + n)], want, 1e-5);
            }
    }
    // K = 0: y is zeroed; T = 0 or N = 0: nothing happens (null pointers are fine then).
    d_y.fill(0xff, d_y.size(), 0, s1);
    ref::matmul_bf16(d_y.as<float>(), N, nullptr, 0, nullptr, T, N, 0, handle, nullptr, s1);
    s1.synchronize();
    std::vector<float> y(size_t(T * N), 1.f);
    d_y.download(y.data(), d_y.size());
    for (float v : y) EXPECT_EQ(v, 0.f);
    EXPECT_NO_THROW(ref::matmul_bf16(nullptr, 4, nullptr, 4, nullptr, 0, 4, 4, handle, nullptr, s1));
    EXPECT_NO_THROW(ref::matmul_f32(nullptr, 4, nullptr, 4, nullptr, 4, 0, 4, handle, s1));
    EXPECT_THROW(ref::matmul_f32(d_y.as<float>(), N, d_x.as<float>(), K - 1, d_w.as<float>(), T, N, K, handle, s1),
                 Error);  // ldx < K
    EXPECT_THROW(ref::matmul_bf16(d_y.as<float>(), N, d_x.as<float>(), K, nullptr, T, N, K, handle, nullptr, s1),
                 Error);  // null weights
}

TEST(CudaRefMatmul, CublasErrorsNameTheStatus) {
    REQUIRE_CUDA();
    CublasHandle handle;
    try {
        // lda < K is rejected by cuBLAS itself: m = 1, n = 1, k = 4, lda = 1.
        const float alpha = 1.f, beta = 0.f;
        TS_CUBLAS_CHECK(cublasSgemm(handle.get(), CUBLAS_OP_T, CUBLAS_OP_N, 1, 1, 4, &alpha, nullptr, 1, nullptr, 4,
                                    &beta, nullptr, 1));
        FAIL() << "cublasSgemm with lda < k succeeded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("CUBLAS_STATUS_INVALID_VALUE"), std::string::npos) << msg;
        EXPECT_NE(msg.find("cublasSgemm"), std::string::npos) << msg;
        EXPECT_EQ(e.kind(), ErrorKind::Invalid);
    }
}
