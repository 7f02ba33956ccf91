// Causal GQA attention over a paged KV cache (f32 or f16), and the KV-cache store. Each task
// handles one token and a run of query heads sharing one kv head, so every cached K/V row is
// loaded once for the whole group. Two passes: scores, then softmax-weighted sum of V.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

namespace {

inline const char* cache_row(const KvCacheView& c, int64_t block, int64_t row, int64_t head) {
    return static_cast<const char*>(c.data) + block * c.block_stride + row * c.row_stride + head * c.head_stride;
}

// Σ q[i]·k[i] over D, k f32 or f16.
inline float dot_row(const float* q, const char* k, DType kt, int64_t D, bool simd) {
    int64_t i = 0;
    float s = 0.f;
#ifdef TESSERA_CPU_AVX2
    if (simd) {
        __m256 acc = _mm256_setzero_ps();
        if (kt == DType::F32)
            for (; i + 8 <= D; i += 8)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(reinterpret_cast<const float*>(k) + i), acc);
        else
            for (; i + 8 <= D; i += 8)
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), load8_f16(reinterpret_cast<const uint16_t*>(k) + i), acc);
        s = hsum(acc);
    }
#endif
    if (kt == DType::F32)
        for (; i < D; ++i) s += q[i] * reinterpret_cast<const float*>(k)[i];
    else
        for (; i < D; ++i) s += q[i] * f16_to_f32(reinterpret_cast<const uint16_t*>(k)[i]);
    return s;
}

// acc[i] += a · v[i] over D, v f32 or f16.
inline void axpy_row(float* acc, float a, const char* v, DType vt, int64_t D, bool simd) {
    int64_t i = 0;
#ifdef TESSERA_CPU_AVX2
    if (simd) {
        const __m256 av = _mm256_set1_ps(a);
        if (vt == DType::F32)
            for (; i + 8 <= D; i += 8)
                _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(reinterpret_cast<const float*>(v) + i),
                                                          _mm256_loadu_ps(acc + i)));
        else
            for (; i + 8 <= D; i += 8)
                _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, load8_f16(reinterpret_cast<const uint16_t*>(v) + i),
                                                          _mm256_loadu_ps(acc + i)));
    }
#endif
    if (vt == DType::F32)
        for (; i < D; ++i) acc[i] += a * reinterpret_cast<const float*>(v)[i];
    else
        for (; i < D; ++i) acc[i] += a * f16_to_f32(reinterpret_cast<const uint16_t*>(v)[i]);
}

}  // namespace

void check_attn_plan(const AttnPlan& plan, int64_t T, int64_t n_blocks, int64_t block_size) {
    TS_CHECK(plan.n_seqs >= 0 && (plan.n_seqs == 0 || (plan.q_start && plan.kv_len && plan.block_table)),
             "attention plan: {} sequences but missing arrays", plan.n_seqs);
    TS_CHECK(plan.block_size == block_size, "attention plan: block_size {} but the cache has {}", plan.block_size,
             block_size);
    TS_CHECK(plan.n_seqs == 0 ? T == 0 : plan.q_start[0] == 0 && plan.q_start[plan.n_seqs] == T,
             "attention plan: q_start must run from 0 to the {} tokens of the batch", T);
    for (int s = 0; s < plan.n_seqs; ++s) {
        const int64_t n_new = int64_t(plan.q_start[s + 1]) - plan.q_start[s], len = plan.kv_len[s];
        TS_CHECK(n_new >= 0 && (len >= n_new || len == 0), "attention plan: sequence {} has {} new tokens but kv_len {}",
                 s, n_new, len);  // kv_len 0: a padding sequence
        TS_CHECK(len <= int64_t(plan.max_blocks) * block_size,
                 "attention plan: sequence {} kv_len {} exceeds {} blocks of {}", s, len, plan.max_blocks, block_size);
        for (int64_t b = 0; b < (len + block_size - 1) / block_size; ++b) {
            const int32_t blk = plan.block_table[int64_t(s) * plan.max_blocks + b];
            TS_CHECK(blk >= 0 && blk < n_blocks, "attention plan: sequence {} block {} is {}, cache has {} blocks", s,
                     b, blk, n_blocks);
        }
    }
}

void kv_store(const KvCacheView& kc, const KvCacheView& vc, const HeadsView& k, const HeadsView& v,
              const int32_t* slot) {
    const int64_t n_slots = kc.n_blocks * kc.block_size;
    for (int64_t t = 0; t < k.T; ++t)
        TS_CHECK(slot[t] < n_slots, "kv_store: slot {} of token {} is outside the cache ({} slots)", slot[t], t,
                 n_slots);
    auto store = [](const KvCacheView& c, const HeadsView& src, int64_t t, int64_t s) {
        for (int64_t h = 0; h < src.n_heads; ++h) {
            const float* x = src.data + t * src.tok_stride + h * src.head_stride;
            char* dst = const_cast<char*>(cache_row(c, s / c.block_size, s % c.block_size, h));
            if (c.dtype == DType::F32)
                std::copy(x, x + src.D, reinterpret_cast<float*>(dst));
            else
                for (int64_t i = 0; i < src.D; ++i) reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(x[i]);
        }
    };
    ThreadPool::global().parallel_for(k.T, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            if (slot[t] < 0) continue;  // padding token
            store(kc, k, t, slot[t]);
            store(vc, v, t, slot[t]);
        }
    });
}

void attention(const HeadsView& out, const HeadsView& q, const KvCacheView& kc, const KvCacheView& vc,
               const AttnPlan& plan, float scale) {
    const int64_t T = q.T, n_head = q.n_heads, n_kv = kc.n_kv, D = q.D, Dv = vc.D;
    const int64_t group = n_head / n_kv;
    // Token -> sequence, computed once.
    std::vector<int32_t> seq_of(static_cast<size_t>(T));
    for (int s = 0; s < plan.n_seqs; ++s)
        for (int32_t t = plan.q_start[s]; t < plan.q_start[s + 1]; ++t) seq_of[size_t(t)] = s;

    // Split each kv group into `split` runs of query heads so small batches still fill the pool.
    const int64_t want = int64_t(ThreadPool::global().size()) * 4;
    const int64_t split = std::clamp<int64_t>((want + T * n_kv - 1) / std::max<int64_t>(T * n_kv, 1), 1, group);
    const int64_t per = (group + split - 1) / split;
    const bool simd = simd_enabled();

    ThreadPool::global().parallel_for(T * n_kv * split, [&](int64_t begin, int64_t end) {
        std::vector<float> scores, acc;
        for (int64_t task = begin; task < end; ++task) {
            const int64_t t = task / (n_kv * split), kvh = (task / split) % n_kv, part = task % split;
            const int64_t h0 = kvh * group + part * per, h1 = std::min(kvh * group + group, h0 + per);
            if (h0 >= h1) continue;
            const int64_t nh = h1 - h0;
            const int s = seq_of[size_t(t)];
            const int64_t n_new = plan.q_start[s + 1] - plan.q_start[s];
            const int64_t pos = plan.kv_len[s] - n_new + (t - plan.q_start[s]);
            if (plan.kv_len[s] == 0) {  // padding: attends to nothing, zero output
                for (int64_t h = h0; h < h1; ++h)
                    std::fill_n(out.data + t * out.tok_stride + h * out.head_stride, Dv, 0.f);
                continue;
            }
            const int64_t n_ctx = pos + 1;
            const int32_t* table = plan.block_table + int64_t(s) * plan.max_blocks;

            // Pass 1: scores[h][p] = scale · q_h · k_p
            scores.resize(size_t(nh * n_ctx));
            for (int64_t p = 0; p < n_ctx; ++p) {
                const char* krow = cache_row(kc, table[p / kc.block_size], p % kc.block_size, kvh);
                for (int64_t h = 0; h < nh; ++h)
                    scores[size_t(h * n_ctx + p)] =
                        scale * dot_row(q.data + t * q.tok_stride + (h0 + h) * q.head_stride, krow, kc.dtype, D, simd);
            }
            // Softmax per head (the weights stay unnormalised; divide at the end).
            std::vector<float> inv_sum(static_cast<size_t>(nh));
            for (int64_t h = 0; h < nh; ++h) {
                float* sc = scores.data() + h * n_ctx;
                const float m = *std::max_element(sc, sc + n_ctx);
                double sum = 0.0;
                for (int64_t p = 0; p < n_ctx; ++p) {
                    sc[p] = std::exp(sc[p] - m);
                    sum += sc[p];
                }
                inv_sum[size_t(h)] = float(1.0 / sum);
            }
            // Pass 2: out_h = Σ_p w[h][p] · v_p
            acc.assign(size_t(nh * Dv), 0.f);
            for (int64_t p = 0; p < n_ctx; ++p) {
                const char* vrow = cache_row(vc, table[p / vc.block_size], p % vc.block_size, kvh);
                for (int64_t h = 0; h < nh; ++h)
                    axpy_row(acc.data() + h * Dv, scores[size_t(h * n_ctx + p)], vrow, vc.dtype, Dv, simd);
            }
            for (int64_t h = 0; h < nh; ++h) {
                float* o = out.data + t * out.tok_stride + (h0 + h) * out.head_stride;
                for (int64_t i = 0; i < Dv; ++i) o[i] = acc[size_t(h * Dv + i)] * inv_sum[size_t(h)];
            }
        }
    });
}

}  // namespace tessera::cpu
