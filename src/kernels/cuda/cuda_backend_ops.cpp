// CudaBackend's ops: each checks its tensors (device memory, f32 activations, shapes), turns
// them into raw pointers and element strides, and queues the reference kernel on the stream —
// or, for weights packed in fast mode, the kernel pack's (matmul_dispatch.h picks which). The
// attention and KV-cache ops are in cuda_backend_attention.cpp, the A/B switches in cuda_switches.cpp.
#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/status.h"
#include "kernels/cuda/convert.h"
#include "kernels/cuda/cuda_backend_args.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_switches.h"
#include "kernels/cuda/fast_sample.h"
#include "kernels/cuda/fast_dense_gemv.h"
#include "kernels/cuda/fast_embed.h"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gemm_f32.h"
#include "kernels/cuda/fast_gemv_plan.h"
#include "kernels/cuda/fast_gemv_q8.h"
#include "kernels/cuda/fast_matmul.h"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_topk.h"
#include "kernels/cuda/matmul_dispatch.h"
#include "kernels/cuda/ref_elementwise.h"
#include "kernels/cuda/ref_embed.h"
#include "kernels/cuda/ref_gdn.h"
#include "kernels/cuda/ref_matmul.h"
#include "kernels/cuda/ref_misc.h"
#include "kernels/cuda/ref_moe.h"
#include "kernels/cuda/ref_norm.h"
#include "kernels/cuda/ref_rope.h"

namespace tessera::cuda {

using detail::check_device;
using detail::evenly_strided;
using detail::Heads;
using detail::heads_of;
using detail::Rows;
using detail::rows_of;
using detail::same_shape;

using detail::bulk_mma_reducer_env;
using detail::bulk_x_env;
using detail::gdn_chunk_variant;
using detail::gdn_decode_out_fused;
using detail::gdn_decode_variant_env;
using detail::gemv_mode;
using detail::GemvMode;
using detail::moe_decode_fused;
using detail::moe_decode_fused_try;
using detail::moe_decode_mma;
using detail::moe_mid_grouped;
using detail::moe_prefill_mma;
using detail::moe_prefill_plain;
using detail::moe_prefill_gather;
using detail::moe_prefill_persist;
using detail::f32_gemm_tf32x3_min_tokens;
using detail::moe_prefill_fit;
using detail::moe_combine_fused;
using detail::moe_l2_first;
using detail::moe_warpgroups;
using detail::moe_fit8;
using detail::moe_dynamic;
using detail::moe_fused_tiles;
using detail::moe_fused_warp;
using detail::moe_out_bf16;
using detail::moe_route_ahead;
using detail::moe_route_exact;
using detail::prefill_cublas_forced;
using detail::prefill_via_cublas;
using detail::reference_op;

void CudaBackend::matmul(const Tensor& y, const Tensor& x, const Tensor& w) {
    const Rows X = rows_of(x, "matmul", "x"), Y = rows_of(y, "matmul", "y");
    check_device(w, "matmul", "w");
    TS_CHECK(w.ndim == 2 && w.is_contiguous() && w.cols() == X.cols && w.rows() == Y.cols && X.rows == Y.rows,
             "cuda matmul: y {} = x {} · w {}ᵀ does not fit", y.describe(), x.describe(), w.describe());
    if (X.rows == 0 || Y.cols == 0) return;
    if (const PackedMatrix* p = packed_of(w)) return matmul_packed(y, x, *p);
    // Fast mode: few tokens on an f32 / bf16 matrix (router, gates, bf16 checkpoints) in one GEMV
    // launch instead of cuBLAS's split-K GEMM + reduction (fast_dense_gemv.h).
    const bool bf16 = w.dtype == DType::BF16;
    if (kernels_ == CudaKernels::Fast && (bf16 || w.dtype == DType::F32) && !reference_op("matmul") &&
        fast::dense_gemv_supported(X.rows, X.cols, bf16, X.p, X.ld))
        return fast::dense_gemv(Y.p, Y.ld, X.p, X.ld, X.rows, w.data, bf16, Y.cols, X.cols, stream_.get());
    if (w.dtype == DType::F32) {
        // Fast mode, a prefill's worth of tokens: 3×TF32 on the warpgroup MMA (f32's accuracy class),
        // w's halves in scratch (fast_gemm_f32.h)
        if (kernels_ == CudaKernels::Fast && !reference_op("matmul") && X.rows >= f32_gemm_tf32x3_min_tokens() &&
            Y.cols * X.cols <= fast::kGemmF32MaxWeights &&
            fast::gemm_f32_tf32x3_fits(X.p, X.ld, w.ptr<float>(), X.rows, Y.cols, X.cols)) {
            const size_t sb = fast::gemm_f32_tf32x3_scratch(X.rows, Y.cols, X.cols);
            return fast::gemm_f32_tf32x3(Y.p, Y.ld, X.p, X.ld, w.ptr<float>(), X.rows, Y.cols, X.cols, scratch(2, sb),
                                         sb, stream_.get());
        }
        ref::matmul_f32(Y.p, Y.ld, X.p, X.ld, w.ptr<float>(), X.rows, Y.cols, X.cols, cublas_, stream_.get());
    } else if (w.dtype == DType::BF16) {
        // The reference keeps activations f32: the weight is widened to f32 (exact) in scratch and
        // multiplied in f32, so bf16 checkpoints meet the CPU's tolerance. (ref::matmul_bf16, with
        // bf16 activations, is the faster variant the kernel pack measures against.)
        const int64_t N = Y.cols, K = X.cols;
        auto* wf = static_cast<float*>(scratch(2, size_t(N * K) * sizeof(float)));
        bf16_to_f32_rows(wf, K, w.ptr<uint16_t>(), K, N, K, stream_.get());
        ref::matmul_f32(Y.p, Y.ld, X.p, X.ld, wf, X.rows, N, K, cublas_, stream_.get());
    } else {
        fail(ErrorKind::Unsupported, "cuda matmul: weights of dtype {} (the reference path places matrices as bf16)",
             dtype_name(w.dtype));
    }
}

static_assert(kDispatchGemvMaxTokens == fast::kGemvMaxTokens);
// TESSERA_GEMV=bulk_wide: Bulk at one or two tokens on matrices of at least this many weights.
constexpr int64_t kBulkWideMinWeights = int64_t(16) << 20;

// y = x · wᵀ on a packed weight: the GEMV for decode-sized T, the tensor-core GEMM for more
// tokens where it is built, else the packed matrix unpacked to f32 in scratch and the reference
// f32 cuBLAS GEMM (the same accuracy as the reference path's widened weights).
void CudaBackend::matmul_packed(const Tensor& y, const Tensor& x, const PackedMatrix& w) {
    const Rows X = rows_of(x, "matmul", "x"), Y = rows_of(y, "matmul", "y");
    switch (reference_op("matmul") ? MatmulKernel::DequantCublas : choose_matmul(X.rows, w.n, w.k, w.kind)) {
        case MatmulKernel::None: return;
        case MatmulKernel::Gemv:
            if (gemv_mode() == GemvMode::Int8) {  // x rounded to int8 per 32 columns, dp4a (fast_gemv_q8.h)
                void* sc = scratch(4, fast::gemv_q8_scratch(X.rows, w.k));
                return fast::gemv_q8(Y.p, Y.ld, X.p, X.ld, X.rows, w, sc, stream_.get());
            }
            if (gemv_mode() == GemvMode::Mma)  // the pick without Dp4a
                return fast::gemv_packed_plan(fast::gemv_pick(X.rows, w.n, w.k, w.kind, fast::gemv_sm_count(), false),
                                              Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            if (gemv_mode() == GemvMode::Chunks) {  // MmaChunks where the pick is MmaRows (fast_gemv_chunks.cu)
                fast::GemvPlan p = fast::gemv_pick(X.rows, w.n, w.k, w.kind, fast::gemv_sm_count(), false);
                if (p.variant == fast::GemvVariant::MmaRows && fast::gemv_chunks_fits(w.k, X.rows, w.kind))
                    p = {fast::GemvVariant::MmaChunks, 1, 1};
                return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if (gemv_mode() == GemvMode::Dp4aCluster) {
                fast::GemvPlan p = fast::gemv_pick(X.rows, w.n, w.k, w.kind, fast::gemv_sm_count(),
                                                   fast::gemv_dp4a_takes_group(w.group));
                if (p.variant == fast::GemvVariant::Dp4a) p.cluster = fast::kGemvDp4aCluster;
                return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if (gemv_mode() == GemvMode::Imma || gemv_mode() == GemvMode::ImmaRegs) {
                fast::GemvPlan p = fast::gemv_imma_plan(w, X.rows, fast::gemv_sm_count());
                p.regs = gemv_mode() == GemvMode::ImmaRegs;
                if (p.cluster > 0) return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
                return fast::gemv_packed(Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if ((gemv_mode() == GemvMode::Bulk ||
                 (gemv_mode() == GemvMode::BulkWide && X.rows <= fast::kGemvBulkMaxTokens &&
                  w.n * w.k >= kBulkWideMinWeights)) &&
                fast::gemv_bulk_takes(w, X.rows)) {
                fast::GemvPlan p{fast::GemvVariant::Bulk};
                p.xwarp = bulk_x_env() < 0 ? fast::gemv_bulk_xwarp(X.rows) : bulk_x_env();
                return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if (gemv_mode() == GemvMode::BulkMma && X.rows >= 3) {
                fast::GemvPlan p{fast::GemvVariant::BulkMma, 1, 1,
                                 fast::gemv_bulk_mma_cluster(w, X.rows, fast::gemv_sm_count())};
                if (p.cluster > 0) {  // (0: no cluster fits — the pick below)
                    p.reducer = bulk_mma_reducer_env() >= 0
                                    ? bulk_mma_reducer_env()
                                    : fast::gemv_bulk_mma_reducer(w, p.cluster, fast::gemv_sm_count());
                    return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
                }
            }
            if (gemv_mode() == GemvMode::WgmmaTma) {
                const fast::GemvPlan p = fast::gemv_wgmma_plan(w, X.rows, fast::gemv_sm_count());
                if (p.cluster > 0) return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if (gemv_mode() == GemvMode::NoBulkMma) {
                fast::GemvPlan p = fast::gemv_pick_packed(X.rows, w, fast::gemv_sm_count(),
                                                          fast::gemv_dp4a_takes_group(w.group), false);
                if (p.variant == fast::GemvVariant::Bulk && bulk_x_env() >= 0) p.xwarp = bulk_x_env();
                return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            if (gemv_mode() == GemvMode::Staged) {
                fast::GemvPlan p = fast::gemv_pick(X.rows, w.n, w.k, w.kind, fast::gemv_sm_count(), false);
                if (p.variant == fast::GemvVariant::MmaRows && p.mtiles == 1 &&
                    fast::gemv_staged_fits(w.k, w.kind, w.biases != nullptr, w.group))
                    p = {fast::GemvVariant::MmaStaged, 1, 1};
                return fast::gemv_packed_plan(p, Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get());
            }
            // the pick, its Bulk staging x as TESSERA_BULK_X says and its BulkMma in TESSERA_BULK_MMA's
            // form (auto, -1: the pick's own)
            return fast::gemv_packed(Y.p, Y.ld, X.p, X.ld, X.rows, w, stream_.get(), bulk_x_env(),
                                     bulk_mma_reducer_env());
        case MatmulKernel::Gemm:
            // w to bf16 (in scratch, or its copy), cuBLAS's GEMM — by default not where the matrix
            // has no bf16 copy and the warp-specialised packed tiles take it (Int4 in 16-row tiles):
            // they are level with cuBLAS on a copy (bench_fast_gemm, session 35), so a
            // dequantisation a call only loses
            if (const auto copy = bf16_.find(w.codes);
                prefill_via_cublas(X.rows) &&
                (copy != bf16_.end() || prefill_cublas_forced() || !kHaveFastGemm || !fast::gemm_takes_tma(w))) {
                auto* xb = static_cast<uint16_t*>(scratch(3, size_t(X.rows * w.k) * sizeof(uint16_t)));
                const uint16_t* wb = copy != bf16_.end() ? copy->second.as<uint16_t>() : nullptr;
                if (!wb) {
                    auto* ws = static_cast<uint16_t*>(scratch(2, size_t(w.n * w.k) * sizeof(uint16_t)));
                    fast::dequant_rows_bf16(ws, w.k, w, w.n, stream_.get());
                    wb = ws;
                }
                return ref::matmul_bf16(Y.p, Y.ld, X.p, X.ld, wb, X.rows, w.n, w.k, cublas_, xb, stream_.get());
            }
            if constexpr (kHaveFastGemm) {
                void* sc = scratch(3, fast::gemm_packed_scratch(X.rows, w.k));
                return fast::gemm_packed(Y.p, Y.ld, X.p, X.ld, X.rows, w, sc, stream_.get());
            }
            [[fallthrough]];
        case MatmulKernel::DequantCublas: {
            auto* wf = static_cast<float*>(scratch(2, size_t(w.n * w.k) * sizeof(float)));
            fast::dequant_rows(wf, w.k, w, nullptr, w.n, stream_.get());
            return ref::matmul_f32(Y.p, Y.ld, X.p, X.ld, wf, X.rows, w.n, w.k, cublas_, stream_.get());
        }
    }
}

void CudaBackend::embed(const Tensor& y, const Tensor& table, const int32_t* ids) {
    const Rows Y = rows_of(y, "embed", "y");
    check_device(table, "embed", "table");
    TS_CHECK(table.ndim == 2 && table.cols() == Y.cols, "cuda embed: table {} does not give rows of {}",
             table.describe(), Y.cols);
    if (const PackedMatrix* p = packed_of(table)) {
        if (Y.rows > 0) TS_CHECK(ids != nullptr, "cuda embed: ids are null for {} tokens", Y.rows);
        return fast::dequant_rows(Y.p, Y.ld, *p, ids, Y.rows, stream_.get());
    }
    ref::embed(Y.p, Y.ld, table.data, table.dtype, table.stride[0], table.rows(), ids, Y.rows, Y.cols, stream_.get());
}

void CudaBackend::rms_norm(const Tensor& y, const Tensor& x, const Tensor& w, float eps) {
    if (x.ndim == 3 && (!evenly_strided(x) || !evenly_strided(y))) {  // heads of a stacked projection
        const Heads X = heads_of(x, "rms_norm", "x"), Y = heads_of(y, "rms_norm", "y");
        TS_CHECK(X.T == Y.T && X.n == Y.n && X.D == Y.D, "cuda rms_norm: y {} but x {}", y.describe(), x.describe());
        check_device(w, "rms_norm", "w");
        TS_CHECK(w.numel() == X.D, "cuda rms_norm: weight {} for heads of {}", w.describe(), X.D);
        return ref::rms_norm_heads(Y.p, Y.ts, Y.hs, X.p, X.ts, X.hs, w.ptr<float>(), X.T, X.n, X.D, eps,
                                   stream_.get());
    }
    const Rows X = rows_of(x, "rms_norm", "x"), Y = rows_of(y, "rms_norm", "y");
    same_shape(X, Y, "rms_norm");
    check_device(w, "rms_norm", "w");
    TS_CHECK(w.numel() == X.cols, "cuda rms_norm: weight {} for rows of {}", w.describe(), X.cols);
    ref::rms_norm(Y.p, Y.ld, X.p, X.ld, w.ptr<float>(), X.rows, X.cols, eps, stream_.get());
}

void CudaBackend::add_rms_norm(const Tensor& x, const Tensor& y, const Tensor& delta, const Tensor& w, float eps) {
    // delta [R, C], or [P, R, C]: P parts added in order (Backend::add_rms_norm).
    const bool parts = delta.ndim == 3;
    TS_CHECK(!parts || (delta.dim(0) >= 1 && delta.dim(0) <= 1024 && delta.is_contiguous()),
             "cuda add_rms_norm: delta {} is not [R, C] or contiguous [P <= 1024, R, C]", delta.describe());
    const Tensor d0 = parts ? delta.slice_rows(0, 1).view({delta.dim(1), delta.dim(2)}) : delta;
    const Rows X = rows_of(x, "add_rms_norm", "x"), Y = rows_of(y, "add_rms_norm", "y"),
               D = rows_of(d0, "add_rms_norm", "delta");
    same_shape(X, Y, "add_rms_norm");
    same_shape(X, D, "add_rms_norm");
    check_device(w, "add_rms_norm", "w");
    TS_CHECK(w.numel() == X.cols, "cuda add_rms_norm: weight {} for rows of {}", w.describe(), X.cols);
    const int n_parts = parts ? int(delta.dim(0)) : 1;
    const int64_t part_stride = parts ? delta.stride[0] / int64_t(sizeof(float)) : 0;
    ref::add_rms_norm(X.p, X.ld, D.p, D.ld, Y.p, Y.ld, w.ptr<float>(), X.rows, X.cols, eps, stream_.get(), n_parts,
                      part_stride);
}

void CudaBackend::rope(const Tensor& x, const int32_t* pos, const RopeParams& p) {
    const Heads X = heads_of(x, "rope", "x");
    const int rot = p.rot_dims > 0 ? p.rot_dims : int(X.D);
    ref::rope(X.p, X.ts, X.hs, X.T, X.n, X.D, pos, rope_freqs(p, rot), rot, p.style, stream_.get());
}

void CudaBackend::swiglu(const Tensor& y, const Tensor& gate, const Tensor& up) {
    const Rows Y = rows_of(y, "swiglu", "y"), G = rows_of(gate, "swiglu", "gate"), U = rows_of(up, "swiglu", "up");
    same_shape(Y, G, "swiglu");
    same_shape(Y, U, "swiglu");
    ref::swiglu(Y.p, Y.ld, G.p, G.ld, U.p, U.ld, Y.rows, Y.cols, stream_.get());
}

void CudaBackend::add(const Tensor& y, const Tensor& a, const Tensor& b) {
    const Rows Y = rows_of(y, "add", "y"), A = rows_of(a, "add", "a"), B = rows_of(b, "add", "b");
    same_shape(Y, A, "add");
    same_shape(Y, B, "add");
    ref::add(Y.p, Y.ld, A.p, A.ld, B.p, B.ld, Y.rows, Y.cols, stream_.get());
}

void CudaBackend::add_bias(const Tensor& y, const Tensor& bias) {
    const Rows Y = rows_of(y, "add_bias", "y");
    check_device(bias, "add_bias", "bias");
    TS_CHECK(bias.numel() == Y.cols, "cuda add_bias: bias {} for rows of {}", bias.describe(), Y.cols);
    ref::add_bias(Y.p, Y.ld, bias.ptr<float>(), Y.rows, Y.cols, stream_.get());
}

void CudaBackend::softmax(const Tensor& x) {
    const Rows X = rows_of(x, "softmax", "x");
    ref::softmax(X.p, X.ld, X.rows, X.cols, stream_.get());
}

void CudaBackend::top_k(const Tensor& x, int k, float* values, int32_t* ids) {
    static_assert(fast::kTopKMax == Backend::kMaxTopK);
    const Rows X = rows_of(x, "top_k", "x");
    const size_t bytes = fast::top_k_scratch_bytes(X.rows, X.cols, k);
    fast::top_k(X.p, X.ld, X.rows, X.cols, k, values, ids, bytes ? scratch(7, bytes) : nullptr, stream_.get());
}

void CudaBackend::edit_logits(const Tensor& x, const LogitEdit* edits, int64_t n) {
    const Rows X = rows_of(x, "edit_logits", "x");
    if (n == 0) return;
    TS_CHECK(edits, "cuda edit_logits: null edits");
    for (int64_t i = 0; i < n; ++i)
        TS_CHECK(edits[i].row >= 0 && edits[i].row < X.rows && edits[i].id >= 0 && edits[i].id < X.cols,
                 "cuda edit_logits: edit {} at ({}, {}) outside [{}, {}]", i, edits[i].row, edits[i].id, X.rows, X.cols);
    const size_t bytes = size_t(n) * sizeof(LogitEdit);
    if (edits_.size() < bytes) {
        stream_.synchronize();  // queued work may still read the old copy
        edits_ = DeviceBuffer(std::max(bytes, 2 * edits_.size()));
    }
    copy_in(edits_.data(), edits, bytes);
    fast::edit_logits(X.p, X.ld, static_cast<const LogitEdit*>(edits_.data()), n, stream_.get());
}

void CudaBackend::sample(const Tensor& x, const SampleRow* rows, int32_t* ids) {
    const Rows X = rows_of(x, "sample", "x");
    if (X.rows == 0) return;
    TS_CHECK(rows && ids, "cuda sample: null rows or ids for x {}", x.describe());
    for (int64_t r = 0; r < X.rows; ++r) check_sample_row(rows[r], r);
    const size_t bytes = size_t(X.rows) * sizeof(SampleRow);
    if (sample_rows_.size() < bytes) {
        stream_.synchronize();  // queued work may still read the old copy
        sample_rows_ = DeviceBuffer(std::max(bytes, 2 * sample_rows_.size()));
    }
    copy_in(sample_rows_.data(), rows, bytes);
    fast::sample(X.p, X.ld, X.rows, X.cols, static_cast<const SampleRow*>(sample_rows_.data()), ids,
                 scratch(7, fast::sample_scratch_bytes(X.rows, X.cols)), stream_.get(),
                 detail::sample_whole_row() ? fast::SamplePlan::Row : fast::SamplePlan::Candidates);
}

void CudaBackend::argmax(const Tensor& x, int32_t* out) {
    const Rows X = rows_of(x, "argmax", "x");
    if (kernels_ == CudaKernels::Reference) return ref::argmax(X.p, X.ld, X.rows, X.cols, out, stream_.get());
    const size_t bytes = fast::argmax_scratch_bytes(X.rows, X.cols);
    fast::argmax(X.p, X.ld, X.rows, X.cols, out, bytes ? scratch(7, bytes) : nullptr, stream_.get());
}

void CudaBackend::sigmoid_mul(const Tensor& y, const Tensor& x, const Tensor& gate) {
    if (gate.ndim == 3 && (!evenly_strided(gate) || !evenly_strided(x) || !evenly_strided(y))) {
        // [T, heads, D] views, e.g. the output gate inside a stacked q | gate | k | v projection
        const Heads Y = heads_of(y, "sigmoid_mul", "y"), X = heads_of(x, "sigmoid_mul", "x"),
                    G = heads_of(gate, "sigmoid_mul", "gate");
        TS_CHECK(X.T == Y.T && X.n == Y.n && X.D == Y.D && G.T == X.T && G.n == X.n && G.D == X.D,
                 "cuda sigmoid_mul: y {}, x {} and gate {} must be the same [T, heads, D]", y.describe(),
                 x.describe(), gate.describe());
        return ref::sigmoid_mul_heads(Y.p, Y.ts, Y.hs, X.p, X.ts, X.hs, G.p, G.ts, G.hs, X.T, X.n, X.D, stream_.get());
    }
    const Rows Y = rows_of(y, "sigmoid_mul", "y"), X = rows_of(x, "sigmoid_mul", "x");
    const Rows G = rows_of(gate, "sigmoid_mul", "gate");
    same_shape(Y, X, "sigmoid_mul");
    const bool per_row = G.cols == 1 && X.cols != 1;
    TS_CHECK(G.rows == X.rows && (per_row || G.cols == X.cols), "cuda sigmoid_mul: gate {} for x {}",
             gate.describe(), x.describe());
    ref::sigmoid_mul(Y.p, Y.ld, X.p, X.ld, G.p, G.ld, per_row, X.rows, X.cols, stream_.get());
}

void CudaBackend::l2_norm(const Tensor& x, float eps, float scale) {
    const Heads X = heads_of(x, "l2_norm", "x");
    ref::l2_norm(X.p, X.ts, X.hs, X.T, X.n, X.D, eps, scale, stream_.get());
}

void CudaBackend::rms_norm_gated(const Tensor& y, const Tensor& x, const Tensor& z, const Tensor& w, float eps) {
    const Heads Y = heads_of(y, "rms_norm_gated", "y"), X = heads_of(x, "rms_norm_gated", "x");
    const Heads Z = heads_of(z, "rms_norm_gated", "z");
    check_device(w, "rms_norm_gated", "w");
    TS_CHECK(w.numel() == X.D, "cuda rms_norm_gated: weight {} for heads of {}", w.describe(), X.D);
    ref::rms_norm_gated(Y.p, Y.ts, Y.hs, X.p, X.ts, X.hs, Z.p, Z.ts, Z.hs, w.ptr<float>(), X.T, X.n, X.D, eps,
                        stream_.get());
}

void CudaBackend::conv1d_silu(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                              const SeqPlan& plan) {
    conv1d_silu_norm(y, x, w, conv_state, plan, fast::ConvNorm{});
}

void CudaBackend::conv1d_silu_qk_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                                      const SeqPlan& plan, int64_t n_qk, int64_t dim, float eps, float q_scale) {
    const fast::ConvNorm norm{2 * n_qk, dim, n_qk, eps, q_scale};
    if (!fast_gdn() || reference_op("conv1d_silu") || w.ndim != 2 || !fast::conv1d_silu_fits(w.dim(1), norm))
        return Backend::conv1d_silu_qk_norm(y, x, w, conv_state, plan, n_qk, dim, eps, q_scale);
    check_conv1d_silu_qk_norm(y, n_qk, dim);
    conv1d_silu_norm(y, x, w, conv_state, plan, norm);
}

// conv1d_silu with the q / k norms of `norm` (none: heads 0) — the fast kernel where fast_gdn(),
// TESSERA_REFERENCE_OPS leaves conv1d_silu alone and it takes the shape (with norms always:
// conv1d_silu_qk_norm asked), else the reference kernel.
void CudaBackend::conv1d_silu_norm(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& conv_state,
                                   const SeqPlan& plan, const fast::ConvNorm& norm) {
    const Rows Y = rows_of(y, "conv1d_silu", "y"), X = rows_of(x, "conv1d_silu", "x");
    same_shape(Y, X, "conv1d_silu");
    check_device(w, "conv1d_silu", "w");
    check_device(conv_state, "conv1d_silu", "conv_state");
    TS_CHECK(w.ndim == 2 && w.dim(0) == X.cols && w.is_contiguous() && w.dtype == DType::F32,
             "cuda conv1d_silu: weight {} for {} channels", w.describe(), X.cols);
    const int64_t K = w.dim(1);
    TS_CHECK(conv_state.ndim == 3 && conv_state.dim(1) == K - 1 && conv_state.dim(2) == X.cols &&
                 conv_state.is_contiguous(),
             "cuda conv1d_silu: state {} for K = {}, C = {}", conv_state.describe(), K, X.cols);
    if (norm.heads > 0 || (fast_gdn() && !reference_op("conv1d_silu") && fast::conv1d_silu_fits(K, norm)))
        return fast::conv1d_silu(Y.p, Y.ld, X.p, X.ld, X.rows, X.cols, w.ptr<float>(), K, conv_state.ptr<float>(),
                                 (K - 1) * X.cols, conv_state.dim(0), plan, norm, stream_.get());
    ref::conv1d_silu(Y.p, Y.ld, X.p, X.ld, X.rows, X.cols, w.ptr<float>(), K, conv_state.ptr<float>(),
                     (K - 1) * X.cols, conv_state.dim(0), plan, stream_.get());
}

void CudaBackend::gdn_gates(const Tensor& beta, const Tensor& g, const Tensor& b, const Tensor& a,
                            const Tensor& neg_exp_a, const Tensor& dt_bias) {
    const Rows Be = rows_of(beta, "gdn_gates", "beta"), G = rows_of(g, "gdn_gates", "g");
    const Rows B = rows_of(b, "gdn_gates", "b"), A = rows_of(a, "gdn_gates", "a");
    same_shape(Be, G, "gdn_gates");
    same_shape(Be, B, "gdn_gates");
    same_shape(Be, A, "gdn_gates");
    check_device(neg_exp_a, "gdn_gates", "neg_exp_a");
    check_device(dt_bias, "gdn_gates", "dt_bias");
    TS_CHECK(neg_exp_a.numel() == Be.cols && dt_bias.numel() == Be.cols, "cuda gdn_gates: per-head vectors for {} heads",
             Be.cols);
    ref::gdn_gates(Be.p, Be.ld, G.p, G.ld, B.p, B.ld, A.p, A.ld, neg_exp_a.ptr<float>(), dt_bias.ptr<float>(), Be.rows,
                   Be.cols, stream_.get());
}

void CudaBackend::gated_delta_rule(const Tensor& o, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                                   const Tensor& beta, const Tensor& state, const SeqPlan& plan, const GdnParams& p) {
    const Heads O = heads_of(o, "gated_delta_rule", "o"), Q = heads_of(q, "gated_delta_rule", "q");
    const Heads K = heads_of(k, "gated_delta_rule", "k"), V = heads_of(v, "gated_delta_rule", "v");
    const Rows G = rows_of(g, "gated_delta_rule", "g"), B = rows_of(beta, "gated_delta_rule", "beta");
    check_device(state, "gated_delta_rule", "state");
    TS_CHECK(state.ndim == 4 && state.is_contiguous() && state.dim(1) == V.n && state.dim(2) == K.D &&
                 state.dim(3) == V.D,
             "cuda gated_delta_rule: state {} for {} heads of {}x{}", state.describe(), V.n, K.D, V.D);
    if (fast_gdn() && (p.mode == GdnMode::Recurrent || (p.chunk == fast::kGdnChunk && K.D <= fast::kGdnChunkMaxDk))) {
        const fast::GdnChunkVariant variant = gdn_chunk_variant();
        const int64_t floats = fast::gated_delta_rule_scratch_floats(Q.T, V.n, K.D, V.D, p, variant);
        auto* sc = floats ? static_cast<float*>(scratch(6, size_t(floats) * sizeof(float))) : nullptr;
        return fast::gated_delta_rule(O.p, O.ts, O.hs, fast::HeadsIn{Q.p, Q.ts, Q.hs}, fast::HeadsIn{K.p, K.ts, K.hs},
                                      fast::HeadsIn{V.p, V.ts, V.hs}, G.p, G.ld, B.p, B.ld, Q.T, K.D, V.D,
                                      state.ptr<float>(), V.n * K.D * V.D, state.dim(0), plan, p, sc, /*max_len=*/0,
                                      stream_.get(), variant);
    }
    ref::gated_delta_rule(O.p, O.ts, O.hs, ref::HeadsIn{Q.p, Q.ts, Q.hs}, ref::HeadsIn{K.p, K.ts, K.hs},
                          ref::HeadsIn{V.p, V.ts, V.hs}, G.p, G.ld, B.p, B.ld, Q.T, K.D, V.D, state.ptr<float>(),
                          V.n * K.D * V.D, state.dim(0), plan, p, stream_.get());
}

// The kernel pack's Gated DeltaNet (fast_gdn.h) in fast mode — the fused decode step and the
// recurrent / chunked delta rule — unless TESSERA_FAST_GDN=0 keeps the reference kernels (they
// pass their tests against the CPU and the hybrid fixtures against transformers on the GPU).
bool CudaBackend::fast_gdn() const {
    if (kernels_ != CudaKernels::Fast) return false;
    const char* v = std::getenv("TESSERA_FAST_GDN");  // read per call: tests switch it within one process
    TS_CHECK(!v || !*v || std::string(v) == "0" || std::string(v) == "1", "TESSERA_FAST_GDN={}: expected 0 or 1", v);
    return !v || std::string(v) != "0";
}

bool CudaBackend::fuses_gdn_decode(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k) const {
    return fast_gdn() && p.n_k_heads > 0 && p.n_v_heads % p.n_k_heads == 0 && p.n_v_heads / p.n_k_heads <= 16 &&
           dk <= 256 && dv <= 256 && conv_k >= 2 && conv_k <= 8;
}

void CudaBackend::gdn_decode_step(const Tensor& y, const Tensor& mixed, const Tensor& z, const Tensor& b,
                                  const Tensor& a, const Tensor& conv_w, const Tensor& conv_state,
                                  const Tensor& neg_exp_a, const Tensor& dt_bias, const Tensor& rec_state,
                                  const Tensor& norm_w, float eps, const SeqPlan& plan, const GdnParams& p,
                                  const Tensor* w_out, const Tensor* out_parts) {
    const char* op = "gdn_decode_step";
    const Rows Y = rows_of(y, op, "y"), M = rows_of(mixed, op, "mixed"), Z = rows_of(z, op, "z");
    const Rows Bt = rows_of(b, op, "b"), A = rows_of(a, op, "a");
    for (const Tensor* t : {&conv_w, &conv_state, &neg_exp_a, &dt_bias, &rec_state, &norm_w}) check_device(*t, op, "weight or state");
    TS_CHECK(M.rows == plan.n_seqs && Y.rows == M.rows && Z.rows == M.rows && Bt.rows == M.rows && A.rows == M.rows,
             "cuda {}: {} sequences but {} rows", op, plan.n_seqs, M.rows);
    TS_CHECK(conv_w.ndim == 2 && conv_w.is_contiguous() && conv_w.dim(0) == M.cols && conv_state.ndim == 3 &&
                 conv_state.is_contiguous() && rec_state.ndim == 4 && rec_state.is_contiguous(),
             "cuda {}: conv {} / conv state {} / state {} do not fit mixed [{}, {}]", op, conv_w.describe(),
             conv_state.describe(), rec_state.describe(), M.rows, M.cols);
    fast::GdnDecodeArgs g;
    g.n_seqs = plan.n_seqs;
    g.slot = plan.slot;
    g.nk = p.n_k_heads;
    g.nv = p.n_v_heads;
    g.dk = rec_state.dim(2);
    g.dv = rec_state.dim(3);
    g.tiled_heads = p.tiled_heads;
    g.mixed = M.p;
    g.mixed_s = M.ld;
    g.z = Z.p;
    g.z_s = Z.ld;
    g.b = Bt.p;
    g.b_s = Bt.ld;
    g.a = A.p;
    g.a_s = A.ld;
    g.conv_w = conv_w.ptr<float>();
    g.conv_k = conv_w.dim(1);
    g.conv_state = conv_state.ptr<float>();
    g.conv_slot_stride = conv_state.dim(1) * conv_state.dim(2);
    g.neg_exp_a = neg_exp_a.ptr<float>();
    g.dt_bias = dt_bias.ptr<float>();
    g.state = rec_state.ptr<float>();
    g.state_slot_stride = rec_state.dim(1) * rec_state.dim(2) * rec_state.dim(3);
    g.n_slots = rec_state.dim(0);
    g.norm_w = norm_w.ptr<float>();
    g.rms_eps = eps;
    g.y = Y.p;
    g.y_s = Y.ld;
    g.variant = gdn_decode_variant_env();
    TS_CHECK(!w_out == !out_parts, "cuda {}: the out-projection needs both its weight and its parts", op);
    if (w_out) {
        const PackedMatrix* pw = packed_of(*w_out);
        TS_CHECK(pw && fast::gdn_decode_out_fits(g, *pw), "cuda {}: out-projection {} cannot be fused here", op,
                 w_out->describe());
        check_device(*out_parts, op, "out parts");
        TS_CHECK(out_parts->ndim == 3 && out_parts->is_contiguous() && out_parts->dtype == DType::F32 &&
                     out_parts->dim(0) == g.nk && out_parts->dim(1) == plan.n_seqs && out_parts->dim(2) == pw->n,
                 "cuda {}: out parts {} are not f32 [{}, {}, {}]", op, out_parts->describe(), g.nk, plan.n_seqs,
                 pw->n);
        g.out_w = *pw;
        g.out_parts = out_parts->ptr<float>();
        g.out_part_s = out_parts->stride[0] / int64_t(sizeof(float));
        g.out_row_s = out_parts->stride[1] / int64_t(sizeof(float));
    }
    fast::gdn_decode_step(g, stream_.get());
}

// The out-projection fused into the decode step (fast::gdn_decode_out_fits: HeadSplit's shapes, one
// sequence, a packed Int4 w_out) leaves one part a key head; TESSERA_GDN_DECODE_OUT=separate keeps
// the GEMV after the step, for A/B.
int CudaBackend::gdn_decode_out_parts(const GdnParams& p, int64_t dk, int64_t dv, int64_t conv_k, int64_t n_seqs,
                                      const Tensor& w_out) const {
    if (!fuses_gdn_decode(p, dk, dv, conv_k) || !gdn_decode_out_fused() || reference_op("matmul")) return 0;
    const PackedMatrix* pw = packed_of(w_out);
    if (!pw) return 0;
    fast::GdnDecodeArgs g;
    g.n_seqs = int(n_seqs);
    g.nk = p.n_k_heads;
    g.nv = p.n_v_heads;
    g.dk = dk;
    g.dv = dv;
    g.conv_k = conv_k;
    g.variant = gdn_decode_variant_env();
    return fast::gdn_decode_out_fits(g, *pw) ? p.n_k_heads : 0;
}

// The kernel pack's MoE (packed Int4 experts) takes at most fast::kMoeMaxExperts experts and
// fast::kMoeMaxTopK slots a token.
MoeLimits CudaBackend::moe_limits() const {
    return kernels_ == CudaKernels::Fast ? MoeLimits{fast::kMoeMaxExperts, fast::kMoeMaxTopK} : Backend::moe_limits();
}

void CudaBackend::moe_topk(const Tensor& logits, const MoeRouting& r, int32_t* ids, float* weights) {
    const Rows L = rows_of(logits, "moe_topk", "logits");
    TS_CHECK(L.ld == L.cols, "cuda moe_topk: logits {} must be contiguous", logits.describe());
    const int64_t E = L.cols - (r.shared ? 1 : 0);
    TS_CHECK(E >= 1, "cuda moe_topk: logits {} hold no expert{}", logits.describe(),
             r.shared ? " besides the shared expert's gate" : "");
    routed_ids_ = nullptr;
    routed_logits_ = {};
    if (kernels_ == CudaKernels::Fast && E <= fast::kMoeMaxExperts && r.k <= fast::kMoeMaxTopK &&
        !reference_op("moe_route")) {
        const bool exact = moe_route_exact();
        fast::moe_route(L.p, L.ld, L.rows, int(E), r.k, r.renormalize, r.shared, ids, weights, stream_.get(), exact);
        routed_ids_ = ids;
        if (r.renormalize && !exact && E <= fast::kMoeRouteAheadMaxExperts)  // ranked on the logits
            routed_logits_ = {L.p, L.ld, int(E), r.k, r.shared};
        return;
    }
    ref::moe_topk(L.p, L.rows, E, r.k, r.renormalize, r.shared, ids, weights, stream_.get());
}

void CudaBackend::moe_experts(const Tensor& y, const Tensor& x, const MoeWeights& w, const int32_t* ids,
                              const float* weights, int k) {
    const Rows Y = rows_of(y, "moe_experts", "y"), X = rows_of(x, "moe_experts", "x");
    same_shape(Y, X, "moe_experts");
    const int E = w.n_experts();
    TS_CHECK(E > 0 && int(w.up.size()) == E && int(w.down.size()) == E, "cuda moe_experts: {} experts", E);
    const int64_t I = w.gate[0].dim(0);
    // Right after the fast routing of these ids, x (routed there, unchanged since: backend.h) was
    // complete before the routing kernel started: the MoE may read it before its PDL wait.
    const bool x_settled = ids == routed_ids_;
    // And where that launch ranked the logits, the decode's gate+up may rank them itself
    // (TESSERA_MOE_ROUTE_AHEAD=on: fast::MoeRouteAhead).
    const fast::MoeRouteAhead route_ahead = x_settled && moe_route_ahead() ? routed_logits_ : fast::MoeRouteAhead{};
    routed_ids_ = nullptr;
    routed_logits_ = {};
    if (kernels_ == CudaKernels::Fast) {
        const PackedMatrix* g = expert_descriptors(w.gate);
        const PackedMatrix* u = g ? expert_descriptors(w.up) : nullptr;
        const PackedMatrix* d = u ? expert_descriptors(w.down) : nullptr;
        if (d) {  // every expert packed Int4: the kernel pack's MoE (fast_moe.h)
            auto checked = moe_checked_.find(w.gate.data());
            if (checked == moe_checked_.end()) {
                std::vector<PackedMatrix> hg, hu, hd;
                for (int e = 0; e < E; ++e) {
                    hg.push_back(*packed_of(w.gate[size_t(e)]));
                    hu.push_back(*packed_of(w.up[size_t(e)]));
                    hd.push_back(*packed_of(w.down[size_t(e)]));
                }
                checked = moe_checked_.emplace(w.gate.data(), fast::moe_check_experts(hg.data(), hu.data(), hd.data(),
                                                                                     E, X.cols, I)).first;
            }
            fast::MoePackedExperts pe{E, X.cols, I, g, u, d, checked->second};
            // TESSERA_MOE_DECODE=fused: the one-kernel decode step where it takes the shapes, its
            // tickets on zeroed words it leaves zero (as the decode attention's merge does).
            const bool fused = moe_decode_fused();
            TS_CHECK(!fused || fast::kMoeFusedDecodeWorks || moe_decode_fused_try(),
                     "TESSERA_MOE_DECODE=fused is disabled: its kernel hung on its first H200 run (session 41) and "
                     "its fix (session 42) is not yet confirmed on a GPU; use dp4a (the default) or mma "
                     "(fused-try runs the unconfirmed kernel)");
            // Ticket words, zero and left zero: the fused decode's, and (TESSERA_MOE_COMBINE=fused) the
            // down tiles' slot sum — one zeroed buffer, asked for once (a larger ask reallocates it).
            const int fused_cluster = fused && X.rows <= fast::kMoeFusedMaxTokens  // (≤ 512 bytes)
                                          ? fast::moe_fused_shape(X.cols, I, checked->second).cluster
                                          : 0;
            const bool combine = moe_combine_fused();
            const size_t zb = std::max(fused_cluster ? fast::moe_fused_counters_bytes(X.rows, fused_cluster) : 0,
                                       combine ? fast::moe_combine_counters_bytes(X.rows, X.cols) : 0);
            auto* tickets = zb ? static_cast<unsigned*>(zeroed_scratch(zb)) : nullptr;
            if (fused_cluster) pe.counters = tickets;
            if (combine) pe.combine_counters = tickets;
            void* sc = scratch(1, fast::moe_experts_scratch_bytes(X.rows, k, E, X.cols, I));
            return fast::moe_experts_packed(Y.p, Y.ld, X.p, X.ld, X.rows, pe, ids, weights, k, sc, stream_.get(),
                                            {.dp4a = !moe_decode_mma(),
                                             .x_settled = x_settled,
                                             .wgmma = !moe_prefill_mma(),
                                             .mid = moe_mid_grouped(),
                                             .tma = !moe_prefill_plain(),
                                             .gather = moe_prefill_gather(),
                                             .persist = moe_prefill_persist(),
                                             .fit = moe_prefill_fit(),
                                             .fused = fused,
                                             .route_ahead = route_ahead.logits ? &route_ahead : nullptr,
                                             .combine = combine,
                                             .l2_first = moe_l2_first(),
                                             .warpgroups = moe_warpgroups(),
                                             .fit8 = moe_fit8(),
                                             .dynamic = moe_dynamic(),
                                             .out16 = moe_out_bf16(),
                                             .fused_tiles = moe_fused_tiles(),
                                             .fused_warp = moe_fused_warp()});
        }
    }
    const DType dt = w.gate[0].dtype;
    TS_CHECK(dt == DType::BF16 || dt == DType::F32, "cuda moe_experts: expert weights {} (placed bf16 or f32 expected)",
             w.gate[0].describe());
    auto* sc = static_cast<float*>(scratch(1, size_t(ref::moe_experts_scratch_floats(X.rows, k, I)) * sizeof(float)));
    const void* const* gp = expert_pointers(w.gate);
    const void* const* up = expert_pointers(w.up);
    const void* const* dp = expert_pointers(w.down);
    if (dt == DType::BF16)
        ref::moe_experts(Y.p, Y.ld, X.p, X.ld, X.rows, X.cols, I, E, reinterpret_cast<const uint16_t* const*>(gp),
                         reinterpret_cast<const uint16_t* const*>(up), reinterpret_cast<const uint16_t* const*>(dp),
                         ids, weights, k, sc, stream_.get());
    else
        ref::moe_experts(Y.p, Y.ld, X.p, X.ld, X.rows, X.cols, I, E, reinterpret_cast<const float* const*>(gp),
                         reinterpret_cast<const float* const*>(up), reinterpret_cast<const float* const*>(dp), ids,
                         weights, k, sc, stream_.get());
}

}  // namespace tessera::cuda
