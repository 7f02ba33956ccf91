// The matmul cases shared by bench_gemv (few tokens: weight-read bandwidth) and bench_gemm (many
// tokens: FLOP/s): y[T, N] = x[T, K] · w[N, K]ᵀ through Backend::matmul at llama.cpp's anchor shape
// and the flagship's projections.
#pragma once
#include <string>
#include <vector>

#include "harness.h"

namespace tessera::bench {

struct MatmulShape {
    const char* name;  // "4096x14336": N x K
    int64_t N, K;
    bool prefill;  // also a prefill (GEMM) shape; lm_head runs on the last token only
};

inline const std::vector<MatmulShape>& matmul_shapes() {
    static const std::vector<MatmulShape> s = {
        {"4096x14336", 4096, 14336, true},                       // llama.cpp's test-backend-ops shape
        {"q+gate/qkv 8192x2048", 8192, Flagship::hidden, true},  // flagship attn q+gate / GDN qkv
        {"gdn z 4096x2048", 4096, Flagship::hidden, true},       // flagship GDN z
        {"o/out 2048x4096", Flagship::hidden, 4096, true},       // flagship attn o / GDN out
        {"lm_head 248320x2048", Flagship::vocab, Flagship::hidden, false},
    };
    return s;
}

// llama.cpp on H200 at this case (PERF.md), or "".
inline std::string matmul_anchor(const MatmulShape& s, const std::string& dtype, int64_t T) {
    if (s.N != 4096 || s.K != 14336) return "";
    if (T == 1 && dtype == "q4_0") return anchor::gemv_q4_0;
    if (T == 1 && dtype == "q4_k") return anchor::gemv_q4_k;
    if (T == 1 && dtype == "bf16") return anchor::gemv_bf16;
    if (T == 8 && dtype == "q4_0") return anchor::gemm8_q4_0;
    if (T == 512 && dtype == "q4_0") return anchor::gemm512_q4_0;
    if (T == 512 && dtype == "bf16") return anchor::gemm512_bf16;
    return "";
}

// Every (shape, dtype, T) case; `gemv`: bandwidth-bound (weights rotated over copies to read
// them cold), else compute-bound GEMM shapes only.
inline void bench_matmul(Bench& b, bool gemv) {
    const char* family = gemv ? "gemv " : "gemm ";
    for (const MatmulShape& s : matmul_shapes()) {
        if (!gemv && !s.prefill) continue;
        const std::string name = family + std::string(s.name);
        for (const std::string& dt : b.opt().dtypes) {
            const DType t = dtype_from_name(dt);
            std::vector<int64_t> todo;
            for (int64_t T : b.opt().tokens)
                if (b.want(name, dt, T)) todo.push_back(T);
            if (todo.empty()) continue;
            Scope sc(b.dev());
            const std::vector<uint8_t> host = random_weight(t, s.N, s.K, 1);
            const int copies = gemv ? b.cold_copies(matrix_bytes(t, s.N, s.K)) : 1;
            std::vector<Tensor> w;
            for (int c = 0; c < copies; ++c) w.push_back(sc.weight(t, s.N, s.K, host.data()));
            for (int64_t T : todo) {
                const std::vector<float> xh = random_f32(size_t(T * s.K), -1.f, 1.f, 2);
                const Tensor x = sc.tensor(DType::F32, {T, s.K}, xh.data()), y = sc.tensor(DType::F32, {T, s.N});
                Row row{name,
                        dt,
                        T,
                        matmul_cost(t, T, s.N, s.K),
                        matmul_anchor(s, dt, T),
                        copies > 1 ? std::to_string(copies) + " copies" : ""};
                row.cold = copies > 1;
                b.run(row, [&](int i) { b.be().matmul(y, x, w[size_t(i % copies)]); });
            }
        }
    }
}

}  // namespace tessera::bench
