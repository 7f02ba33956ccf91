// The kernel pack's quantized matmuls over the packed layout (packed_weight.h):
//   y[T, N] = x[T, K] · w[N, K]ᵀ     x, y f32 row-major (row strides ldx, ldy in elements)
// Raw device pointers, queued on `stream`, no host synchronisation, no allocation (CUDA-graph
// safe). Host-side argument checks live in the .cpp files (nvcc does not take fmt); the launches
// in the .cu files.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/cuda/packed_weight.h"

namespace tessera::cuda::fast {

// Decode: few tokens (1 ≤ T ≤ kGemvMaxTokens). Each weight byte is read once for all T tokens.
// The kernel is gemv_pick's (fast_gemv_plan.h): the tensor-core variants round x to bf16 (codes
// and scales stay exact, sums f32), the f32 one (Int8 below 4 tokens, K past 20480) keeps x exact.
constexpr int64_t kGemvMaxTokens = 8;
// bulk_xwarp: where the pick is Bulk, how it stages x (GemvPlan::xwarp; -1: the pick's own);
// bulk_mma_reducer: where it is BulkMma, its form (GemvPlan::reducer; -1: the pick's own).
void gemv_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w,
                 cudaStream_t stream, int bulk_xwarp = -1, int bulk_mma_reducer = -1);

// Prefill: many tokens, on the tensor cores (wgmma — warp-specialised, fed by TMA, where w is Int4
// in 16-row tiles — or mma.sync; bf16 → f32, weights dequantized in registers; fast_gemm.h). x is
// rounded to bf16 into `scratch` first (gemm_packed_scratch bytes).
size_t gemm_packed_scratch(int64_t T, int64_t K);
void gemm_packed(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const PackedMatrix& w, void* scratch,
                 cudaStream_t stream);
// Whether gemm_packed's warp-specialised TMA tiles take w (Int4 in 16-row tiles).
inline bool gemm_takes_tma(const PackedMatrix& w) {
    return w.kind == PackedKind::Int4 && w.tiles && packed_tiles_fit(w.kind, w.n, w.k, w.group);
}

}  // namespace tessera::cuda::fast
