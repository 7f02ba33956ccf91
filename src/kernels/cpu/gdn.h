// Internals of the Gated DeltaNet CPU kernels: one (sequence, value head) of the delta rule in
// either form, and the small row / matrix helpers they share (AVX2 or portable scalar).
#pragma once
#include <cstdint>

namespace tessera::cpu::gdn {

// One sequence × value head: n tokens, every pointer at the sequence's first token, strides in
// floats per token. S [dk, dv] is the state, read and updated in place.
struct Head {
    int64_t n = 0, dk = 0, dv = 0;
    const float *q = nullptr, *k = nullptr, *v = nullptr, *g = nullptr, *beta = nullptr;
    int64_t q_s = 0, k_s = 0, v_s = 0, g_s = 0, beta_s = 0;
    float* o = nullptr;
    int64_t o_s = 0;
    float* S = nullptr;
};

// Token by token: S ← e^g·S; u = Sᵀk; S += k ⊗ β(v − u); o = Sᵀq.
void recurrent(const Head& h, bool simd);
// The chunked WY form over chunks of `chunk` tokens (HF torch_chunk_gated_delta_rule).
void chunked(const Head& h, int chunk, bool simd);

// Triangular shortcuts of gemm: LowerA: A is lower triangular (A[i, k > i] = 0), so row i stops at
// k = i; LowerC: only C[i, j ≤ i] is wanted (entries right of the diagonal are left undefined).
enum class Tri : uint8_t { None, LowerA, LowerC };

// C[M, N] = (accumulate ? C : 0) + alpha · A[M, K] · B[K, N]; row strides lda/ldb/ldc in floats.
void gemm(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M, int64_t N,
          int64_t K, float alpha, bool accumulate, bool simd, Tri tri = Tri::None);

}  // namespace tessera::cpu::gdn
