// Host side of the tensor memory accelerator: encoding tensor maps through the driver's
// cuTensorMapEncodeTiled (found at run time: no link against libcuda).
#pragma once
#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "kernels/cuda/packed_weight.h"  // PackedMatrix
#include "kernels/cuda/ref_attention.h"  // ref::PagedCache

namespace tessera::cuda {

// A tensor map over a paged f16 cache (its own block / row / head strides) as 4-D
// [blocks][mid][mid][D] with the two middle dimensions — rows and heads — ordered by stride; a box is
// 64 values of d × `rows` keys of one head in one block, in the 128-byte swizzle (fast_wgmma.cuh's
// operand layout: a row of 128 bytes, 16-byte chunk c of row r at c ^ (r % 8)). *heads_inner says
// which middle dimension is the heads (coordinates (d, head, row, block)) or the rows ((d, row,
// head, block)). False where the cache cannot be described so (an f32 cache, D not a multiple of
// 64, strides not multiples of 16 bytes) or the driver refuses.
bool paged_cache_tma_map(CUtensorMap* map, bool* heads_inner, const ref::PagedCache& c, int rows);

// A 3-D tensor map [dims[2]][dims[1]][dims[0]] of f16 (f16 true) or f32 elements at `data`, the
// outer two dimensions strides[0] and strides[1] bytes apart, boxes of box[0] × box[1] × box[2]
// elements in the 128-byte swizzle (box[0] · the element size must be 128 bytes: a row of a
// swizzled wgmma operand). False where the layout cannot be described (data or strides not
// 16-byte aligned, a dimension out of range) or the driver refuses.
bool tma_map_3d_sw128(CUtensorMap* map, bool f16, const void* data, const uint64_t (&dims)[3],
                      const uint64_t (&strides)[2], const uint32_t (&box)[3]);

// A 2-D tensor map [dims[1]][dims[0]] of unsigned elements of `elem_bytes` (2, 4 or 8) at `data`,
// rows `stride` bytes apart, boxes of box[0] × box[1] elements copied as they lie (no swizzle: the
// box lands row after row, box[0] · elem_bytes a multiple of 16). False where the layout cannot be
// described (data or stride not 16-byte aligned, a dimension out of range) or the driver refuses.
bool tma_map_2d(CUtensorMap* map, int elem_bytes, const void* data, const uint64_t (&dims)[2], uint64_t stride,
                const uint32_t (&box)[2]);

// A 3-D tensor map [dims[2]][dims[1]][dims[0]] of unsigned elements of `elem_bytes` (2, 4 or 8)
// at `data`, the outer two dimensions strides[0] and strides[1] bytes apart, boxes of box[0] ×
// box[1] × box[2] elements copied as they lie (no swizzle; box[0] · elem_bytes a multiple of 16).
// False where the layout cannot be described or the driver refuses.
bool tma_map_3d(CUtensorMap* map, int elem_bytes, const void* data, const uint64_t (&dims)[3],
                const uint64_t (&strides)[2], const uint32_t (&box)[3]);

// The tensor maps of an Int4 matrix in 16-row tiles (packed_weight.h) with the row tiles as rows:
// `row_tiles` of them from m's pointers (one matrix: n / 16; a stack of E experts: E·n / 16), boxes
// of one k-tile × `box_tiles` row tiles — codes as k 8-byte words a row tile (a box: 1 KB a tile),
// scales and biases as 16·k/G halves (a box: 32·128/G bytes a tile); biases left unset where m has
// none. Row tiles past `row_tiles` read zeros. False where m is not Int4 in tiles or the driver
// refuses.
bool packed_tiles_tma_maps(const PackedMatrix& m, uint64_t row_tiles, int box_tiles, CUtensorMap* codes,
                           CUtensorMap* scales, CUtensorMap* biases);

// The same matrix as 3-D maps (the k-tiles a dimension of their own, coordinates (0, k-tile, row
// tile)), boxes of `runs` k-tiles × `box_tiles` row tiles: codes [tile][run][1 KB], scales
// (biases) [tile][run][32·128/G bytes] — one box for what packed_tiles_tma_maps' boxes take `runs`
// of. K-tiles past the matrix's read zeros.
bool packed_tiles_tma_maps_3d(const PackedMatrix& m, uint64_t row_tiles, int box_tiles, int runs, CUtensorMap* codes,
                              CUtensorMap* scales, CUtensorMap* biases);

}  // namespace tessera::cuda
