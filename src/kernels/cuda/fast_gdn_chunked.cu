// The chunked (WY) gated delta rule on the tensor cores, chunks of 64 tokens per sequence counted
// from its first token in the call (the CPU's gdn_chunked.cpp, same steps, same rounding points):
//  1. wy_prep, a block per (chunk, sequence, value head), all chunks in parallel: Γ (cumsum of g
//     in double), A = −strictlower(diag(β)K·Kᵀ ⊙ D), T = (I − A)⁻¹ (forward substitution inside
//     the 16 × 16 diagonal blocks, a thread per column; the blocks below by block rows), W = T·(diag(β)K ⊙ e^Γ), U = T·diag(β)V and P = Q·Kᵀ ⊙ D (incl. the
//     diagonal), written to scratch rows per (token, head): [W (dk) | U (dv) | P (64) | e^Γ, e^(Γlast−Γ)].
//  2. wy_state, a block of 8 or 16 warps per (sequence, value head, 32 state columns), chunks in order with the
//     [dk, 32] state slice in shared memory: Vn = U − W·S; O = e^Γ ⊙ (Q·S) + P·Vn;
//     S ← e^Γlast·S + (K ⊙ e^(Γlast−Γ))ᵀ·Vn. Tiles arrive by cp.async, W and K a chunk ahead.
//     GdnChunkVariant::Split* replaces this pass by two (fast_gdn_split.cu, same bits).
// Matrix products: mma.sync m16n8k8 TF32 with f32 accumulation, each operand split a = hi + lo
// (3×TF32: lo·hi + hi·lo + hi·hi), which keeps f32-level accuracy (~1e-6 relative); operands from shared memory
// through small accessors, so transposes and row scalings cost no copies.
#include "kernels/cuda/fast_gdn_wy.cuh"

namespace tessera::cuda::fast::detail {

using namespace wy;

namespace {

// ---- 1. chunk-local matrices ----

// kGridWU (the Split variants): W and U by tile_mma_grid, 4 column tiles a call (same bits).
template <bool kGridWU>
__global__ void __launch_bounds__(kThreads, 2) wy_prep_kernel(ChArgs a) {
    const int64_t c = blockIdx.x, h = blockIdx.z;
    const int s = blockIdx.y, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    Seq sq;
    if (!seq_of(a, s, &sq) || c * kC >= sq.n_wy) return;
    const int64_t tb = sq.t0 + c * kC;
    const int L = int(sq.n_wy - c * kC < kC ? sq.n_wy - c * kC : kC);
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    const int dk = a.dk, dv = a.dv, dkp = a.dkp, dvp = a.dvp, ldk = dkp + 4, ldv = dvp + 8;

    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);  // [64][ldk] k (rows >= L and columns >= dk: 0)
    float* Qs = Ks + kC * ldk;                    // [64][ldk] q, until P is done
    float* Vs = Qs;                               // [64][ldv] v, loaded after P (two blocks fit an SM)
    float* As = Qs + kC * (ldk > ldv ? ldk : ldv);  // [64][kLdT] A
    float* Xs = As + kC * kLdT;                   // [64][kLdT] T
    float* bt = Xs + kC * kLdT;                   // [64] β
    float* eg = bt + kC;                          // [64] e^Γ
    double* Gd = reinterpret_cast<double*>(eg + kC);  // [64] Γ

    for (int l = warp; l < kC; l += kThreads / 32) {  // a warp per token row, lanes along it
        const float* kr = a.k.data + (tb + l) * a.k.tok_stride + hk * a.k.head_stride;
        const float* qr = a.q.data + (tb + l) * a.q.tok_stride + hk * a.q.head_stride;
        load_row(Ks + l * ldk, kr, dk, dkp, l < L, a.vec, lane);
        load_row(Qs + l * ldk, qr, dk, dkp, l < L, a.vec, lane);
    }
    if (tid < kC) bt[tid] = tid < L ? a.beta[(tb + tid) * a.beta_s + h] : 0.f;
    if (warp == 0) chunk_gamma(a, tb, L, h, lane, Gd, eg);
    cp_async_wait_all();  // this thread's copies; the barrier publishes everyone's
    __syncthreads();
    auto D = [&](int i, int j) { return expf(float(Gd[i] - Gd[j])); };  // i >= j

    // A = −strictlower((diag(β)K)·Kᵀ ⊙ D): 4 × 8 tiles of 16 × 8.
    for (int t = warp; t < 32; t += 8) {
        const int m0 = (t / 8) * 16, n0 = (t % 8) * 8;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (n0 < m0 + 16)  // tiles wholly above the diagonal stay 0
            tile_mma(acc, m0, n0, dkp, [&](int m, int kk) { return bt[m] * Ks[m * ldk + kk]; },
                     [&](int kk, int n) { return Ks[n * ldk + kk]; });
        tile_each(acc, m0, n0, [&](int i, int j, float x) { As[i * kLdT + j] = j < i ? -x * D(i, j) : 0.f; });
    }
    __syncthreads();

    if (warp < 2) {
        solve_diag_column(As, Xs, tid, L);  // the diagonal 16 × 16 blocks of T, a thread a column
    } else {
        // Meanwhile P = Q·Kᵀ ⊙ D (lower, incl. the diagonal) straight to scratch.
        for (int t = warp - 2; t < 32; t += 6) {
            const int m0 = (t / 8) * 16, n0 = (t % 8) * 8;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            if (n0 < m0 + 16)
                tile_mma(acc, m0, n0, dkp, [&](int m, int kk) { return Qs[m * ldk + kk]; },
                         [&](int kk, int n) { return Ks[n * ldk + kk]; });
            tile_each(acc, m0, n0, [&](int i, int j, float x) {
                if (i < L) a.scratch[((tb + i) * a.nv + h) * a.rs + dk + dv + j] = j <= i ? x * D(i, j) : 0.f;
            });
        }
    }
    __syncthreads();  // P is done: Qs is free for V, which lands during the block rows below
    for (int l = warp; l < kC; l += kThreads / 32) {
        const float* vr = a.v.data + (tb + l) * a.v.tok_stride + h * a.v.head_stride;
        load_row(Vs + l * ldv, vr, dv, dvp, l < L, a.vec, lane);
    }
    solve_block_rows(As, Xs, warp);  // the blocks below the diagonal

    cp_async_wait_all();  // V
    __syncthreads();
    // W = T·(diag(β)K ⊙ e^Γ) and U = T·diag(β)V: 4 row tiles × (dkp + dvp)/8 column tiles; T is
    // lower triangular, so rows [m0, m0 + 16) stop at column m0 + 16.
    const int nw = dkp / 8, nu = dvp / 8;
    if constexpr (kGridWU) {
        // A warp's row tile (warp % 4) against column tiles warp / 4 + 2r of W, then of U: four at a
        // time (T's fragments split once for the four), the rest one by one.
        const int m0[1] = {(warp % 4) * 16};
        auto Tm = [&](int, int m, int kk) { return Xs[m * kLdT + kk]; };
        auto Bw = [&](int kk, int n) { return eg[kk] * (bt[kk] * Ks[kk * ldk + n]); };
        auto Bu = [&](int kk, int n) { return bt[kk] * Vs[kk * ldv + n]; };
        auto part = [&](int n_tiles, int n_cols, int col0, auto B) {  // col0: the part's scratch column
            auto store = [&](int i, int n, float x) {
                if (i < L && n < n_cols) a.scratch[((tb + i) * a.nv + h) * a.rs + col0 + n] = x;
            };
            int ct = warp / 4;
            for (; ct + 6 < n_tiles; ct += 8) {
                const int n0[4] = {8 * ct, 8 * (ct + 2), 8 * (ct + 4), 8 * (ct + 6)};
                float acc[1][4][4] = {};
                tile_mma_grid(acc, m0, n0, m0[0] + 16, Tm, B);
#pragma unroll
                for (int j = 0; j < 4; ++j) tile_each(acc[0][j], m0[0], n0[j], store);
            }
            for (; ct < n_tiles; ct += 2) {
                float acc[4] = {0.f, 0.f, 0.f, 0.f};
                tile_mma(acc, m0[0], 8 * ct, m0[0] + 16, [&](int m, int kk) { return Tm(0, m, kk); }, B);
                tile_each(acc, m0[0], 8 * ct, store);
            }
        };
        part(nw, dk, 0, Bw);
        part(nu, dv, dk, Bu);
    } else {
        for (int t = warp; t < 4 * (nw + nu); t += 8) {
            const int m0 = (t % 4) * 16, ct = t / 4;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            auto Tm = [&](int m, int kk) { return Xs[m * kLdT + kk]; };
            if (ct < nw) {
                const int n0 = ct * 8;
                tile_mma(acc, m0, n0, m0 + 16, Tm, [&](int kk, int n) { return eg[kk] * (bt[kk] * Ks[kk * ldk + n]); });
                tile_each(acc, m0, n0, [&](int i, int n, float x) {
                    if (i < L && n < dk) a.scratch[((tb + i) * a.nv + h) * a.rs + n] = x;
                });
            } else {
                const int n0 = (ct - nw) * 8;
                tile_mma(acc, m0, n0, m0 + 16, Tm, [&](int kk, int n) { return bt[kk] * Vs[kk * ldv + n]; });
                tile_each(acc, m0, n0, [&](int i, int n, float x) {
                    if (i < L && n < dv) a.scratch[((tb + i) * a.nv + h) * a.rs + dk + n] = x;
                });
            }
        }
    }
    if (tid < L) {
        float* row = a.scratch + ((tb + tid) * a.nv + h) * a.rs + dk + dv + kC;
        row[0] = eg[tid];
        row[1] = D(L - 1, tid);  // e^(Γlast − Γ)
    }
}

// ---- 2. the state carried chunk by chunk ----

template <int NW>  // warps: 8 or 16
__global__ void __launch_bounds__(NW * 32, 1) wy_state_kernel(ChArgs a) {
    constexpr int kTh = NW * 32, kT16 = 16 / NW, kT32 = 32 / NW;  // threads; 16 and 32 tiles per warp
    const int s = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int64_t h = blockIdx.y;
    const int c0 = int(blockIdx.z) * kNs;  // this block's first state column
    const int dk = a.dk, dv = a.dv, dkp = a.dkp, ldk = dkp + 4;
    Seq sq;
    if (!seq_of(a, s, &sq)) return nan_columns(a, sq, h, c0, tid, kTh);
    if (sq.n_wy == 0) return;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = sq.slot >= 0 ? a.state + sq.slot * a.slot_stride + h * int64_t(dk) * dv : nullptr;

    extern __shared__ float4 smem4[];
    float* Ss = reinterpret_cast<float*>(smem4);  // [dkp][kLdS] the state slice
    float* Vn = Ss + dkp * kLdS;                  // [64][kLdS] U, then U − W·S
    float* Wb = Vn + kC * kLdS;                   // [2][64][ldk] W of this chunk and of the next
    float* Kb = Wb + 2 * kC * ldk;                // [2][64][ldk] K, likewise
    float* Qs = Kb + 2 * kC * ldk;                // [64][ldk]
    float* Ps = Qs + kC * ldk;                    // [64][kLdT]
    float* eg = Ps + kC * kLdT;                   // [64] e^Γ
    float* dl = eg + kC;                          // [64] e^(Γlast − Γ)

    // Queues the loads of the chunk at token cs of the sequence (rows past its end: zeros): W
    // and K into buffer b, or Q, P, U and the decays. A warp per token row, lanes along it.
    auto chunk_rows = [&](int64_t cs) { return int(sq.n_wy - cs < kC ? sq.n_wy - cs : kC); };
    auto load_wk = [&](int64_t cs, int b) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        float* W = Wb + b * kC * ldk;
        float* K = Kb + b * kC * ldk;
        for (int l = warp; l < kC; l += NW) {
            const float* wr = a.scratch + ((tb + l) * a.nv + h) * a.rs;
            const float* kr = a.k.data + (tb + l) * a.k.tok_stride + hk * a.k.head_stride;
            load_row(W + l * ldk, wr, dk, dkp, l < L, a.vec, lane);
            load_row(K + l * ldk, kr, dk, dkp, l < L, a.vec, lane);
        }
    };
    auto load_rest = [&](int64_t cs) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        for (int l = warp; l < kC; l += NW) {
            const float* wr = a.scratch + ((tb + l) * a.nv + h) * a.rs;
            const float* qr = a.q.data + (tb + l) * a.q.tok_stride + hk * a.q.head_stride;
            load_row(Qs + l * ldk, qr, dk, dkp, l < L, a.vec, lane);
            const int ucols = dv - c0 < kNs ? dv - c0 : kNs;  // U: this block's columns
            load_row(Vn + l * kLdS, wr + dk + c0, ucols, kNs, l < L, a.vec, lane);
            load_row(Ps + l * kLdT, wr + dk + dv, kC, kC, l < L, a.vec, lane);
            if (lane < 2) load_or_zero((lane == 0 ? eg : dl) + l, wr + dk + dv + kC + lane, l < L);
        }
    };

    for (int idx = tid; idx < dkp * kNs; idx += kTh) {
        const int i = idx / kNs, cc = idx % kNs;
        Ss[i * kLdS + cc] = S && i < dk && c0 + cc < dv ? S[int64_t(i) * dv + c0 + cc] : 0.f;
    }
    // Copy groups: W, K of a chunk are queued one chunk ahead (they land while the chunk before
    // computes); each chunk then commits two groups: its Q, P, U (waited for after W·S) and W, K
    // of the next chunk (or an empty group). Every buffer is rewritten only after the barrier
    // that ends its last reads (the last two barriers of the chunk before).
    load_wk(0, 0);
    cp_async_commit();
    int b = 0;
    for (int64_t cs = 0; cs < sq.n_wy; cs += kC, b ^= 1) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        load_rest(cs);
        cp_async_commit();
        if (cs + kC < sq.n_wy) load_wk(cs + kC, b ^ 1);
        cp_async_commit();  // possibly empty: the count per chunk stays three
        cp_async_wait<2>();  // this chunk's W and K
        __syncthreads();
        const float* Ws = Wb + b * kC * ldk;
        const float* Ks = Kb + b * kC * ldk;

        // Vn = U − W·S: 4 × 4 tiles, 16 / NW per warp.
        float vacc[kT16][4];
#pragma unroll
        for (int q = 0; q < kT16; ++q) {
            const int t = warp + NW * q, m0 = (t % 4) * 16, n0 = (t / 4) * 8;
            for (float& x : vacc[q]) x = 0.f;
            tile_mma(vacc[q], m0, n0, dkp, [&](int m, int kk) { return Ws[m * ldk + kk]; },
                     [&](int kk, int n) { return Ss[kk * kLdS + n]; });
        }
        cp_async_wait<1>();  // Q, P, U and the decays
        __syncthreads();
#pragma unroll
        for (int q = 0; q < kT16; ++q) {  // each element of Vn belongs to one lane
            const int t = warp + NW * q, m0 = (t % 4) * 16, n0 = (t / 4) * 8;
            tile_each(vacc[q], m0, n0, [&](int i, int n, float x) { Vn[i * kLdS + n] -= x; });
        }
        __syncthreads();

        // O = e^Γ ⊙ (Q·S) + P·Vn: 4 × 4 tiles, 16 / NW per warp, written out.
#pragma unroll
        for (int q = 0; q < kT16; ++q) {
            const int t = warp + NW * q, m0 = (t % 4) * 16, n0 = (t / 4) * 8;
            float acc[4] = {0.f, 0.f, 0.f, 0.f};
            tile_mma(acc, m0, n0, dkp, [&](int m, int kk) { return Qs[m * ldk + kk]; },
                     [&](int kk, int n) { return Ss[kk * kLdS + n]; });
            const int gid = (tid % 32) / 4;
            acc[0] *= eg[m0 + gid];
            acc[1] *= eg[m0 + gid];
            acc[2] *= eg[m0 + gid + 8];
            acc[3] *= eg[m0 + gid + 8];
            tile_mma(acc, m0, n0, m0 + 16, [&](int m, int kk) { return Ps[m * kLdT + kk]; },  // P lower
                     [&](int kk, int n) { return Vn[kk * kLdS + n]; });
            tile_each(acc, m0, n0, [&](int i, int n, float x) {
                if (i < L && c0 + n < dv) a.o[(tb + i) * a.o_ts + h * a.o_hs + c0 + n] = x;
            });
        }
        // S ← e^Γlast·S + (K ⊙ e^(Γlast − Γ))ᵀ·Vn: (dkp/16) × 4 tiles, up to 32 / NW per warp.
        const float last = eg[L - 1];
        const int n_st = (dkp + 15) / 16 * 4;
        float sacc[kT32][4];
#pragma unroll
        for (int q = 0; q < kT32; ++q) {
            const int t = warp + NW * q, m0 = (t / 4) * 16, n0 = (t % 4) * 8;
            for (float& x : sacc[q]) x = 0.f;
            if (t < n_st)
                tile_mma(sacc[q], m0, n0, kC, [&](int m, int kk) { return m < dkp ? Ks[kk * ldk + m] * dl[kk] : 0.f; },
                         [&](int kk, int n) { return Vn[kk * kLdS + n]; });
        }
        __syncthreads();  // every read of the old S (and of this chunk's tiles) is done
#pragma unroll
        for (int q = 0; q < kT32; ++q) {
            const int t = warp + NW * q, m0 = (t / 4) * 16, n0 = (t % 4) * 8;
            if (t < n_st)
                tile_each(sacc[q], m0, n0, [&](int i, int n, float x) {
                    if (i < dkp) Ss[i * kLdS + n] = last * Ss[i * kLdS + n] + x;
                });
        }
        __syncthreads();
    }
    if (!S) {
        // A padding sequence's last one-token chunk (step_padding_last).
        if (sq.n_wy == sq.n || warp != 0) return;
        step_padding_last(a, sq, h, hk, c0, Ss, lane);
        return;
    }
    for (int idx = tid; idx < dk * kNs; idx += kTh) {
        const int i = idx / kNs, cc = idx % kNs;
        if (c0 + cc < dv) S[int64_t(i) * dv + c0 + cc] = Ss[i * kLdS + cc];
    }
}

}  // namespace

cudaError_t launch_gdn_chunked(float* o, int64_t o_ts, int64_t o_hs, HeadsIn q, HeadsIn k, HeadsIn v, const float* g,
                               int64_t g_s, const float* beta, int64_t beta_s, int64_t T, int64_t dk, int64_t dv,
                               float* state, int64_t slot_stride, int64_t n_slots, const SeqPlan& plan,
                               const GdnParams& p, float* scratch, int64_t max_len, int state_warps,
                               bool vec_loads, bool split, cudaStream_t stream) {
    ChArgs a = ch_args(o, o_ts, o_hs, q, k, v, g, g_s, beta, beta_s, T, dk, dv, state, slot_stride, n_slots, plan, p,
                       scratch, max_len);
    a.rs = (dk + dv + kC + 4 + 3) / 4 * 4;  // as gated_delta_rule_scratch_floats
    a.vec = vec_loads && dk % 4 == 0 && dv % 4 == 0 && al16(q.data, q.tok_stride, q.head_stride) &&
            al16(k.data, k.tok_stride, k.head_stride) && al16(v.data, v.tok_stride, v.head_stride) &&
            al16(scratch, a.rs, 0);
    const int ldk = a.dkp + 4, ldv = a.dvp + 8;
    const size_t prep_smem =
        sizeof(float) * size_t(kC * (ldk + (ldk > ldv ? ldk : ldv) + 2 * kLdT) + 2 * kC) + sizeof(double) * kC;
    const size_t state_smem = sizeof(float) * size_t((a.dkp + kC) * kLdS + kC * (5 * ldk + kLdT) + 2 * kC);
    const auto prep = split ? wy_prep_kernel<true> : wy_prep_kernel<false>;
    cudaError_t err = cudaFuncSetAttribute(prep, cudaFuncAttributeMaxDynamicSharedMemorySize, int(prep_smem));
    if (err != cudaSuccess) return err;
    const dim3 prep_grid{unsigned((max_len + kC - 1) / kC), unsigned(plan.n_seqs), unsigned(p.n_v_heads)};
    prep<<<prep_grid, kThreads, prep_smem, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    if (split) return launch_wy_split(a, state_warps, stream);
    err = cudaFuncSetAttribute(wy_state_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(state_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(wy_state_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(state_smem));
    if (err != cudaSuccess) return err;
    const dim3 state_grid{unsigned(plan.n_seqs), unsigned(p.n_v_heads), unsigned((dv + kNs - 1) / kNs)};
    if (state_warps == 16) wy_state_kernel<16><<<state_grid, 16 * 32, state_smem, stream>>>(a);
    else wy_state_kernel<8><<<state_grid, 8 * 32, state_smem, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
