#include "kernels/cuda/small_copy.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

namespace detail {
cudaError_t launch_small_copy(void* dst, const void* src, size_t bytes, int threads, cudaStream_t s);  // small_copy.cu
}

void small_copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
    if (!bytes) return;
    TS_CHECK(dst && src, "small_copy: null pointer for {} bytes", bytes);
    TS_CHECK(bytes <= kSmallCopyMax, "small_copy: {} bytes (at most {})", bytes, kSmallCopyMax);
    TS_CUDA_CHECK(detail::launch_small_copy(dst, src, bytes, 256, s));
}

}  // namespace tessera::cuda
