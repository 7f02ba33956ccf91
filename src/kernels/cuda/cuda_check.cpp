// TS_CUDA_CHECK's slow path.
#include "kernels/cuda/cuda_check.h"

#include <cstring>

namespace tessera::cuda {

namespace {
// "/long/path/src/kernels/cuda/x.cpp" -> "src/kernels/cuda/x.cpp"
const char* short_path(const char* file) {
    const char* p = std::strstr(file, "src/");
    return p ? p : file;
}

ErrorKind kind_of(cudaError_t err) {
    switch (err) {
        case cudaErrorMemoryAllocation: return ErrorKind::OutOfMemory;
        case cudaErrorNoDevice:
        case cudaErrorInsufficientDriver:
        case cudaErrorInvalidDevice: return ErrorKind::Unsupported;
        default: return ErrorKind::Internal;
    }
}
}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
    (void)cudaGetLastError();  // so the next, unrelated check does not report this error again
    fail(kind_of(err), "CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(err),
         cudaGetErrorString(err), call, short_path(file), line);
}

}  // namespace tessera::cuda
