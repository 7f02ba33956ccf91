// The kernel pack's decode GEMV for unquantized matrices (f32 or bf16 weights: the MoE router,
// the shared expert's gate, small GDN projections, bf16 checkpoints): y[T, N] = x[T, K] · w[N, K]ᵀ
// for 1 ≤ T ≤ 8, f32 activations and accumulation. cuBLAS picks split-K GEMMs plus a reduction
// kernel for these skinny shapes (~15–30 µs per call in a decode step); this is one launch
// streaming w once with 16-byte loads. Raw pointers; queued on `stream`; CUDA-graph safe.
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

namespace tessera::cuda::fast {

constexpr int64_t kDenseGemvMaxTokens = 8;

// Whether dense_gemv takes this call: 1 ≤ T ≤ 8, rows of 16-byte multiples (K % 4 == 0 for f32,
// K % 8 == 0 for bf16), x 16-byte aligned with ldx % 4 == 0 (w from cudaMalloc is aligned).
bool dense_gemv_supported(int64_t T, int64_t K, bool w_bf16, const float* x, int64_t ldx);

// w: f32 [N, K] (w_bf16 false) or bf16 bits [N, K] (true), row-major, contiguous.
// x: [T, K] row stride ldx; y: [T, N] row stride ldy (f32).
void dense_gemv(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, const void* w, bool w_bf16, int64_t N,
                int64_t K, cudaStream_t stream);

}  // namespace tessera::cuda::fast
