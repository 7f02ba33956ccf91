// CUDA runtime errors as tessera::Error: TS_CUDA_CHECK(cudaMalloc(&p, n)) throws with the
// failing call, the CUDA error name and message, and file:line.
#pragma once
#include <cuda_runtime_api.h>

#include "core/status.h"

namespace tessera::cuda {

// Throws Error (OutOfMemory for allocation failures, Unsupported when there is no usable
// device or driver, Internal otherwise). Clears the runtime's last (non-sticky) error first.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

}  // namespace tessera::cuda

#define TS_CUDA_CHECK(call)                                                          \
    do {                                                                             \
        const cudaError_t ts_cuda_err_ = (call);                                     \
        if (ts_cuda_err_ != cudaSuccess)                                             \
            ::tessera::cuda::throw_cuda_error(ts_cuda_err_, #call, __FILE__, __LINE__); \
    } while (0)
