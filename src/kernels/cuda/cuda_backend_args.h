// The argument checks CudaBackend's ops share (cuda_backend_ops.cpp, cuda_backend_attention.cpp):
// a tensor must be in device memory, and f32 activations are seen as evenly strided rows (Rows)
// or as [T, n, D] heads (Heads) with element strides.
#pragma once
#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera::cuda::detail {

inline void check_device(const Tensor& t, const char* op, const char* what) {
    TS_CHECK(!t.empty() && t.device == Device::CUDA, "cuda {}: {} {} is not in device memory", op, what,
             t.describe());
}

// An f32 tensor seen as evenly strided rows of its last dimension.
struct Rows {
    float* p;
    int64_t rows, cols, ld;  // ld in elements
};

// Whether t's rows (all but its last dimension, flattened) are evenly strided, as rows_of needs.
inline bool evenly_strided(const Tensor& t) {
    for (int d = 0; d + 2 < t.ndim; ++d)
        if (t.stride[d] != t.shape[d + 1] * t.stride[d + 1]) return false;
    return true;
}

inline Rows rows_of(const Tensor& t, const char* op, const char* what) {
    check_device(t, op, what);
    TS_CHECK(t.dtype == DType::F32 && t.ndim >= 1 && t.stride[t.ndim - 1] == 4, "cuda {}: {} must be f32 with "
             "contiguous rows (got {})", op, what, t.describe());
    int64_t ld = t.cols();
    if (t.ndim >= 2) {
        ld = t.stride[t.ndim - 2] / 4;
        TS_CHECK(evenly_strided(t), "cuda {}: {} {} has unevenly strided rows", op, what, t.describe());
    }
    return Rows{t.ptr<float>(), t.rows(), t.cols(), ld};
}

// An f32 [T, n, D] tensor: element strides per token and per head.
struct Heads {
    float* p;
    int64_t T, n, D, ts, hs;
};

inline Heads heads_of(const Tensor& t, const char* op, const char* what) {
    check_device(t, op, what);
    TS_CHECK(t.dtype == DType::F32 && t.ndim == 3 && t.stride[2] == 4, "cuda {}: {} must be f32 [T, n, D] with "
             "contiguous heads (got {})", op, what, t.describe());
    return Heads{t.ptr<float>(), t.shape[0], t.shape[1], t.shape[2], t.stride[0] / 4, t.stride[1] / 4};
}

inline void same_shape(const Rows& a, const Rows& b, const char* op) {
    TS_CHECK(a.rows == b.rows && a.cols == b.cols, "cuda {}: shapes differ ([{}, {}] vs [{}, {}])", op, a.rows, a.cols,
             b.rows, b.cols);
}

}  // namespace tessera::cuda::detail
