// Host-side argument checks shared by the reference kernels' entry points (ref_*.cpp): shapes,
// strides and null pointers, as tessera::Error(Invalid) naming the op and the argument.
// Host code only (it includes fmt through core/status.h, which nvcc rejects).
#pragma once
#include <cstdint>

#include "core/status.h"

namespace tessera::cuda::ref::detail {

inline void check_shape(const char* op, int64_t rows, int64_t cols) {
    TS_CHECK(rows >= 0 && cols >= 0, "{}: bad shape [{}, {}]", op, rows, cols);
}

// A [rows, cols] view with row stride ld (elements) at p; rows > 0 and cols > 0 here.
inline void check_rows(const char* op, const char* what, const void* p, int64_t ld, int64_t rows, int64_t cols) {
    TS_CHECK(p != nullptr, "{}: {} is null for [{}, {}]", op, what, rows, cols);
    TS_CHECK(rows <= 1 || ld >= cols, "{}: {} row stride {} is smaller than its {} columns", op, what, ld, cols);
}

// A [T, n_heads, D] view with element strides per token and per head; T, n_heads, D > 0 here.
inline void check_heads(const char* op, const char* what, const void* p, int64_t tok_stride, int64_t head_stride,
                        int64_t T, int64_t n_heads, int64_t D) {
    TS_CHECK(p != nullptr, "{}: {} is null for [{}, {}, {}]", op, what, T, n_heads, D);
    TS_CHECK((n_heads <= 1 || head_stride >= D) && (T <= 1 || tok_stride >= (n_heads - 1) * head_stride + D) &&
                 head_stride >= 0 && tok_stride >= 0,
             "{}: {} [{}, {}, {}] has overlapping heads or tokens (token stride {}, head stride {})", op, what, T,
             n_heads, D, tok_stride, head_stride);
}

// Bytes [begin, end) spanned by a [rows, cols] f32 view with row stride ld.
struct Span {
    const char* begin;
    const char* end;
};
inline Span span_of(const float* p, int64_t ld, int64_t rows, int64_t cols) {
    const char* b = reinterpret_cast<const char*>(p);
    return {b, b + ((rows - 1) * ld + cols) * int64_t(sizeof(float))};
}
inline bool overlaps(Span a, Span b) { return a.begin < b.end && b.begin < a.end; }

}  // namespace tessera::cuda::ref::detail
