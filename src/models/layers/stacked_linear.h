// Projections that read the same x, stacked: y[T, Σ n_i] = x · [W_0 | W_1 | …]ᵀ, one matmul (one
// launch) where the W_i share a dtype (stacked once at load, WeightStore::stack_rows), else one
// matmul per W_i into its band of columns. Either way y's column bands are the W_i's outputs;
// the next ops read them as views (col_view, head_view) with y's row stride.
#pragma once
#include <vector>

#include "core/status.h"
#include "core/views.h"
#include "kernels/backend.h"
#include "runtime/weight_store.h"

namespace tessera {

struct StackedLinear {
    Tensor stacked;              // [Σ n_i, K], or empty: then
    std::vector<Tensor> apart;   // W_i [n_i, K]
    int64_t rows = 0;            // Σ n_i

    static StackedLinear load(WeightStore& w, const std::vector<WeightStore::RowPiece>& pieces, int64_t K) {
        StackedLinear s;
        for (const auto& p : pieces) s.rows += p.rows;
        s.stacked = w.stack_rows(pieces, K);
        if (s.stacked.empty())  // dtypes differ (e.g. a q8_0 W_b next to a q4_k W_qkv)
            for (const auto& p : pieces)
                s.apart.push_back(p.pick.empty() ? w.matrix(p.name, p.rows, K) : w.gather_rows(p.name, p.pick, K));
        return s;
    }
    bool empty() const { return rows == 0; }

    // y[T, rows] = x · [W_0 | W_1 | …]ᵀ (y may be a strided view).
    void apply(Backend& be, const Tensor& y, const Tensor& x) const {
        TS_ASSERT(y.ndim == 2 && y.dim(1) == rows);
        if (!stacked.empty()) return be.matmul(y, x, stacked);
        int64_t col = 0;
        for (const Tensor& w : apart) {
            be.matmul(col_view(y, col, w.dim(0)), x, w);
            col += w.dim(0);
        }
    }
};

}  // namespace tessera
