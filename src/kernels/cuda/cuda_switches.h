// The environment switches of CudaBackend's ops (docs/cuda.md, Switches): A/B overrides of the
// fast path's kernel choices. Each switch reads its variable once (a function-local static;
// env_choice and env_switch, the helpers they share, read per call); all but
// TESSERA_REFERENCE_OPS throw Error naming the allowed values on any other. The long explanations
// are in cuda_switches.cpp.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "kernels/cuda/fast_gdn.h"

namespace tessera::cuda::detail {

enum class GemvMode { F32, Int8, Staged, Chunks, Mma, Dp4aCluster, Imma, ImmaRegs, Bulk, BulkWide, BulkMma, NoBulkMma, WgmmaTma };
GemvMode gemv_mode();  // TESSERA_GEMV: the decode GEMV's kernel (f32, the default: the pick)
int bulk_x_env();  // TESSERA_BULK_X: -1 auto (the default: fast::gemv_bulk_xwarp), 0 first, 1 warp
int bulk_mma_reducer_env();  // TESSERA_BULK_MMA: -1 auto (the pick's GemvPlan::reducer), 0 barrier, 1 reducer
// The index in `names` of env var `var`'s value: 0, the default, when unset or empty; any other value
// throws Error "VAR=value: expected a (the default), b … or z".
int env_choice(const char* var, std::initializer_list<const char*> names);
bool env_switch(const char* var, const char* dflt, const char* alt);  // env var `var`: alt (true) or dflt
bool decode_attention_simt();  // TESSERA_DECODE_ATTENTION=simt (default mma)
bool moe_decode_mma();    // TESSERA_MOE_DECODE=mma (default dp4a)
bool moe_decode_fused();  // TESSERA_MOE_DECODE=fused (or fused-try)
bool moe_decode_fused_try();  // TESSERA_MOE_DECODE=fused-try: the fused kernel while it is unconfirmed
bool moe_prefill_mma();  // TESSERA_MOE_PREFILL=mma (default tma)
bool moe_prefill_plain();  // TESSERA_MOE_PREFILL=wgmma (default tma)
bool moe_prefill_gather();  // TESSERA_MOE_PREFILL=tma-gather (default tma)
int moe_prefill_persist();  // MoeSwitches::persist: 1 tma-persist, -1 tma-fit / tma-tiles, 0 the pick's
bool moe_prefill_fit();  // TESSERA_MOE_PREFILL=tma-fit (default tma)
bool moe_mid_grouped();  // TESSERA_MOE_MID unset or grouped (the default; tiles: false)
bool moe_route_exact();  // TESSERA_MOE_ROUTE=exact (default logits)
bool moe_route_ahead();  // TESSERA_MOE_ROUTE_AHEAD=on (default off)
bool moe_combine_fused();  // TESSERA_MOE_COMBINE=fused (default kernel)
int moe_l2_first();  // TESSERA_MOE_L2: 0 normal (default), 1 first, 2 first-last, 3 last-item
int moe_warpgroups();  // TESSERA_MOE_WARPGROUPS: auto (0, default: 4 at tiles of 48, of 64 from 2,048 tokens), 2, 4
bool moe_fit8();  // TESSERA_MOE_FIT8: on (default) or off — the MoE tiles' wgmma N the items' rows in steps of 8
bool moe_dynamic();  // TESSERA_MOE_DYNAMIC: on (default) or off — the persistent MoE tiles drawn from a counter
bool moe_fused_tiles();  // TESSERA_MOE_FUSED_TILES: off (default), on or warp — gate+up's, down's tiles in one launch
bool moe_fused_warp();   // TESSERA_MOE_FUSED_TILES=warp: the fused launch's gate+up tiles counted by a producer warp
bool moe_out_bf16();  // TESSERA_MOE_OUT: bf16 (default) or f32
bool flash_mma();  // TESSERA_FLASH=mma (default wgmma)
bool flash_cp_async();  // TESSERA_FLASH_LOADS=cp.async (default tma)
bool flash_overlap_by_kv();  // TESSERA_FLASH_SCHEDULE=kv (default serial)
bool sample_whole_row();  // TESSERA_SAMPLE_PLAN=row (default candidates)
// TESSERA_F32_GEMM: tf32x3 (default: from fast::kGemmF32MinTokens tokens), tf32x3-all (from the
// dense GEMV's end, for A/B) or cublas (never): the fewest tokens gemm_f32_tf32x3 takes.
int64_t f32_gemm_tf32x3_min_tokens();
// TESSERA_GDN_CHUNKED: f16rtu16 (the default), f16rtsched and the other forms (cuda_switches.cpp).
fast::GdnChunkVariant gdn_chunk_variant();
int gdn_decode_variant_env();  // TESSERA_GDN_DECODE: an int(fast::GdnDecodeVariant), Auto by default
bool gdn_decode_out_fused();  // TESSERA_GDN_DECODE_OUT=separate (the default) or fused
int decode_merge_env();  // TESSERA_DECODE_MERGE: -2 auto (the default), -1 kernel, else AttnMerge::cluster
bool reference_op(std::string_view op);  // TESSERA_REFERENCE_OPS: whether op is in its comma list
bool prefill_via_cublas(int64_t T);  // TESSERA_PREFILL_GEMM: whether a packed matmul of T tokens runs on cuBLAS
bool prefill_cublas_forced();  // TESSERA_PREFILL_GEMM=cublas (auto: cuBLAS only where it pays, see the .cpp)

}  // namespace tessera::cuda::detail
