#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>
#include <vector>

#include "core/arena.h"
#include "core/half.h"
#include "core/memlog.h"
#include "core/status.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

using namespace tessera;

TEST(Half, F16RoundTripsEveryFiniteValue) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const uint16_t x = uint16_t(h);
        if ((x & 0x7c00) == 0x7c00) continue;  // inf / nan
        EXPECT_EQ(f32_to_f16(f16_to_f32(x)), x) << std::hex << h;
    }
}

TEST(Half, F16RoundsToNearestEven) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 1.0f / 2048)), 1.0f);                 // tie -> even (1.0)
    EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 3.0f / 2048)), 1.0f + 2.0f / 1024);   // tie -> even (up)
    EXPECT_EQ(f32_to_f16(65520.f), 0x7c00);                                      // rounds to inf
    EXPECT_EQ(f16_to_f32(f32_to_f16(5.96046448e-08f)), 5.96046448e-08f);          // min subnormal
    EXPECT_EQ(f32_to_f16(2.9e-08f), 0);                                          // below half of it
}

TEST(Half, Bf16RoundsToNearestEven) {
    EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);             // tie -> even
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Tensor, ShapesStridesAndViews) {
    std::vector<float> buf(24);
    Tensor t(buf.data(), DType::F32, {2, 3, 4});
    EXPECT_EQ(t.numel(), 24);
    EXPECT_EQ(t.rows(), 6);
    EXPECT_EQ(t.stride[0], 48);
    EXPECT_EQ(t.stride[2], 4);
    EXPECT_TRUE(t.is_contiguous());
    Tensor v = t.view({6, -1});
    EXPECT_EQ(v.dim(1), 4);
    EXPECT_THROW(t.view({5, -1}), Error);
    Tensor s = t.slice_rows(1, 2);
    EXPECT_EQ(s.ptr<float>(), buf.data() + 12);
    EXPECT_EQ(t.row_ptr(4), buf.data() + 16);
    EXPECT_THROW(check_shape(t, {2, 3, 5}, "x"), Error);
    try {
        check_shape(t, {2, 4}, "blk.0.attn_q");
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "blk.0.attn_q: expected [2, 4] got [2, 3, 4]");
    }
}

TEST(Tensor, QuantizedRows) {
    std::vector<uint8_t> buf(18 * 4);
    Tensor t(buf.data(), DType::Q4_0, {2, 64});
    EXPECT_EQ(t.row_bytes(), 36u);
    EXPECT_EQ(t.nbytes(), 72u);
    EXPECT_THROW(Tensor(buf.data(), DType::Q4_0, {2, 60}), Error);
}

TEST(Arena, BumpsAlignsAndReportsOverflow) {
    Arena a("act", 1024);
    void* p = a.alloc(10);
    void* q = a.alloc(10);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 64, 0u);
    EXPECT_EQ(static_cast<char*>(q) - static_cast<char*>(p), 64);
    EXPECT_THROW(a.alloc(2048), Error);
    // 74 bytes used: the next block starts at 128, so 896 more fill the arena and 897 do not.
    EXPECT_TRUE(a.fits(896));
    EXPECT_FALSE(a.fits(897));
    EXPECT_TRUE(a.fits(950, 1));  // unaligned: from 74
    EXPECT_FALSE(a.fits(951, 1));
    a.reset();
    EXPECT_EQ(a.used(), 0u);
    EXPECT_EQ(a.peak(), 74u);
}

TEST(ThreadPool, CoversRangeOnceAndRethrows) {
    ThreadPool pool(4);
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(1000, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
    EXPECT_THROW(pool.parallel_for(100, [](int64_t b, int64_t) {
        if (b > 0) fail(ErrorKind::Invalid, "boom");
    }), Error);
    // Still usable after an exception.
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, [&](int64_t b, int64_t e) { for (int64_t i = b; i < e; ++i) sum += i; });
    EXPECT_EQ(sum.load(), 4950);
}

TEST(MemLog, FormatsBytes) {
    EXPECT_EQ(format_bytes(512), "512 B");
    EXPECT_EQ(format_bytes(3 << 20), "3.0 MiB");
    EXPECT_EQ(format_bytes(int64_t(3) << 30), "3.00 GiB");
    MemLog::global().set("weights", 1 << 20);
    EXPECT_NE(MemLog::global().format("create").find("weights=1.0 MiB"), std::string::npos);
}

TEST(Status, ContextIsPrepended) {
    try {
        with_context("model.gguf", [] { fail(ErrorKind::Io, "truncated"); });
        FAIL();
    } catch (const Error& e) {
        EXPECT_STREQ(e.what(), "model.gguf: truncated");
        EXPECT_EQ(e.kind(), ErrorKind::Io);
    }
}
