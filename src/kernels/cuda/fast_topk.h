// Sampling's work on a step's logits where they are. edit_logits: the requests' penalties and
// bias (Backend::edit_logits). top_k: the k largest values of each row (Backend::top_k), what
// sampling needs from a
// step's logits, so only k candidates a row cross to the host instead of the vocabulary. One
// block per row (per segment of a wide row, then a block per row over the segments' candidates):
// a radix select of the k-th largest key (four passes of 8 bits over the row,
// histograms in shared memory), the candidates gathered in index order (a block scan), then
// sorted by descending value and ascending index (bitonic, in shared memory). NaN never enters;
// -0 and +0 are one value, as the CPU's comparison has them. Raw pointers; queued on `stream`;
// no allocation or host sync (graph-safe).
#pragma once
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/logit_edit.h"

namespace tessera::cuda::fast {

constexpr int kTopKMax = 128;  // = Backend::kMaxTopK

// x[edits[i].row, edits[i].id] ← apply_logit_edit (kernels/logit_edit.h), a thread per edit;
// `edits` [n] in device memory, already checked (rows, ids, one edit per element).
void edit_logits(float* x, int64_t ldx, const LogitEdit* edits, int64_t n, cudaStream_t stream);

// values / ids [rows, k] (device): row r's k largest non-NaN values of x[r, :cols] (row stride
// ldx), descending, ties by the lower index; padded with NaN / -1 past the row's non-NaN count.
// Rows wider than kTopKSegment run in two passes (per segment, then over the segments' S·k
// candidates) through `scratch`: top_k_scratch_bytes(rows, cols, k) bytes (null when that is 0).
constexpr int kTopKSegment = 8192;
constexpr int top_k_segments(int64_t cols) { return int((cols + kTopKSegment - 1) / kTopKSegment); }
constexpr size_t top_k_scratch_bytes(int64_t rows, int64_t cols, int k) {
    return top_k_segments(cols) > 1 ? size_t(rows) * size_t(top_k_segments(cols)) * size_t(k) * 8 : 0;
}
void top_k(const float* x, int64_t ldx, int64_t rows, int64_t cols, int k, float* values, int32_t* ids,
           void* scratch, cudaStream_t stream);

// out[r] = the index of the largest non-NaN value of x[r, :cols], the lowest among equals (-0
// equals +0), 0 when the row has none — the CPU backend's argmax. Blocks of kArgmaxSegment
// columns; wider rows merge the segments' results through `scratch`:
// argmax_scratch_bytes(rows, cols) bytes (null when that is 0).
constexpr int kArgmaxSegment = 4096;
constexpr int argmax_segments(int64_t cols) { return int((cols + kArgmaxSegment - 1) / kArgmaxSegment); }
constexpr size_t argmax_scratch_bytes(int64_t rows, int64_t cols) {
    return argmax_segments(cols) > 1 ? size_t(rows) * size_t(argmax_segments(cols)) * 8 : 0;
}
void argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, void* scratch,
            cudaStream_t stream);

namespace detail {
cudaError_t launch_edit_logits(float* x, int64_t ldx, const LogitEdit* edits, int64_t n, cudaStream_t stream);
cudaError_t launch_top_k(const float* x, int64_t ldx, int64_t rows, int64_t cols, int k, float* values, int32_t* ids,
                         void* scratch, cudaStream_t stream);
cudaError_t launch_argmax(const float* x, int64_t ldx, int64_t rows, int64_t cols, int32_t* out, void* scratch,
                          cudaStream_t stream);
}  // namespace detail

}  // namespace tessera::cuda::fast
