// The embedding reference kernel against the CPU backend for every table dtype it reads
// (f32, f16, bf16, Q4_0, Q8_0, Q4_K, Q6_K, MXFP4): strided table rows, strided output, repeated
// and boundary ids. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/status.h"
#include "formats/quants.h"
#include "kernels/backend.h"
#include "kernels/cuda/ref_embed.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;
namespace ref = tessera::cuda::ref;

namespace {

// A table [n_rows, H] of dtype t, quantized from random f32 rows, rows `stride` bytes apart.
struct HostTable {
    std::vector<uint8_t> bytes;
    int64_t stride = 0;
};
HostTable make_table(DType t, int64_t n_rows, int64_t H, int64_t pad_bytes, uint32_t seed) {
    const int64_t row_bytes = int64_t(dtype_row_bytes(t, H));
    HostTable tab;
    tab.stride = row_bytes + pad_bytes;
    tab.bytes.assign(size_t(n_rows * tab.stride), 0xab);
    for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<float> src = random_rows(1, H, H, seed + uint32_t(r), -3.f, 3.f);
        quantize_row(t, src.data(), tab.bytes.data() + r * tab.stride, H);
    }
    return tab;
}

}  // namespace

TEST(CudaRefEmbed, MatchesCpuForEveryTableDtype) {
    REQUIRE_CUDA();
    struct Case {
        DType t;
        std::vector<int64_t> widths;
    };
    const std::vector<Case> cases = {
        {DType::F32, {1, 3, 129, 4097}}, {DType::F16, {1, 3, 129, 4097}}, {DType::BF16, {1, 127, 4097}},
        {DType::Q4_0, {32, 96, 4128}},   {DType::Q8_0, {32, 288, 4128}},  {DType::MXFP4, {32, 160}},
        {DType::Q4_K, {256, 768}},       {DType::Q6_K, {256, 1280}},
    };
    const int64_t n_rows = 37;
    for (const Case& c : cases)
        for (int64_t H : c.widths) {
            // Pad rows by 4 bytes: keeps every dtype's elements and block scales aligned.
            const HostTable tab = make_table(c.t, n_rows, H, 4, uint32_t(H));
            // One token, then a batch with repeats and both ends of the table.
            const std::vector<std::vector<int32_t>> batches = {{36}, {0, 5, 36, 5, 17, 1, 0, 35, 2}};
            for (const std::vector<int32_t>& ids : batches) {
                const int64_t T = int64_t(ids.size()), ldy = H + 3;
                std::vector<float> y = random_rows(T, H, ldy, 1);
                cuda::Stream s;
                cuda::DeviceBuffer dtab = to_device(tab.bytes), dids = to_device(ids), dy = to_device(y);
                Tensor table(const_cast<uint8_t*>(tab.bytes.data()), c.t, {n_rows, H});
                table.stride[0] = tab.stride;
                make_cpu_backend()->embed(rows_view(y.data(), T, H, ldy), table, ids.data());
                ref::embed(dy.as<float>(), ldy, dtab.data(), c.t, tab.stride, n_rows, dids.as<int32_t>(), T, H, s);
                s.synchronize();
                const std::string what = std::string("embed ") + dtype_name(c.t) + " H=" + std::to_string(H) +
                                         " T=" + std::to_string(T);
                // Every decode is a conversion or one or two f32 products, like the CPU codec:
                // exact. Q4_K's d·q − m is exact too unless the CPU build contracts it to an FMA
                // (quants_k.cpp turns contraction off); allow that one rounding there.
                if (c.t == DType::Q4_K) expect_close(to_host<float>(dy), y, 1e-6, what);
                else expect_same_bytes(to_host<float>(dy), y, what);
            }
        }
}

TEST(CudaRefEmbed, BadIdsGiveNanRows) {
    REQUIRE_CUDA();
    const int64_t n_rows = 4, H = 5;
    std::vector<float> table = random_rows(n_rows, H, H, 3);
    std::vector<int32_t> ids = {1, -1, 4, 3};
    std::vector<float> y(size_t(ids.size() * H), 0.f);
    cuda::Stream s;
    cuda::DeviceBuffer dt = to_device(table), di = to_device(ids), dy = to_device(y);
    ref::embed(dy.as<float>(), H, dt.data(), DType::F32, H * 4, n_rows, di.as<int32_t>(), int64_t(ids.size()), H, s);
    s.synchronize();
    y = to_host<float>(dy);
    for (int64_t c = 0; c < H; ++c) {
        EXPECT_EQ(y[size_t(c)], table[size_t(H + c)]);
        EXPECT_TRUE(std::isnan(y[size_t(H + c)])) << "id -1";
        EXPECT_TRUE(std::isnan(y[size_t(2 * H + c)])) << "id 4 of 4 rows";
        EXPECT_EQ(y[size_t(3 * H + c)], table[size_t(3 * H + c)]);
    }
}

TEST(CudaRefEmbed, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float buf[64] = {};
    const int32_t* ids = reinterpret_cast<const int32_t*>(buf);
    EXPECT_FALSE(ref::embed_supports(DType::I8));
    EXPECT_TRUE(ref::embed_supports(DType::Q4_0));
    try {
        ref::embed(buf, 8, buf, DType::I8, 8, 4, ids, 1, 8, nullptr);
        FAIL() << "an i8 table was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    }
    EXPECT_THROW(ref::embed(buf, 48, buf, DType::Q8_0, 34, 4, ids, 1, 48, nullptr), Error);  // not whole blocks
    EXPECT_THROW(ref::embed(buf, 32, buf, DType::Q8_0, 30, 4, ids, 1, 32, nullptr), Error);  // stride < row
    EXPECT_THROW(ref::embed(buf, 8, buf, DType::F32, 32, 4, nullptr, 1, 8, nullptr), Error);  // null ids
    EXPECT_THROW(ref::embed(buf, 8, buf, DType::F16, 17, 4, ids, 1, 8, nullptr), Error);      // misaligned rows
    EXPECT_NO_THROW(ref::embed(nullptr, 0, nullptr, DType::F32, 0, 0, nullptr, 0, 8, nullptr));  // T = 0
}
