// The fused one-token GDN decode step with a value head's state in NS blocks (dk, dv <= 128): block
// (s, (hk·r + jj)·NS + p) holds columns [p·128/NS, (p+1)·128/NS) of the dk × dv state of value
// head jj of key head hk — 128/NS column lanes × THREADS·NS/128 row lanes, R consecutive rows each in
// registers. Every block computes the head's q and k (conv, SiLU, l2 norms) itself.
//  - NS = 1 (Head256 / Head512): the RMSNorm over dv is a block sum, no distributed shared memory.
//    The r blocks reading one key head form a cluster only because they share the q/k conv state:
//    each reads it (arriving on the cluster barrier right after), and each writes its share of the
//    shifted rows at the very end, after the barrier's wait — which by then has long completed. No
//    cluster at r = 1.
//  - NS = 2, 4 (HeadSplit): the r·NS blocks of a key head form a cluster; the RMSNorm's Σ o² is
//    summed over the head's NS blocks through distributed shared memory (a cluster barrier, whose
//    arrival also marks the q/k conv state read; a second one keeps every block's partial sums alive
//    until the others have read them). The point is the state's traffic: a block loads and stores
//    64/NS KB instead of 64 — at batch 1, 32 blocks storing 64 KB each spent ~2.2 µs of a 6.4 µs
//    step on it (H200, tmp ablation, session 24).
//
// Latency: the state rows, the conv weights, the conv state rows, norm_w, A and dt_bias are
// requested before the PDL wait; after it one round of loads (the projections: q | k | v inputs,
// z, a, b), then three block barriers (NS = 1; two and a cluster barrier for NS > 1) and the stores.
#include <cooperative_groups.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_step.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cg = cooperative_groups;

namespace tessera::cuda::fast::detail {

namespace {

using step::block_sum3;
using step::cluster_arrive;
using step::cluster_wait;
using step::conv_silu;
using step::cp_async4;
using step::cp_async_wait_all;
using step::silu;

constexpr int kCols = 128;  // the columns of a head (dv <= 128)
constexpr int kMaxDk = 128;

// grid (n_seqs, nv·NS): blockIdx.y = (hk·r + jj)·NS + p, clusters of r·NS blocks along y (r·NS > 1).
// KM >= conv_k.
template <int THREADS, int NS, int KM>
__global__ void __launch_bounds__(THREADS, THREADS == 256 ? (NS == 4 ? 4 : 2) : 1)
    gdn_decode_head_kernel(GdnDecodeArgs a) {
    constexpr int COLS = kCols / NS;     // this block's columns
    constexpr int NR = THREADS / COLS;   // row lanes
    constexpr int R = kMaxDk / NR;       // rows a thread
    constexpr int NW = COLS / 32;        // the warps of row lane 0 (Σ o² partials)
    static_assert(NR >= 2 && NR * R == kMaxDk && R % 4 == 0 && COLS % 32 == 0);
    const int s = blockIdx.x, tid = threadIdx.x, cl = tid % COLS, rl = tid / COLS;
    const int nk = int(a.nk), r = int(a.nv / a.nk), part = int(blockIdx.y) % NS, hj = int(blockIdx.y) / NS;
    const int hk = hj / r, jj = hj % r, rank = jj * NS + part;  // rank: in the key head's cluster
    const int h = a.tiled_heads ? jj * nk + hk : hk * r + jj;  // this block's value head
    const int c = part * COLS + cl;                            // this thread's state column
    const int dk = int(a.dk), dv = int(a.dv), K = int(a.conv_k);
    const int64_t C = 2 * int64_t(nk) * dk + a.nv * dv;
    const bool col_ok = c < dv;
    const bool v_lane = rl == NR - 1;  // the row lane computing v (row lane 0 computes q, k)

    __shared__ float vw[COLS * KM];  // v's conv weights and windows, [column][tap]
    __shared__ float vwin[COLS * KM];
    __shared__ __align__(16) float qk[2 * kMaxDk];  // conv + SiLU of q | k (zeros past dk)
    __shared__ float vv[COLS];        // v after conv + SiLU
    __shared__ float sh3[THREADS / 32][3];
    __shared__ float2 red[NR][COLS];  // (Sᵀk, Sᵀq) partial sums per row lane
    __shared__ float sq[NW];          // Σ o² per warp of row lane 0
    extern __shared__ float4 dyn4[];
    float* qw = reinterpret_cast<float*>(dyn4);  // [2·dk][K] conv weights of q | k of key head hk
    float* qwin = qw + 2 * dk * K;               // [2·dk][K] their windows: K-1 state rows, x

    const int64_t slot = a.slot[s];  // the same in every block of the cluster: all return or none
    if (slot < -1 || slot >= a.n_slots) {
        pdl::wait();  // nothing is written before the kernel before has ended
        pdl::trigger();
        if (rl == 0 && col_ok) a.y[s * a.y_s + int64_t(h) * dv + c] = dev::quiet_nan();
        return;
    }
    const float* xrow = a.mixed + s * a.mixed_s;
    const float* cst = slot >= 0 ? a.conv_state + slot * a.conv_slot_stride : nullptr;
    float* S = slot >= 0 && col_ok ? a.state + slot * a.state_slot_stride + int64_t(h) * dk * dv + c : nullptr;

    auto queue_tap = [&](float* w, float* win, int64_t ch, int tap, int phase) {  // step::queue_conv_tap
        step::queue_conv_tap(w, win, a.conv_w, cst, xrow, C, ch, tap, K, phase);
    };
    auto taps = [&](int phase) {
        for (int i = tid; i < 2 * dk * K; i += THREADS) {  // q | k of key head hk
            const int cl = i / K, tap = i - cl * K;
            const int64_t ch = cl < dk ? hk * dk + cl : nk * dk + hk * dk + (cl - dk);
            queue_tap(&qw[cl * K + tap], &qwin[cl * K + tap], ch, tap, phase);
        }
        for (int i = tid; i < COLS * K; i += THREADS) {  // v of head h, this block's columns
            const int cc = i / K, tap = i - cc * K;
            if (part * COLS + cc < dv)
                queue_tap(&vw[cc * KM + tap], &vwin[cc * KM + tap], 2 * nk * dk + int64_t(h) * dv + part * COLS + cc,
                          tap, phase);
        }
    };

    // Before the wait: what no kernel of this step writes.
    taps(0);
    float sr[R];  // S[R·rl + m, c]
#pragma unroll
    for (int m = 0; m < R; ++m) {
        const int i = R * rl + m;
        sr[m] = S && i < dk ? S[int64_t(i) * dv] : 0.f;
    }
    const float nw = col_ok ? a.norm_w[c] : 0.f, nea = a.neg_exp_a[h], dtb = a.dt_bias[h];
    pdl::wait();
    pdl::trigger();
    const float bb = a.b[s * a.b_s + h], ax = a.a[s * a.a_s + h];
    const float zz = rl == 0 && col_ok ? a.z[s * a.z_s + int64_t(h) * dv + c] : 0.f;
    taps(1);
    cp_async_wait_all();
    __syncthreads();

    // q and k (row lane 0), v (the last row lane): conv + SiLU; the l2 norms' sums.
    float3 part3 = make_float3(0.f, 0.f, 0.f);  // Σq², Σk², Σqk
    if (tid < kMaxDk) {
        const bool ok = tid < dk;
        const float qv = ok ? conv_silu<KM>(&qw[tid * K], &qwin[tid * K], K) : 0.f;
        const float kv = ok ? conv_silu<KM>(&qw[(dk + tid) * K], &qwin[(dk + tid) * K], K) : 0.f;
        qk[tid] = qv;
        qk[kMaxDk + tid] = kv;
        part3 = make_float3(qv * qv, kv * kv, qv * kv);
    }
    if (v_lane) vv[cl] = col_ok ? conv_silu<KM>(&vw[cl * KM], &vwin[cl * KM], K) : 0.f;
    const float3 sums = block_sum3(part3, sh3);  // its barrier also publishes qk and vv
    if (NS == 1 && r > 1) cluster_arrive();  // this block's reads of the q/k conv state are done (release)

    const float beta = 1.f / (1.f + expf(-bb));
    const float xg = ax + dtb, sp = xg > 20.f ? xg : log1pf(expf(xg));
    const float decay = expf(nea * sp);
    const float inv_q = 1.f / sqrtf(sums.x + 1e-6f), inv_k = 1.f / sqrtf(sums.y + 1e-6f);
    const float scale = 1.f / sqrtf(float(dk));
    const float kq = sums.z * inv_q * scale * inv_k;  // k̂ᵀq̂

    // The delta rule on this thread's rows, k̂ = inv_k·k and q̂ = inv_q·scale·q applied to the sums:
    // S ← g·S; u = Sᵀk̂, o = Sᵀq̂ (sums over row lanes in row-lane order: the same bits in every row
    // lane); S ← S + k̂ (β(v − u))ᵀ.
    const float4* q4 = reinterpret_cast<const float4*>(qk + R * rl);
    const float4* k4 = reinterpret_cast<const float4*>(qk + kMaxDk + R * rl);
    float pu = 0.f, po = 0.f;
#pragma unroll
    for (int m4 = 0; m4 < R / 4; ++m4) {
        const float4 qv = q4[m4], kv = k4[m4];
        const float qs[4] = {qv.x, qv.y, qv.z, qv.w}, ks[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            float& x = sr[4 * m4 + e];
            x *= decay;
            pu = fmaf(x, ks[e], pu);
            po = fmaf(x, qs[e], po);
        }
    }
    red[rl][cl] = make_float2(pu * inv_k, po * (inv_q * scale));
    __syncthreads();
    float u = 0.f, os = 0.f;
#pragma unroll
    for (int rr = 0; rr < NR; ++rr) {
        const float2 v = red[rr][cl];
        u += v.x;
        os += v.y;
    }
    const float delta = beta * (vv[cl] - u), kd = inv_k * delta;
#pragma unroll
    for (int m4 = 0; m4 < R / 4; ++m4) {
        const float4 kv = k4[m4];
        sr[4 * m4] = fmaf(kv.x, kd, sr[4 * m4]);
        sr[4 * m4 + 1] = fmaf(kv.y, kd, sr[4 * m4 + 1]);
        sr[4 * m4 + 2] = fmaf(kv.z, kd, sr[4 * m4 + 2]);
        sr[4 * m4 + 3] = fmaf(kv.w, kd, sr[4 * m4 + 3]);
    }

    // y = norm_w ⊙ rmsnorm(o) ⊙ silu(z) over the head's dv columns (row lane 0). Σ o² is the sum of
    // the head's four 32-column warp sums in column order whatever NS: the same bits.
    const float out = col_ok ? fmaf(delta, kq, os) : 0.f;
    if (rl == 0) {
        float q2 = out * out;
        for (int off = 16; off > 0; off /= 2) q2 += __shfl_xor_sync(0xffffffffu, q2, off);
        if (tid % 32 == 0) sq[tid / 32] = q2;
    }
    float total = 0.f;
    if constexpr (NS == 1) {
        __syncthreads();
        if (rl == 0 && col_ok)
#pragma unroll
            for (int w = 0; w < NW; ++w) total += sq[w];
    } else {
        cluster_arrive();  // sq written; the q/k conv state read (release)
        cluster_wait();
        if (rl == 0 && col_ok) {
            cg::cluster_group cluster = cg::this_cluster();
#pragma unroll
            for (int p = 0; p < NS; ++p) {
                const float* other = cluster.map_shared_rank(sq, jj * NS + p);
#pragma unroll
                for (int w = 0; w < NW; ++w) total += other[w];
            }
        }
        cluster_arrive();  // this block has read the others' sq
    }
    if (rl == 0 && col_ok) {
        const float inv = 1.f / sqrtf(total / float(dv) + a.rms_eps);
        a.y[s * a.y_s + int64_t(h) * dv + c] = (out * inv) * (nw * silu(zz));
    }

    // The stores: the state, v's conv window shifted, then (after every block of the cluster has
    // read them) this block's share of the q/k conv windows: channels i ≡ rank (mod r·NS).
    if (S) {
        float* Sw = S;
        asm volatile("" : "+l"(Sw));  // recompute the row addresses: R 64-bit pointers kept live would spill
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = R * rl + m;
            if (i < dk) Sw[int64_t(i) * dv] = sr[m];
        }
    }
    if (slot >= 0 && v_lane && col_ok) {
        float* st = a.conv_state + slot * a.conv_slot_stride + 2 * nk * dk + int64_t(h) * dv + c;
        for (int rr = 0; rr < K - 1; ++rr) st[rr * C] = vwin[cl * KM + rr + 1];
    }
    if (NS == 1 && r > 1) cluster_wait();
    if (slot >= 0) {
        float* st = a.conv_state + slot * a.conv_slot_stride;
        const int n = r * NS;
        for (int i = rank + n * tid; i < 2 * dk; i += n * THREADS) {
            const int64_t ch = i < dk ? hk * dk + i : nk * dk + hk * dk + (i - dk);
            for (int rr = 0; rr < K - 1; ++rr) st[rr * C + ch] = qwin[i * K + rr + 1];
        }
    }
    if (NS > 1) cluster_wait();  // no block leaves while another may read its sq
}

template <int THREADS, int NS, int KM>
cudaError_t launch_head(const GdnDecodeArgs& a, cudaStream_t stream) {
    auto kernel = gdn_decode_head_kernel<THREADS, NS, KM>;
    const size_t smem = size_t(4 * a.dk * a.conv_k) * sizeof(float);  // the q | k conv taps
    if (smem > 16 * 1024) {  // past the default 48 KB with the static arrays (conv kernel 8)
        const cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        if (err != cudaSuccess) return err;
    }
    const int n = int(a.nv / a.nk) * NS;  // the blocks of a key head
    const dim3 grid(unsigned(a.n_seqs), unsigned(a.nv * NS)), block(THREADS);
    if (n == 1) return pdl::launch(kernel, grid, block, smem, stream, a);
    return pdl::launch_cluster(kernel, grid, block, smem, stream, dim3(1, unsigned(n), 1), a);
}

}  // namespace

bool gdn_decode_head_fits(const GdnDecodeArgs& a) {
    return a.dk <= kMaxDk && a.dv <= kCols && a.nv / a.nk <= 8 && a.nv <= 65535;  // portable clusters; grid y
}

int gdn_decode_head_split(const GdnDecodeArgs& a) {
    const int64_t r = a.nv / a.nk;
    for (int ns : {4, 2})  // every block holds a column; clusters of at most 8; grid y
        if (r * ns <= 8 && (ns - 1) * (kCols / ns) < a.dv && a.nv * ns <= 65535) return ns;
    return 1;
}

cudaError_t launch_gdn_decode_step_head(const GdnDecodeArgs& a, int threads, int split, cudaStream_t stream) {
    const bool small_k = a.conv_k <= 4;
    if (threads == 512) return small_k ? launch_head<512, 1, 4>(a, stream) : launch_head<512, 1, 8>(a, stream);
    if (split == 4) return small_k ? launch_head<256, 4, 4>(a, stream) : launch_head<256, 4, 8>(a, stream);
    if (split == 2) return small_k ? launch_head<256, 2, 4>(a, stream) : launch_head<256, 2, 8>(a, stream);
    return small_k ? launch_head<256, 1, 4>(a, stream) : launch_head<256, 1, 8>(a, stream);
}

}  // namespace tessera::cuda::fast::detail
