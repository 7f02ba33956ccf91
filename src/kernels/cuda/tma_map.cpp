// cuTensorMapEncodeTiled through the runtime's driver entry point (tma_map.h).
#include "kernels/cuda/tma_map.h"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime_api.h>

namespace tessera::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
    static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
        void* p = nullptr;
        cudaDriverEntryPointQueryResult found{};
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
                cudaSuccess ||
            found != cudaDriverEntryPointSuccess)
            p = nullptr;
        return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
    }();
    return fn;
}

}  // namespace

bool paged_cache_tma_map(CUtensorMap* map, bool* heads_inner, const ref::PagedCache& c, int rows) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    if (!encode || !c.f16 || !c.data || c.D % 64 != 0 || rows < 1 || rows > 256 || rows > c.block_size) return false;
    const int64_t es = 2;
    for (int64_t s : {c.block_stride, c.row_stride, c.head_stride})
        if (s <= 0 || (s * es) % 16 != 0 || s * es >= (int64_t(1) << 40)) return false;
    if (reinterpret_cast<uintptr_t>(c.data) % 16 != 0) return false;
    *heads_inner = c.head_stride <= c.row_stride;
    const cuuint64_t heads = cuuint64_t(c.n_kv), brows = cuuint64_t(c.block_size);
    const cuuint64_t hs = cuuint64_t(c.head_stride * es), rs = cuuint64_t(c.row_stride * es);
    const cuuint64_t dims[4] = {cuuint64_t(c.D), *heads_inner ? heads : brows, *heads_inner ? brows : heads,
                                cuuint64_t(c.n_blocks)};
    const cuuint64_t strides[3] = {*heads_inner ? hs : rs, *heads_inner ? rs : hs, cuuint64_t(c.block_stride * es)};
    const cuuint32_t box[4] = {64, *heads_inner ? 1u : cuuint32_t(rows), *heads_inner ? cuuint32_t(rows) : 1u, 1};
    const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, const_cast<void*>(c.data), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace tessera::cuda
