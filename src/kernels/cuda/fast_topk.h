// Sampling's work on a step's logits where they are. edit_logits: the requests' penalties and
// bias (Backend::edit_logits). top_k: the k largest values of each row (Backend::top_k), what
// sampling needs from a
// step's logits, so only k candidates a row cross to the host instead of the vocabulary. One
// block per row: a radix select of the k-th largest key (four passes of 8 bits over the row,
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
void top_k(const float* x, int64_t ldx, int64_t rows, int64_t cols, int k, float* values, int32_t* ids,
           cudaStream_t stream);

}  // namespace tessera::cuda::fast
