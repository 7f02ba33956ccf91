// Which kernel a matmul on a packed weight runs (TESSERA_KERNELS=fast): one pure function of the
// shape, so the choice is unit-tested at every boundary (tests/kernels/test_packed_repack.cpp)
// and CudaBackend::matmul only follows it. Header-only: the CPU build tests it too.
#pragma once
#include <cstdint>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda {

enum class MatmulKernel : uint8_t {
    None,           // T = 0 or N = 0: nothing to compute
    Gemv,           // fast::gemv_packed (1 ≤ T ≤ kDispatchGemvMaxTokens)
    Gemm,           // fast::gemm_packed (tensor cores)
    DequantCublas,  // the packed matrix dequantized to f32 in scratch, then the reference cuBLAS GEMM
};

// = fast::kGemvMaxTokens (fast_matmul.h, which needs the CUDA headers; the backend asserts equality).
constexpr int64_t kDispatchGemvMaxTokens = 8;
// Whether fast::gemm_packed (fast_gemm.cu) is built into this tree.
constexpr bool kHaveFastGemm = true;

// y[T, N] = x[T, K] · w[N, K]ᵀ with w packed as `kind`. `have_gemm` is for the tests.
constexpr MatmulKernel choose_matmul(int64_t T, int64_t N, int64_t K, PackedKind kind,
                                     bool have_gemm = kHaveFastGemm) {
    (void)K;
    (void)kind;
    if (T <= 0 || N <= 0) return MatmulKernel::None;
    if (T <= kDispatchGemvMaxTokens) return MatmulKernel::Gemv;
    return have_gemm ? MatmulKernel::Gemm : MatmulKernel::DequantCublas;
}

}  // namespace tessera::cuda
