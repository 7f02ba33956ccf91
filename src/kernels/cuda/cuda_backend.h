// The CUDA backend: every op of kernels/backend.h on the GPU. Today the plain reference path
// (TESSERA_KERNELS=reference): weights placed in device memory — matrices dequantized to bf16
// (f32 ones kept f32) and multiplied with cuBLAS — and the simple reference kernels of
// kernels/cuda/ref_*.h for everything else. All ops are queued on one stream; plan arrays and
// tensors are device memory (see Backend::memory()).
#pragma once
#include <memory>

#include "kernels/backend.h"

namespace tessera {

// Throws Error(Unsupported) with the reason when no usable device is present.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

}  // namespace tessera
