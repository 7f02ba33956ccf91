// Argument checks and dispatch of the fast Gated DeltaNet kernels (fast_gdn.cu: recurrent and the
// fused decode step; fast_gdn_chunked.cu: the WY form; fast_gdn_conv.cu: the prefill's conv). Only
// what the host knows is checked; the plan arrays and slots are device memory, checked on the device.
#include "kernels/cuda/fast_gdn.h"

#include <cmath>
#include <limits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ref_check.h"

namespace tessera::cuda::fast {

namespace {

void check_rule(const char* op, int64_t T, int64_t dk, int64_t dv, int64_t slot_stride, int64_t n_slots,
                const SeqPlan& plan, const GdnParams& p) {
    const int64_t nk = p.n_k_heads, nv = p.n_v_heads;
    TS_CHECK(nk > 0 && nv > 0 && nv % nk == 0 && nv <= 65535,
             "{}: {} value heads are not a multiple of {} key heads (or more than 65535)", op, nv, nk);
    TS_CHECK(dk >= 1 && dk <= ref::kGdnMaxHeadDim && dv >= 1 && dv <= ref::kGdnMaxHeadDim,
             "{}: head dims dk={} dv={} must be in [1, {}]", op, dk, dv, ref::kGdnMaxHeadDim);
    TS_CHECK(T >= 0 && T <= std::numeric_limits<int32_t>::max(), "{}: {} tokens", op, T);
    if (T == 0) return;
    TS_CHECK(n_slots >= 1, "{}: the state has {} slots", op, n_slots);
    TS_CHECK(plan.n_seqs >= 1 && plan.q_start != nullptr && plan.slot != nullptr,
             "{}: {} tokens but the plan has {} sequences or missing arrays", op, T, plan.n_seqs);
    TS_CHECK(slot_stride >= nv * dk * dv, "{}: slot stride {} smaller than [{}, {}, {}]", op, slot_stride, nv, dk,
             dv);
}

}  // namespace

int64_t gated_delta_rule_scratch_floats(int64_t T, int64_t nv, int64_t dk, int64_t dv, const GdnParams& p,
                                        GdnChunkVariant variant) {
    if (p.mode != GdnMode::Chunked) return 0;
    if (gdn_chunk_f16x3(variant)) return T * nv * gdn_chunk16_row_floats(dk, dv) + kGdnPrepCtrWords;
    return T * nv * ((dk + dv + kGdnChunk + 4 + 3) / 4 * 4);
}

void gated_delta_rule(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                      int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv, float* state,
                      int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const GdnParams& p, float* scratch,
                      int64_t max_len, cudaStream_t stream, GdnChunkVariant variant) {
    const char* op = "fast::gated_delta_rule";
    check_rule(op, T, dk, dv, slot_stride, n_slots, plan, p);
    if (T == 0) return;
    const int64_t nk = p.n_k_heads, nv = p.n_v_heads;
    TS_CHECK(o && state && g && beta, "{}: null o, state, g or beta", op);
    ref::detail::check_heads(op, "q", q.data, q.tok_stride, q.head_stride, T, nk, dk);
    ref::detail::check_heads(op, "k", k.data, k.tok_stride, k.head_stride, T, nk, dk);
    ref::detail::check_heads(op, "v", v.data, v.tok_stride, v.head_stride, T, nv, dv);
    TS_CHECK(o_hs >= dv && (T == 1 || o_ts >= (nv - 1) * o_hs + dv),
             "{}: o strides (token {}, head {}) overlap [{}, {}, {}]", op, o_ts, o_hs, T, nv, dv);
    TS_CHECK(max_len >= 0 && max_len <= T, "{}: max_len {} outside [0, {}] (0: unknown)", op, max_len, T);
    if (max_len == 0) max_len = T;
    if (p.mode != GdnMode::Chunked) {
        TS_CHECK(plan.n_seqs <= std::numeric_limits<int32_t>::max(), "{}: {} sequences", op, plan.n_seqs);
        TS_CUDA_CHECK(detail::launch_gdn_recurrent(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state,
                                                   slot_stride, n_slots, plan, p, max_len, false, stream));
        return;
    }
    TS_CHECK(p.chunk == kGdnChunk, "{}: the chunked form runs chunks of {} tokens, not {}", op, kGdnChunk, p.chunk);
    TS_CHECK(dk <= kGdnChunkMaxDk, "{}: the chunked form takes dk <= {}, not {}", op, kGdnChunkMaxDk, dk);
    if (max_len >= 2) {  // some sequence may have a WY part
        TS_CHECK(scratch != nullptr, "{}: Chunked mode needs {} floats of scratch", op,
                 gated_delta_rule_scratch_floats(T, nv, dk, dv, p, variant));
        TS_CHECK(plan.n_seqs <= 65535, "{}: the chunked form takes at most 65535 sequences, not {}", op,
                 plan.n_seqs);
        if (gdn_chunk_f16x3(variant)) {
            TS_CHECK(reinterpret_cast<uintptr_t>(scratch) % 16 == 0,
                     "{}: the F16x3 variant copies 16-byte pieces of scratch, which must be 16-byte aligned", op);
            TS_CHECK(kGdnChunk * nv * gdn_chunk16_row_floats(dk, dv) < (int64_t(1) << 31),
                     "{}: {} value heads of {} × {}: a chunk's scratch rows span 2^31 floats or more, past the "
                     "F16x3 prep's 32-bit row offsets", op, nv, dk, dv);
            const int64_t prep_blocks = (max_len + kGdnChunk - 1) / kGdnChunk * plan.n_seqs * nv;
            TS_CHECK(prep_blocks <= std::numeric_limits<int32_t>::max(),
                     "{}: {} chunks of the longest sequence × {} sequences × {} value heads are {} prep blocks, "
                     "past the F16x3 prep's one-dimensional grid (2^31 − 1); split the call", op,
                     (max_len + kGdnChunk - 1) / kGdnChunk, plan.n_seqs, nv, prep_blocks);
            TS_CUDA_CHECK(detail::launch_gdn_chunked16(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state,
                                                       slot_stride, n_slots, plan, p, scratch, max_len,
                                                       variant, stream));
        } else {
            TS_CUDA_CHECK(detail::launch_gdn_chunked(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state,
                                                     slot_stride, n_slots, plan, p, scratch, max_len,
                                                     gdn_chunk_state_warps(variant), gdn_chunk_vec_loads(variant),
                                                     gdn_chunk_split(variant), stream));
        }
    }
    // After the WY parts (same stream): every lone token and last one-token chunk.
    TS_CUDA_CHECK(detail::launch_gdn_recurrent(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state,
                                               slot_stride, n_slots, plan, p, max_len, true, stream));
}

bool conv1d_silu_fits(int64_t K, const ConvNorm& norm) {
    return K >= 2 && K <= 4 && (norm.heads == 0 || (norm.dim >= 1 && norm.dim <= 128));
}

void conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w, int64_t K,
                 float* conv_state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan, const ConvNorm& norm,
                 cudaStream_t stream) {
    const char* op = "fast conv1d_silu";
    TS_CHECK(conv1d_silu_fits(K, norm), "{}: K = {} taps, norm heads of {} (takes K in [2, 4], heads of <= 128)", op,
             K, norm.dim);
    TS_CHECK(norm.heads >= 0 && norm.scaled >= 0 && norm.scaled <= norm.heads && norm.heads * norm.dim <= C &&
                 std::isfinite(norm.eps) && norm.eps >= 0.f && std::isfinite(norm.scale),
             "{}: norm of {} heads of {} ({} scaled by {}, eps {}) over {} channels", op, norm.heads, norm.dim,
             norm.scaled, norm.scale, norm.eps, C);
    if (!ref::check_conv1d_silu(op, y, ys, x, xs, T, C, w, K, conv_state, slot_stride, n_slots, plan)) return;
    const int64_t groups = conv1d_silu_groups(C, norm);  // a warp each
    TS_CHECK((groups + kConvWarps - 1) / kConvWarps <= 65535, "{}: {} channel groups (heads of {}) exceed the launch",
             op, groups, norm.dim);
    TS_CUDA_CHECK(detail::launch_conv1d_silu(y, ys, x, xs, T, C, w, K, conv_state, slot_stride, n_slots, plan, norm,
                                             stream));
    TS_CUDA_CHECK(ref::detail::launch_conv_state(x, xs, T, C, K, conv_state, slot_stride, n_slots, plan, stream));
}

bool gdn_decode_out_fits(const GdnDecodeArgs& a, const PackedMatrix& w) {
    const auto v = a.variant == 0 ? gdn_decode_variant(a.n_seqs, a.nk, a.dv) : GdnDecodeVariant(a.variant);
    const bool split = v == GdnDecodeVariant::HeadSplit;
    return split && a.nk > 0 && a.nv % a.nk == 0 && detail::gdn_decode_out_takes(a, w);
}

void gdn_decode_step(const GdnDecodeArgs& a, cudaStream_t stream) {
    const char* op = "fast::gdn_decode_step";
    TS_CHECK(a.n_seqs >= 0 && a.n_seqs <= std::numeric_limits<int32_t>::max(), "{}: {} sequences", op, a.n_seqs);
    if (a.n_seqs == 0) return;
    TS_CHECK(a.nk > 0 && a.nv > 0 && a.nv % a.nk == 0 && a.nk <= 65535 && a.nv / a.nk <= 16,
             "{}: {} value heads must be 1 to 16 times the {} key heads", op, a.nv, a.nk);
    TS_CHECK(a.dk >= 1 && a.dk <= 256 && a.dv >= 1 && a.dv <= 256, "{}: head dims dk={} dv={} must be in [1, 256]",
             op, a.dk, a.dv);
    TS_CHECK(a.conv_k >= 2 && a.conv_k <= 8, "{}: conv kernel {} must be in [2, 8]", op, a.conv_k);
    TS_CHECK(a.n_slots >= 1, "{}: the state has {} slots", op, a.n_slots);
    TS_CHECK(a.slot && a.mixed && a.z && a.b && a.a && a.conv_w && a.conv_state && a.neg_exp_a && a.dt_bias &&
                 a.state && a.norm_w && a.y,
             "{}: null pointer argument", op);
    const int64_t C = 2 * a.nk * a.dk + a.nv * a.dv, HV = a.nv * a.dv;
    TS_CHECK(a.n_seqs == 1 || (a.mixed_s >= C && a.z_s >= HV && a.b_s >= a.nv && a.a_s >= a.nv && a.y_s >= HV),
             "{}: row strides (mixed {}, z {}, b {}, a {}, y {}) smaller than their rows ({}, {}, {}, {}, {})", op,
             a.mixed_s, a.z_s, a.b_s, a.a_s, a.y_s, C, HV, a.nv, a.nv, HV);
    TS_CHECK(a.conv_slot_stride >= (a.conv_k - 1) * C, "{}: conv slot stride {} smaller than [{}, {}]", op,
             a.conv_slot_stride, a.conv_k - 1, C);
    TS_CHECK(a.state_slot_stride >= a.nv * a.dk * a.dv, "{}: state slot stride {} smaller than [{}, {}, {}]", op,
             a.state_slot_stride, a.nv, a.dk, a.dv);
    TS_CHECK(a.variant >= 0 && a.variant < kGdnDecodeVariants, "{}: unknown variant {}", op, a.variant);
    using V = GdnDecodeVariant;
    auto v = a.variant == 0 ? gdn_decode_variant(a.n_seqs, a.nk, a.dv) : GdnDecodeVariant(a.variant);
    // The choice's HeadSplit only where it splits: Head256 at one sequence loses to Cols32.
    const bool splits = detail::gdn_decode_head_fits(a) && detail::gdn_decode_head_split(a) > 1;
    if (a.variant == 0 && v == V::HeadSplit && !splits) v = V::Cols32;
    if (a.out_w.codes) {
        TS_CHECK(gdn_decode_out_fits(a, a.out_w), "{}: the out-projection [{}, {}] (group {}) cannot be fused here", op,
                 a.out_w.n, a.out_w.k, a.out_w.group);
        const int64_t part_floats = a.n_seqs == 1 ? a.out_w.n : a.n_seqs * a.out_row_s;  // parts must not overlap
        TS_CHECK(a.out_parts && a.out_row_s >= a.out_w.n && (a.nk == 1 || a.out_part_s >= part_floats),
                 "{}: out parts (part stride {}, row stride {}) do not hold [{}, {}, {}]", op, a.out_part_s,
                 a.out_row_s, a.nk, a.n_seqs, a.out_w.n);
    }
    TS_CHECK(!a.stamps || ((v == V::Head256 || v == V::HeadSplit) && !a.out_w.codes && a.conv_k <= 4 &&
                           detail::gdn_decode_head_fits(a) && (v == V::Head256 || detail::gdn_decode_head_split(a) == 4)),
             "{}: stamps are taken by Head256 and HeadSplit in 4 at conv_k <= 4 without the fused projection", op);
    if (v == GdnDecodeVariant::ClusterPerKeyHead) {
        TS_CUDA_CHECK(detail::launch_gdn_decode_step(a, stream));
        return;
    }
    if ((v == V::Head256 || v == V::Head512 || v == V::HeadSplit) && detail::gdn_decode_head_fits(a)) {
        const int split = v == V::HeadSplit ? detail::gdn_decode_head_split(a) : 1;
        TS_CUDA_CHECK(detail::launch_gdn_decode_step_head(a, v == V::Head512 ? 512 : 256, split, stream));
        return;
    }
    const bool narrow = v == GdnDecodeVariant::Cols16 && a.dv <= 128;  // a cluster holds at most 8 blocks
    TS_CUDA_CHECK(detail::launch_gdn_decode_step_v2(a, narrow ? 16 : 32, stream));
}

}  // namespace tessera::cuda::fast
