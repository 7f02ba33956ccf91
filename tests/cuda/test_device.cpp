// The CUDA skeleton: device query, error checking, DeviceBuffer, Stream, and the conversion
// kernels against core/half.h. Without a GPU (CI) every test that needs one skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;
using namespace tessera::cuda;


namespace {

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = uint8_t(rng());
    return v;
}

bool bf16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7f80u; }
bool f16_is_nan(uint16_t h) { return (h & 0x7fffu) > 0x7c00u; }

// Inputs that exercise rounding: specials, exact ties, f32 subnormals, f16 overflow and
// subnormal boundaries, then random values over a wide exponent range.
std::vector<float> awkward_floats(size_t n, uint32_t seed) {
    std::vector<float> v = {0.f, -0.f, 1.f, -1.f, INFINITY, -INFINITY, NAN, -NAN,
                            std::numeric_limits<float>::max(), std::numeric_limits<float>::lowest(),
                            std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(),
                            65504.f, 65519.f, 65520.f, 65536.f, 6.1035156e-05f, 5.9604645e-08f,
                            2.9802322e-08f, 2.9802326e-08f, 1e-6f, -3.3e-7f};
    for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f80ffffu, 0x7f7fffffu, 0x00400000u,
                          0x80000001u, 0x3f801000u, 0x3f803000u, 0x7fc00001u, 0xff800001u})
        v.push_back(bits_to_f32(bits));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> mant(-2.f, 2.f);
    std::uniform_int_distribution<int> expo(-30, 20);
    while (v.size() < n) v.push_back(std::ldexp(mant(rng), expo(rng)));
    v.resize(n);
    return v;
}

// Runs an f32 -> 16-bit kernel on x[rows, cols] with padded strides and compares each value
// with the CPU conversion `ref`; checks that the padding was left alone.
template <typename Kernel, typename Ref, typename IsNan>
void check_f32_to_16(Kernel kernel, Ref ref, IsNan is_nan, int64_t rows, int64_t cols, int64_t pad) {
    const int64_t ldx = cols + pad, ldy = cols + 2 * pad;
    const std::vector<float> x = awkward_floats(size_t(rows * ldx), uint32_t(rows * 7919 + cols));
    DeviceBuffer dx(x.size() * 4), dy(size_t(rows * ldy) * 2);
    dx.upload(x.data(), dx.size());
    dy.fill(0xcd);
    kernel(dy.as<uint16_t>(), ldy, dx.as<float>(), ldx, rows, cols, nullptr);
    std::vector<uint16_t> y(size_t(rows * ldy));
    dy.download(y.data(), dy.size());
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < ldy; ++c) {
            const uint16_t got = y[size_t(r * ldy + c)];
            if (c >= cols) {
                ASSERT_EQ(got, 0xcdcd) << "padding overwritten at [" << r << ", " << c << "]";
                continue;
            }
            const float in = x[size_t(r * ldx + c)];
            const uint16_t want = ref(in);
            const bool ok = is_nan(want) ? is_nan(got) : got == want;
            if (!ok && ++bad <= 5)
                ADD_FAILURE() << "[" << r << ", " << c << "] input bits 0x" << std::hex << f32_to_bits(in)
                              << ": got 0x" << got << " want 0x" << want;
        }
    EXPECT_EQ(bad, 0) << "of " << rows * cols << " values (shape [" << rows << ", " << cols << "])";
}

// Runs a 16-bit -> f32 kernel over every bit pattern (as [256, 256], rows ldx / ldy apart) and
// compares with the CPU conversion `ref`.
template <typename Kernel, typename Ref>
void check_16_to_f32_all_patterns(Kernel kernel, Ref ref, int64_t ldx, int64_t ldy) {
    const int64_t rows = 256, cols = 256;
    std::vector<uint16_t> x(size_t(rows * ldx), 0);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) x[size_t(r * ldx + c)] = uint16_t(r * cols + c);
    DeviceBuffer dx(x.size() * 2), dy(size_t(rows * ldy) * 4);
    dx.upload(x.data(), dx.size());
    dy.fill(0xcd);
    Stream stream;
    kernel(dy.as<float>(), ldy, dx.as<uint16_t>(), ldx, rows, cols, stream.get());
    stream.synchronize();
    std::vector<float> y(size_t(rows * ldy));
    dy.download(y.data(), dy.size());
    int bad = 0;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < ldy; ++c) {
            const uint32_t got = f32_to_bits(y[size_t(r * ldy + c)]);
            if (c >= cols) {
                ASSERT_EQ(got, 0xcdcdcdcdu) << "padding overwritten at [" << r << ", " << c << "]";
                continue;
            }
            const uint16_t in = uint16_t(r * cols + c);
            const float want = ref(in);
            const bool ok = std::isnan(want) ? std::isnan(bits_to_f32(got)) : got == f32_to_bits(want);
            if (!ok && ++bad <= 5)
                ADD_FAILURE() << "input 0x" << std::hex << in << ": got 0x" << got << " want 0x"
                              << f32_to_bits(want);
        }
    EXPECT_EQ(bad, 0);
}

}  // namespace

TEST(CudaDevice, Query) {
    REQUIRE_CUDA();
    const int n = device_count();
    ASSERT_GT(n, 0);
    for (int i = 0; i < n; ++i) {
        const DeviceInfo d = device_info(i);
        std::cout << to_string(d) << "\n";
        EXPECT_EQ(d.index, i);
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.sm_count, 0);
        EXPECT_GE(d.cc_major, 5);
        EXPECT_GT(d.total_bytes, size_t(1) << 30);
        EXPECT_GT(d.free_bytes, 0u);
        EXPECT_LE(d.free_bytes, d.total_bytes);
    }
    EXPECT_THROW(device_info(n), Error);
    EXPECT_THROW(device_info(-1), Error);
}

TEST(CudaCheck, ErrorNamesCallAndLocation) {  // needs no GPU: every runtime call fails then too
    try {
        TS_CUDA_CHECK(cudaSetDevice(-1));
        FAIL() << "cudaSetDevice(-1) succeeded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("CUDA error cuda"), std::string::npos) << msg;
        std::cout << msg << "\n";
        EXPECT_NE(msg.find("cudaSetDevice(-1)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("test_device.cpp:"), std::string::npos) << msg;
    }
}

TEST(CudaBuffer, BoundsAreCheckedWithoutTouchingTheDevice) {
    DeviceBuffer empty;
    uint8_t b[4] = {};
    EXPECT_EQ(empty.size(), 0u);
    EXPECT_EQ(empty.data(), nullptr);
    empty.upload(b, 0);  // zero bytes into nothing is fine
    try {
        empty.upload(b, 1);
        FAIL() << "upload past the end did not throw";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("1 bytes at offset 0 do not fit a 0-byte buffer"), std::string::npos)
            << e.what();
    }
    EXPECT_THROW(empty.download(b, 1), Error);
    EXPECT_THROW(empty.fill(0, 1), Error);
    EXPECT_THROW(empty.copy_from(empty, 1), Error);
}

TEST(CudaBuffer, RoundTripOddSizes) {
    REQUIRE_CUDA();
    for (size_t n : {size_t(1), size_t(3), size_t(1000003)}) {
        const std::vector<uint8_t> host = random_bytes(n, uint32_t(n));
        DeviceBuffer buf(n);
        ASSERT_EQ(buf.size(), n);
        ASSERT_NE(buf.data(), nullptr);
        buf.upload(host.data(), n);
        std::vector<uint8_t> back(n, 0);
        buf.download(back.data(), n);
        EXPECT_EQ(back, host) << n << " bytes";
        // A sub-range at an odd offset.
        if (n > 2) {
            const std::vector<uint8_t> part = random_bytes(n - 2, 99);
            buf.upload(part.data(), n - 2, 1);
            std::vector<uint8_t> all(n);
            buf.download(all.data(), n);
            EXPECT_EQ(all[0], host[0]);
            EXPECT_TRUE(std::equal(part.begin(), part.end(), all.begin() + 1));
            EXPECT_EQ(all[n - 1], host[n - 1]);
        }
        EXPECT_THROW(buf.upload(host.data(), n, 1), Error);
        EXPECT_THROW(buf.download(back.data(), 1, n), Error);
    }
}

TEST(CudaBuffer, MoveTransfersOwnership) {
    REQUIRE_CUDA();
    DeviceBuffer a(1000);
    void* p = a.data();
    DeviceBuffer b(std::move(a));
    EXPECT_EQ(b.data(), p);
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(a.data(), nullptr);
    EXPECT_EQ(a.size(), 0u);
    DeviceBuffer c(16);
    c = std::move(b);  // frees c's old block
    EXPECT_EQ(c.data(), p);
    EXPECT_EQ(b.data(), nullptr);
    c.reset();
    EXPECT_TRUE(c.empty());
}

TEST(CudaBuffer, DeviceToDeviceCopyAndFill) {
    REQUIRE_CUDA();
    const size_t n = 1000003;
    const std::vector<uint8_t> host = random_bytes(n, 7);
    DeviceBuffer src(n), dst(n + 5);
    src.upload(host.data(), n);
    dst.fill(0x5a);
    dst.copy_from(src, n - 10, /*dst_offset=*/5, /*src_offset=*/3);
    dst.fill(0x00, 7, /*offset=*/1000);
    std::vector<uint8_t> out(n + 5);
    dst.download(out.data(), out.size());  // cudaMemcpy waits for the default stream's work
    for (size_t i = 0; i < out.size(); ++i) {
        uint8_t want;
        if (i >= 1000 && i < 1007) want = 0x00;
        else if (i >= 5 && i < 5 + (n - 10)) want = host[i - 5 + 3];
        else want = 0x5a;
        ASSERT_EQ(out[i], want) << "byte " << i;
    }
    EXPECT_THROW(dst.copy_from(src, n, 6, 0), Error);
    EXPECT_THROW(dst.copy_from(src, 2, 0, n - 1), Error);
}

TEST(CudaStream, OrdersWorkAndSynchronizes) {
    REQUIRE_CUDA();
    Stream s;
    ASSERT_NE(s.get(), nullptr);
    const size_t n = 3 << 20;
    DeviceBuffer a(n), b(n);
    a.fill(0x11, n, 0, s);
    b.copy_from(a, n, 0, 0, s);
    a.fill(0x22, n, 0, s);
    s.synchronize();
    std::vector<uint8_t> ha(n), hb(n);
    a.download(ha.data(), n);
    b.download(hb.data(), n);
    EXPECT_EQ(std::count(ha.begin(), ha.end(), 0x22), std::ptrdiff_t(n));
    EXPECT_EQ(std::count(hb.begin(), hb.end(), 0x11), std::ptrdiff_t(n));
    Stream moved(std::move(s));
    EXPECT_EQ(s.get(), nullptr);
    moved.synchronize();
}

TEST(CudaConvert, F32ToBf16MatchesCpu) {
    REQUIRE_CUDA();
    // (the last three: rows aligned for the four-column loads and stores)
    for (auto [rows, cols, pad] : {std::tuple{1, 1, 0}, {1, 3, 1}, {7, 33, 3}, {2, 1000003, 0}, {129, 257, 5},
                                   {64, 2048, 0}, {5, 4100, 4}, {70000, 4, 0}})
        check_f32_to_16(f32_to_bf16_rows, f32_to_bf16, bf16_is_nan, rows, cols, pad);
}

TEST(CudaConvert, F32ToF16MatchesCpu) {
    REQUIRE_CUDA();
    // (the last three: rows aligned for the four-column loads and stores)
    for (auto [rows, cols, pad] : {std::tuple{1, 1, 0}, {1, 3, 1}, {7, 33, 3}, {2, 1000003, 0}, {129, 257, 5},
                                   {64, 2048, 0}, {5, 4100, 4}, {70000, 4, 0}})
        check_f32_to_16(f32_to_f16_rows, f32_to_f16, f16_is_nan, rows, cols, pad);
}

TEST(CudaConvert, Bf16ToF32AllPatterns) {
    REQUIRE_CUDA();
    check_16_to_f32_all_patterns(bf16_to_f32_rows, bf16_to_f32, 259, 261);  // rows unaligned: element by element
    check_16_to_f32_all_patterns(bf16_to_f32_rows, bf16_to_f32, 260, 264);  // aligned: four columns at a time
}

TEST(CudaConvert, F16ToF32AllPatterns) {
    REQUIRE_CUDA();
    check_16_to_f32_all_patterns(f16_to_f32_rows, f16_to_f32, 259, 261);  // rows unaligned: element by element
    check_16_to_f32_all_patterns(f16_to_f32_rows, f16_to_f32, 260, 264);  // aligned: four columns at a time
}

TEST(CudaConvert, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float* x = nullptr;
    uint16_t* y = nullptr;
    EXPECT_NO_THROW(f32_to_bf16_rows(y, 0, x, 0, 0, 5, nullptr));  // empty: nothing to do
    EXPECT_THROW(f32_to_bf16_rows(y, 4, x, 4, 2, 4, nullptr), Error);  // null pointers
    EXPECT_THROW(f32_to_bf16_rows(y, 4, x, 3, 2, 4, nullptr), Error);  // ldx < cols
    EXPECT_THROW(bf16_to_f32_rows(x, 4, y, 4, -1, 4, nullptr), Error);
}
