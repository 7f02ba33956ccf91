// Views into activation buffers without copies: a band of columns of a [T, C] buffer seen as
// [T, n_heads, D] heads (the q / k / v parts of a fused projection, the gate half of each head) —
// for the model's layers and the backends' default ops alike.
#pragma once
#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

// Columns [col, col + n_heads * head_stride) of x [T, C] as [T, n_heads, head_dim] where head h
// starts at col + h * head_stride (head_stride >= head_dim; > head_dim when heads interleave).
inline Tensor head_view(const Tensor& x, int64_t col, int64_t n_heads, int64_t head_dim, int64_t head_stride) {
    TS_ASSERT(x.ndim == 2 && x.dtype == DType::F32 && col + (n_heads - 1) * head_stride + head_dim <= x.shape[1]);
    Tensor v = x;
    v.data = static_cast<float*>(x.data) + col;
    v.ndim = 3;
    v.shape = {x.shape[0], n_heads, head_dim, 0};
    v.stride = {x.stride[0], head_stride * 4, 4, 0};
    return v;
}

// Columns [col, col + width) of x [T, C] as [T, width].
inline Tensor col_view(const Tensor& x, int64_t col, int64_t width) {
    TS_ASSERT(x.ndim == 2 && x.dtype == DType::F32 && col + width <= x.shape[1]);
    Tensor v = x;
    v.data = static_cast<float*>(x.data) + col;
    v.shape[1] = width;
    return v;
}

}  // namespace tessera
