// Checks and the grid of fast::read_floor (the kernel is in fast_read_floor.cu).
#include "kernels/cuda/fast_read_floor.h"

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda::fast {

namespace detail {
cudaError_t launch_read_floor(const void* p, int64_t n16, int blocks, float* sink, cudaStream_t stream);
}

void read_floor(const void* p, size_t bytes, float* sink, cudaStream_t stream) {
    const int64_t n16 = int64_t(bytes / 16);
    if (n16 == 0) return;
    TS_CHECK(p && sink, "read_floor: null pointer");
    TS_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0, "read_floor: the buffer is not 16-byte aligned");
    constexpr int kBlocksPerSm = 8;
    TS_CUDA_CHECK(detail::launch_read_floor(p, n16, current_sm_count() * kBlocksPerSm, sink, stream));
}

}  // namespace tessera::cuda::fast
