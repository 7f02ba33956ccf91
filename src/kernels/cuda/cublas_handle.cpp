// CublasHandle: RAII over cublasCreate/cublasDestroy, the stream binding and the workspace.
#include "kernels/cuda/cublas_handle.h"

#include <cstring>
#include <utility>

#include "core/status.h"

namespace tessera::cuda {

namespace {
const char* short_path(const char* file) {  // ".../src/kernels/cuda/x.cpp" -> "src/kernels/cuda/x.cpp"
    const char* p = std::strstr(file, "src/");
    return p ? p : file;
}

ErrorKind kind_of(cublasStatus_t st) {
    switch (st) {
        case CUBLAS_STATUS_ALLOC_FAILED: return ErrorKind::OutOfMemory;
        case CUBLAS_STATUS_NOT_INITIALIZED:
        case CUBLAS_STATUS_ARCH_MISMATCH:
        case CUBLAS_STATUS_NOT_SUPPORTED: return ErrorKind::Unsupported;
        case CUBLAS_STATUS_INVALID_VALUE: return ErrorKind::Invalid;
        default: return ErrorKind::Internal;
    }
}
}  // namespace

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
    fail(kind_of(status), "cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(status),
         cublasGetStatusString(status), call, short_path(file), line);
}

CublasHandle::CublasHandle(cudaStream_t stream, size_t workspace_bytes) : workspace_(workspace_bytes) {
    TS_CUBLAS_CHECK(cublasCreate(&h_));
    try {
        // Plain f32 math: no TF32 for f32 GEMMs (the reference path must meet f32 tolerances).
        TS_CUBLAS_CHECK(cublasSetMathMode(h_, CUBLAS_DEFAULT_MATH));
        stream_ = stream;
        TS_CUBLAS_CHECK(cublasSetStream(h_, stream_));
        TS_CUBLAS_CHECK(cublasSetWorkspace(h_, workspace_.data(), workspace_.size()));
    } catch (...) {
        destroy();
        throw;
    }
}

CublasHandle::~CublasHandle() { destroy(); }

void CublasHandle::destroy() noexcept {
    if (h_) (void)cublasDestroy(h_);  // fails only on a broken context; a destructor must not throw
    h_ = nullptr;
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : h_(std::exchange(other.h_, nullptr)),
      stream_(std::exchange(other.stream_, nullptr)),
      workspace_(std::move(other.workspace_)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
    if (this != &other) {
        destroy();  // before the workspace it may still use is freed
        h_ = std::exchange(other.h_, nullptr);
        stream_ = std::exchange(other.stream_, nullptr);
        workspace_ = std::move(other.workspace_);
    }
    return *this;
}

void CublasHandle::bind(cudaStream_t stream) {
    TS_CHECK(h_ != nullptr, "CublasHandle::bind: the handle was moved from");
    if (stream == stream_) return;
    TS_CUBLAS_CHECK(cublasSetStream(h_, stream));
    stream_ = stream;
    TS_CUBLAS_CHECK(cublasSetWorkspace(h_, workspace_.data(), workspace_.size()));
}

}  // namespace tessera::cuda
