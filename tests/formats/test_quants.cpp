// Quant codecs against golden data made by llama.cpp's `gguf.quants` (scripts/make_quant_fixtures.py):
// quantize bytes and dequantized f32 bits must match exactly. Plus hand-derived block layouts,
// reconstruction error bounds and error handling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "formats/quants.h"

using namespace tessera;

namespace {

struct QuantCase {
    std::string label;
    uint32_t kind = 0;  // 0: input floats given, 1: raw blocks only
    std::vector<float> input;
    std::vector<uint8_t> blocks;
    std::vector<float> deq;
};

std::vector<uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot open " + path);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// Reads tests/fixtures/quants/<name>.bin (layout in scripts/make_quant_fixtures.py).
std::vector<QuantCase> load_cases(const std::string& name) {
    const auto data = read_file(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/quants/" + name + ".bin");
    size_t pos = 0;
    auto take = [&](void* dst, size_t n) {
        if (pos + n > data.size()) throw std::runtime_error(name + ".bin: truncated");
        std::memcpy(dst, data.data() + pos, n);
        pos += n;
    };
    auto u32 = [&] { uint32_t v; take(&v, 4); return v; };
    char magic[4];
    take(magic, 4);
    if (std::memcmp(magic, "TSQF", 4) != 0 || u32() != 1) throw std::runtime_error(name + ".bin: bad header");
    std::vector<QuantCase> cases(u32());
    for (auto& c : cases) {
        char label[17] = {};
        take(label, 16);
        c.label = label;
        c.kind = u32();
        const uint32_t n = u32(), nbytes = u32();
        if (c.kind == 0) {
            c.input.resize(n);
            take(c.input.data(), 4ull * n);
        }
        c.blocks.resize(nbytes);
        take(c.blocks.data(), nbytes);
        c.deq.resize(n);
        take(c.deq.data(), 4ull * n);
    }
    if (pos != data.size()) throw std::runtime_error(name + ".bin: trailing bytes");
    return cases;
}

// Index of the first element whose f32 bit patterns differ, or -1.
int64_t first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (f32_to_bits(a[i]) != f32_to_bits(b[i])) return int64_t(i);
    return -1;
}

class GoldenQuant : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenQuant, MatchesGgufQuantsBitExactly) {
    const std::string name = GetParam();
    const DType t = dtype_from_name(name);
    const auto cases = load_cases(name);
    ASSERT_GE(cases.size(), 2u);
    for (const auto& c : cases) {
        SCOPED_TRACE(name + "/" + c.label);
        const int64_t n = int64_t(c.deq.size());
        ASSERT_EQ(dtype_row_bytes(t, n), c.blocks.size());
        if (c.kind == 0) {
            std::vector<uint8_t> q(c.blocks.size(), 0xAA);
            quantize_row(t, c.input.data(), q.data(), n);
            for (size_t i = 0; i < q.size(); ++i)
                ASSERT_EQ(int(q[i]), int(c.blocks[i])) << "quantized byte " << i << " (block "
                                                       << i / dtype_info(t).block_bytes << ")";
        }
        std::vector<float> y(size_t(n), -12345.f);
        dequantize_row(t, c.blocks.data(), y.data(), n);
        const int64_t bad = first_bit_mismatch(y, c.deq);
        ASSERT_EQ(bad, -1) << "element " << bad << ": got " << y[size_t(std::max<int64_t>(bad, 0))] << " expected "
                           << c.deq[size_t(std::max<int64_t>(bad, 0))];
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenQuant,
                         ::testing::Values("f32", "f16", "bf16", "q4_0", "q8_0", "q4_k", "q6_k", "mxfp4"),
                         [](const auto& info) { return std::string(info.param); });

std::vector<float> random_normal(int64_t n, float scale, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = nd(rng);
    return x;
}

// sqrt(mean((y-x)^2)) / sqrt(mean(x^2))
double relative_rmse(DType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(dtype_row_bytes(t, int64_t(x.size())));
    std::vector<float> y(x.size());
    quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    dequantize_row(t, q.data(), y.data(), int64_t(x.size()));
    double e = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        e += double(y[i] - x[i]) * double(y[i] - x[i]);
        s += double(x[i]) * double(x[i]);
    }
    return std::sqrt(e / s);
}

}  // namespace

// Bounds from the step sizes: b-bit codes over a block's range r give rms error ≈ step/sqrt(12).
// For N(0,1) data: Q4_0 step ≈ 2.2/8 → ~0.08 (plus sign asymmetry), Q4_K ~0.08, Q6_K ~0.02, Q8_0 ~0.005.
TEST(Quants, ReconstructionErrorIsBounded) {
    const auto x = random_normal(256 * 64, 1.0f, 7);
    EXPECT_LT(relative_rmse(DType::Q8_0, x), 0.01);
    EXPECT_LT(relative_rmse(DType::Q4_0, x), 0.13);
    EXPECT_LT(relative_rmse(DType::Q4_K, x), 0.11);
    EXPECT_LT(relative_rmse(DType::Q6_K, x), 0.03);
    EXPECT_LT(relative_rmse(DType::MXFP4, x), 0.2);
    EXPECT_LT(relative_rmse(DType::Q6_K, x), relative_rmse(DType::Q4_K, x) / 2);
    // Scale invariance of the error (no absolute epsilon hidden in the search).
    EXPECT_LT(relative_rmse(DType::Q4_K, random_normal(4096, 1e-4f, 3)), 0.11);
    EXPECT_LT(relative_rmse(DType::Q6_K, random_normal(4096, 1e4f, 3)), 0.03);
}

TEST(Quants, ZeroBlocksEncodeToZeroBytes) {
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q8_0}) {
        std::vector<float> x(256, 0.f);
        std::vector<uint8_t> q(dtype_row_bytes(t, 256), 0xFF);
        quantize_row(t, x.data(), q.data(), 256);
        for (uint8_t b : q) ASSERT_EQ(b, 0) << dtype_name(t);
    }
}

// Hand-derived: d = max/-8 = 0.5, id = 2, q = trunc(2x + 8.5), exact on a half-integer grid.
TEST(Quants, Q4_0HandBlock) {
    float x[32];
    for (int j = 0; j < 32; ++j) x[j] = 0.5f * float((j % 16) - 8);  // x[0] = -4 is the extreme
    BlockQ4_0 b;
    quantize_row(DType::Q4_0, x, &b, 32);
    EXPECT_EQ(b.d, f32_to_f16(0.5f));
    for (int j = 0; j < 16; ++j) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
    float y[32];
    dequantize_row(DType::Q4_0, &b, y, 32);
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << j;
}

// Hand-built Q4_K block: d = 1, dmin = 0.5; sub-block 0 (sc 3, m 2), sub-block 5 (sc 33, m 40,
// which needs the packed high bits); nibble 5 in sub-block 0 -> 1*3*5 - 0.5*2 = 14.
TEST(Quants, Q4_KHandBlockLayout) {
    BlockQ4_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    b.scales[0] = 3;                 // sc0 low 6 bits
    b.scales[4] = 2;                 // m0 low 6 bits
    // j = 5: sc = (scales[9] & 15) | ((scales[1] >> 6) << 4), m = (scales[9] >> 4) | ((scales[5] >> 6) << 4)
    const int sc5 = 33, m5 = 40;
    b.scales[9] = uint8_t((sc5 & 15) | ((m5 & 15) << 4));
    b.scales[1] = uint8_t((sc5 >> 4) << 6);
    b.scales[5] = uint8_t((m5 >> 4) << 6);
    b.qs[0] = 5;              // element 0: sub-block 0, low nibble
    b.qs[64 + 7] = 9 << 4;    // element 128+32+7 = 167: sub-block 5, high nibble of qs[64+7]
    float y[256];
    dequantize_row(DType::Q4_K, &b, y, 256);
    EXPECT_EQ(y[0], 14.0f);
    EXPECT_EQ(y[1], -1.0f);                        // q 0: -dmin*m0
    EXPECT_EQ(y[167], 33.0f * 9 - 0.5f * 40);       // 277
    EXPECT_EQ(y[160], -20.0f);
    EXPECT_EQ(y[32], 0.0f);                        // sub-block 1: sc 0, m 0
}

// Hand-built Q6_K block: d = 0.5; element l of the first 128 uses ql[l] low nibble + qh[l] bits 0-1
// and scale sc[l/16]; element 64+l uses ql[l] high nibble + qh[l] bits 4-5 and sc[4 + l/16].
TEST(Quants, Q6_KHandBlockLayout) {
    BlockQ6_K b{};
    b.d = f32_to_f16(0.5f);
    b.scales[0] = -3;
    b.scales[5] = 7;
    b.ql[0] = 0x8 | (0x1 << 4);     // element 0 low 4 bits = 8, element 64 low 4 bits = 1
    b.qh[0] = 0x2 | (0x3 << 4);     // element 0 high bits = 2 -> q = 40; element 64 high = 3 -> q = 49
    b.ql[20] = 0xF0;                // element 84 (sub-group 5): low = 15, high bits 0 -> q = 15
    float y[256];
    dequantize_row(DType::Q6_K, &b, y, 256);
    EXPECT_EQ(y[0], 0.5f * -3 * (40 - 32));
    EXPECT_EQ(y[64], 0.0f);                       // sc[4] = 0
    EXPECT_EQ(y[84], 0.5f * 7 * (15 - 32));
    EXPECT_EQ(y[1], 0.5f * -3 * -32);            // all-zero code is -32
}

// e = 128 -> scale 2^(128-127) = 2; code 5 is E2M1 3.0 -> 6; code 0xF is -6.0 -> -12.
TEST(Quants, Mxfp4HandBlock) {
    BlockMXFP4 b{};
    b.e = 128;
    b.qs[0] = 0x5 | (0xF << 4);
    float y[32];
    dequantize_row(DType::MXFP4, &b, y, 32);
    EXPECT_EQ(y[0], 6.0f);
    EXPECT_EQ(y[16], -12.0f);
    EXPECT_EQ(y[1], 0.0f);
    EXPECT_EQ(mxfp4_e8m0_to_f32_half(0), std::ldexp(1.0f, -128));
    EXPECT_EQ(mxfp4_e8m0_to_f32_half(254), std::ldexp(1.0f, 126));
}

// Hand-derived Q4_K quantize: every sub-block holds k*s for k = 0..15 with s = 63/64, so the
// scale search lands on L = k, all 6-bit scales are 63, d = s/63 = 2^-6 exactly, mins are 0 and
// the block reconstructs the input exactly.
TEST(Quants, Q4_KQuantizeHandBlock) {
    const float s = 63.0f / 64;
    float x[256];
    for (int i = 0; i < 256; ++i) x[i] = float((i * 7 + i / 32) % 16) * s;
    for (int j = 0; j < 8; ++j) x[32 * j] = 0, x[32 * j + 1] = 15 * s;  // each sub-block spans 0..15
    BlockQ4_K b;
    quantize_row(DType::Q4_K, x, &b, 256);
    EXPECT_EQ(b.d, f32_to_f16(1.0f / 64));
    EXPECT_EQ(f16_to_f32(b.dmin), 0.0f);
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        q4_k_scale_min(j, b.scales, &sc, &m);
        EXPECT_EQ(sc, 63) << j;
    }
    for (int i = 0; i < 256; ++i) {
        const int chunk = i / 64, l = i % 32;                 // 64 elements share 32 bytes:
        const uint8_t byte = b.qs[chunk * 32 + l];            // low nibble first 32, high nibble next 32
        const int q = (i % 64) < 32 ? (byte & 15) : (byte >> 4);
        EXPECT_EQ(float(q) * s, x[i]) << i;
    }
    float y[256];
    dequantize_row(DType::Q4_K, &b, y, 256);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

// Hand-derived Q6_K quantize: every group of 16 holds (k-32)*0.5 with k in 0..63 and contains
// k = 0, so make_qx_quants finds L = k with scale 0.5; then iscale = -128/0.5, the stored
// d = 1/iscale = -2^-8 (ggml keeps the sign there) and every 8-bit scale is -128.
TEST(Quants, Q6_KQuantizeHandBlock) {
    float x[256];
    int k[256];
    for (int i = 0; i < 256; ++i) k[i] = (i % 16 == 0) ? 0 : (i * 5 + 3) % 64;
    for (int i = 0; i < 256; ++i) x[i] = float(k[i] - 32) * 0.5f;
    BlockQ6_K b;
    quantize_row(DType::Q6_K, x, &b, 256);
    EXPECT_EQ(b.d, f32_to_f16(-1.0f / 256));
    for (int g = 0; g < 16; ++g) EXPECT_EQ(b.scales[g], -128) << g;
    for (int i = 0; i < 256; ++i) {
        const int half = i / 128, r = i % 128, l = r % 32, quarter = r / 32;  // ggml's ql/qh packing
        const uint8_t lo = b.ql[half * 64 + l + (quarter & 1) * 32];
        const int low4 = quarter < 2 ? (lo & 15) : (lo >> 4);
        const int high2 = (b.qh[half * 32 + l] >> (2 * quarter)) & 3;
        EXPECT_EQ(low4 | (high2 << 4), k[i]) << i;
    }
    float y[256];
    dequantize_row(DType::Q6_K, &b, y, 256);
    for (int i = 0; i < 256; ++i) EXPECT_EQ(y[i], x[i]) << i;
}

TEST(Quants, TensorHelpersMatchRows) {
    const int64_t rows = 37, cols = 512;
    const auto x = random_normal(rows * cols, 2.0f, 11);
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::MXFP4, DType::BF16, DType::F16}) {
        const size_t rb = dtype_row_bytes(t, cols);
        std::vector<uint8_t> q1(rb * rows), q2(rb * rows);
        for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * cols, q1.data() + r * rb, cols);
        quantize_tensor(t, x.data(), q2.data(), rows, cols);
        ASSERT_EQ(q1, q2) << dtype_name(t);
        std::vector<float> y1(size_t(rows * cols)), y2(size_t(rows * cols));
        for (int64_t r = 0; r < rows; ++r) dequantize_row(t, q1.data() + r * rb, y1.data() + r * cols, cols);
        Tensor src(q1.data(), t, {rows, cols}), dst(y2.data(), DType::F32, {rows, cols});
        dequantize_tensor(src, dst);
        ASSERT_EQ(0, std::memcmp(y1.data(), y2.data(), y1.size() * 4)) << dtype_name(t);
    }
}

TEST(Quants, StridedRowsDequantize) {
    // View every other row of a [4, 256] Q8_0 tensor.
    const auto x = random_normal(4 * 256, 1.0f, 5);
    std::vector<uint8_t> q(dtype_row_bytes(DType::Q8_0, 256) * 4);
    quantize_tensor(DType::Q8_0, x.data(), q.data(), 4, 256);
    Tensor all(q.data(), DType::Q8_0, {4, 256});
    Tensor odd = all;
    odd.shape[0] = 2;
    odd.stride[0] = all.stride[0] * 2;
    std::vector<float> y(512), ref(1024);
    dequantize_tensor(odd, Tensor(y.data(), DType::F32, {2, 256}));
    dequantize_tensor(DType::Q8_0, q.data(), ref.data(), 4, 256);
    EXPECT_EQ(0, std::memcmp(y.data(), ref.data(), 256 * 4));
    EXPECT_EQ(0, std::memcmp(y.data() + 256, ref.data() + 512, 256 * 4));
}

TEST(Quants, BadArgumentsAreErrors) {
    std::vector<float> x(300, 1.f);
    std::vector<uint8_t> q(4096);
    EXPECT_THROW(quantize_row(DType::Q4_K, x.data(), q.data(), 300), Error);   // not whole blocks
    EXPECT_THROW(dequantize_row(DType::Q8_0, q.data(), x.data(), 33), Error);
    try {
        dequantize_row(DType::I32, q.data(), x.data(), 4);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
        EXPECT_NE(std::string(e.what()).find("i32"), std::string::npos);
    }
    EXPECT_THROW(quantize_row(DType::U8, x.data(), q.data(), 4), Error);
    std::vector<float> y(256);
    EXPECT_THROW(dequantize_tensor(Tensor(q.data(), DType::Q8_0, {2, 32}), Tensor(y.data(), DType::F32, {2, 64})), Error);
}
