// The read-floor kernels of bench_fast_gemv (fast::read_floor, fast::read_pattern): they read what
// they are given, write their sink only on a marker, and refuse layouts they do not take.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/fast_read_floor.h"
#include "kernels/cuda/packed_weight.h"
#include "kernels/cuda/stream.h"

#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::cuda;
using reftest::to_device;
using reftest::to_host;

// read_floor reads every 16-byte chunk it is given (a chunk whose words XOR to its marker makes
// the reading thread write the sink; zeros never do) and refuses a misaligned buffer.
TEST(FastReadFloor, ReadsTheBufferAndWritesOnlyOnItsMarker) {
    REQUIRE_CUDA();
    for (size_t bytes : {size_t(16), size_t(1000 * 16 + 5), size_t(3) << 20}) {
        SCOPED_TRACE(bytes);
        std::vector<uint32_t> words((bytes + 3) / 4, 0u);
        DeviceBuffer d = to_device(words), sink = to_device(std::vector<float>{-1.f});
        Stream s;
        fast::read_floor(d.data(), bytes, sink.as<float>(), s.get());
        s.synchronize();
        EXPECT_EQ(to_host<float>(sink)[0], -1.f);
        words[(bytes / 16 - 1) * 4] = 0x9e3779b9u;  // the last whole chunk: read by some thread
        d = to_device(words);
        fast::read_floor(d.data(), bytes, sink.as<float>(), s.get());
        s.synchronize();
        EXPECT_EQ(to_host<float>(sink)[0], 1.f);
    }
    DeviceBuffer d(64), sink(4);
    EXPECT_THROW(fast::read_floor(static_cast<char*>(d.data()) + 4, 32, sink.as<float>(), nullptr), Error);
}

// read_pattern reads the last 16 bytes of the codes in both orders (the matrix's rows, and as
// 16-row tiles: the same bytes) and writes the sink only on its marker; refuses other layouts.
TEST(FastReadFloor, PatternReadsTheLastChunk) {
    REQUIRE_CUDA();
    const int64_t n = 48, k = 384;  // 3 row tiles, 3 k-tiles: warps 3..7 have none
    std::vector<uint32_t> codes(size_t(n * k / 8), 0u);
    std::vector<uint16_t> scales(size_t(n * k / 32), 0);
    Stream s;
    for (const bool tiled : {false, true}) {
        SCOPED_TRACE(tiled);
        for (const bool marked : {false, true}) {
            codes.back() = marked ? 0x9e3779b9u : 0u;
            DeviceBuffer dc = to_device(codes), ds = to_device(scales), sink = to_device(std::vector<float>{-1.f});
            PackedMatrix w;
            w.n = n, w.k = k, w.codes = dc.as<uint8_t>(), w.scales = ds.as<uint16_t>();
            fast::read_pattern(w, tiled, sink.as<float>(), s.get());
            s.synchronize();
            EXPECT_EQ(to_host<float>(sink)[0], marked ? 1.f : -1.f);
        }
    }
    DeviceBuffer dc(size_t(n * k / 2)), ds(size_t(n * k / 16)), sink(4);
    PackedMatrix w;
    w.n = n, w.k = k, w.codes = dc.as<uint8_t>(), w.scales = ds.as<uint16_t>();
    w.n = 40;
    EXPECT_THROW(fast::read_pattern(w, false, sink.as<float>(), nullptr), Error);
    w.n = n, w.group = 64;
    EXPECT_THROW(fast::read_pattern(w, false, sink.as<float>(), nullptr), Error);
}
