// Row-wise elementwise ops (SwiGLU, add, softmax, argmax) and dtype conversion of one row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/half.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "formats/quants.h"
#include "kernels/cpu/cpu_kernels.h"

namespace tessera::cpu {

namespace {
// Rows per parallel chunk so a chunk holds at least ~16K elements.
int64_t row_grain(int64_t C) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)); }
}  // namespace

void convert_row(DType t, const void* row, float* y, int64_t H) {
    switch (t) {
        case DType::F32: std::memcpy(y, row, size_t(H) * sizeof(float)); return;
        case DType::F16:
            for (int64_t i = 0; i < H; ++i) y[i] = f16_to_f32(static_cast<const uint16_t*>(row)[i]);
            return;
        case DType::BF16:
            for (int64_t i = 0; i < H; ++i) y[i] = bf16_to_f32(static_cast<const uint16_t*>(row)[i]);
            return;
        default:
            if (!can_dequantize(t)) fail(ErrorKind::Unsupported, "cannot convert {} rows to f32 on cpu", dtype_name(t));
            dequantize_row(t, row, y, H);
    }
}

void swiglu(float* y, int64_t ys, const float* g, int64_t gs, const float* u, int64_t us, int64_t R, int64_t C) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r)
            for (int64_t c = 0; c < C; ++c) {
                const float gv = g[r * gs + c];
                y[r * ys + c] = gv / (1.f + std::exp(-gv)) * u[r * us + c];
            }
    }, row_grain(C));
}

void add(float* y, int64_t ys, const float* a, int64_t as, const float* b, int64_t bs, int64_t R, int64_t C) {
    ThreadPool::global().parallel_for(R, [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r)
            for (int64_t c = 0; c < C; ++c) y[r * ys + c] = a[r * as + c] + b[r * bs + c];
    }, row_grain(C));
}

void add_bias(float* y, int64_t ys, const float* bias, int64_t R, int64_t C) {
    ThreadPool::global().parallel_for(R, [&](int64_t rb, int64_t re) {
        for (int64_t r = rb; r < re; ++r)
            for (int64_t c = 0; c < C; ++c) y[r * ys + c] += bias[c];
    }, row_grain(C));
}

void softmax(float* x, int64_t xs, int64_t R, int64_t C) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            float* v = x + r * xs;
            float m = -std::numeric_limits<float>::infinity();
            for (int64_t c = 0; c < C; ++c) m = std::max(m, v[c]);
            if (m == -std::numeric_limits<float>::infinity()) {  // fully masked row: all zeros
                for (int64_t c = 0; c < C; ++c) v[c] = 0.f;
                continue;
            }
            double sum = 0.0;
            for (int64_t c = 0; c < C; ++c) {
                v[c] = std::exp(v[c] - m);
                sum += v[c];
            }
            const float inv = float(1.0 / sum);
            for (int64_t c = 0; c < C; ++c) v[c] *= inv;
        }
    }, row_grain(C));
}

void top_k(const float* x, int64_t xs, int64_t R, int64_t C, int k, float* values, int32_t* ids) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        std::vector<int32_t> idx;
        for (int64_t r = b; r < e; ++r) {
            const float* v = x + r * xs;
            idx.clear();
            for (int64_t c = 0; c < C; ++c)
                if (!std::isnan(v[c])) idx.push_back(int32_t(c));
            const size_t n = std::min(idx.size(), size_t(k));
            std::partial_sort(idx.begin(), idx.begin() + long(n), idx.end(),
                              [&](int32_t i, int32_t j) { return v[i] > v[j] || (v[i] == v[j] && i < j); });
            for (int j = 0; j < k; ++j) {
                const bool has = size_t(j) < n;
                values[r * k + j] = has ? v[idx[size_t(j)]] : std::numeric_limits<float>::quiet_NaN();
                ids[r * k + j] = has ? idx[size_t(j)] : -1;
            }
        }
    }, row_grain(C));
}

void argmax(const float* x, int64_t xs, int64_t R, int64_t C, int32_t* out) {
    ThreadPool::global().parallel_for(R, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
            const float* v = x + r * xs;
            int64_t best = 0;
            float bv = -std::numeric_limits<float>::infinity();
            bool found = false;
            for (int64_t c = 0; c < C; ++c)
                if (!std::isnan(v[c]) && (!found || v[c] > bv)) {  // NaN never wins; first index on ties
                    bv = v[c];
                    best = c;
                    found = true;
                }
            out[r] = int32_t(best);
        }
    }, row_grain(C));
}

}  // namespace tessera::cpu
