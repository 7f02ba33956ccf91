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

bool tma_map_3d_sw128(CUtensorMap* map, bool f16, const void* data, const uint64_t (&dims)[3],
                      const uint64_t (&strides)[2], const uint32_t (&box)[3]) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    const uint64_t es = f16 ? 2 : 4;
    if (!encode || !data || reinterpret_cast<uintptr_t>(data) % 16 != 0 || box[0] * es != 128) return false;
    for (int i = 0; i < 3; ++i)
        if (dims[i] < 1 || dims[i] > (uint64_t(1) << 32) || box[i] < 1 || box[i] > 256) return false;
    for (uint64_t s : strides)
        if (s % 16 != 0 || s >= (uint64_t(1) << 40)) return false;
    const cuuint64_t d[3] = {dims[0], dims[1], dims[2]};
    const cuuint64_t st[2] = {strides[0], strides[1]};
    const cuuint32_t b[3] = {box[0], box[1], box[2]};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    return encode(map, f16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3,
                  const_cast<void*>(data), d, st, b, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool tma_map_2d(CUtensorMap* map, int elem_bytes, const void* data, const uint64_t (&dims)[2], uint64_t stride,
                const uint32_t (&box)[2]) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    const CUtensorMapDataType type = elem_bytes == 2   ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                     : elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                                       : CU_TENSOR_MAP_DATA_TYPE_INT64;
    if (!encode || !data || (elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) ||
        reinterpret_cast<uintptr_t>(data) % 16 != 0 || stride % 16 != 0 || stride >= (uint64_t(1) << 40) ||
        (box[0] * uint64_t(elem_bytes)) % 16 != 0)
        return false;
    for (int i = 0; i < 2; ++i)
        if (dims[i] < 1 || dims[i] > (uint64_t(1) << 32) || box[i] < 1 || box[i] > 256) return false;
    const cuuint64_t d[2] = {dims[0], dims[1]};
    const cuuint64_t st[1] = {stride};
    const cuuint32_t b[2] = {box[0], box[1]};
    const cuuint32_t elem_strides[2] = {1, 1};
    return encode(map, type, 2, const_cast<void*>(data), d, st, b, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool tma_map_3d(CUtensorMap* map, int elem_bytes, const void* data, const uint64_t (&dims)[3],
                const uint64_t (&strides)[2], const uint32_t (&box)[3]) {
    const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_tiled();
    const CUtensorMapDataType type = elem_bytes == 2   ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                     : elem_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32
                                                       : CU_TENSOR_MAP_DATA_TYPE_INT64;
    if (!encode || !data || (elem_bytes != 2 && elem_bytes != 4 && elem_bytes != 8) ||
        reinterpret_cast<uintptr_t>(data) % 16 != 0 || (box[0] * uint64_t(elem_bytes)) % 16 != 0)
        return false;
    for (uint64_t st : strides)
        if (st % 16 != 0 || st >= (uint64_t(1) << 40)) return false;
    for (int i = 0; i < 3; ++i)
        if (dims[i] < 1 || dims[i] > (uint64_t(1) << 32) || box[i] < 1 || box[i] > 256) return false;
    const cuuint64_t d[3] = {dims[0], dims[1], dims[2]};
    const cuuint64_t st[2] = {strides[0], strides[1]};
    const cuuint32_t b[3] = {box[0], box[1], box[2]};
    const cuuint32_t elem_strides[3] = {1, 1, 1};
    return encode(map, type, 3, const_cast<void*>(data), d, st, b, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

bool packed_tiles_tma_maps_3d(const PackedMatrix& m, uint64_t row_tiles, int box_tiles, int runs, CUtensorMap* codes,
                              CUtensorMap* scales, CUtensorMap* biases) {
    if (m.kind != PackedKind::Int4 || !m.tiles || !packed_tiles_fit(m.kind, m.n, m.k, m.group) || box_tiles < 1 ||
        runs < 1)
        return false;
    const uint64_t kt = uint64_t(m.k / kPackedTileCols), gpt = uint64_t(kPackedTileCols / m.group);
    const uint32_t tiles = uint32_t(box_tiles), r = uint32_t(runs);
    if (!tma_map_3d(codes, 8, m.codes, {128, kt, row_tiles}, {1024, uint64_t(m.k) * 8}, {128, r, tiles})) return false;
    const uint64_t sdims[3] = {16 * gpt, kt, row_tiles}, sstrides[2] = {32 * gpt, 32 * gpt * kt};
    const uint32_t sbox[3] = {uint32_t(16 * gpt), r, tiles};
    if (!tma_map_3d(scales, 2, m.scales, sdims, sstrides, sbox)) return false;
    return !m.biases || tma_map_3d(biases, 2, m.biases, sdims, sstrides, sbox);
}

bool packed_tiles_tma_maps(const PackedMatrix& m, uint64_t row_tiles, int box_tiles, CUtensorMap* codes,
                           CUtensorMap* scales, CUtensorMap* biases) {
    if (m.kind != PackedKind::Int4 || !m.tiles || !packed_tiles_fit(m.kind, m.n, m.k, m.group) || box_tiles < 1)
        return false;
    const uint64_t gpr = uint64_t(m.k / m.group);
    const uint32_t gpt = uint32_t(kPackedTileCols / m.group), tiles = uint32_t(box_tiles);
    if (!tma_map_2d(codes, 8, m.codes, {uint64_t(m.k), row_tiles}, uint64_t(m.k) * 8, {128, tiles})) return false;
    if (!tma_map_2d(scales, 2, m.scales, {16 * gpr, row_tiles}, 32 * gpr, {16 * gpt, tiles})) return false;
    return !m.biases || tma_map_2d(biases, 2, m.biases, {16 * gpr, row_tiles}, 32 * gpr, {16 * gpt, tiles});
}

}  // namespace tessera::cuda
