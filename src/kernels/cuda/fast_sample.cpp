// Argument checks for the sampling kernel (fast_sample.cu).
#include "kernels/cuda/fast_sample.h"

#include "core/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

void sample(const float* x, int64_t ldx, int64_t rows, int64_t cols, const SampleRow* rows_p, int32_t* ids,
            void* scratch, cudaStream_t stream, SamplePlan how) {
    TS_CHECK(rows >= 0 && rows <= 65535 && cols >= 1 && cols <= kSampleMaxVocab,
             "sample: bad shape [{}, {}] (at most 65535 rows of {} logits)", rows, cols, kSampleMaxVocab);
    if (rows == 0) return;
    ref::detail::check_rows("sample", "x", x, ldx, rows, cols);
    TS_CHECK(rows_p && ids, "sample: null row parameters or ids");
    TS_CHECK(scratch && reinterpret_cast<uintptr_t>(scratch) % 16 == 0, "sample: [{}, {}] needs {} bytes of scratch",
             rows, cols, sample_scratch_bytes(rows, cols));
    TS_CUDA_CHECK(detail::launch_sample(x, ldx, rows, cols, rows_p, ids, scratch, stream, how));
}

}  // namespace tessera::cuda::fast
