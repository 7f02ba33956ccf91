// The gated delta rule on CPU: the sequence plan check, the entry point that spreads
// (sequence, value head) pairs over the thread pool, and the token-by-token recurrent form.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/gdn.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

void check_seq_plan(const SeqPlan& plan, int64_t T, int64_t n_slots, const char* op) {
    TS_CHECK(plan.n_seqs >= 0 && (plan.n_seqs == 0 || (plan.q_start && plan.slot)),
             "{}: sequence plan has {} sequences but missing arrays", op, plan.n_seqs);
    TS_CHECK(plan.n_seqs == 0 ? T == 0 : plan.q_start[0] == 0 && plan.q_start[plan.n_seqs] == T,
             "{}: sequence plan q_start must run from 0 to the {} tokens of the batch", op, T);
    std::vector<int32_t> slots;
    for (int s = 0; s < plan.n_seqs; ++s) {
        TS_CHECK(plan.q_start[s + 1] >= plan.q_start[s], "{}: sequence {} has a negative token count ({} to {})", op,
                 s, plan.q_start[s], plan.q_start[s + 1]);
        TS_CHECK(plan.slot[s] >= -1 && plan.slot[s] < n_slots, "{}: sequence {} has state slot {}, the state has {}",
                 op, s, plan.slot[s], n_slots);
        if (plan.slot[s] >= 0) slots.push_back(plan.slot[s]);  // -1: padding, no slot
    }
    std::sort(slots.begin(), slots.end());
    TS_CHECK(std::adjacent_find(slots.begin(), slots.end()) == slots.end(),
             "{}: two sequences of one plan share a state slot", op);
}

namespace gdn {

namespace {

// Row i of S, one token's update and read-out: row += k_i·δ; o += q_i·row. With `next`, also the
// next token's decay and Sᵀk: row *= d'; u' += k'_i·row — so S is read once per token, not twice.
struct Next {
    float decay, k_i;
    float* u;
};
inline void row_step_scalar(float* row, float k_i, const float* delta, float q_i, float* o, const Next* next,
                            int64_t n) {
    for (int64_t j = 0; j < n; ++j) {
        row[j] += k_i * delta[j];
        o[j] += q_i * row[j];
    }
    if (next)
        for (int64_t j = 0; j < n; ++j) {
            row[j] *= next->decay;
            next->u[j] += next->k_i * row[j];
        }
}
#ifdef TESSERA_CPU_AVX2
inline void row_step_avx2(float* row, float k_i, const float* delta, float q_i, float* o, const Next* next,
                          int64_t n) {
    const __m256 k = _mm256_set1_ps(k_i), q = _mm256_set1_ps(q_i);
    const __m256 d = _mm256_set1_ps(next ? next->decay : 1.f), kn = _mm256_set1_ps(next ? next->k_i : 0.f);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 s = _mm256_fmadd_ps(k, _mm256_loadu_ps(delta + j), _mm256_loadu_ps(row + j));
        _mm256_storeu_ps(o + j, _mm256_fmadd_ps(q, s, _mm256_loadu_ps(o + j)));
        if (next) {
            s = _mm256_mul_ps(s, d);
            _mm256_storeu_ps(next->u + j, _mm256_fmadd_ps(kn, s, _mm256_loadu_ps(next->u + j)));
        }
        _mm256_storeu_ps(row + j, s);
    }
    if (j < n) {
        const Next tail = next ? Next{next->decay, next->k_i, next->u + j} : Next{};
        row_step_scalar(row + j, k_i, delta + j, q_i, o + j, next ? &tail : nullptr, n - j);
    }
}
#endif

}  // namespace

void recurrent(const Head& h, bool simd) {
    const int64_t dk = h.dk, dv = h.dv;
    if (h.n == 0) return;
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(3 * dv));
    float* u = scratch.data();  // [dv] Sᵀk of the current token (S already decayed)
    float* u_next = u + dv;     // [dv] the same for the next token
    float* delta = u_next + dv;  // [dv] β(v − u)
    auto step = [&](float* row, float k_i, float q_i, float* o, const Next* next) {
#ifdef TESSERA_CPU_AVX2
        if (simd) return row_step_avx2(row, k_i, delta, q_i, o, next, dv);
#endif
        row_step_scalar(row, k_i, delta, q_i, o, next, dv);
    };
    // Token 0's first half: S ← e^g·S; u = Sᵀk.
    const float decay0 = std::exp(h.g[0]);
    std::fill(u, u + dv, 0.f);
    for (int64_t i = 0; i < dk; ++i) {
        float* row = h.S + i * dv;
        for (int64_t j = 0; j < dv; ++j) {
            row[j] *= decay0;
            u[j] += h.k[i] * row[j];
        }
    }
    for (int64_t t = 0; t < h.n; ++t) {
        const float* q = h.q + t * h.q_s;
        const float* k = h.k + t * h.k_s;
        const float* v = h.v + t * h.v_s;
        float* o = h.o + t * h.o_s;
        const float beta = h.beta[t * h.beta_s];
        for (int64_t j = 0; j < dv; ++j) delta[j] = beta * (v[j] - u[j]);
        std::fill(o, o + dv, 0.f);
        if (t + 1 == h.n) {
            for (int64_t i = 0; i < dk; ++i) step(h.S + i * dv, k[i], q[i], o, nullptr);
            break;
        }
        const float* k1 = h.k + (t + 1) * h.k_s;
        const float decay1 = std::exp(h.g[(t + 1) * h.g_s]);
        std::fill(u_next, u_next + dv, 0.f);
        for (int64_t i = 0; i < dk; ++i) {
            const Next next{decay1, k1[i], u_next};
            step(h.S + i * dv, k[i], q[i], o, &next);
        }
        std::swap(u, u_next);
    }
}

}  // namespace gdn

void gated_delta_rule(const HeadsView& o, const HeadsView& q, const HeadsView& k, const HeadsView& v,
                      const float* g, int64_t g_s, const float* beta, int64_t beta_s, float* state,
                      int64_t slot_stride, const SeqPlan& plan, const GdnParams& p) {
    const int64_t nk = p.n_k_heads, nv = p.n_v_heads, r = nv / nk, dk = q.D, dv = v.D;
    const bool simd = simd_enabled();
    const bool chunked = p.mode == GdnMode::Chunked;
    // One work item per (sequence, value head); each owns its state [dk, dv] and output rows.
    // Head-major order spreads a long sequence's heads over the pool's contiguous chunks, so a
    // prefill batched with many decodes does not land on a few threads.
    const int64_t n_seqs = plan.n_seqs;
    ThreadPool::global().parallel_for(n_seqs * nv, [&](int64_t b, int64_t e) {
        std::vector<float> scratch_state;  // a padding sequence's state: zeros, never written back
        for (int64_t item = b; item < e; ++item) {
            const int64_t s = item % n_seqs, hv = item / n_seqs, hk = p.tiled_heads ? hv % nk : hv / r;
            const int64_t t0 = plan.q_start[s];
            gdn::Head h;
            h.n = plan.q_start[s + 1] - t0;
            h.dk = dk;
            h.dv = dv;
            h.q = q.data + t0 * q.tok_stride + hk * q.head_stride;
            h.k = k.data + t0 * k.tok_stride + hk * k.head_stride;
            h.v = v.data + t0 * v.tok_stride + hv * v.head_stride;
            h.o = o.data + t0 * o.tok_stride + hv * o.head_stride;
            h.g = g + t0 * g_s + hv;
            h.beta = beta + t0 * beta_s + hv;
            h.q_s = q.tok_stride;
            h.k_s = k.tok_stride;
            h.v_s = v.tok_stride;
            h.o_s = o.tok_stride;
            h.g_s = g_s;
            h.beta_s = beta_s;
            if (h.n == 0) continue;
            if (plan.slot[s] >= 0) {
                h.S = state + plan.slot[s] * slot_stride + hv * dk * dv;
            } else {
                scratch_state.assign(size_t(dk * dv), 0.f);
                h.S = scratch_state.data();
            }
            if (!chunked) {
                gdn::recurrent(h, simd);
                continue;
            }
            // Chunks of p.chunk from the sequence's first token; a lone token (a decode, or a last
            // chunk of one) takes the recurrent step, so it gives the same bits alone or batched.
            const int64_t n_wy = h.n == 1 || (p.chunk > 1 && h.n % p.chunk == 1) ? h.n - 1 : h.n;
            if (n_wy > 0) {
                gdn::Head wy = h;
                wy.n = n_wy;
                gdn::chunked(wy, p.chunk, simd);
            }
            if (n_wy < h.n) {
                gdn::Head one = h;
                one.n = 1;
                one.q += n_wy * h.q_s;
                one.k += n_wy * h.k_s;
                one.v += n_wy * h.v_s;
                one.g += n_wy * h.g_s;
                one.beta += n_wy * h.beta_s;
                one.o += n_wy * h.o_s;
                gdn::recurrent(one, simd);
            }
        }
    });
}

}  // namespace tessera::cpu
