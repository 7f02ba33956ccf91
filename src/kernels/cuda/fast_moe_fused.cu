// The fast MoE's decode step in one kernel (MoePlan::fused_decode): for a token's k slots, gate+up
// with SwiGLU, down, and the weighted sum over the slots — where the integer-unit pair
// (fast_moe_decode_dp4a.cu) takes two kernels, every block of the down kernel quantizing all k
// act rows again, and the down kernel's chain starting only when the gate+up grid has ended.
//
// Why (docs/cuda-rounds.md, thirty-seventh round). At one token the MoE is latency-bound: ~21 MB of
// experts on llama.cpp's Qwen3-30B shape stream in ~4 µs even from HBM, yet the pair takes 12.7 µs
// back to back (the thirty-fifth round) — two kernels' chains (ids → weights → dots → act → the
// next grid's wait → act again → dots → sum), each a warp's ~1,000 instructions. Here:
//  - a thread-block cluster of C blocks a (token, slot); block `rank` owns gate and up rows
//    [rank·16·RG, +16·RG) and down rows [rank·16·RD, +16·RD) of the slot's expert (RG = I/16/C, RD
//    = H/16/C row tiles), so the slot's experts are read once, by C SMs in parallel;
//  - one producer lane streams the block's weights — every gate, up and down tile it needs, the
//    down tiles too, right after the expert id — through a ring of stages by the bulk-copy engine
//    (one copy of codes and one of scales a stage: whole row tiles are contiguous in the experts'
//    stacked 16-row tiles), so down's weights land while gate+up computes;
//  - act never leaves the cluster: each block stores its SwiGLU outputs into every block of the
//    cluster (distributed shared memory, by st.async on that block's act barrier, which completes
//    once the whole act row has landed there), and each block quantizes the act row for its down
//    rows from its own shared memory;
//  - the slots meet through global memory: each block writes w_j·o_j for its down rows, fences,
//    and draws a ticket on counters[t, rank]; the block drawing k − 1 (the last of the token's k
//    clusters for those rows) sums the k parts in slot order and writes y — no block waits for
//    another cluster (no deadlock whatever is resident; fast_decode_attention.cu's fused merge
//    does the same), and the counter goes back to zero for the next launch.
// The arithmetic is the dp4a pair's: x and act in two int8 limbs per 32 columns (fast_dp4a.cuh,
// the same limbs), exact integer chunk sums, f32 joins — with Bulk's lane map (lane (g, t): chunk
// t of rows g and g + 8; fast_gemv_bulk.cu), whose 16-byte reads of a staged k-tile are
// contiguous, so the f32 sums run in another order than the pair's: not its bits, within its
// bound (tests/cuda/test_fast_moe_experts.cpp, FusedDecode*). The slot sum is sum_slots_in_order's
// (w_j·o_j rounded, then added in slot order).
//
// Needs the experts stacked in tiles (MoeTiling::gate_up and down), one group size for the three
// matrices, H and I multiples of 128 with H / 16 and I / 16 multiples of C (moe_fused_shape).
// Status: written in session 40, when no GPU was lent. Its first run (session 41) hung. Session 42
// (no GPU lent either) found a likely cause in the SASS and removed it: the act exchange was a
// second phase of the cluster barrier, which the producer warp arrived at (after the first phase's
// wait) while its block's consumer warps had not yet waited for the first phase. The hardware's
// cluster barrier is a per-warp unit (UCGABAR_ARV / UCGABAR_WAIT), and the PTX contract is "arrive,
// then wait, then the next arrive" — nothing promises that one CTA's warps may sit in different
// phases, and no other kernel of the pack lets them. Now the cluster barrier has one phase (every
// block started, its barriers initialised), and the act row is exchanged by st.async on an
// mbarrier, as fast_gdn_decode_head.cu's Σ q² exchange (run on the H200) does. Each mbarrier wait
// has a watchdog (kWatchNs): a wait that has not returned then prints where it stands and traps,
// so a hang left in it fails its test with a place instead of stalling the run.
// Opt-in (TESSERA_MOE_DECODE=fused): its tests pass on the GPU (session 45, H100), but the dp4a pair
// it would replace is faster there (fast_moe.h, kMoeFusedDecodeWorks).
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>

#include "kernels/cuda/fast_device.cuh"
#include "kernels/cuda/fast_dp4a.cuh"
#include "kernels/cuda/fast_mbarrier.cuh"
#include "kernels/cuda/fast_moe.h"
#include "kernels/cuda/fast_moe_fused_map.h"
#include "kernels/cuda/fast_moe_slots.cuh"
#include "kernels/cuda/fast_tma.cuh"
#include "kernels/cuda/pdl.cuh"

namespace tessera::cuda::fast::detail {

namespace {

using namespace dev;

constexpr int kConsumerBar = 1;  // named barrier of the consumer threads
constexpr int threads_of(int cw) { return cw * 32 + 32; }  // CW consumer warps + the producer warp

// The cluster barrier in its halves, used for one phase only: every thread arrives once its
// block's mbarriers are initialised (relaxed: fence_mbarrier_init_cluster releases them) and waits
// before it touches another block's shared memory (as CUDA requires).
__device__ __forceinline__ void cluster_arrive_relaxed() { asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory"); }

// How long an mbarrier wait may take before the watchdog calls it a hang: far past any launch of
// this kernel (microseconds), and short against a test's timeout.
constexpr uint64_t kWatchNs = 4'000'000'000ull;

// Where a hung wait stands, then a trap (the launch fails with cudaErrorLaunchFailure).
__device__ __noinline__ void watchdog_trap(const char* what, int stage, uint32_t parity) {
    printf("tessera fused MoE decode: block (%d, %d, %d) thread %d: no %s after %llu ms (stage %d, parity %u)\n",
           int(blockIdx.x), int(blockIdx.y), int(blockIdx.z), int(threadIdx.x), what,
           (unsigned long long)(kWatchNs / 1000000), stage, parity);
    __trap();
}

// mbar_wait with the watchdog (the clock read only once the first try has failed). CLUSTER: the
// acquire at cluster scope (mbar_try_wait; the act row's phase, completed by the cluster's st.async).
template <bool CLUSTER = false>
__device__ __forceinline__ void watched_wait(uint64_t* bar, uint32_t parity, const char* what, int stage) {
    if (mbar_try_wait<CLUSTER>(bar, parity)) return;
    const uint64_t t0 = global_ns();
    while (!mbar_try_wait<CLUSTER>(bar, parity))
        if (global_ns() - t0 > kWatchNs) watchdog_trap(what, stage, parity);
}

struct FusedArgs {
    float* y;
    int64_t ldy;
    const float* x;
    int64_t ldx;
    float* part;         // [T][k][H]: w_j·o_j of each slot (scratch)
    unsigned* counters;  // [T][C]: zero, left zero
    const int32_t* ids;
    const float* weights;
    ExpertStack gate, up, down;  // stacked (m0 set)
    int H, I, E, k;
    bool bias_gu, bias_d, x_aligned, x_settled;
    MoeFusedShape f;
};

// Pair p of a staged tile (codes, scales, biases or null at the stage's arrays: a pair is 1 KB of
// codes and 16·(4 >> LG) halves of scales), this lane's two rows (moe_fused_lane's map m) dotted
// with the staged limbs X at k-tile kt: a0, a1 — Bulk's arithmetic (fast_gemv_bulk.cu, bulk_ktile).
template <int LG>
__device__ __forceinline__ void pair_dot(const uint8_t* codes, const uint16_t* scales, const uint16_t* biases, int p,
                                         const Dp4aX& X, int kt, const MoeFusedLane& m, float& a0, float& a1) {
    const uint8_t* c = codes + p * 1024 + m.code;
    const uint4 q0 = *reinterpret_cast<const uint4*>(c);        // row g, chunk t
    const uint4 q1 = *reinterpret_cast<const uint4*>(c + 512);  // row g + 8
    const int so = p * 16 * (4 >> LG);
    const float s0 = half_bits(scales[so + m.scale0]), s1 = half_bits(scales[so + m.scale1]);
    float b0 = -8.f * s0, b1 = -8.f * s1;
    if (biases) b0 = half_bits(biases[so + m.scale0]), b1 = half_bits(biases[so + m.scale1]);
    const int col = kt * 128 + m.xcol;
    const auto* ph = reinterpret_cast<const uint4*>(X.hi + col);
    const auto* pl = reinterpret_cast<const uint4*>(X.lo + col);
    const float2 ds = X.st[col >> 5];  // (dx, sx)
    const float v0 = fmaf(float(dp4a_chunk32(q0, pl)), 1.f / 254.f, float(dp4a_chunk32(q0, ph)));
    const float v1 = fmaf(float(dp4a_chunk32(q1, pl)), 1.f / 254.f, float(dp4a_chunk32(q1, ph)));
    a0 = fmaf(s0 * ds.x, v0, b0 * ds.y);
    a1 = fmaf(s1 * ds.x, v1, b1 * ds.y);
}

// Σ over the quad (t = 0..3) of a lane's row partial.
__device__ __forceinline__ float quad_sum(float v) {
    v += __shfl_xor_sync(0xffffffffu, v, 1);
    return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

// Grid (C, k, T) in clusters of C along x: block `rank` of token t's slot j. LG: log2(G / 32); CW:
// consumer warps (8 or 16: MoeFusedShape::warps) — warp q takes gate and up's k-tiles ≡ q (mod CW).
template <int LG, int CW>
__global__ void __launch_bounds__(threads_of(CW), CW == 8 ? 2 : 1)
    moe_fused_decode_kernel(const __grid_constant__ FusedArgs a) {
    constexpr int kCW = CW, kCT = CW * 32;
    auto consumers_sync = [] { named_barrier_sync(kConsumerBar, kCT); };
    const MoeFusedShape& f = a.f;
    const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
    const int rank = int(blockIdx.x), j = int(blockIdx.y), t = int(blockIdx.z);
    const int64_t s = int64_t(t) * a.k + j;
    const int C = f.cluster, stages = f.stages_gu + f.stages_d;

    extern __shared__ uint4 smem4[];
    uint8_t* const sm = reinterpret_cast<uint8_t*>(smem4);
    uint8_t* const ring = sm;  // [ring][stage_bytes]: codes 16 KB, scales, biases
    uint8_t* const xs = sm + f.off_x;  // the token's x, staged (fast_dp4a.cuh)
    float* const act_s = reinterpret_cast<float*>(sm + f.off_act);  // [I]: the slot's act row
    uint8_t* const as = sm + f.off_act_q;                            // act staged
    float* const red = reinterpret_cast<float*>(sm + f.off_red);     // [rt_gu][CW][2][16]
    float* const part_s = reinterpret_cast<float*>(sm + f.off_part);  // [rt_d][nkt_i][16]
    uint64_t* const full = reinterpret_cast<uint64_t*>(sm + f.off_bar);
    uint64_t* const empty = full + f.ring;
    uint64_t* const act_bar = empty + f.ring;  // the act row landed here (4·I bytes by st.async)
    int* const last_s = reinterpret_cast<int*>(act_bar + 1);

    if (tid == 0) {  // (as fast_gemv_bulk.cu: the block barrier publishes them to the producer's copies)
        for (int i = 0; i < f.ring; ++i) mbar_init(&full[i], 1), mbar_init(&empty[i], kCT);
        mbar_init(act_bar, 1);
        fence_mbarrier_init_cluster();                   // act_bar, to the blocks that st.async to it
        mbar_arrive_expect_tx(act_bar, 4u * uint32_t(a.I));  // its one arrival: C blocks' 16·rt_gu floats each
    }
    __syncthreads();
    cluster_arrive_relaxed();  // this block has started, its barriers initialised (the barrier's one phase)

    if (warp == kCW) {
        // ---- producer: the block's stages, in the order the consumers take them ----
        cluster_wait();  // (arrive, then wait: the producer touches no other block)
        pdl::wait();
        pdl::trigger();
        if (lane != 0) return;
        const int e0 = a.ids[s];
        const int e = e0 >= 0 && e0 < a.E ? e0 : 0;  // a bad id streams expert 0; its outputs are NaN
        for (int st = 0; st < stages; ++st) {
            const int slot = st % f.ring, use = st / f.ring;
            if (use > 0) watched_wait(&empty[slot], uint32_t(use - 1) & 1u, "free ring slot", st);
            const MoeFusedStage r = moe_fused_stage(f, st);
            const MoeFusedSource src = moe_fused_source(f, r, a.H, a.I, LG, rank);
            const ExpertStack& es = r.mat == 0 ? a.gate : r.mat == 1 ? a.up : a.down;
            const int64_t so = e * es.scale_step + src.scale;
            const uint32_t sbytes = 2u * src.scale_halves;
            const bool bias = r.mat < 2 ? a.bias_gu : a.bias_d;
            mbar_arrive_expect_tx(&full[slot], src.code_bytes + sbytes * (bias ? 2u : 1u));
            const uint32_t dst = smem_addr(ring + size_t(slot) * f.stage_bytes);
            bulk_load(dst, es.m0.codes + e * es.code_step + src.code, src.code_bytes, &full[slot]);
            bulk_load(dst + kMoeFusedStageCodes, es.m0.scales + so, sbytes, &full[slot]);
            if (bias) bulk_load(dst + kMoeFusedStageCodes + f.scale_bytes, es.m0.biases + so, sbytes, &full[slot]);
        }
        return;
    }

    // ---- consumers ----
    const int g = lane >> 2, tq = lane & 3;
    const MoeFusedLane lm = moe_fused_lane(lane, LG);
    const float* const xt = a.x + int64_t(t) * a.ldx;
    if (a.x_settled) dp4a_quantize_x<kCT>(xt, a.ldx, 1, a.H, a.x_aligned, xs);
    pdl::wait();
    pdl::trigger();
    if (!a.x_settled) dp4a_quantize_x<kCT>(xt, a.ldx, 1, a.H, a.x_aligned, xs);
    const int e0 = a.ids[s];
    const bool bad = e0 < 0 || e0 >= a.E;
    const float wj = a.weights[s];
    consumers_sync();  // x staged
    const Dp4aX X = dp4a_x(xs, a.H, 1);

    // Stage st, landed: what it holds, its codes, scales and biases (or null) in the ring.
    struct Staged {
        MoeFusedStage r;
        const uint8_t* codes;
        const uint16_t *scales, *biases;
    };
    auto open_stage = [&](int st, bool bias) {
        const int slot = st % f.ring;
        watched_wait(&full[slot], uint32_t(st / f.ring) & 1u, "staged weights", st);
        const uint8_t* sb = ring + size_t(slot) * f.stage_bytes;
        return Staged{moe_fused_stage(f, st), sb, reinterpret_cast<const uint16_t*>(sb + kMoeFusedStageCodes),
                      bias ? reinterpret_cast<const uint16_t*>(sb + kMoeFusedStageCodes + f.scale_bytes) : nullptr};
    };
    // 1. gate and up: warp q the k-tiles ≡ q (mod CW) of each row tile, the quad's sums at the row
    // tile's end into red[rt][q][gate, up][16 rows].
    float acc[2][2] = {{0.f, 0.f}, {0.f, 0.f}};  // [gate, up][rows g, g + 8] (indexed by constants only)
    int st = 0;
    for (; st < f.stages_gu; ++st) {
        const Staged sg = open_stage(st, a.bias_gu);
        const MoeFusedStage& r = sg.r;
        const bool up = r.mat == 1;
        // Pair kk is k-tile k0 + kk of row tile r0 (moe_fused_pair with nr = 1); this warp's ≡ warp (mod CW).
        for (int kk = (warp - r.k0 % kCW + kCW) % kCW; kk < r.nk; kk += kCW) {
            float a0, a1;
            pair_dot<LG>(sg.codes, sg.scales, sg.biases, kk, X, r.k0 + kk, lm, a0, a1);
            if (up) acc[1][0] += a0, acc[1][1] += a1;
            else acc[0][0] += a0, acc[0][1] += a1;
        }
        mbar_arrive(&empty[st % f.ring]);
        if (up && r.k0 + r.nk == f.nkt_h) {  // the row tile's last stage
#pragma unroll
            for (int m = 0; m < 2; ++m)
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    const float v = quad_sum(acc[m][i]);
                    if (tq == 0) red[((r.r0 * kCW + warp) * 2 + m) * 16 + g + 8 * i] = v;
                    acc[m][i] = 0.f;
                }
        }
    }
    consumers_sync();  // red complete

    // 2. SwiGLU of the block's 16·rt_gu outputs (warps' parts in warp order), into every block of
    // the cluster (st.async on that block's act_bar); act_bar's phase completes once the cluster's
    // act row is whole here.
    cluster_wait();  // every block of the cluster has started, its act_bar initialised
    {
        const int nout = 16 * f.rt_gu, i0 = rank * nout;
        for (int i = tid; i < nout; i += kCT) {
            const int rt = i >> 4, row = i & 15;
            const float* p = red + rt * kCW * 32 + row;
            float gv = p[0], uv = p[16];
#pragma unroll
            for (int q = 1; q < kCW; ++q) gv += p[q * 32], uv += p[q * 32 + 16];
            const float v = bad ? quiet_nan() : gv / (1.f + expf(-gv)) * uv;  // cpu::swiglu
            for (int b = 0; b < C; ++b) st_async_cluster_f32(act_s + i0 + i, uint32_t(b), v, act_bar);
        }
    }
    watched_wait<true>(act_bar, 0, "act row from the cluster", -1);

    // 3. The act row staged as x was (the dp4a pair's down kernel stages the same limbs).
    {
        const int items = a.I / 8;  // I is a multiple of 128
        uint8_t* ah = as;
        uint8_t* al = as + a.I;
        auto* ast = reinterpret_cast<float2*>(as + 2 * a.I);
        for (int base = 0; base < items; base += kCT) {  // whole warps: the quantizer shuffles
            const int i = base + tid;
            float v[8];
#pragma unroll
            for (int e = 0; e < 8; ++e) v[e] = i < items ? act_s[8 * i + e] : 0.f;
            const Dp4aQ8 q = dp4a_quantize8(v);
            if (i < items) {
                *reinterpret_cast<uint2*>(ah + 8 * i) = q.H;
                *reinterpret_cast<uint2*>(al + 8 * i) = q.L;
                if ((i & 3) == 0) ast[i / 4] = make_float2(q.dx, q.sx);
            }
        }
    }
    consumers_sync();
    const Dp4aX XA = dp4a_x(as, a.I, 1);

    // 4. down: the (row tile, k-tile) pairs of each stage dealt over the warps; a pair's 16 row
    // partials into part_s[row tile][k-tile].
    for (; st < stages; ++st) {
        const Staged sg = open_stage(st, a.bias_d);
        const MoeFusedStage& r = sg.r;
        for (int p = warp; p < r.nr * r.nk; p += kCW) {
            int rt, kt;
            moe_fused_pair(r, p, rt, kt);
            float a0, a1;
            pair_dot<LG>(sg.codes, sg.scales, sg.biases, p, XA, kt, lm, a0, a1);
            a0 = quad_sum(a0);
            a1 = quad_sum(a1);
            if (tq == 0) {
                float* o = part_s + (rt * f.nkt_i + kt) * 16 + g;
                o[0] = bad ? quiet_nan() : a0;
                o[8] = bad ? quiet_nan() : a1;
            }
        }
        mbar_arrive(&empty[st % f.ring]);
    }
    consumers_sync();  // part_s complete

    // 5. o_j of the block's down rows (k-tiles in order), w_j·o_j to the token's part row of slot
    // j; then the ticket: the last of the k slots' blocks for these rows sums them in slot order.
    const int nrow = 16 * f.rt_d, h0 = rank * nrow;
    float* const part_t = a.part + int64_t(t) * a.k * a.H + h0;
    for (int i = tid; i < nrow; i += kCT) {
        const float* p = part_s + (i >> 4) * f.nkt_i * 16 + (i & 15);
        float o = p[0];
        for (int kt = 1; kt < f.nkt_i; ++kt) o += p[kt * 16];
        __stcg(part_t + int64_t(j) * a.H + i, __fmul_rn(wj, o));
    }
    __threadfence();  // this thread's part, before the ticket
    consumers_sync();
    if (tid == 0) {
        unsigned* ctr = a.counters + int64_t(t) * C + rank;
        const int last = atomicAdd(ctr, 1u) == unsigned(a.k - 1);
        if (last) {
            atomicExch(ctr, 0u);  // every slot has drawn: zero for the next launch
            __threadfence();      // the other slots' parts, before this block reads them
        }
        *last_s = last;
    }
    consumers_sync();
    if (!*last_s) return;
    float* const yt = a.y + int64_t(t) * a.ldy + h0;
    for (int i = tid; i < nrow; i += kCT) {
        float sum = __ldcg(part_t + i);
        for (int jj = 1; jj < a.k; ++jj) sum = __fadd_rn(sum, __ldcg(part_t + int64_t(jj) * a.H + i));
        yt[i] = sum;
    }
}

ExpertStack stack_of(const PackedMatrix* desc, const PackedMatrix& m0) {
    return {desc, m0, m0.n * (m0.k / 2), m0.n * (m0.k / m0.group)};
}

template <int LG, int CW>
cudaError_t launch_lg(const FusedArgs& args, int64_t T, cudaStream_t stream) {
    auto* kernel = moe_fused_decode_kernel<LG, CW>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(args.f.smem));
    if (err == cudaSuccess && args.f.cluster > 8)
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
    const dim3 grid(unsigned(args.f.cluster), unsigned(args.k), unsigned(T));
    return pdl::launch_cluster(kernel, grid, dim3(threads_of(CW)), args.f.smem, stream,
                               dim3(unsigned(args.f.cluster), 1, 1), args);
}

}  // namespace

int moe_fused_active_clusters(int64_t H, int64_t I, const MoeTiling& t, int form) {
    const MoeFusedShape f = moe_fused_shape(H, I, t, form);
    if (!f.cluster) return 0;
    auto query = [&](auto* kernel, int threads) {
        if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(f.smem)) != cudaSuccess ||
            (f.cluster > 8 &&
             cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)) {
            (void)cudaGetLastError();
            return 0;
        }
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(unsigned(f.cluster), 1, 1);
        cfg.blockDim = dim3(unsigned(threads));
        cfg.dynamicSmemBytes = f.smem;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = unsigned(f.cluster);
        at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        int n = 0;
        if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) n = 0;
        (void)cudaGetLastError();
        return n;
    };
    const bool wide = f.warps == 16;
    switch (t.gate0.group) {
        case 32: return wide ? query(moe_fused_decode_kernel<0, 16>, threads_of(16)) : query(moe_fused_decode_kernel<0, 8>, threads_of(8));
        case 64: return wide ? query(moe_fused_decode_kernel<1, 16>, threads_of(16)) : query(moe_fused_decode_kernel<1, 8>, threads_of(8));
        case 128: return wide ? query(moe_fused_decode_kernel<2, 16>, threads_of(16)) : query(moe_fused_decode_kernel<2, 8>, threads_of(8));
        default: return 0;
    }
}

cudaError_t launch_moe_fused_decode(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                                    const MoePackedExperts& w, const int32_t* ids, const float* weights, int k,
                                    float* part, bool x_settled, const MoeFusedShape& f, cudaStream_t stream) {
    FusedArgs a{};
    a.f = f;
    if (!a.f.cluster || !w.counters || T < 1 || T > 65535) return cudaErrorInvalidValue;
    a.y = y, a.ldy = ldy, a.x = x, a.ldx = ldx, a.part = part, a.counters = w.counters;
    a.ids = ids, a.weights = weights;
    a.gate = stack_of(w.gate, w.tiling.gate0);
    a.up = stack_of(w.up, w.tiling.up0);
    a.down = stack_of(w.down, w.tiling.down0);
    a.H = int(w.H), a.I = int(w.I), a.E = w.E, a.k = k;
    a.bias_gu = w.tiling.gate0.biases != nullptr;
    a.bias_d = w.tiling.down0.biases != nullptr;
    a.x_aligned = reinterpret_cast<uintptr_t>(x) % 16 == 0 && ldx % 4 == 0;
    a.x_settled = x_settled;
    const bool wide = a.f.warps == 16;
    switch (w.tiling.gate0.group) {
        case 32: return wide ? launch_lg<0, 16>(a, T, stream) : launch_lg<0, 8>(a, T, stream);
        case 64: return wide ? launch_lg<1, 16>(a, T, stream) : launch_lg<1, 8>(a, T, stream);
        case 128: return wide ? launch_lg<2, 16>(a, T, stream) : launch_lg<2, 8>(a, T, stream);
        default: return cudaErrorInvalidValue;
    }
}

}  // namespace tessera::cuda::fast::detail
