// Backend::sample on the GPU: a token a row drawn where the logits are (kernels/sampling.h), so
// a sampled step returns 4 bytes a row instead of the vocabulary. Three launches (each by PDL,
// pdl.cuh: its wait before its first read of what the one before wrote):
//   1. a cluster of 8 blocks of 1024 threads a row, each over an eighth of the columns: the
//      argmax and the count of finite logits (greedy rows end here); top-k's cut — the k-th
//      largest key by a radix select of counts (3 passes of 11 / 11 / 10 bits, a histogram in
//      each block's shared memory, read by all through distributed shared memory), its ties cut
//      by id with a second select; top-p's — the boundary key by a radix select of the
//      fixed-point masses (exact in any order), its ties cut alike. The selects walk a candidate
//      set gathered into shared memory where it provably holds the cuts (fast_sample.cu), else
//      the whole row;
//   2. blocks over segments of 2048 columns of every row: the kept token with the largest
//      s + Gumbel noise (Philox), a block argmax each;
//   3. a warp a row: the best of its segments.
// Raw pointers; queued on `stream`; no allocation or host sync (graph-safe).
#pragma once
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/sampling.h"

namespace tessera::cuda::fast {

// How the plan walks a row: the candidates where they hold the cuts (the default), or always the
// whole row (what it did before session 43: for tests and A/B; the same tokens either way).
enum class SamplePlan { Candidates, Row };

// ids[r] (device) = the token drawn from row r of x[rows, cols] (row stride ldx) with rows_p[r]
// (device, checked by the caller: check_sample_row), through `scratch` (device,
// sample_scratch_bytes(rows, cols) bytes, 16-byte aligned).
size_t sample_scratch_bytes(int64_t rows, int64_t cols);
void sample(const float* x, int64_t ldx, int64_t rows, int64_t cols, const SampleRow* rows_p, int32_t* ids,
            void* scratch, cudaStream_t stream, SamplePlan how = SamplePlan::Candidates);

namespace detail {
// draw_delta: the draw's margin (fast_sample.cu, sample_draw_kernel), at least its default; larger
// (tests) draws more tokens exactly — the same token either way.
cudaError_t launch_sample(const float* x, int64_t ldx, int64_t rows, int64_t cols, const SampleRow* rows_p,
                          int32_t* ids, void* scratch, cudaStream_t stream, SamplePlan how,
                          double draw_delta = 0x1p-14);
// After a sample() on `scratch` (synchronises): per row, 1 where its cuts came from the candidates,
// 0 from the whole row, -1 where it cut nothing (greedy, no filter, +inf logits). For tests.
std::vector<int32_t> sample_plans_from_candidates(const void* scratch, int64_t rows);
}  // namespace detail

}  // namespace tessera::cuda::fast
