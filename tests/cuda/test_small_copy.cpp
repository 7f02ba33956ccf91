// Backend copies between page-locked staging memory and device memory: those up to 64 KiB by a
// kernel through the host buffer's mapped address (TESSERA_SMALL_COPIES=kernel, the default), the
// rest and the `dma` mode by the copy engine. Every size and misalignment lands byte for byte, a
// staging buffer the host rewrote between two copies is read afresh, and copy_out_queued's bytes
// are there once a later mark has passed. PinnedMemory::device_view answers only for its own
// blocks.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/pinned_memory.h"
#include "kernels/cuda/small_copy.h"

#include "ref_test_util.h"  // REQUIRE_CUDA

using namespace tessera;

namespace {

// A backend made with TESSERA_SMALL_COPIES=copies; the variable is unset again however the
// construction ends (a throw must not leak it into the tests after).
std::unique_ptr<Backend> backend_with(const char* copies) {
    struct Unset {
        ~Unset() { unsetenv("TESSERA_SMALL_COPIES"); }
    } unset;
    setenv("TESSERA_SMALL_COPIES", copies, 1);
    return make_cuda_backend(0, CudaKernels::Fast);
}

void fill(uint8_t* p, size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(rng());
}

// A block of `bytes` in `mem`, freed with the holder.
struct Block {
    MemoryResource& mem;
    uint8_t* p;
    Block(MemoryResource& m, size_t bytes) : mem(m), p(static_cast<uint8_t*>(m.allocate(bytes))) {}
    ~Block() { mem.deallocate(p); }
};

}  // namespace

class SmallCopies : public ::testing::TestWithParam<const char*> {};

TEST_P(SmallCopies, EverySizeAndAlignmentRoundTrips) {
    REQUIRE_CUDA();
    auto be = backend_with(GetParam());
    const size_t cap = 300000;
    Block src(be->staging_memory(), cap + 64), dst(be->staging_memory(), cap + 64), dev(be->memory(), cap + 64);
    uint32_t seed = 1;
    for (size_t n : {size_t(1), size_t(3), size_t(15), size_t(16), size_t(17), size_t(255), size_t(4096), size_t(4099),
                     cuda::kSmallCopyMax, cuda::kSmallCopyMax + 1, size_t(200000)})
        for (size_t off : {size_t(0), size_t(1), size_t(8), size_t(16)}) {
            fill(src.p + off, n, seed++);
            std::memset(dst.p, 0xab, cap + 64);
            be->copy_in(dev.p + (off ^ 8), src.p + off, n);
            be->copy_out_queued(dst.p + (off ^ 1), dev.p + (off ^ 8), n);
            be->wait_mark(be->mark());
            ASSERT_EQ(std::memcmp(dst.p + (off ^ 1), src.p + off, n), 0) << GetParam() << ": " << n << " bytes at " << off;
            ASSERT_EQ(dst.p[(off ^ 1) + n], 0xab) << "wrote past the end";
            if ((off ^ 1) > 0) {
                ASSERT_EQ(dst.p[(off ^ 1) - 1], 0xab) << "wrote before the start";
            }
        }
}

TEST_P(SmallCopies, RewrittenStagingIsReadAfresh) {
    REQUIRE_CUDA();
    auto be = backend_with(GetParam());
    const size_t n = 3840;  // a decode step's plan
    Block stage(be->staging_memory(), n), out(be->staging_memory(), n), dev(be->memory(), 2 * n);
    std::vector<uint8_t> a(n), b(n);
    fill(a.data(), n, 7);
    fill(b.data(), n, 8);
    for (int round = 0; round < 3; ++round) {
        std::memcpy(stage.p, a.data(), n);
        be->copy_in(dev.p, stage.p, n);
        be->wait_mark(be->mark());  // the copy has read the staging buffer
        std::memcpy(stage.p, b.data(), n);
        be->copy_in(dev.p + n, stage.p, n);
        be->copy_out_queued(out.p, dev.p, n);
        be->wait_mark(be->mark());
        ASSERT_EQ(std::memcmp(out.p, a.data(), n), 0) << GetParam() << ", round " << round;
        be->copy_out_queued(out.p, dev.p + n, n);
        be->wait_mark(be->mark());
        ASSERT_EQ(std::memcmp(out.p, b.data(), n), 0) << GetParam() << ", round " << round;
    }
}

INSTANTIATE_TEST_SUITE_P(Modes, SmallCopies, ::testing::Values("kernel", "dma"));

TEST(SmallCopies, ModeIsChecked) {
    REQUIRE_CUDA();
    EXPECT_THROW(backend_with("sometimes"), Error);
}

TEST(PinnedMemory, DeviceViewOnlyInsideItsBlocks) {
    REQUIRE_CUDA();
    cuda::PinnedMemory pinned;
    auto* p = static_cast<uint8_t*>(pinned.allocate(1000));
    EXPECT_NE(pinned.device_view(p, 1000), nullptr);
    EXPECT_NE(pinned.device_view(p + 999, 1), nullptr);
    EXPECT_EQ(static_cast<uint8_t*>(pinned.device_view(p + 10, 5)) - static_cast<uint8_t*>(pinned.device_view(p, 1)), 10);
    EXPECT_EQ(pinned.device_view(p + 999, 2), nullptr) << "past the end";
    EXPECT_EQ(pinned.device_view(p + 1000, 1), nullptr);
    std::vector<uint8_t> heap(16);
    EXPECT_EQ(pinned.device_view(heap.data(), 16), nullptr) << "not page-locked here";
    pinned.deallocate(p);
    EXPECT_EQ(pinned.device_view(p, 1), nullptr) << "freed";
}
