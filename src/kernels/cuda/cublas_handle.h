// CublasHandle: an owned cuBLAS handle bound to one stream, with its own workspace (so cuBLAS
// allocates nothing during a call and the calls can be captured in a CUDA graph). Movable, not
// copyable. cuBLAS failures are tessera::Error carrying the status name (TS_CUBLAS_CHECK).
#pragma once
#include <cstddef>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "kernels/cuda/device_buffer.h"

namespace tessera::cuda {

// Throws Error (OutOfMemory for CUBLAS_STATUS_ALLOC_FAILED, Unsupported for NOT_SUPPORTED /
// ARCH_MISMATCH / NOT_INITIALIZED, Invalid for INVALID_VALUE, Internal otherwise) naming the
// status, the call and file:line.
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

class CublasHandle {
public:
    // 32 MiB: NVIDIA's recommended cuBLAS workspace on Hopper.
    static constexpr size_t kDefaultWorkspaceBytes = size_t(32) << 20;

    // cublasCreate on the current device, bound to `stream` (nullptr: the legacy default stream).
    explicit CublasHandle(cudaStream_t stream = nullptr, size_t workspace_bytes = kDefaultWorkspaceBytes);
    ~CublasHandle();
    CublasHandle(CublasHandle&& other) noexcept;
    CublasHandle& operator=(CublasHandle&& other) noexcept;
    CublasHandle(const CublasHandle&) = delete;
    CublasHandle& operator=(const CublasHandle&) = delete;

    cublasHandle_t get() const { return h_; }
    cudaStream_t stream() const { return stream_; }
    // Queues the following calls on `stream` (a no-op when already bound to it). Re-attaches the
    // workspace, which cublasSetStream resets to cuBLAS's own pool.
    void bind(cudaStream_t stream);

private:
    void destroy() noexcept;

    cublasHandle_t h_ = nullptr;
    cudaStream_t stream_ = nullptr;
    DeviceBuffer workspace_;
};

}  // namespace tessera::cuda

#define TS_CUBLAS_CHECK(call)                                                             \
    do {                                                                                  \
        const cublasStatus_t ts_cublas_st_ = (call);                                      \
        if (ts_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                       \
            ::tessera::cuda::throw_cublas_error(ts_cublas_st_, #call, __FILE__, __LINE__); \
    } while (0)
