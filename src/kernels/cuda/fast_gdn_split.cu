// GdnChunkVariant::Split*: the chunked delta rule's state pass split in two, after wy_prep
// (fast_gdn_chunked.cu), with the same products in the same order (the same bits as wy_state):
//  2. wy_carry, a block of 8 or 16 warps per (sequence, value head, 32 state columns), chunks in
//     order: Vn = U − W·S and e^Γ ⊙ (Q·S) in one pass over S (each S fragment split once for
//     both), Vn written over U in scratch and e^Γ ⊙ (Q·S) into o; S ← e^Γlast·S + (K ⊙ e^(Γlast−Γ))ᵀ·Vn.
//     P and P·Vn (a quarter of wy_state's products and its largest tile load) leave the serial chain.
//  3. wy_out, a block per (chunk, sequence, value head), all chunks in parallel: o += P·Vn.
// Warp tiles by tile_mma_grid: several 16 × 8 tiles a warp, each fragment split once for all.
#include "kernels/cuda/fast_gdn_wy.cuh"

namespace tessera::cuda::fast::detail::wy {

namespace {

// ---- 2. the state carried chunk by chunk ----

template <int NW>  // warps: 8 or 16
__global__ void __launch_bounds__(NW * 32, 1) wy_carry_kernel(ChArgs a) {
    // Tiles per warp (any split gives the same bits: each tile's products run in one order):
    // W·S and Q·S, 4 × 4 tiles each: one row tile, kN1 column tiles of both; the S update,
    // (dkp/16) × 4 tiles: kM2 row tiles × 2 column tiles.
    constexpr int kTh = NW * 32, kN1 = 16 / NW, kM2 = 16 / NW;
    const int s = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int64_t h = blockIdx.y;
    const int c0 = int(blockIdx.z) * kNs;  // this block's first state column
    // Row strides: W and Q are read by rows (lanes gid) and K by columns (lanes tig): ≡ 4 and ≡ 8
    // (mod 32 banks) keep both conflict-free.
    const int dk = a.dk, dv = a.dv, dkp = a.dkp, ldk = dkp + 4, ldkk = dkp + 8;
    Seq sq;
    if (!seq_of(a, s, &sq)) return nan_columns(a, sq, h, c0, tid, kTh);
    if (sq.n_wy == 0) return;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = sq.slot >= 0 ? a.state + sq.slot * a.slot_stride + h * int64_t(dk) * dv : nullptr;

    extern __shared__ float4 smem4[];
    float* Ss = reinterpret_cast<float*>(smem4);  // [dkp][kLdS] the state slice
    float* Vn = Ss + dkp * kLdS;                  // [64][kLdS] U, then U − W·S
    float* Ws = Vn + kC * kLdS;                   // [64][ldk] W
    float* Qs = Ws + kC * ldk;                    // [64][ldk] Q
    float* Kb = Qs + kC * ldk;                    // [2][64][ldkk] K of this chunk and of the next
    float* eg = Kb + 2 * kC * ldkk;               // [64] e^Γ
    float* dl = eg + kC;                          // [64] e^(Γlast − Γ)

    auto chunk_rows = [&](int64_t cs) { return int(sq.n_wy - cs < kC ? sq.n_wy - cs : kC); };
    auto scratch_row = [&](int64_t t) { return a.scratch + (t * a.nv + h) * a.rs; };
    // Queues the loads of the chunk at token cs of the sequence (rows past its end: zeros): W, Q
    // and K (into buffer b), or U and the decays. A warp per token row, lanes along it.
    auto load_wqk = [&](int64_t cs, int b) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        float* K = Kb + b * kC * ldkk;
        for (int l = warp; l < kC; l += NW) {
            const float* qr = a.q.data + (tb + l) * a.q.tok_stride + hk * a.q.head_stride;
            const float* kr = a.k.data + (tb + l) * a.k.tok_stride + hk * a.k.head_stride;
            load_row(Ws + l * ldk, scratch_row(tb + l), dk, dkp, l < L, a.vec, lane);
            load_row(Qs + l * ldk, qr, dk, dkp, l < L, a.vec, lane);
            load_row(K + l * ldkk, kr, dk, dkp, l < L, a.vec, lane);
        }
    };
    auto load_u = [&](int64_t cs) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        const int ucols = dv - c0 < kNs ? dv - c0 : kNs;  // U: this block's columns
        for (int l = warp; l < kC; l += NW) {
            const float* wr = scratch_row(tb + l);
            load_row(Vn + l * kLdS, wr + dk + c0, ucols, kNs, l < L, a.vec, lane);
            if (lane < 2) load_or_zero((lane == 0 ? eg : dl) + l, wr + dk + dv + kC + lane, l < L);
        }
    };

    for (int idx = tid; idx < dkp * kNs; idx += kTh) {
        const int i = idx / kNs, cc = idx % kNs;
        Ss[i * kLdS + cc] = S && i < dk && c0 + cc < dv ? S[int64_t(i) * dv + c0 + cc] : 0.f;
    }
    // Copy groups: W, Q, K of chunk c + 1 are queued once chunk c's W and Q are read (they land
    // while its Vn and S update compute); chunk c's U and decays at its start. Each chunk commits
    // two groups: its U (waited for after W·S and Q·S) and the next chunk's W, Q, K (or an empty
    // group). Every buffer is rewritten only after the barrier that ends its last reads.
    load_wqk(0, 0);
    cp_async_commit();
    int b = 0;
    for (int64_t cs = 0; cs < sq.n_wy; cs += kC, b ^= 1) {
        const int64_t tb = sq.t0 + cs;
        const int L = chunk_rows(cs);
        load_u(cs);
        cp_async_commit();
        cp_async_wait<1>();  // this chunk's W, Q and K
        __syncthreads();
        const float* Ks = Kb + b * kC * ldkk;

        // Vn = U − W·S (acc1[0]) and e^Γ ⊙ (Q·S) (acc1[1]), S's fragments split once for both.
        const int m1[2] = {(warp % 4) * 16, (warp % 4) * 16};
        int n1[kN1];
#pragma unroll
        for (int j = 0; j < kN1; ++j) n1[j] = ((warp / 4) * kN1 + j) * 8;
        float acc1[2][kN1][4] = {};
        tile_mma_grid(acc1, m1, n1, dkp, [&](int i, int m, int kk) { return (i == 0 ? Ws : Qs)[m * ldk + kk]; },
                      [&](int kk, int n) { return Ss[kk * kLdS + n]; });
        cp_async_wait<0>();  // U and the decays
        __syncthreads();     // also: every read of W and Q is done
        if (cs + kC < sq.n_wy) load_wqk(cs + kC, b ^ 1);
        cp_async_commit();  // possibly empty: the count per chunk stays two
        const int gid = lane / 4;
#pragma unroll
        for (int j = 0; j < kN1; ++j) {  // each element of Vn belongs to one lane
            tile_each(acc1[0][j], m1[0], n1[j], [&](int i, int n, float x) {
                float& vn = Vn[i * kLdS + n];
                vn -= x;
                if (i < L && c0 + n < dv) scratch_row(tb + i)[dk + c0 + n] = vn;
            });
            float(&oc)[4] = acc1[1][j];
            oc[0] *= eg[m1[1] + gid];
            oc[1] *= eg[m1[1] + gid];
            oc[2] *= eg[m1[1] + gid + 8];
            oc[3] *= eg[m1[1] + gid + 8];
            tile_each(oc, m1[1], n1[j], [&](int i, int n, float x) {
                if (i < L && c0 + n < dv) a.o[(tb + i) * a.o_ts + h * a.o_hs + c0 + n] = x;
            });
        }
        __syncthreads();

        // S ← e^Γlast·S + (K ⊙ e^(Γlast − Γ))ᵀ·Vn (rows past dkp: none).
        const float last = eg[L - 1];
        int m2[kM2];
#pragma unroll
        for (int i = 0; i < kM2; ++i) m2[i] = ((warp / 2) * kM2 + i) * 16;
        const int n2[2] = {(warp % 2) * 16, (warp % 2) * 16 + 8};
        const bool rows = m2[0] < dkp;  // this warp has rows of S
        float acc2[kM2][2][4] = {};
        if (rows)
            tile_mma_grid(acc2, m2, n2, kC,
                          [&](int, int m, int kk) { return m < dkp ? Ks[kk * ldkk + m] * dl[kk] : 0.f; },
                          [&](int kk, int n) { return Vn[kk * kLdS + n]; });
        __syncthreads();  // every read of the old S (and of this chunk's tiles) is done
        if (rows) {
#pragma unroll
            for (int i = 0; i < kM2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
                    tile_each(acc2[i][j], m2[i], n2[j], [&](int r, int n, float x) {
                        if (r < dkp) Ss[r * kLdS + n] = last * Ss[r * kLdS + n] + x;
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

// ---- 3. the intra-chunk part of the outputs, every chunk at once ----

__global__ void __launch_bounds__(kThreads) wy_out_kernel(ChArgs a) {
    const int64_t c = blockIdx.x, h = blockIdx.z;
    const int s = blockIdx.y, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    Seq sq;
    if (!seq_of(a, s, &sq) || c * kC >= sq.n_wy) return;
    const int64_t tb = sq.t0 + c * kC;
    const int L = int(sq.n_wy - c * kC < kC ? sq.n_wy - c * kC : kC);
    const int dk = a.dk, dv = a.dv, dv32 = (dv + 31) / 32 * 32, ldv = dv32 + 8;

    extern __shared__ float4 smem4[];
    float* Ps = reinterpret_cast<float*>(smem4);  // [64][kLdT] P (rows >= L: 0)
    float* Vs = Ps + kC * kLdT;                   // [64][ldv] Vn (rows >= L and columns >= dv: 0)
    for (int l = warp; l < kC; l += kThreads / 32) {
        const float* wr = a.scratch + ((tb + l) * a.nv + h) * a.rs;
        load_row(Ps + l * kLdT, wr + dk + dv, kC, kC, l < L, a.vec, lane);
        load_row(Vs + l * ldv, wr + dk, dv, dv32, l < L, a.vec, lane);
    }
    cp_async_wait_all();
    __syncthreads();

    // o += P·Vn (P lower triangular: rows [m0, m0 + 16) stop at column m0 + 16), o's value
    // (e^Γ ⊙ (Q·S) from wy_carry) as the accumulators' start: a warp per row tile and 4 column
    // tiles (32 columns) at a time, P's fragments split once for the 4.
    const int gid = lane / 4, tig = lane % 4, m0[1] = {(warp % 4) * 16};
    float* orow = a.o + h * a.o_hs;
    for (int g = warp / 4; g < dv32 / 32; g += kThreads / 32 / 4) {
        const int n0[4] = {32 * g, 32 * g + 8, 32 * g + 16, 32 * g + 24};
        float acc[1][4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // tile_each's element order
                const int i = m0[0] + gid + (e / 2) * 8, n = n0[j] + 2 * tig + e % 2;
                acc[0][j][e] = i < L && n < dv ? orow[(tb + i) * a.o_ts + n] : 0.f;
            }
        tile_mma_grid(acc, m0, n0, m0[0] + 16, [&](int, int m, int kk) { return Ps[m * kLdT + kk]; },
                      [&](int kk, int n) { return Vs[kk * ldv + n]; });
#pragma unroll
        for (int j = 0; j < 4; ++j)
            tile_each(acc[0][j], m0[0], n0[j], [&](int i, int n, float x) {
                if (i < L && n < dv) orow[(tb + i) * a.o_ts + n] = x;
            });
    }
}

}  // namespace

cudaError_t launch_wy_split(const ChArgs& a, int state_warps, cudaStream_t stream) {
    const int ldk = a.dkp + 4, ldv = (a.dv + 31) / 32 * 32 + 8;
    const size_t carry_smem = sizeof(float) * size_t((a.dkp + kC) * kLdS + 2 * kC * ldk + 2 * kC * (a.dkp + 8) + 2 * kC);
    const size_t out_smem = sizeof(float) * size_t(kC * (kLdT + ldv));
    cudaError_t err = cudaFuncSetAttribute(wy_carry_kernel<8>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(carry_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(wy_carry_kernel<16>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(carry_smem));
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(wy_out_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(out_smem));
    if (err != cudaSuccess) return err;
    const dim3 carry_grid{unsigned(a.plan.n_seqs), unsigned(a.nv), unsigned((a.dv + kNs - 1) / kNs)};
    if (state_warps == 16) wy_carry_kernel<16><<<carry_grid, 16 * 32, carry_smem, stream>>>(a);
    else wy_carry_kernel<8><<<carry_grid, 8 * 32, carry_smem, stream>>>(a);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
    const dim3 out_grid{unsigned((a.max_len + kC - 1) / kC), unsigned(a.plan.n_seqs), unsigned(a.nv)};
    wy_out_kernel<<<out_grid, kThreads, out_smem, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail::wy
