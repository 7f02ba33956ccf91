// fast::conv1d_silu (fast_gdn.h): a Gated DeltaNet layer's causal depthwise conv + SiLU over a
// prefill's tokens, and the l2 norms of its q and k heads, in one pass over the conv's input.
//
// Why. The reference kernel (ref_gdn.cu) gives each thread one channel of 16 tokens and re-reads
// the K inputs of every output through the plan's lookups; then ref::l2_norm reads and rewrites
// the q | k half twice more. On the flagship (8,192 channels, 2,048 tokens a prefill chunk) that
// was 126 µs for the conv and 2 × 12.7 µs for the norms on an H100 — 7 % and 1.4 % of an 8K
// prefill (session 46's trace) — for 134 MB of traffic the conv needs (~45 µs).
//
// Work. A warp takes one group of channels for a run of kRun tokens: a q or k head (its dim ≤ 128
// channels) or 128 channels of the rest; lane l holds channels l + 32i, i < 4 — ref::l2_norm's warp
// kernel's layout, so a head's Σ x² is summed in its order and the norm's bits are its bits. The
// last K-1 inputs of each channel stay in registers (the window); the inputs of kBatch tokens are
// requested together before their outputs are computed. Each output is Σ_j w[c, j]·in_j in j
// order from 0.f, then acc / (1 + e^-acc) — the reference kernel's expressions, so its bits. At a
// sequence's start (a run's first token, or where the plan's next sequence begins) the window is
// refilled from the sequence's conv state (positions < 0) or its earlier inputs. A token no usable
// plan row covers gets NaN, as the reference ops give. The conv state is updated after every output
// has read it, by the reference kernel's second launch (ref::detail::launch_conv_state).
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/ref_plan.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using ref::conv_input;
using ref::find_seq;
using ref::quiet_nan;
using ref::seq_range;
using ref::SeqRange;

constexpr int kWarps = kConvWarps;  // channel groups a block (fast_gdn.h)
constexpr int kRun = 32;            // tokens a warp walks
constexpr int kBatch = 4;           // tokens whose inputs a warp requests at once
constexpr int kGroup = kConvGroup;  // channels of an un-normalised group: 4 a lane (fast_gdn.h)
constexpr int kNV = kGroup / 32;    // channels a lane
static_assert(kNV == 4, "a lane's channels as ref::l2_norm's warp kernel holds them (D <= 128)");

struct ConvArgs {
    float* y;
    int64_t ys;
    const float* x;
    int64_t xs, T, C;
    const float* w;  // [C, K]
    const float* conv_state;
    int64_t slot_stride, n_slots;
    SeqPlan plan;
    ConvNorm norm;
    int64_t n_groups;  // conv1d_silu_groups(C, norm)
};

template <int K, bool NORM>
__global__ void __launch_bounds__(kWarps * 32, 5) conv1d_silu_kernel(const ConvArgs a) {
    const int lane = int(threadIdx.x & 31);
    const int64_t grp = int64_t(blockIdx.y) * kWarps + (threadIdx.x >> 5);
    if (grp >= a.n_groups) return;  // whole warps: grp is uniform over the warp
    // The group's channels [c0, c0 + width); normed: a q / k head, scaled by `scale`.
    int64_t c0, width;
    bool normed = false;
    float scale = 1.f;
    if (NORM && grp < a.norm.heads) {
        c0 = grp * a.norm.dim;
        width = a.norm.dim;
        normed = true;
        scale = grp < a.norm.scaled ? a.norm.scale : 1.f;
    } else {
        const int64_t base = NORM ? a.norm.heads * a.norm.dim : 0, g = NORM ? grp - a.norm.heads : grp;
        c0 = base + g * kGroup;
        width = a.C - c0 < kGroup ? a.C - c0 : kGroup;
    }
    bool on[kNV];
    int ch[kNV];  // (C < 2^24: ref::check_conv1d_silu)
    // The lane's taps in shared memory (its own slots: no barrier), registers for kBatch tokens' inputs.
    __shared__ float4 taps[kWarps][kNV][32];
    float4(&wk)[kNV][32] = taps[threadIdx.x >> 5];
#pragma unroll
    for (int i = 0; i < kNV; ++i) {
        on[i] = lane + 32 * i < width;
        ch[i] = int(c0) + lane + 32 * i;
        float t4[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int j = 0; j < K; ++j) t4[j] = on[i] ? a.w[int64_t(ch[i]) * K + j] : 0.f;
        wk[i][lane] = make_float4(t4[0], t4[1], t4[2], t4[3]);
    }
    const int64_t tb = int64_t(blockIdx.x) * kRun, te = tb + kRun < a.T ? tb + kRun : a.T;
    float win[kNV][K - 1];  // inputs at positions p − (K−1) .. p − 1 of the next token p, oldest first
    SeqRange r;
    bool ok = false;
    int64_t seq_end = tb;  // the current sequence (ok) or bad plan row (!ok) covers [.., seq_end)
    for (int64_t t0 = tb; t0 < te; t0 += kBatch) {
        // kBatch tokens' inputs requested together (whatever sequences they belong to): the loads
        // a warp has in flight, where one token's at a time left the SM mostly waiting.
        float in[kBatch][kNV];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const float* xr = a.x + (t0 + u) * a.xs;
#pragma unroll
            for (int i = 0; i < kNV; ++i) in[u][i] = on[i] && t0 + u < te ? xr[ch[i]] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < kBatch; ++u) {
            const int64_t t = t0 + u;
            if (t >= te) break;
            if (t >= seq_end) {
                const int s = find_seq(a.plan.q_start, a.plan.n_seqs, t);
                ok = s >= 0 && seq_range(a.plan, s, a.T, a.n_slots, &r);
                seq_end = ok ? r.t0 + r.n : t + 1;
                if (ok) {
                    const float* st = r.slot >= 0 ? a.conv_state + r.slot * a.slot_stride : nullptr;
                    const int64_t p = t - r.t0;
#pragma unroll
                    for (int i = 0; i < kNV; ++i)
#pragma unroll
                        for (int m = 0; m < K - 1; ++m)
                            win[i][m] = on[i] ? conv_input(a.x, a.xs, st, a.C, K, r.t0, p - (K - 1) + m, ch[i]) : 0.f;
                }
            }
            float v[kNV];
            if (ok) {
#pragma unroll
                for (int i = 0; i < kNV; ++i) {
                    const float4 w4 = wk[i][lane];
                    const float w[4] = {w4.x, w4.y, w4.z, w4.w};
                    float acc = 0.f;
#pragma unroll
                    for (int m = 0; m < K - 1; ++m) acc += w[m] * win[i][m];
                    acc += w[K - 1] * in[u][i];
                    v[i] = on[i] ? acc / (1.f + expf(-acc)) : 0.f;
#pragma unroll
                    for (int m = 0; m + 1 < K - 1; ++m) win[i][m] = win[i][m + 1];
                    win[i][K - 2] = in[u][i];
                }
            } else {
#pragma unroll
                for (int i = 0; i < kNV; ++i) v[i] = on[i] ? quiet_nan() : 0.f;
            }
            if (NORM && normed) {  // ref::l2_norm's warp kernel on the row in registers
                float ss = 0.f;
#pragma unroll
                for (int i = 0; i < kNV; ++i) ss += v[i] * v[i];
                for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
                const float inv = float(1.0 / sqrt(double(ss) + double(a.norm.eps)));
#pragma unroll
                for (int i = 0; i < kNV; ++i) v[i] = v[i] * inv * scale;
            }
            float* const yr = a.y + t * a.ys;
#pragma unroll
            for (int i = 0; i < kNV; ++i)
                if (on[i]) yr[ch[i]] = v[i];
        }
    }
}

template <int K>
cudaError_t launch_k(const ConvArgs& a, cudaStream_t stream) {
    const dim3 grid(unsigned((a.T + kRun - 1) / kRun), unsigned((a.n_groups + kWarps - 1) / kWarps));
    if (a.norm.heads > 0) conv1d_silu_kernel<K, true><<<grid, kWarps * 32, 0, stream>>>(a);
    else conv1d_silu_kernel<K, false><<<grid, kWarps * 32, 0, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_conv1d_silu(float* y, int64_t ys, const float* x, int64_t xs, int64_t T, int64_t C, const float* w,
                               int64_t K, const float* conv_state, int64_t slot_stride, int64_t n_slots,
                               const SeqPlan& plan, const ConvNorm& norm, cudaStream_t stream) {
    const int64_t groups = conv1d_silu_groups(C, norm);
    const ConvArgs a{y, ys, x, xs, T, C, w, conv_state, slot_stride, n_slots, plan, norm, groups};
    switch (K) {
        case 2: return launch_k<2>(a, stream);
        case 3: return launch_k<3>(a, stream);
        case 4: return launch_k<4>(a, stream);
        default: return cudaErrorInvalidValue;  // conv1d_silu_fits said no
    }
}

}  // namespace tessera::cuda::fast::detail
