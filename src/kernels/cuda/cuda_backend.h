// The CUDA backend: every op of kernels/backend.h on the GPU, in one of two kernel modes
// (TESSERA_KERNELS):
//   fast (default): Q4_0 / Q4_K / Q8_0 / Q6_K matrices are repacked at load into the kernel pack's
//     Int4 / Int8 layout (packed_weight.h) and multiplied by its kernels (fast_matmul.h; the
//     choice in matmul_dispatch.h); everything else as in reference.
//   reference: weights placed in device memory — matrices dequantized to bf16 (f32 ones kept f32)
//     and multiplied with cuBLAS — and the simple reference kernels of kernels/cuda/ref_*.h.
// All ops are queued on one stream; plan arrays and tensors are device memory (Backend::memory()).
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/backend.h"

namespace tessera {

enum class CudaKernels : uint8_t { Fast, Reference };

// TESSERA_KERNELS's value: null or empty → Fast, "fast", "reference"; anything else is
// Error(Invalid) naming the accepted values.
CudaKernels parse_cuda_kernels(const char* value);
const char* cuda_kernels_name(CudaKernels k);  // "fast" / "reference"

// Throws Error(Unsupported) with the reason when no usable device is present.
std::unique_ptr<Backend> make_cuda_backend(int device, CudaKernels kernels);
// The kernels TESSERA_KERNELS names (fast when unset).
std::unique_ptr<Backend> make_cuda_backend(int device = 0);
// The cudaStream_t every op of `b` is queued on, or null when b is not the CUDA backend (for
// benchmarks that time the backend's ops with events on its stream).
void* cuda_backend_stream(Backend& b);

}  // namespace tessera
