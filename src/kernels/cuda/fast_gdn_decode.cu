// The fused one-token GDN decode step, latency-first: a cluster of ceil(dv/COLS) blocks per
// (sequence, key head); block z holds columns [COLS·z, COLS·z + COLS) of the state of each value
// head reading the key head, 256 threads per head (COLS columns × 256/COLS row lanes, a few rows
// each in registers). Every global load that the step needs is issued at once right after the
// slot is known (state, conv windows, gates, z): one memory latency, then two block barriers, one
// cluster barrier for the RMSNorm's sum over dv (distributed shared memory), and only then every
// global write (a cluster barrier's release waits for earlier stores to land): the state, y, and
// the q/k conv state (every block of the cluster has read it by then). With PDL the state, the
// conv weights and state rows are requested before waiting for the projections' kernel.
#include <cooperative_groups.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_step.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cg = cooperative_groups;

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kGroup = 256;     // threads per value head in a block
constexpr int kMaxHeads = 16;   // value heads per key head (r = nv / nk)

using step::block_sum3;
using step::cluster_arrive;
using step::cluster_arrive_relaxed;
using step::cluster_wait;
using step::conv_silu;
using step::cp_async4;
using step::cp_async_wait_all;
using step::silu;

// grid (n_seqs, nk, nsl), clusters of nsl blocks along z; blockDim = min(r, 2)·256. COLS state
// columns per block, R rows per thread (dk <= R·256/COLS), KM >= conv_k. The conv taps (weights
// and windows) land in shared memory by cp.async: no registers held for them.
template <int COLS, int R, int KM, int MINB>
__global__ void __launch_bounds__(2 * kGroup, MINB) gdn_decode2_kernel(GdnDecodeArgs a) {
    constexpr int NR = kGroup / COLS;  // row lanes per head
    constexpr int DKM = NR * R;        // the largest dk
    cg::cluster_group cluster = cg::this_cluster();
    const int s = blockIdx.x, tid = threadIdx.x, hp = tid / kGroup, t = tid % kGroup, c = t % COLS, rl = t / COLS;
    const int hp_n = blockDim.x / kGroup, z = blockIdx.z, nsl = gridDim.z, K = int(a.conv_k);
    const int hk = blockIdx.y, nk = int(a.nk), nv = int(a.nv), r = nv / nk;
    const int dk = int(a.dk), dv = int(a.dv);
    const int64_t C = 2 * int64_t(nk) * dk + int64_t(nv) * dv;
    const int j = z * COLS + c;  // this thread's state column
    const bool col_ok = j < dv;
    auto head_of = [&](int jj) { return a.tiled_heads ? jj * nk + hk : hk * r + jj; };

    __shared__ float vw[2][COLS * KM];      // per head in pass: v's conv weights and windows, [column][tap]
    __shared__ float vwin[2][COLS * KM];
    __shared__ float qk[2 * DKM];           // conv + SiLU of q | k
    __shared__ float sh3[16][3];
    __shared__ float2 red[2][2][kGroup];    // pass parity, head in pass, [row lane][column]: (Sᵀk, Sᵀq)
    __shared__ float vv[2][2][COLS];        // pass parity, head in pass: v after conv + SiLU
    __shared__ float oo[kMaxHeads][COLS];   // o of every head, this block's columns
    __shared__ float gz[kMaxHeads][COLS];   // norm_w · silu(z) likewise
    __shared__ float ssq[kMaxHeads];        // Σ o² over this block's columns, per head

    // Launched with PDL (pdl.cuh): the projections (mixed, z, b, a) come from the kernel before;
    // the plan (slot), the weights and the conv and recurrent states (written by earlier steps)
    // do not, so their loads are issued before the wait and land while that kernel ends.
    const int64_t slot = a.slot[s];  // the same in every block of the cluster: all return or none
    const float* xrow = a.mixed + s * a.mixed_s;

    // Pass p: this thread's head (pass_head), then its gates (gates, after the wait).
    struct Pass {
        bool active;
        int jj, h;
        float decay, beta, zg;
    };
    auto pass_head = [&](int p) {
        Pass q;
        q.jj = p * hp_n + hp;
        q.active = q.jj < r;
        q.h = q.active ? head_of(q.jj) : 0;
        q.decay = 1.f;
        q.beta = 0.f;
        q.zg = 0.f;
        return q;
    };
    auto gates = [&](Pass& q) {
        if (q.active) {
            const float bb = a.b[s * a.b_s + q.h], x = a.a[s * a.a_s + q.h] + a.dt_bias[q.h];
            const float nea = a.neg_exp_a[q.h];
            q.beta = 1.f / (1.f + expf(-bb));
            const float sp = x > 20.f ? x : log1pf(expf(x));
            q.decay = expf(nea * sp);
            if (rl == 0 && col_ok) q.zg = a.norm_w[j] * silu(a.z[s * a.z_s + q.h * dv + j]);
        }
    };
    Pass ps = pass_head(0);

    if (slot < -1 || slot >= a.n_slots) {
        pdl::wait();  // nothing is written before the kernel before has ended
        pdl::trigger();
        for (int idx = tid; idx < r * COLS; idx += blockDim.x) {
            const int col = z * COLS + idx % COLS;
            if (col < dv) a.y[s * a.y_s + head_of(idx / COLS) * dv + col] = dev::quiet_nan();
        }
        return;
    }
    const float* cst = slot >= 0 ? a.conv_state + slot * a.conv_slot_stride : nullptr;
    float* S0 = slot >= 0 ? a.state + slot * a.state_slot_stride : nullptr;

    auto queue_tap = [&](float* w, float* win, int64_t ch, int tap, int phase) {  // step::queue_conv_tap
        step::queue_conv_tap(w, win, a.conv_w, cst, xrow, C, ch, tap, K, phase);
    };
    // Pass p's loads: the v taps of its head's columns (the head's 256 threads) and this thread's
    // state rows S[rl + NR·m, j].
    float sr[R];
    auto load_pass = [&](const Pass& q, int phase) {
        if (q.active)
            for (int i = t; i < COLS * K; i += kGroup) {
                const int cc = i / K, tap = i - cc * K, col = z * COLS + cc;
                if (col < dv)
                    queue_tap(&vw[hp][cc * KM + tap], &vwin[hp][cc * KM + tap], 2 * nk * dk + q.h * dv + col, tap, phase);
            }
        if (phase == 1) return;
        const float* S = S0 && q.active && col_ok ? S0 + q.h * int64_t(dk) * dv + j : nullptr;
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = rl + NR * m;
            sr[m] = S && i < dk ? S[i * dv] : 0.f;
        }
    };
    // Pass p's v conv window shifted in place (this block's column; row lane 0).
    auto shift_v = [&](const Pass& q) {
        if (!(q.active && rl == 0 && col_ok && slot >= 0)) return;
        float* st = a.conv_state + slot * a.conv_slot_stride + 2 * nk * dk + q.h * dv + j;
        for (int rr = 0; rr < K - 1; ++rr) st[rr * C] = vwin[hp][c * KM + rr + 1];
    };
    // v of pass p into vv (row lane 0).
    auto finish_v = [&](const Pass& q, int pb) {
        if (!(q.active && rl == 0)) return;
        vv[pb][hp][c] = col_ok ? conv_silu<KM>(&vw[hp][c * KM], &vwin[hp][c * KM], K) : 0.f;
    };
    // Pass p's new state slice from sr.
    auto store_state = [&](const Pass& q) {
        if (!(S0 && col_ok && q.active)) return;
        float* S = S0 + q.h * int64_t(dk) * dv + j;
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = rl + NR * m;
            if (i < dk) S[i * dv] = sr[m];
        }
    };

    extern __shared__ float4 dyn4[];
    float* qw = reinterpret_cast<float*>(dyn4);  // [2·dk][K] conv weights of q | k of key head hk
    float* qwin = qw + 2 * dk * K;               // [2·dk][K] their conv windows: K-1 state rows, x
    auto qk_taps = [&](int phase) {  // q | k taps of key head hk
        for (int i = tid; i < 2 * dk * K; i += blockDim.x) {
            const int cl = i / K, tap = i - cl * K;
            const int64_t ch = cl < dk ? hk * dk + cl : nk * dk + hk * dk + (cl - dk);
            queue_tap(&qw[cl * K + tap], &qwin[cl * K + tap], ch, tap, phase);
        }
    };
    qk_taps(0);
    load_pass(ps, 0);
    pdl::wait();
    pdl::trigger();
    gates(ps);
    qk_taps(1);
    load_pass(ps, 1);
    cp_async_wait_all();
    __syncthreads();

    // q and k: conv + SiLU, l2 norms.
    float3 part = make_float3(0.f, 0.f, 0.f);  // Σq², Σk², Σqk
    for (int i = tid; i < dk; i += blockDim.x) {
        const float qv = conv_silu<KM>(&qw[i * K], &qwin[i * K], K);
        const float kv = conv_silu<KM>(&qw[(dk + i) * K], &qwin[(dk + i) * K], K);
        qk[i] = qv;
        qk[dk + i] = kv;
        part.x += qv * qv;
        part.y += kv * kv;
        part.z += qv * kv;
    }
    finish_v(ps, 0);
    const float3 sums = block_sum3(part, sh3);  // its barrier also publishes qk and vv
    const float inv_q = 1.f / sqrtf(sums.x + 1e-6f), inv_k = 1.f / sqrtf(sums.y + 1e-6f);
    const float scale = 1.f / sqrtf(float(dk));
    const float kq = sums.z * inv_q * scale * inv_k;  // k̂ᵀq̂
    auto q_hat = [&](int i) { return i < dk ? qk[i] * inv_q * scale : 0.f; };
    auto k_hat = [&](int i) { return i < dk ? qk[dk + i] * inv_k : 0.f; };

    const int n_pass = int((r + hp_n - 1) / hp_n);
    for (int p = 0; p < n_pass; ++p) {
        const int pb = p & 1;
        if (p > 0) {  // later passes (r > 2): after the last pass's barrier, which ends its reads of vw, vwin
            ps = pass_head(p);
            gates(ps);
            load_pass(ps, 0);
            load_pass(ps, 1);
            cp_async_wait_all();
            __syncthreads();
            finish_v(ps, pb);  // vv of parity pb was last read two passes ago
        }
        float pu = 0.f, po = 0.f;
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = rl + NR * m;
            sr[m] *= ps.decay;
            pu = fmaf(sr[m], k_hat(i), pu);
            po = fmaf(sr[m], q_hat(i), po);
        }
        red[pb][hp][t] = make_float2(pu, po);
        __syncthreads();
        if (ps.active) {
            float u = 0.f, os = 0.f;
#pragma unroll
            for (int rr = 0; rr < NR; ++rr) {  // in row-lane order: the same sums in every row lane
                const float2 v = red[pb][hp][rr * COLS + c];
                u += v.x;
                os += v.y;
            }
            const float delta = ps.beta * (vv[pb][hp][c] - u);
#pragma unroll
            for (int m = 0; m < R; ++m) sr[m] = fmaf(k_hat(rl + NR * m), delta, sr[m]);
            if (t < 32) {  // the head's first warp: its lanes < COLS are row lane 0
                const float out = col_ok ? fmaf(delta, kq, os) : 0.f;
                float sq = t < COLS ? out * out : 0.f;
                for (int off = 16; off > 0; off /= 2) sq += __shfl_xor_sync(0xffffffffu, sq, off);
                if (t < COLS) {
                    oo[ps.jj][c] = out;
                    gz[ps.jj][c] = ps.zg;
                }
                if (t == 0) ssq[ps.jj] = sq;
            }
        }
        if (p + 1 < n_pass) {  // sr and vwin serve the next pass (r > 2): write now
            store_state(ps);
            shift_v(ps);
        }
        // red and vv of parity pb are rewritten two passes on, after the next pass's barrier.
    }

    // Every block's ssq is written and every block has read the old q/k conv state. No global
    // store of this thread precedes the barrier (the release would wait for it).
    cluster_arrive();
    cluster_wait();
    // y of (head tid / COLS, column tid % COLS): r·COLS <= blockDim (r <= 2: r·256 threads, else 512).
    const int jy = tid / COLS, cy = tid % COLS, col_y = z * COLS + cy;
    float yv = 0.f;
    if (jy < r) {
        float total = 0.f;
        for (int rank = 0; rank < nsl; ++rank) total += cluster.map_shared_rank(ssq, rank)[jy];
        const float inv = 1.f / sqrtf(total / float(dv) + a.rms_eps);
        yv = (oo[jy][cy] * inv) * gz[jy][cy];
    }
    cluster_arrive_relaxed();  // this block's reads of the others' ssq are done
    if (jy < r && col_y < dv) a.y[s * a.y_s + int64_t(head_of(jy)) * dv + col_y] = yv;
    store_state(ps);
    shift_v(ps);
    if (slot >= 0) {  // shift the q/k conv windows: block z takes the channels i ≡ z (mod nsl)
        float* st = a.conv_state + slot * a.conv_slot_stride;
        for (int i = z + nsl * tid; i < 2 * dk; i += nsl * int(blockDim.x)) {
            const int64_t ch = i < dk ? hk * dk + i : nk * dk + hk * dk + (i - dk);
            for (int rr = 0; rr < K - 1; ++rr) st[rr * C + ch] = qwin[i * K + rr + 1];
        }
    }
    cluster_wait();  // no block leaves while another still reads its ssq
}

template <int COLS, int R, int KM>
cudaError_t launch_cols(const GdnDecodeArgs& a, cudaStream_t stream) {
    const int64_t r = a.nv / a.nk;
    const int hp_n = int(r < 2 ? r : 2);  // value heads per pass (256 threads each)
    const unsigned nsl = unsigned((a.dv + COLS - 1) / COLS);
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(a.n_seqs), unsigned(a.nk), nsl);
    cfg.blockDim = dim3(unsigned(hp_n * kGroup));
    cfg.dynamicSmemBytes = size_t(4 * a.dk * a.conv_k) * sizeof(float);  // the q | k conv taps
    auto kernel = gdn_decode2_kernel<COLS, R, KM, (R <= 16 ? 2 : 1)>;
    if (cfg.dynamicSmemBytes > 16 * 1024) {  // past the default 48 KB with the static arrays (dk, K large)
        const cudaError_t err =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(cfg.dynamicSmemBytes));
        if (err != cudaSuccess) return err;
    }
    cfg.stream = stream;
    cudaLaunchAttribute attr[2];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = nsl;
    attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;  // pdl.cuh
    attr[1].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl::enabled() ? 2 : 1;
    return cudaLaunchKernelEx(&cfg, kernel, a);
}

template <int COLS>
cudaError_t launch_k(const GdnDecodeArgs& a, cudaStream_t stream) {
    constexpr int NR = kGroup / COLS;
    const bool small_dk = a.dk <= 128, small_k = a.conv_k <= 4;
    if (small_dk && small_k) return launch_cols<COLS, 128 / NR, 4>(a, stream);
    if (small_dk) return launch_cols<COLS, 128 / NR, 8>(a, stream);
    if (small_k) return launch_cols<COLS, 256 / NR, 4>(a, stream);
    return launch_cols<COLS, 256 / NR, 8>(a, stream);
}

}  // namespace

cudaError_t launch_gdn_decode_step_v2(const GdnDecodeArgs& a, int cols, cudaStream_t stream) {
    return cols == 16 ? launch_k<16>(a, stream) : launch_k<32>(a, stream);
}

}  // namespace tessera::cuda::fast::detail
