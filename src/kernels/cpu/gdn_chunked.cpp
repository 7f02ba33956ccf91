// The chunked (WY) form of the gated delta rule, as HF transformers' torch_chunk_gated_delta_rule
// computes it, and the small dense GEMM it is built from. A last partial chunk of L < C tokens is
// handled as it stands: HF pads with g = 0, β = 0, k = v = 0, which changes nothing in it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/gdn.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu::gdn {

namespace {

#ifdef TESSERA_CPU_AVX2
// R rows × (8·NV) columns of C, accumulated in registers over all of K.
template <int R, int NV>
inline void gemm_tile(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t K,
                      float alpha, bool accumulate) {
    __m256 acc[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
    for (int64_t kk = 0; kk < K; ++kk) {
        __m256 b[NV];
        for (int v = 0; v < NV; ++v) b[v] = _mm256_loadu_ps(B + kk * ldb + 8 * v);
        for (int r = 0; r < R; ++r) {
            const __m256 a = _mm256_broadcast_ss(A + r * lda + kk);
            for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
        }
    }
    const __m256 al = _mm256_set1_ps(alpha);
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) {
            float* c = C + r * ldc + 8 * v;
            const __m256 x = _mm256_mul_ps(al, acc[r][v]);
            _mm256_storeu_ps(c, accumulate ? _mm256_add_ps(_mm256_loadu_ps(c), x) : x);
        }
}

template <int R>
void gemm_rows_avx2(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t N,
                    int64_t K, float alpha, bool accumulate) {
    int64_t j = 0;
    for (; j + 16 <= N; j += 16) gemm_tile<R, 2>(C + j, ldc, A, lda, B + j, ldb, K, alpha, accumulate);
    for (; j + 8 <= N; j += 8) gemm_tile<R, 1>(C + j, ldc, A, lda, B + j, ldb, K, alpha, accumulate);
    for (; j < N; ++j)
        for (int r = 0; r < R; ++r) {
            float s = 0.f;
            for (int64_t kk = 0; kk < K; ++kk) s += A[r * lda + kk] * B[kk * ldb + j];
            float& c = C[r * ldc + j];
            c = accumulate ? c + alpha * s : alpha * s;
        }
}
#endif

}  // namespace

void gemm(float* C, int64_t ldc, const float* A, int64_t lda, const float* B, int64_t ldb, int64_t M, int64_t N,
          int64_t K, float alpha, bool accumulate, bool simd, Tri tri) {
    // K and N needed by rows [i, i + rows): everything, or up to the block's last diagonal entry.
    auto k_of = [&](int64_t i, int64_t rows) { return tri == Tri::LowerA ? std::min(K, i + rows) : K; };
    auto n_of = [&](int64_t i, int64_t rows) {  // whole 8-column groups: no scalar tail inside a chunk
        return tri == Tri::LowerC ? std::min(N, (i + rows + 7) / 8 * 8) : N;
    };
#ifdef TESSERA_CPU_AVX2
    if (simd && tri == Tri::None && N >= 16) {
        // Column strips outermost: one strip of B (K × 16) stays in L1 while every row block uses it.
        int64_t j = 0;
        for (; j + 16 <= N; j += 16) {
            int64_t i = 0;
            for (; i + 6 <= M; i += 6)
                gemm_tile<6, 2>(C + i * ldc + j, ldc, A + i * lda, lda, B + j, ldb, K, alpha, accumulate);
            for (; i + 4 <= M; i += 4)
                gemm_tile<4, 2>(C + i * ldc + j, ldc, A + i * lda, lda, B + j, ldb, K, alpha, accumulate);
            for (; i < M; ++i)
                gemm_tile<1, 2>(C + i * ldc + j, ldc, A + i * lda, lda, B + j, ldb, K, alpha, accumulate);
        }
        if (j < N) gemm(C + j, ldc, A, lda, B + j, ldb, M, N - j, K, alpha, accumulate, simd);  // < 16 columns left
        return;
    }
    if (simd) {
        int64_t i = 0;
        for (; i + 6 <= M; i += 6)
            gemm_rows_avx2<6>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n_of(i, 6), k_of(i, 6), alpha, accumulate);
        for (; i + 4 <= M; i += 4)
            gemm_rows_avx2<4>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n_of(i, 4), k_of(i, 4), alpha, accumulate);
        for (; i < M; ++i)
            gemm_rows_avx2<1>(C + i * ldc, ldc, A + i * lda, lda, B, ldb, n_of(i, 1), k_of(i, 1), alpha, accumulate);
        return;
    }
#endif
    thread_local std::vector<float> row;
    row.resize(size_t(N));
    for (int64_t i = 0; i < M; ++i) {
        const int64_t Ki = k_of(i, 1), Ni = n_of(i, 1);
        std::fill(row.begin(), row.end(), 0.f);
        for (int64_t kk = 0; kk < Ki; ++kk) {
            const float a = A[i * lda + kk];
            const float* b = B + kk * ldb;
            for (int64_t j = 0; j < Ni; ++j) row[size_t(j)] += a * b[j];
        }
        float* c = C + i * ldc;
        for (int64_t j = 0; j < Ni; ++j) c[j] = accumulate ? c[j] + alpha * row[size_t(j)] : alpha * row[size_t(j)];
    }
}

void chunked(const Head& h, int chunk, bool simd) {
    const int64_t C = chunk, dk = h.dk, dv = h.dv;
    thread_local std::vector<double> G;  // [C] Γ: cumulative log-decay inside the chunk
    thread_local std::vector<float> buf;
    G.resize(size_t(C));
    // Scratch views, laid out by `take` so the buffer's size cannot drift from them.
    size_t size = 0;
    auto take = [&](int64_t n) {
        const size_t at = size;
        size += size_t(n);
        return at;
    };
    const size_t at_eG = take(C), at_D = take(C * C), at_T = take(C * C), at_P = take(C * C), at_Kb = take(C * dk),
                 at_KT = take(dk * C), at_W = take(C * dk), at_U = take(C * dv), at_X = take(C * std::max(dk, dv)),
                 at_Q = take(C * dk), at_O = take(C * dv);
    buf.resize(size);
    float* eG = buf.data() + at_eG;  // [C] e^Γ
    float* D = buf.data() + at_D;    // [C, C] e^(Γi − Γj), i ≥ j
    float* T = buf.data() + at_T;    // [C, C] A, then T = (I − A)⁻¹ by forward substitution
    float* P = buf.data() + at_P;    // [C, C] (Q·Kᵀ ⊙ D), lower incl. the diagonal
    float* Kb = buf.data() + at_Kb;  // [C, dk] diag(β)·K
    float* KT = buf.data() + at_KT;  // [dk, C] Kᵀ, later (K ⊙ e^(Γlast − Γ))ᵀ
    float* W = buf.data() + at_W;    // [C, dk] T·(Kb ⊙ e^Γ)
    float* U = buf.data() + at_U;    // [C, dv] T·diag(β)·V, then Vn = U − W·S
    float* X = buf.data() + at_X;    // [C, max(dk, dv)] diag(β)·V, then Kb ⊙ e^Γ
    // Q and O of the chunk, contiguous: token rows of q / o are often a multiple of 4 KiB apart,
    // which would make the GEMMs' row accesses collide in the same L1 sets.
    float* Q = buf.data() + at_Q;  // [C, dk]
    float* O = buf.data() + at_O;  // [C, dv]

    for (int64_t c0 = 0; c0 < h.n; c0 += C) {
        const int64_t L = std::min(C, h.n - c0);
        for (int64_t l = 0; l < L; ++l) std::copy_n(h.q + (c0 + l) * h.q_s, dk, Q + l * dk);
        const float* k = h.k + c0 * h.k_s;
        const float* v = h.v + c0 * h.v_s;
        double acc = 0;
        for (int64_t l = 0; l < L; ++l) {
            acc += h.g[(c0 + l) * h.g_s];
            G[size_t(l)] = acc;
            eG[l] = float(std::exp(acc));
        }
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j <= i; ++j) D[i * C + j] = std::exp(float(G[size_t(i)] - G[size_t(j)]));
        for (int64_t l = 0; l < L; ++l) {
            const float b = h.beta[(c0 + l) * h.beta_s];
            for (int64_t i = 0; i < dk; ++i) {
                Kb[l * dk + i] = b * k[l * h.k_s + i];
                KT[i * C + l] = k[l * h.k_s + i];
            }
            for (int64_t j = 0; j < dv; ++j) X[l * dv + j] = b * v[l * h.v_s + j];
        }

        // A = −strictlower(Kb·Kᵀ ⊙ D); then row by row T[i, :i] = A[i, :i] + A[i, :i]·T[:i, :i]; T += I.
        gemm(T, C, Kb, dk, KT, C, L, L, dk, 1.f, false, simd, Tri::LowerC);
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j) T[i * C + j] = j < i ? -T[i * C + j] * D[i * C + j] : 0.f;
        for (int64_t i = 1; i < L; ++i) {
            float* ti = T + i * C;
            for (int64_t m = 1; m < i; ++m) {  // ascending: ti[m] is still A[i, m] when read
                const float a = ti[m];
                const float* tm = T + m * C;
                for (int64_t j = 0; j < m; ++j) ti[j] += a * tm[j];
            }
        }
        for (int64_t i = 0; i < L; ++i) T[i * C + i] = 1.f;

        gemm(U, dv, T, C, X, dv, L, dv, L, 1.f, false, simd, Tri::LowerA);  // U = T·diag(β)V
        for (int64_t l = 0; l < L; ++l)
            for (int64_t i = 0; i < dk; ++i) X[l * dk + i] = eG[l] * Kb[l * dk + i];
        gemm(W, dk, T, C, X, dk, L, dk, L, 1.f, false, simd, Tri::LowerA);   // W = T·(Kb ⊙ e^Γ)
        gemm(U, dv, W, dk, h.S, dv, L, dv, dk, -1.f, true, simd);  // Vn = U − W·S

        // O = e^Γ ⊙ (Q·S) + (Q·Kᵀ ⊙ D)·Vn, with S still the state before this chunk.
        gemm(O, dv, Q, dk, h.S, dv, L, dv, dk, 1.f, false, simd);
        for (int64_t l = 0; l < L; ++l)
            for (int64_t j = 0; j < dv; ++j) O[l * dv + j] *= eG[l];
        gemm(P, C, Q, dk, KT, C, L, L, dk, 1.f, false, simd, Tri::LowerC);
        for (int64_t i = 0; i < L; ++i)
            for (int64_t j = 0; j < L; ++j) P[i * C + j] = j <= i ? P[i * C + j] * D[i * C + j] : 0.f;
        gemm(O, dv, P, C, U, dv, L, dv, L, 1.f, true, simd, Tri::LowerA);
        for (int64_t l = 0; l < L; ++l) std::copy_n(O + l * dv, dv, h.o + (c0 + l) * h.o_s);

        // S ← e^Γlast·S + (K ⊙ e^(Γlast − Γ))ᵀ·Vn
        for (int64_t l = 0; l < L; ++l) {
            const float w = D[(L - 1) * C + l];
            for (int64_t i = 0; i < dk; ++i) KT[i * C + l] *= w;
        }
        const float last = eG[L - 1];
        for (int64_t i = 0; i < dk * dv; ++i) h.S[i] *= last;
        gemm(h.S, dv, KT, C, U, dv, dk, dv, L, 1.f, true, simd);
    }
}

}  // namespace tessera::cpu::gdn
