// The host repacking of GGUF matrices into the kernel pack's packed layout (kernels/packed_repack.h)
// against the CPU codecs: dequantizing the packed form equals formats/quants.h's dequantization
// exactly for Q4_0 / Q8_0 and within 2⁻¹¹ of each group's scale (and min) for Q4_K / Q6_K, on
// random matrices with odd row counts and strided rows; clear errors for bad input; and the
// fast-path matmul dispatch (kernels/cuda/matmul_dispatch.h) at every boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "formats/quants.h"
#include "kernel_test_util.h"
#include "kernels/cuda/matmul_dispatch.h"
#include "kernels/packed_repack.h"

using namespace tessera;
using namespace tessera::cuda;

namespace {

struct Quantized {
    std::vector<uint8_t> bytes;  // [n, row stride]
    size_t stride = 0;
    std::vector<float> deq;      // [n, k] the CPU codec's dequantization
};

// n rows of k, rows `pad` bytes apart beyond their size (a strided view).
Quantized quantize(DType t, int64_t n, int64_t k, uint64_t seed, size_t pad) {
    Quantized q;
    const size_t rb = dtype_row_bytes(t, k);
    q.stride = rb + pad;
    q.bytes.assign(q.stride * size_t(n), 0xAB);
    const auto src = test::random_floats(size_t(n * k), seed, -1.5f, 1.5f);
    q.deq.resize(size_t(n * k));
    for (int64_t r = 0; r < n; ++r) {
        uint8_t* row = q.bytes.data() + size_t(r) * q.stride;
        quantize_row(t, src.data() + r * k, row, k);
        dequantize_row(t, row, q.deq.data() + r * k, k);
    }
    return q;
}

Tensor view(DType t, Quantized& q, int64_t n, int64_t k) {
    Tensor v(q.bytes.data(), t, {n, k});
    v.stride[0] = int64_t(q.stride);
    return v;
}

// The bound of a K-quant element: the f16 rounding of its group's scale (and min) times its code.
double kquant_bound(DType t, const Quantized& q, const PackedHost& p, int64_t r, int64_t c) {
    const int64_t g = r * (p.k / p.group) + c / p.group;
    const double s = std::fabs(f16_to_f32(p.scales[size_t(g)]));
    if (t == DType::Q6_K) return std::ldexp(s * 32, -11) * 1.001;
    const double m = std::fabs(f16_to_f32(p.biases[size_t(g)]));
    (void)q;
    return std::ldexp(s * 15 + m, -11) * 1.001;
}

void check_repack(DType t, int64_t n, int64_t k, uint64_t seed, size_t pad) {
    SCOPED_TRACE(std::string(dtype_name(t)) + " [" + std::to_string(n) + ", " + std::to_string(k) + "] pad " +
                 std::to_string(pad));
    Quantized q = quantize(t, n, k, seed, pad);
    const PackedHost p = repack(view(t, q, n, k));
    EXPECT_EQ(p.kind, packed_kind_of(t));
    EXPECT_EQ(p.n, n);
    EXPECT_EQ(p.k, k);
    EXPECT_EQ(p.group, t == DType::Q6_K ? 16 : 32);
    const int64_t code_bytes = p.kind == PackedKind::Int4 ? k / 2 : k;
    EXPECT_EQ(code_bytes % 16, 0);  // the kernels' 128-bit loads
    EXPECT_EQ(p.codes.size(), size_t(n * code_bytes));
    EXPECT_EQ(p.scales.size(), size_t(n * (k / p.group)));
    EXPECT_EQ(p.biases.size(), t == DType::Q4_K ? p.scales.size() : 0u);
    const bool exact = t == DType::Q4_0 || t == DType::Q8_0;
    std::vector<float> row(static_cast<size_t>(k));
    int bad = 0;
    for (int64_t r = 0; r < n; ++r) {
        unpack_row_f32(p, r, row.data());
        for (int64_t c = 0; c < k; ++c) {
            const float want = q.deq[size_t(r * k + c)], got = row[size_t(c)];
            const double tol = exact ? 0.0 : kquant_bound(t, q, p, r, c);
            if (!(std::fabs(double(got) - double(want)) <= tol) && ++bad <= 5)
                ADD_FAILURE() << "[" << r << ", " << c << "] got " << got << " want " << want << " (tol " << tol << ")";
        }
    }
    EXPECT_EQ(bad, 0);
}

}  // namespace

TEST(PackedRepack, MatchesCpuCodecs) {
    uint64_t seed = 1;
    for (DType t : {DType::Q4_0, DType::Q8_0})
        for (int64_t n : {1, 3, 17, 33})
            for (int64_t k : {32, 96, 160, 544}) check_repack(t, n, k, seed++, n % 2 ? 0 : 6);
    for (DType t : {DType::Q4_K, DType::Q6_K})
        for (int64_t n : {1, 3, 17, 33})
            for (int64_t k : {256, 768}) check_repack(t, n, k, seed++, n % 2 ? 0 : 10);
}

// Q4_0 codes in natural order: byte j of a row holds column 2j low, 2j + 1 high; the scale is
// the block's f16 d copied.
TEST(PackedRepack, Q4_0Layout) {
    BlockQ4_0 b{};
    b.d = f32_to_f16(0.5f);
    for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));  // y[j] = j - 8, y[j + 16] = 7 - j
    const PackedHost p = repack(Tensor(&b, DType::Q4_0, {1, 32}));
    ASSERT_EQ(p.codes.size(), 16u);
    for (int c = 0; c < 32; ++c) {
        const int want = c < 16 ? c : 15 - (c - 16);
        const int got = (c % 2) ? p.codes[size_t(c / 2)] >> 4 : p.codes[size_t(c / 2)] & 0xF;
        EXPECT_EQ(got, want) << "column " << c;
    }
    EXPECT_EQ(p.scales[0], b.d);
    EXPECT_TRUE(p.biases.empty());
}

// 16-row tiles: the same matrix (every row unpacks to the same floats), every chunk and scale
// where packed_weight.h says — tile (r / 16, column / 128), 1 KB of codes (64 bytes a row) and
// 16·128/G halves of scales each, tiles in k order within a row tile — and a shape that does not
// fit is refused. Q4_0 (G 32, no biases), Q4_K (biases) and hand-made G 64 / 128 matrices.
TEST(PackedRepack, TilesHoldTheSameMatrix) {
    uint64_t seed = 7;
    auto make = [](DType t, int64_t n, int64_t k, uint64_t sd) {
        Quantized q = quantize(t, n, k, sd, 0);
        return repack(view(t, q, n, k));
    };
    std::vector<PackedHost> cases;
    for (auto [n, k] : {std::pair<int64_t, int64_t>{16, 128}, {48, 384}, {32, 1024}}) {
        cases.push_back(make(DType::Q4_0, n, k, seed++));
        if (k % 256 == 0) cases.push_back(make(DType::Q4_K, n, k, seed++));
    }
    for (int group : {64, 128}) {  // MLX-style affine groups, biases present
        PackedHost p;
        p.n = 32, p.k = 512, p.group = group;
        p.codes.resize(size_t(p.n * p.k / 2));
        p.scales.resize(size_t(p.n * p.k / group));
        p.biases.resize(p.scales.size());
        uint32_t x = 12345u + uint32_t(group);
        auto next = [&] { return x = x * 1664525u + 1013904223u; };
        for (auto& b : p.codes) b = uint8_t(next() >> 24);
        for (auto& v : p.scales) v = f32_to_f16(float(int(next() >> 20) - 2048) / 4096.f);
        for (auto& v : p.biases) v = f32_to_f16(float(int(next() >> 20) - 2048) / 512.f);
        cases.push_back(p);
    }
    for (const PackedHost& p : cases) {
        SCOPED_TRACE("[" + std::to_string(p.n) + ", " + std::to_string(p.k) + "] G " + std::to_string(p.group));
        PackedHost t = p;
        tile_packed(t);
        ASSERT_TRUE(t.tiles);
        ASSERT_EQ(t.codes.size(), p.codes.size());
        ASSERT_EQ(t.scales.size(), p.scales.size());
        ASSERT_EQ(t.biases.size(), p.biases.size());
        const int64_t nkt = p.k / 128, gpt = 128 / p.group, rb = p.k / 2, gpr = p.k / p.group;
        for (int64_t r = 0; r < p.n; ++r) {
            for (int64_t ch = 0; ch < rb / 16; ++ch) {
                const int64_t tile = (r / 16) * nkt + ch / 4;
                const uint8_t* got = t.codes.data() + tile * 1024 + (r % 16) * 64 + (ch % 4) * 16;
                ASSERT_EQ(std::memcmp(got, p.codes.data() + r * rb + 16 * ch, 16), 0) << "row " << r << " chunk " << ch;
            }
            for (int64_t gi = 0; gi < gpr; ++gi) {
                const size_t at = size_t(((r / 16) * nkt + gi / gpt) * 16 * gpt + (r % 16) * gpt + gi % gpt);
                ASSERT_EQ(t.scales[at], p.scales[size_t(r * gpr + gi)]) << "row " << r << " group " << gi;
                if (!p.biases.empty()) {
                    ASSERT_EQ(t.biases[at], p.biases[size_t(r * gpr + gi)]);
                }
            }
            std::vector<float> want(size_t(p.k)), got(size_t(p.k));
            unpack_row_f32(p, r, want.data());
            unpack_row_f32(t, r, got.data());
            ASSERT_EQ(want, got) << "row " << r;
        }
        EXPECT_THROW(tile_packed(t), Error);  // already tiles
    }
    PackedHost odd = make(DType::Q4_0, 17, 128, 3);
    EXPECT_THROW(tile_packed(odd), Error);  // 17 rows
    PackedHost narrow = make(DType::Q4_0, 16, 96, 4);
    EXPECT_THROW(tile_packed(narrow), Error);  // 96 columns
    PackedHost int8 = make(DType::Q8_0, 16, 128, 5);
    EXPECT_THROW(tile_packed(int8), Error);
}

// packed_layout_k32 (the MoE decode kernels' 32-bit layout from group, order and k) and the
// 32-bit in-row steps address every chunk and scale group where packed_layout does, in both orders.
TEST(PackedRepack, Layout32AddressesAsTheLayout) {
    for (int64_t k : {128, 384, 2048})
        for (int group : {32, 64, 128, 256})
            for (bool tiles : {false, true}) {
                if (k % group != 0 || (tiles && !packed_tiles_fit(PackedKind::Int4, 48, k, group))) continue;
                SCOPED_TRACE("k " + std::to_string(k) + " G " + std::to_string(group) + (tiles ? " tiles" : ""));
                PackedMatrix m;
                m.n = 48, m.k = k, m.group = group, m.tiles = tiles;
                const PackedLayout want = packed_layout(m), got = packed_layout_k32(group, tiles, int(k));
                const PackedRowSteps st = packed_row_steps(got);
                for (int64_t r = 0; r < m.n; ++r) {
                    ASSERT_EQ(got.code_row(r), want.code_row(r)) << "row " << r;
                    ASSERT_EQ(got.scale_row(r), want.scale_row(r)) << "row " << r;
                }
                for (int ch = 0; ch < int(k / 32); ++ch) ASSERT_EQ(st.chunk(ch), want.chunk(ch)) << "chunk " << ch;
                for (int gi = 0; gi < int(k / group); ++gi)
                    ASSERT_EQ(st.scale_group(gi), want.scale_group(gi)) << "group " << gi;
            }
}

TEST(PackedRepack, RejectsBadInput) {
    std::vector<uint8_t> buf(4096, 0);
    try {
        (void)repack(Tensor(buf.data(), DType::MXFP4, {2, 64}));
        FAIL() << "MXFP4 repacked";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
        EXPECT_NE(std::string(e.what()).find("mxfp4"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)repack(Tensor(buf.data(), DType::BF16, {2, 64})), Error);
    EXPECT_THROW((void)repack(Tensor(buf.data(), DType::Q4_0, {2, 48})), Error);    // not whole blocks
    EXPECT_THROW((void)repack(Tensor(buf.data(), DType::Q6_K, {2, 128})), Error);   // K-quants need 256
    EXPECT_THROW((void)repack(Tensor(buf.data(), DType::Q8_0, {2, 2, 32})), Error); // not a matrix
    EXPECT_THROW((void)packed_kind_of(DType::F32), Error);
    EXPECT_TRUE(can_repack(DType::Q4_K));
    EXPECT_FALSE(can_repack(DType::F16));
}

// A Q4_K scale d·sc beyond f16's range cannot be packed: a clear error, not an infinity.
TEST(PackedRepack, RejectsScaleOverflow) {
    BlockQ4_K b{};
    b.d = f32_to_f16(60000.f);
    for (int j = 0; j < 12; ++j) b.scales[j] = 0x3F;  // every 6-bit scale and min at 63
    try {
        (void)repack(Tensor(&b, DType::Q4_K, {1, 256}));
        FAIL() << "overflowing scale repacked";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("overflows f16"), std::string::npos) << e.what();
    }
}

TEST(MatmulDispatch, Boundaries) {
    for (PackedKind kind : {PackedKind::Int4, PackedKind::Int8}) {
        EXPECT_EQ(choose_matmul(0, 4096, 4096, kind), MatmulKernel::None);
        EXPECT_EQ(choose_matmul(-1, 4096, 4096, kind), MatmulKernel::None);
        EXPECT_EQ(choose_matmul(5, 0, 4096, kind), MatmulKernel::None);
        for (int64_t T = 1; T <= 8; ++T) {
            EXPECT_EQ(choose_matmul(T, 4096, 14336, kind), MatmulKernel::Gemv) << T;
            EXPECT_EQ(choose_matmul(T, 1, 32, kind, true), MatmulKernel::Gemv) << T;
        }
        for (int64_t T : {9, 16, 512, 8192}) {
            EXPECT_EQ(choose_matmul(T, 4096, 14336, kind, false), MatmulKernel::DequantCublas) << T;
            EXPECT_EQ(choose_matmul(T, 4096, 14336, kind, true), MatmulKernel::Gemm) << T;
        }
        EXPECT_EQ(choose_matmul(9, 4096, 14336, kind),
                  kHaveFastGemm ? MatmulKernel::Gemm : MatmulKernel::DequantCublas);
    }
    static_assert(kDispatchGemvMaxTokens == 8);
}
