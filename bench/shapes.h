// The one place the benchmarks' work is counted from first principles (bytes moved, FLOPs), the
// model shapes they run at, and llama.cpp's anchor figures from ../shared/PERF.md.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace tessera::bench {

struct Cost {
    double bytes = 0;  // bytes that must cross the memory bus at least once
    double flops = 0;
};

// Bytes of a [rows, cols] matrix of dtype t: rows × (cols / block elements) × block bytes
// (q4_0: 18 bytes per 32, q8_0: 34 per 32, q4_k: 144 per 256, bf16: 2 per 1).
inline double matrix_bytes(DType t, int64_t rows, int64_t cols) {
    const DTypeInfo& i = dtype_info(t);
    TS_CHECK(cols % i.block_elems == 0, "{} rows of {} elements are not whole blocks of {}", dtype_name(t), cols,
             i.block_elems);
    return double(rows) * double(cols / i.block_elems) * double(i.block_bytes);
}

// y[T, N] = x[T, K] · w[N, K]ᵀ: the weights read once, 2·T·N·K FLOPs.
inline Cost matmul_cost(DType w, int64_t T, int64_t N, int64_t K) {
    return {matrix_bytes(w, N, K), 2.0 * double(T) * double(N) * double(K)};
}

// SwiGLU experts (gate, up [I, H], down [H, I]) for T tokens routed to k experts each: the bytes of
// the `distinct` experts the routing selects, 3 matmuls of 2·I·H FLOPs per (token, expert).
inline Cost moe_cost(DType w, int64_t T, int k, double distinct, int64_t I, int64_t H) {
    const double per_expert = 2 * matrix_bytes(w, I, H) + matrix_bytes(w, H, I);
    return {distinct * per_expert, 3 * 2.0 * double(T) * double(k) * double(I) * double(H)};
}

// (query, key) pairs of causal attention for T new tokens ending a context of kv_len:
// token t (0-based) sees kv_len − T + t + 1 keys.
inline double causal_pairs(int64_t T, int64_t kv_len) {
    return double(T) * double(kv_len - T) + double(T) * double(T + 1) / 2;
}

// Attention over `pairs` (query, key) pairs: q·k and p·v are 2·D FLOPs each per pair and head
// (4·heads·D·pairs); bytes: q, out and the K/V cache of kv_len positions read once.
inline Cost attention_cost(int64_t heads, int64_t n_kv, int64_t D, int64_t T, int64_t kv_len, double kv_elem_bytes) {
    const double kv = 2.0 * double(kv_len) * double(n_kv) * double(D) * kv_elem_bytes;
    const double qo = 2.0 * double(T) * double(heads) * double(D) * 4;
    return {kv + qo, 4.0 * double(heads) * double(D) * causal_pairs(T, kv_len)};
}

// The gated delta rule for T tokens of one sequence, nv value heads with state [dk, dv]:
// per token and head, decay (dk·dv) + u = Sᵀk (2·dk·dv) + rank-1 update (2·dk·dv) + o = Sᵀq
// (2·dk·dv) = 7·dk·dv FLOPs (the recurrent definition; the chunked form does other work for the
// same result). Bytes: the f32 state read and written once, q, k, v, o, g, β once.
inline Cost gdn_cost(int64_t T, int64_t nk, int64_t nv, int64_t dk, int64_t dv) {
    const double state = 2.0 * double(nv) * double(dk) * double(dv) * 4;
    const double io = double(T) * double(2 * nk * dk + 2 * nv * dv + 2 * nv) * 4;
    return {state + io, 7.0 * double(T) * double(nv) * double(dk) * double(dv)};
}

// An elementwise op over n f32 elements that reads `reads` arrays and writes `writes`.
inline Cost elementwise_cost(int64_t n, int reads, int writes, double flops_per_elem) {
    return {double(n) * double(reads + writes) * 4, double(n) * flops_per_elem};
}

// ---- shapes ----------------------------------------------------------------------------
// The flagship: Qwen3.6-35B-A3B (REFERENCE.md, tools/synth_presets.cpp).
struct Flagship {
    static constexpr int64_t hidden = 2048, vocab = 248320;
    static constexpr int64_t n_head = 16, n_kv = 2, head_dim = 256;  // gated full attention
    static constexpr int64_t gdn_nk = 16, gdn_nv = 32, gdn_dk = 128, gdn_dv = 128, conv_k = 4;
    static constexpr int64_t experts = 256, top_k = 8, expert_ff = 512;
};

// ---- llama.cpp CUDA on one H200 (PERF.md, test-backend-ops perf, 2026-11-29) -----------------
// Not comparable with CPU figures; printed beside the shape they were measured at.
namespace anchor {
inline constexpr const char* gemv_q4_0 = "14.35 us, 2.30 TB/s";
inline constexpr const char* gemv_q4_k = "16.22 us, 2.04 TB/s";
inline constexpr const char* gemv_bf16 = "30.25 us, 3.88 TB/s";
inline constexpr const char* gemm8_q4_0 = "32.72 us, 1.01 TB/s";
inline constexpr const char* gemm512_q4_0 = "316 us, 190 TFLOP/s";
inline constexpr const char* gemm512_bf16 = "120 us, 502 TFLOP/s (cuBLAS)";
// llama.cpp's MoE figures are one mul_mat_id, i.e. one of the three expert matrices.
inline constexpr const char* moe1_q4_0 = "7.63 us, 0.93 TB/s (1 of 3 matrices)";
inline constexpr const char* moe512_q4_0 = "320 us, 40 TFLOP/s (1 of 3 matrices)";
inline constexpr const char* gdn1 = "2.54 us (recurrence)";
inline constexpr const char* gdn1024 = "639 us (recurrence, sequential)";
}  // namespace anchor

}  // namespace tessera::bench
