// Checks and the grid of fast::read_floor (the kernel is in fast_read_floor.cu).
#include "kernels/cuda/fast_read_floor.h"

#include <cstdint>

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device.h"

namespace tessera::cuda::fast {

namespace detail {
cudaError_t launch_read_floor(const void* p, int64_t n16, int blocks, float* sink, cudaStream_t stream);
cudaError_t launch_read_pattern(const uint8_t* codes, const uint16_t* scales, int64_t n, int64_t row_bytes, bool tiled,
                                int smem, float* sink, cudaStream_t stream);
}

void read_floor(const void* p, size_t bytes, float* sink, cudaStream_t stream) {
    const int64_t n16 = int64_t(bytes / 16);
    if (n16 == 0) return;
    TS_CHECK(p && sink, "read_floor: null pointer");
    TS_CHECK(reinterpret_cast<uintptr_t>(p) % 16 == 0, "read_floor: the buffer is not 16-byte aligned");
    constexpr int kBlocksPerSm = 8;
    TS_CUDA_CHECK(detail::launch_read_floor(p, n16, current_sm_count() * kBlocksPerSm, sink, stream));
}

void read_pattern(const PackedMatrix& w, bool tiled, float* sink, cudaStream_t stream) {
    TS_CHECK(w.codes && w.scales && sink, "read_pattern: null pointer");
    TS_CHECK(w.kind == PackedKind::Int4 && w.group == 32 && !w.biases, "read_pattern: only Int4, G = 32, no biases");
    TS_CHECK(w.n % 16 == 0 && w.k % 128 == 0, "read_pattern: n must be a multiple of 16 and k of 128, got {}x{}", w.n,
             w.k);
    // 100 KB of (unused) shared memory a block: two blocks an SM, as MmaRows' registers allow.
    constexpr int kSmem = 100 * 1024;
    TS_CUDA_CHECK(detail::launch_read_pattern(w.codes, w.scales, w.n, w.k / 2, tiled, kSmem, sink, stream));
}

}  // namespace tessera::cuda::fast
