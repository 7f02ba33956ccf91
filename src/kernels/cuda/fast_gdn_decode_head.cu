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
//    summed over the head's NS blocks: each block pushes its partials into every block of the
//    cluster by st.async on that block's mbarrier (sq_bar), whose completion also says that every
//    block has read the q/k conv state — no cluster barrier after the PDL wait (the default
//    barrier.cluster.arrive is a MEMBAR.GPU, and a second one kept every block until the others
//    had read its partials: ~1.5 µs of a 6.1 µs step, H200, session 37). The point of the split is
//    the state's traffic: a block loads and stores 64/NS KB instead of 64 — at batch 1, 32 blocks
//    storing 64 KB each spent ~2.2 µs of a 6.4 µs step on it (H200, tmp ablation, session 24).
//
//  - OUT (HeadSplit in 4 only): the layer's out-projection fused. A block's 32 columns of y are one
//    16-byte chunk of each row of out_w, so the block stages that chunk of all H rows (cp.async,
//    before the PDL wait, in a group of its own that only the projection waits for; the scales in
//    registers), quantizes its y into two int8 limbs
//    (fast_dp4a.cuh) and takes dp4a products: H partial sums over its columns. The key head's r·4
//    blocks add theirs in rank order through distributed shared memory, each block a slice of the
//    H rows, into part hk of out_parts — nk parts that the next add + RMSNorm sums. No kernel
//    boundary, and out_w streams in while the kernel before runs.
//
// Latency (a chain of dependent steps: bench_fast_gdn --stamps times each, GdnDecodeStamp): the conv
// weights, then the slot, the conv state rows, the state rows, norm_w, A and dt_bias are requested
// before the PDL wait — the taps as a few contiguous runs of floats, 16 bytes a lane (step::Runs),
// into tap-major windows; after it one round of loads (x's q | k | v channels, z, a, b) with the
// gates computed while they land, then two block barriers (conv + l2 norms; Sᵀk, Sᵀq), Σ o²
// (a block barrier for NS = 1, the pushed partials for NS > 1) and the stores. Shapes the
// compiler can see (the block's warps, whole row lanes) keep the chain short: a warp executed ~2,000
// instructions at ~5.4 cycles each before session 37's pass (Nsight Compute).
#include <cooperative_groups.h>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_gdn.h"
#include "kernels/cuda/fast_gdn_step.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace cg = cooperative_groups;

namespace tessera::cuda::fast::detail {

namespace {

using step::block_sum3;
using step::cluster_arrive;
using step::cluster_wait;
using step::conv_silu_strided;
using step::cp_async_wait_all;
using step::silu;

constexpr int kCols = 128;  // the columns of a head (dv <= 128)
constexpr int kMaxDk = 128;

__device__ inline void cp_async16(void* dst, const void* src) {
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}

// The fused out-projection's dynamic shared memory past the q | k conv taps: out_w's chunk of
// each row (16 bytes), then each row's partial sum (f32).
__host__ __device__ inline size_t out_smem_bytes(int64_t rows) { return size_t(rows) * (16 + sizeof(float)); }

// The fused out-projection's tail (gdn_decode_head_kernel<256, 4, KM, true>, called by every thread
// between the second cluster barrier's arrival and its wait): yv is column tid's y in warp 0 (the
// block's 32 columns, zero past dv); ws / wb the scales / biases of rows tid + 256·i; wq the rows'
// chunks, pp the partial sums (shared memory). Leaves the cluster barrier arrived (its wait is the
// kernel's last instruction).
template <int NI>
__device__ __forceinline__ void out_projection(const GdnDecodeArgs& a, float yv, const uint32_t* ws,
                                               const uint32_t* wb, const uint4* wq, float* pp, int64_t s, int hk,
                                               int rank, int n_rank, int tid) {
    constexpr int kThreads = 256;
    __shared__ uint4 xq[4];  // per 8 columns: hi limbs even | odd, lo limbs even | odd
    __shared__ float2 xs;    // (dx, sx) of the 32 columns
    step::cp_async_wait_all();  // out_w's chunks (the barrier below publishes them)
    if (tid < 32) {
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const float t = __shfl_sync(0xffffffffu, yv, 8 * (tid & 3) + e);
            v[e] = tid < 4 ? t : 0.f;
        }
        const dev::Dp4aQ8 q = dev::dp4a_quantize8(v);
        if (tid < 4) xq[tid] = make_uint4(q.H.x, q.H.y, q.L.x, q.L.y);
        if (tid == 0) xs = make_float2(q.dx, q.sx);
    }
    __syncthreads();
    const uint4 x[4] = {xq[0], xq[1], xq[2], xq[3]};
    const float2 d = xs;
    const int N = int(a.out_w.n);
    const bool bias = a.out_w.biases != nullptr;
    constexpr uint32_t kLow = 0x0F0F0F0Fu;
#pragma unroll
    for (int i = 0; i < NI; ++i) {
        const int n = tid + kThreads * i;
        if (n >= N) break;
        const uint4 w = wq[n];
        const uint32_t wd[4] = {w.x, w.y, w.z, w.w};
        int sh = 0, sl = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // word j: columns 8j … 8j + 7
            const uint32_t lo = wd[j] & kLow, hi = (wd[j] >> 4) & kLow;
            sh = __dp4a(int(lo), int(x[j].x), sh), sh = __dp4a(int(hi), int(x[j].y), sh);
            sl = __dp4a(int(lo), int(x[j].z), sl), sl = __dp4a(int(hi), int(x[j].w), sl);
        }
        const float sc = dev::half_bits(uint16_t(ws[i / 2] >> (16 * (i % 2))));
        const float bi = bias ? dev::half_bits(uint16_t(wb[i / 2] >> (16 * (i % 2)))) : -8.f * sc;
        pp[n] = fmaf(sc * d.x, fmaf(float(sl), 1.f / 254.f, float(sh)), bi * d.y);
    }
    step::cluster_wait();    // the second barrier: every block has read the others' Σ o²
    step::cluster_arrive();  // pp written (release)
    step::cluster_wait();
    // Rows [n0, n1) of part hk: the cluster's r·4 partial sums in rank order.
    const int per = (N + n_rank - 1) / n_rank, n0 = rank * per, n1 = min(N, n0 + per);
    cg::cluster_group cluster = cg::this_cluster();
    float* dst = a.out_parts + hk * a.out_part_s + s * a.out_row_s;
    for (int n = n0 + tid; n < n1; n += kThreads) {
        float v[8];
#pragma unroll
        for (int q = 0; q < 8; ++q) v[q] = q < n_rank ? cluster.map_shared_rank(pp, q)[n] : 0.f;
        float sum = v[0];
#pragma unroll
        for (int q = 1; q < 8; ++q) sum += v[q];
        dst[n] = sum;
    }
    step::cluster_arrive_relaxed();  // the others' pp read (their values are in the stores above)
}

// Diagnosis (ST: GdnDecodeArgs::stamps): thread 0's (globaltimer, clock64) at step i.
template <bool ST>
__device__ __forceinline__ void stamp(const GdnDecodeArgs& a, int i) {
    if constexpr (ST) {
        if (threadIdx.x != 0) return;
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt)::"memory");
        const unsigned long long ck = clock64();
        const size_t blk = (size_t(a.stamp_launch) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
        unsigned long long* p = a.stamps + (blk * kGdnDecodeStamps + size_t(i)) * 2;
        p[0] = gt;
        p[1] = ck;
    }
}

// grid (n_seqs, nv·NS): blockIdx.y = (hk·r + jj)·NS + p, clusters of r·NS blocks along y (r·NS > 1).
// KM >= conv_k. OUT: the out-projection fused (NS = 4, THREADS = 256). ST: stamps (diagnosis).
template <int THREADS, int NS, int KM, bool OUT = false, bool ST = false>
__global__ void __launch_bounds__(THREADS, THREADS == 256 ? (NS == 4 && !OUT ? 3 : 2) : 1)
    gdn_decode_head_kernel(GdnDecodeArgs a) {
    static_assert(!(OUT && ST), "stamps: the step without the fused projection");
    stamp<ST>(a, kStampEntry);
    constexpr int COLS = kCols / NS;     // this block's columns
    constexpr int NR = THREADS / COLS;   // row lanes
    constexpr int R = kMaxDk / NR;       // rows a thread
    constexpr int NW = COLS / 32;        // the warps of row lane 0 (Σ o² partials)
    static_assert(NR >= 2 && NR * R == kMaxDk && R % 4 == 0 && COLS % 32 == 0);
    static_assert(!OUT || (COLS == 32 && THREADS == 256), "the fused out-projection: a chunk a block");
    constexpr int NI = OUT ? int(kGdnOutMaxRows) / THREADS : 1;  // out_w rows a thread
    const int s = blockIdx.x, tid = threadIdx.x, cl = tid % COLS, rl = tid / COLS;
    const int nk = int(a.nk), r = int(a.nv) / nk, part = int(blockIdx.y) % NS, hj = int(blockIdx.y) / NS;
    const int hk = hj / r, jj = hj % r, rank = jj * NS + part;  // rank: in the key head's cluster
    const int h = a.tiled_heads ? jj * nk + hk : hk * r + jj;  // this block's value head
    const int c = part * COLS + cl;                            // this thread's state column
    const int dk = int(a.dk), dv = int(a.dv), K = int(a.conv_k);
    const int64_t C = 2 * int64_t(nk) * dk + a.nv * dv;
    const bool col_ok = c < dv;
    const bool v_lane = rl == NR - 1;  // the row lane computing v (row lane 0 computes q, k)

    // NS > 1 without OUT: Σ o²'s partials pushed to every block of the key head's cluster by
    // st.async on that block's sq_bar (one local arrival expecting the cluster's n·NW floats) — no
    // cluster barrier on the chain, and no block waits for the others to leave; sq_bar's completion
    // also says that every block of the cluster has read the q/k conv state (the windows' writes
    // wait for it). OUT keeps the two cluster barriers (its projection's sums need them anyway).
    constexpr bool kPush = NS > 1 && !OUT;
    __shared__ __align__(16) float vw[COLS * KM];    // v's conv weights, [column][K]
    __shared__ __align__(16) float vwin[KM * COLS];  // v's windows, tap-major [K][COLS]
    __shared__ __align__(16) float qk[2 * kMaxDk];  // conv + SiLU of q | k (zeros past dk)
    __shared__ float vv[COLS];        // v after conv + SiLU
    __shared__ float sh3[THREADS / 32][3];
    __shared__ float2 red[NR][COLS];  // (Sᵀk, Sᵀq) partial sums per row lane
    __shared__ float sq[NW];          // Σ o² per warp of row lane 0 (OUT, NS = 1)
    __shared__ float sq_all[kPush ? 8 : 1][NW];  // kPush: Σ o² per warp of row lane 0, per cluster rank
    __shared__ uint64_t sq_bar;
    extern __shared__ float4 dyn4[];
    float* qw = reinterpret_cast<float*>(dyn4);  // [2·dk][K] conv weights of q | k of key head hk
    float* qwin = qw + 2 * dk * K;               // tap-major [K][2·dk] their windows: K-1 state rows, x
    uint4* wq = reinterpret_cast<uint4*>(qwin + 2 * dk * K);  // OUT: [H] out_w's chunk of each row
    float* pp = reinterpret_cast<float*>(wq + (OUT ? a.out_w.n : 0));  // OUT: [H] partial sums
    const int n_rank = r * NS;  // the key head's blocks (its cluster, where > 1)
    const int W2 = 2 * dk;      // qwin's rows
    const int vcols = max(0, min(COLS, dv - part * COLS));                        // this block's v columns
    const int qch = hk * dk, kch = nk * dk + hk * dk;       // q / k channels (C < 2^25: gdn_decode_head_fits)
    const int vch = 2 * nk * dk + h * dv + part * COLS;     // v's first

    // The conv weights first: they depend on nothing (not even the slot).
    step::Runs<THREADS> runs{tid};
    runs.copy(qw, a.conv_w + qch * K, dk * K);
    runs.copy(qw + dk * K, a.conv_w + kch * K, dk * K);
    runs.copy(vw, a.conv_w + vch * K, vcols * K);

    const int64_t slot = a.slot[s];  // the same in every block of the cluster: all return or none
    if (slot < -1 || slot >= a.n_slots) {
        cp_async_wait_all();  // no copy into this block's shared memory outlives it
        pdl::wait();  // nothing is written before the kernel before has ended
        pdl::trigger();
        if (rl == 0 && col_ok) a.y[s * a.y_s + int64_t(h) * dv + c] = dev::quiet_nan();
        if constexpr (OUT) {  // this block's slice of part hk
            const int N = int(a.out_w.n), n_rank = r * NS, per = (N + n_rank - 1) / n_rank;
            for (int n = rank * per + tid; n < min(N, rank * per + per); n += THREADS)
                a.out_parts[hk * a.out_part_s + s * a.out_row_s + n] = dev::quiet_nan();
        }
        return;
    }
    stamp<ST>(a, kStampSlot);
    const float* xrow = a.mixed + s * a.mixed_s;
    const float* cst = slot >= 0 ? a.conv_state + slot * a.conv_slot_stride : nullptr;
    float* S = slot >= 0 && col_ok ? a.state + slot * a.state_slot_stride + int64_t(h) * dk * dv + c : nullptr;

    if constexpr (kPush) {
        if (tid == 0) {
            dev::mbar_init(&sq_bar, 1);
            dev::fence_mbarrier_init_cluster();
            dev::mbar_arrive_expect_tx(&sq_bar, uint32_t(n_rank * NW * sizeof(float)));
        }
        step::cluster_arrive_relaxed();  // sq_bar initialised (the fence releases it to the cluster)
    }

    // Before the wait: what no kernel of this step writes — the conv windows' K-1 state rows.
    for (int t = 0; t < K - 1; ++t) {
        if (cst) {
            runs.copy(qwin + t * W2, cst + t * C + qch, dk);
            runs.copy(qwin + t * W2 + dk, cst + t * C + kch, dk);
            runs.copy(vwin + t * COLS, cst + t * C + vch, vcols);
        } else {
            runs.zero(qwin + t * W2, W2);
            runs.zero(vwin + t * COLS, vcols);
        }
    }
    if constexpr (OUT) asm volatile("cp.async.commit_group;\n" ::: "memory");  // the taps' group
    stamp<ST>(a, kStampTaps);
    float sr[R];  // S[R·rl + m, c]
    if (S && R * rl + R <= dk) {  // every row of this row lane: no test a row
        const float* p = S + int64_t(R * rl) * dv;
#pragma unroll
        for (int m = 0; m < R; ++m) sr[m] = p[int64_t(m) * dv];
    } else {
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = R * rl + m;
            sr[m] = S && i < dk ? S[int64_t(i) * dv] : 0.f;
        }
    }
    const float nw = col_ok ? a.norm_w[c] : 0.f, nea = a.neg_exp_a[h], dtb = a.dt_bias[h];
    // OUT: row n = tid + THREADS·i of out_w: its chunk of this block's columns (shared memory) and
    // its scale (and bias) as f16 pairs in registers.
    uint32_t ws[(NI + 1) / 2] = {}, wb[(NI + 1) / 2] = {};
    if constexpr (OUT) {
        const PackedMatrix& W = a.out_w;
        const PackedLayout lay = packed_layout(W);
        const int N = int(W.n), col0 = h * dv + part * COLS, gi = col0 / W.group;
#pragma unroll
        for (int i = 0; i < NI; ++i) {
            const int n = tid + THREADS * i;
            if (n >= N) break;
            cp_async16(&wq[n], W.codes + lay.code_row(n) + lay.chunk(col0 / 32));
            const int64_t si = lay.scale_row(n) + lay.scale_group(gi);
            ws[i / 2] |= uint32_t(__ldg(W.scales + si)) << (16 * (i % 2));
            if (W.biases) wb[i / 2] |= uint32_t(__ldg(W.biases + si)) << (16 * (i % 2));
        }
        asm volatile("cp.async.commit_group;\n" ::: "memory");  // out_w's group, waited for by out_projection
    }
    if constexpr (kPush) cluster_wait();  // every sq_bar of the cluster initialised
    stamp<ST>(a, kStampPreWait);
    pdl::wait();
    stamp<ST>(a, kStampWaited);
    pdl::trigger();
    // The conv windows' last row: x.
    float* const xq = qwin + (K - 1) * W2;
    if constexpr (OUT) {  // plain loads: the cp.async groups wait for the taps, not for out_w
        runs.load(xq, xrow + qch, dk);
        runs.load(xq + dk, xrow + kch, dk);
        runs.load(vwin + (K - 1) * COLS, xrow + vch, vcols);
    } else {
        runs.copy(xq, xrow + qch, dk);
        runs.copy(xq + dk, xrow + kch, dk);
        runs.copy(vwin + (K - 1) * COLS, xrow + vch, vcols);
    }
    const float bb = a.b[s * a.b_s + h], ax = a.a[s * a.a_s + h];
    const float zz = rl == 0 && col_ok ? a.z[s * a.z_s + int64_t(h) * dv + c] : 0.f;
    // The gates while x's copies land: β = σ(b), g = exp(neg_exp_a·softplus(a + dt_bias)).
    const float beta = 1.f / (1.f + expf(-bb));
    const float xg = ax + dtb, sp = xg > 20.f ? xg : log1pf(expf(xg));
    const float decay = expf(nea * sp);
    if constexpr (OUT) asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // the taps, not out_w
    else cp_async_wait_all();
    __syncthreads();
    stamp<ST>(a, kStampInputs);

    // q and k (row lane 0), v (the last row lane): conv + SiLU; the l2 norms' sums.
    float3 part3 = make_float3(0.f, 0.f, 0.f);  // Σq², Σk², Σqk
    if (tid < kMaxDk) {
        const bool ok = tid < dk;
        const float qv = ok ? conv_silu_strided<KM>(&qw[tid * K], &qwin[tid], W2, K) : 0.f;
        const float kv = ok ? conv_silu_strided<KM>(&qw[(dk + tid) * K], &qwin[dk + tid], W2, K) : 0.f;
        qk[tid] = qv;
        qk[kMaxDk + tid] = kv;
        part3 = make_float3(qv * qv, kv * kv, qv * kv);
    }
    if (v_lane) vv[cl] = col_ok ? conv_silu_strided<KM>(&vw[cl * K], &vwin[cl], COLS, K) : 0.f;
    stamp<ST>(a, kStampConv);
    const float3 sums = block_sum3<THREADS / 32>(part3, sh3);  // its barrier also publishes qk and vv
    stamp<ST>(a, kStampNorms);
    if (NS == 1 && r > 1) cluster_arrive();  // this block's reads of the q/k conv state are done (release)

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
    stamp<ST>(a, kStampStateSums);
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
        if constexpr (kPush) {
            if (tid % 32 == 0)
#pragma unroll
                for (int q = 0; q < 8; ++q)
                    if (q < n_rank) dev::st_async_cluster_f32(&sq_all[rank][tid / 32], q, q2, &sq_bar);
        } else if (tid % 32 == 0) {
            sq[tid / 32] = q2;
        }
    }
    float total = 0.f;
    if constexpr (kPush) {
        dev::mbar_wait(&sq_bar, 0);  // every block's partials here (and every block past its conv state reads)
        stamp<ST>(a, kStampOutArrived);
        if (rl == 0 && col_ok)
#pragma unroll
            for (int p = 0; p < NS; ++p)
#pragma unroll
                for (int w = 0; w < NW; ++w) total += sq_all[jj * NS + p][w];
    } else if constexpr (NS == 1) {
        __syncthreads();
        stamp<ST>(a, kStampOutArrived);
        if (rl == 0 && col_ok)
#pragma unroll
            for (int w = 0; w < NW; ++w) total += sq[w];
    } else {
        cluster_arrive();  // sq written; the q/k conv state read (release)
        cluster_wait();
        stamp<ST>(a, kStampOutArrived);
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
    stamp<ST>(a, kStampOutSum);
    float yv = 0.f;  // y of column c (row lane 0)
    if (rl == 0 && col_ok) {
        const float inv = 1.f / sqrtf(total / float(dv) + a.rms_eps);
        yv = (out * inv) * (nw * silu(zz));
        a.y[s * a.y_s + int64_t(h) * dv + c] = yv;
    }
    if constexpr (OUT) out_projection<NI>(a, yv, ws, wb, wq, pp, s, hk, rank, r * NS, tid);

    // The stores: the state, v's conv window shifted, then (after every block of the cluster has
    // read them: the cluster barrier for NS = 1, sq_bar for kPush, the Σ o² barrier for OUT) this
    // block's share of the q/k conv windows: the rank-th of r·NS contiguous ranges of channels.
    if (S && R * rl + R <= dk) {  // every row of this row lane
        float* p = S + int64_t(R * rl) * dv;
        asm volatile("" : "+l"(p));  // recompute the row addresses: R 64-bit pointers kept live would spill
#pragma unroll
        for (int m = 0; m < R; ++m) p[int64_t(m) * dv] = sr[m];
    } else if (S) {
        float* Sw = S;
        asm volatile("" : "+l"(Sw));
#pragma unroll
        for (int m = 0; m < R; ++m) {
            const int i = R * rl + m;
            if (i < dk) Sw[int64_t(i) * dv] = sr[m];
        }
    }
    if (slot >= 0 && v_lane && col_ok) {
        float* st = a.conv_state + slot * a.conv_slot_stride + 2 * nk * dk + int64_t(h) * dv + c;
        for (int rr = 0; rr < K - 1; ++rr) st[rr * C] = vwin[(rr + 1) * COLS + cl];
    }
    stamp<ST>(a, kStampStored);
    if (NS == 1 && r > 1) cluster_wait();
    if (slot >= 0) {  // this block's share of the q/k windows, rows 1 … K-1 moved up: channels [i0, i1)
        float* st = a.conv_state + slot * a.conv_slot_stride;
        const int per = (W2 + n_rank - 1) / n_rank, i0 = rank * per, i1 = min(W2, i0 + per);
#pragma unroll 1
        for (int i = i0 + tid; i < i1; i += THREADS) {
            const int64_t ch = i < dk ? qch + i : kch + (i - dk);
            for (int rr = 0; rr < K - 1; ++rr) st[rr * C + ch] = qwin[(rr + 1) * W2 + i];
        }
    }
    if constexpr (NS > 1 && !kPush) cluster_wait();  // no block leaves while another may read its sq (OUT: its pp)
    stamp<ST>(a, kStampEnd);
}

template <int THREADS, int NS, int KM, bool OUT = false, bool ST = false>
cudaError_t launch_head(const GdnDecodeArgs& a, cudaStream_t stream) {
    auto kernel = gdn_decode_head_kernel<THREADS, NS, KM, OUT, ST>;
    size_t smem = size_t(4 * a.dk * a.conv_k) * sizeof(float);  // the q | k conv taps
    if (OUT) smem += out_smem_bytes(a.out_w.n);
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

bool gdn_decode_out_takes(const GdnDecodeArgs& a, const PackedMatrix& w) {
    return gdn_decode_head_fits(a) && gdn_decode_head_split(a) == 4 && a.dv == kCols && w.kind == PackedKind::Int4 &&
           w.codes && w.scales && w.k == a.nv * a.dv && w.n >= 1 && w.n <= kGdnOutMaxRows &&
           (w.group == 32 || w.group == 64 || w.group == 128);
}

cudaError_t launch_gdn_decode_step_head(const GdnDecodeArgs& a, int threads, int split, cudaStream_t stream) {
    const bool small_k = a.conv_k <= 4;
    if (a.out_w.codes)  // gdn_decode_step checked gdn_decode_out_takes
        return small_k ? launch_head<256, 4, 4, true>(a, stream) : launch_head<256, 4, 8, true>(a, stream);
    if (a.stamps) {  // the diagnosis: Head256 and HeadSplit in 4 at the flagship's conv (K <= 4)
        if (threads != 256 || (split != 1 && split != 4) || !small_k) return cudaErrorInvalidValue;
        return split == 4 ? launch_head<256, 4, 4, false, true>(a, stream) : launch_head<256, 1, 4, false, true>(a, stream);
    }
    if (threads == 512) return small_k ? launch_head<512, 1, 4>(a, stream) : launch_head<512, 1, 8>(a, stream);
    if (split == 4) return small_k ? launch_head<256, 4, 4>(a, stream) : launch_head<256, 4, 8>(a, stream);
    if (split == 2) return small_k ? launch_head<256, 2, 4>(a, stream) : launch_head<256, 2, 8>(a, stream);
    return small_k ? launch_head<256, 1, 4>(a, stream) : launch_head<256, 1, 8>(a, stream);
}

}  // namespace tessera::cuda::fast::detail
