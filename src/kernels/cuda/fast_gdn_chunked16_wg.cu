// GdnChunkVariant::F16x3Wg: F16x3's state pass (fast_gdn_chunked16.cu, wy_state16) on the warpgroup
// MMA. Same prep, same scratch rows, same chunks, same arithmetic (every product hi·hi + 2^-11·(hi·lo
// + lo·hi) of operands split under powers of two, S in f32 registers rounded so once a chunk), but
// the operands reach the tensor cores from shared memory through descriptors — no ldmatrix, no
// fragments in registers — where the mma.sync pass spends most of its issue slots and shared-memory
// bandwidth on ldmatrix (session 18's profile: HMMA 8 % of its instructions).
//
// A block per (sequence, value head, 32 state columns), 4 warpgroups, chunks in order:
//   wg 0: Vn = U − W·S        wg 1: Q̃·S, then O = Q̃·S + P·Vn
//   wg 2, 3: S ← e^Γlast·S + K̃ᵀ·Vn, rows 0–63 and 64–127 of S (in registers: the accumulator layout)
// Tiles in the 128-byte swizzle (wgmma_b_offset): W, Q̃, P K-major A ([64 rows][k]); K̃ as a
// transposed (M-major) A ([64 tokens][128 dk]: M = dk); S ([128 dk][64]) and Vn ([64 tokens][64]) as
// N-major B whose 64 columns are [hi 32 | lo 32], each with a twin [0 | hi 32] — so one m64n64k16
// of A's hi on the first gives hi·hi (columns 0–31) and hi·lo (32–63), and one of A's lo on the twin
// adds lo·hi to columns 32–63: the three products in one accumulator, lo·lo never computed.
// W, Q̃, K̃ and P come by cp.async from the scratch rows into their swizzled places (P and U a chunk
// ahead, W and Q̃ once W·S is done, K̃ once the S update is: wy_state16's order); each write that
// wgmma reads is followed by fence.proxy.async before the barrier that publishes it.
#include <cuda_fp16.h>

#include "kernels/cuda/fast_gdn_f16x3.cuh"
#include "kernels/cuda/fast_mma.cuh"
#include "kernels/cuda/fast_wgmma.cuh"

namespace tessera::cuda::fast::detail::f16x3 {

using namespace wy;

namespace {

constexpr int kThWg = 512;               // 16 warps: 4 warpgroups
constexpr int kRegion = 64 * 128;        // bytes: 64 rows of a 64-column swizzled region (f16)
// Shared memory, bytes from a 1024-aligned base.
constexpr int kOffW = 0;                 // [hi, lo] × [64][128] K-major (two regions each)
constexpr int kOffQ = kOffW + 4 * kRegion;
constexpr int kOffK = kOffQ + 4 * kRegion;   // [hi, lo] × [64 tokens][128 dk]
constexpr int kOffP = kOffK + 4 * kRegion;   // [2 buffers][hi, lo] × [64][64]
constexpr int kOffS = kOffP + 4 * kRegion;   // [128 dk][hi 32 | lo 32]
constexpr int kOffV = kOffS + 2 * kRegion;   // [64 tokens][hi 32 | lo 32]
constexpr int kOffS2 = kOffV + kRegion;      // [128 dk][0 | hi 32]: B for A's lo (its lo·hi lands by hi·lo)
constexpr int kOffV2 = kOffS2 + 2 * kRegion; // [64 tokens][0 | hi 32]
constexpr int kOffU = kOffV2 + kRegion;      // floats [2][64][kLdS] (also S's f32 rows for a padding sequence)
constexpr int kOffMeta = kOffU + 2 * kC * kLdS * 4;  // floats [2][8]
constexpr int kOffRed = kOffMeta + 16 * 4;           // uint32 [4]
constexpr int kSmem = kOffRed + 4 * 4 + 1024;        // + room to align the base to 1024
static_assert(2 * kC * kLdS >= 128 * kLdS, "a padding sequence's S (128 rows) fits U's buffers");

// Byte offset of the f16 pair at (row r, column j even) of a [rows][64] N-major tile.
__device__ inline int pair_offset(int r, int j, int rows) { return dev::wgmma_b_offset(r, j >> 3, rows) + (j & 7) * 2; }

__global__ void __launch_bounds__(kThWg, 1) wy_state16_wg_kernel(ChArgs a) {
    const int s = blockIdx.x, tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
    const int wg = warp / 4, wr = 16 * (warp % 4);  // warpgroup; this warp's first row of its 64-row tile
    const int64_t h = blockIdx.y;
    const int c0 = int(blockIdx.z) * kNs;
    const int dk = a.dk, dv = a.dv, dkq = (dk + 15) / 16 * 16;
    Seq sq;
    if (!seq_of(a, s, &sq)) return nan_columns(a, sq, h, c0, tid, kThWg);
    if (sq.n_wy == 0) return;
    const int64_t hk = a.tiled ? h % a.nk : h / (a.nv / a.nk);
    float* S = sq.slot >= 0 ? a.state + sq.slot * a.slot_stride + h * int64_t(dk) * dv : nullptr;
    const Row16 ro = row16(dkq, dv);

    extern __shared__ uint8_t smem_raw[];
    const uint32_t raw = dev::smem_addr(smem_raw), sb = (raw + 1023u) & ~1023u;
    uint8_t* base = smem_raw + (sb - raw);
    float* Ub = reinterpret_cast<float*>(base + kOffU);
    float* meta = reinterpret_cast<float*>(base + kOffMeta);
    uint32_t* red = reinterpret_cast<uint32_t*>(base + kOffRed);  // max |Vn| (2 chunks), max |S| (2 states)
    const uint32_t sW = sb + kOffW, sQ = sb + kOffQ, sK = sb + kOffK, sP = sb + kOffP, sS = sb + kOffS,
                   sV = sb + kOffV;
    constexpr int kB2 = kOffS2 - kOffS;  // from S's tile to its [0 | hi] twin (Vn's: the same distance)
    static_assert(kOffV2 - kOffV == kB2, "S's and Vn's [0 | hi] tiles sit equally far from their tiles");

    auto chunk_rows = [&](int64_t cs) { return int(sq.n_wy - cs < kC ? sq.n_wy - cs : kC); };
    auto rstride = [&] { return int64_t(a.nv) * a.rs; };  // floats from a token's scratch row to the next
    auto row0 = [&](int64_t cs) { return a.scratch + ((sq.t0 + cs) * a.nv + h) * a.rs; };
    // One split part (dkq halves from half offset off) of the chunk's 64 rows into a [64][128]
    // K-major tile at dst (rows past the chunk: zeros); a thread copies chunk tid % 16 of 2 rows.
    auto copy_part = [&](uint32_t dst, int64_t cs, int off) {
        const int L = chunk_rows(cs), c = tid & 15;
        if (c >= dkq / 8) return;  // zeros since the start
        const float* src = row0(cs) + off / 2 + 4 * c;
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const int l = (tid >> 4) + 32 * j;
            dev::cp_async16(dst + dev::wgmma_b_offset(l, c, kC), l < L ? src + l * rstride() : a.scratch, l < L);
        }
    };
    auto load_wq = [&](int64_t cs) {
        if (cs >= sq.n_wy) return;
        copy_part(sW, cs, ro.w);
        copy_part(sW + 2 * kRegion, cs, ro.w + dkq);
        copy_part(sQ, cs, ro.q);
        copy_part(sQ + 2 * kRegion, cs, ro.q + dkq);
    };
    auto load_k = [&](int64_t cs) {
        if (cs >= sq.n_wy) return;
        copy_part(sK, cs, ro.k);
        copy_part(sK + 2 * kRegion, cs, ro.k + dkq);
    };
    auto load_pu = [&](int64_t cs, int b) {  // P (hi, lo), U (this block's columns) and the scales into buffer b
        if (cs >= sq.n_wy) return;
        const float* r0 = row0(cs);
        const int L = chunk_rows(cs);
        {
            const int l = tid >> 3, c = tid & 7;  // a 16-byte chunk of P's hi and of its lo a thread
            const uint32_t dst = sP + b * 2 * kRegion + dev::wgmma_b_offset(l, c, kC);
            const float* src = r0 + l * rstride() + ro.p / 2 + 4 * c;
            dev::cp_async16(dst, l < L ? src : a.scratch, l < L);
            dev::cp_async16(dst + kRegion, l < L ? src + kC / 2 : a.scratch, l < L);
        }
        const int l = warp * 4 + lane / 8, p = lane % 8, col = c0 + 4 * p;
        const int nb = l < L && col < dv ? (dv - col < 4 ? dv - col : 4) * 4 : 0;  // bytes read, rest zero
        dev::cp_async16_n(dev::smem_addr(Ub + (b * kC + l) * kLdS + 4 * p),
                          nb ? r0 + l * rstride() + ro.u + col : a.scratch, nb);
        if (tid < 2) dev::cp_async16(dev::smem_addr(meta + 8 * b + 4 * tid), r0 + ro.meta + 4 * tid, true);
    };

    // The [0 | hi] tiles' zero halves, written once.
    for (int idx = tid; idx < 3 * kRegion / 16; idx += kThWg)
        *reinterpret_cast<uint4*>(base + kOffS2 + 16 * idx) = make_uint4(0u, 0u, 0u, 0u);
    // Columns of dk past dkq are never copied: zeros in W, Q̃, K̃ (hi and lo) from the start.
    for (int idx = tid; idx < 6 * kC * 16; idx += kThWg) {
        const int part = idx / (kC * 16), l = idx / 16 % kC, c = idx % 16;
        if (c < dkq / 8) continue;
        const int tile = part < 2 ? kOffW + part * 2 * kRegion : part < 4 ? kOffQ + (part - 2) * 2 * kRegion
                                                                           : kOffK + (part - 4) * 2 * kRegion;
        *reinterpret_cast<uint4*>(base + tile + dev::wgmma_b_offset(l, c, kC)) = make_uint4(0u, 0u, 0u, 0u);
    }

    // hi·hi + 2^-11·(hi·lo + lo·hi) of element (i, e) from the m64n64 accumulator.
    auto sum3 = [](const float (&d)[32], int i, int e) { return d[4 * i + e] + d[4 * (i + 4) + e] * kLoInv; };
    // D = A·B over n_k k-steps with both of A's halves: d = A_hi·[B_hi | B_lo] + A_lo·[0 | B_hi], so
    // columns 0–31 hold hi·hi and 32–63 hi·lo + lo·hi. TA 0: A K-major ([64][k] tiles a_hi, a_lo),
    // 1: M-major; B N-major at b ([k][64], rows_b rows), its [0 | hi] twin kB2 bytes further.
    auto mma3 = [&](auto ta, float (&d)[32], uint32_t a_hi, uint32_t a_lo, uint32_t b, int n_k, int a_lbo,
                    int rows_b) {
        constexpr int TA = decltype(ta)::value;
        auto desc_a = [&](uint32_t x, int kk) {
            return TA == 0 ? dev::wgmma_desc_sw128(x + (kk >> 2) * kRegion + (kk & 3) * 32)
                           : dev::wgmma_desc_sw128_mn(x + kk * 16 * 128, a_lbo);
        };
        dev::wgmma_fence();
#pragma unroll 4
        for (int kk = 0; kk < n_k; ++kk) {  // 4 at a time: 16 descriptors at once would crowd the registers
            const uint32_t bk = b + kk * 16 * 128;
            const uint64_t b_hl = dev::wgmma_desc_sw128_mn(bk, rows_b * 128);        // [B_hi | B_lo]
            const uint64_t b_0h = dev::wgmma_desc_sw128_mn(bk + kB2, rows_b * 128);  // [0 | B_hi]
            dev::wgmma_m64n64k16_ss_f16_t<TA, 1>(d, desc_a(a_hi, kk), b_hl, kk > 0);
            dev::wgmma_m64n64k16_ss_f16_t<TA, 1>(d, desc_a(a_lo, kk), b_0h, 1);
        }
        dev::wgmma_commit();
        dev::wgmma_wait<0>();
        dev::wgmma_fence_operands(d);
    };
    using KMajor = std::integral_constant<int, 0>;
    using MMajor = std::integral_constant<int, 1>;

    // The chunk loop, one instance a role (so each holds only its own values in registers): 0 W·S →
    // Vn, 1 Q̃·S + P·Vn → O, 2 the S update (wg 2 and 3). Every role takes every barrier and copy.
    // The accumulator layout of a 64-row tile: element (i, e) of a thread is row wr + g + 8·(e/2),
    // column 8i + 2t + e%2 (i < 4: the 32 columns; i + 4 of the same tile: their lo products).
    auto run = [&](auto role) {
        constexpr int ROLE = decltype(role)::value;
        const int srow0 = 64 * (wg - 2) + wr + g;  // ROLE 2: this thread's first row of S
        float Sr[4][4];                             // ROLE 2: S (rows srow0 + 8·(e/2))
        if constexpr (ROLE == 2) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = srow0 + 8 * (e / 2), col = c0 + 8 * i + 2 * t + e % 2;
                    Sr[i][e] = S && r < dk && col < dv ? S[int64_t(r) * dv + col] : 0.f;
                }
        }
        auto s_max = [&] {
            uint32_t m = 0u;
            if constexpr (ROLE == 2) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) m = max(m, abs_bits(Sr[i][e]));
            }
            return m;
        };
        // Writes S·2^eS split into its N-major tile (after the barrier that ends its reads and
        // publishes max |S|), fenced for wgmma; returns 2^-eS.
        auto round_s = [&](const uint32_t* smax) {
            const int es = tile_exp(*smax);
            if constexpr (ROLE == 2) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int r = srow0 + 8 * hf, j = 8 * i + 2 * t;
                        uint32_t hi, lo;
                        split16(Sr[i][2 * hf], Sr[i][2 * hf + 1], pow2(es), hi, lo);
                        *reinterpret_cast<uint32_t*>(base + kOffS + pair_offset(r, j, 128)) = hi;
                        *reinterpret_cast<uint32_t*>(base + kOffS + pair_offset(r, kNs + j, 128)) = lo;
                        *reinterpret_cast<uint32_t*>(base + kOffS2 + pair_offset(r, kNs + j, 128)) = hi;
                    }
                dev::fence_proxy_async_smem();
            }
            return pow2(-es);
        };

        // Copy groups as wy_state16's: P/U(0), W/Q̃(0), K̃(0), P/U(1); per chunk W/Q̃(c + 1) once W·S
        // is done, K̃(c + 1) and P/U(c + 2) once the S update is.
        load_pu(0, 0);
        cp_async_commit();
        load_wq(0);
        cp_async_commit();
        load_k(0);
        cp_async_commit();
        load_pu(kC, 1);
        cp_async_commit();
        if (tid < 4) red[tid] = 0u;
        __syncthreads();
        max_into(&red[2], s_max());
        __syncthreads();
        float inv_s = round_s(&red[2]);  // 2^-eS of the state the chunk starts from

        int b = 0;
        for (int64_t cs = 0, ci = 0; cs < sq.n_wy; cs += kC, ++ci, b ^= 1) {
            const int64_t tb = sq.t0 + cs;
            const int L = chunk_rows(cs);
            cp_async_wait<2>();  // W, Q̃, P, U and the scales of this chunk
            dev::fence_proxy_async_smem();
            __syncthreads();     // ... and S's tile
            if (tid == 0) red[(ci + 1) & 1] = red[2 + ((ci + 1) & 1)] = 0u;  // next chunk's max |Vn|, new max |S|
            const float* sc = meta + 8 * b;

            // Phase 1: W·S (role 0) and Q̃·S (role 1).
            float vo[4][4];  // role 0: Vn; role 1: o's first part e^Γ ⊙ (Q·S)
            uint32_t mv = 0u;
            if constexpr (ROLE < 2) {
                float d[32];
                const uint32_t x = ROLE == 0 ? sW : sQ;
                mma3(KMajor{}, d, x, x + 2 * kRegion, sS, 8, 0, 128);
                const float f = sc[ROLE == 0 ? kMxW : kMxQ] * inv_s;
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const float v = sum3(d, i, e) * f;
                        if constexpr (ROLE == 0) {
                            vo[i][e] = Ub[(b * kC + wr + g + 8 * (e / 2)) * kLdS + 8 * i + 2 * t + e % 2] - v;
                            mv = max(mv, abs_bits(vo[i][e]));
                        } else {
                            vo[i][e] = v;
                        }
                    }
            }
            max_into(&red[ci & 1], mv);
            __syncthreads();  // max |Vn|; every read of W, Q̃ and S's tile is done
            load_wq(cs + kC);
            cp_async_commit();
            const int ev = tile_exp(red[ci & 1]);
            const float inv_v = pow2(-ev);
            if constexpr (ROLE == 0) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int hf = 0; hf < 2; ++hf) {
                        const int r = wr + g + 8 * hf, j = 8 * i + 2 * t;
                        uint32_t hi, lo;
                        split16(vo[i][2 * hf], vo[i][2 * hf + 1], pow2(ev), hi, lo);
                        *reinterpret_cast<uint32_t*>(base + kOffV + pair_offset(r, j, kC)) = hi;
                        *reinterpret_cast<uint32_t*>(base + kOffV + pair_offset(r, kNs + j, kC)) = lo;
                        *reinterpret_cast<uint32_t*>(base + kOffV2 + pair_offset(r, kNs + j, kC)) = hi;
                    }
            }
            cp_async_wait<2>();  // K̃ of this chunk
            dev::fence_proxy_async_smem();
            __syncthreads();     // ... and Vn's tile

            if constexpr (ROLE == 1) {  // O = Q̃·S + P·Vn
                float d[32];
                const uint32_t p = sP + b * 2 * kRegion;
                mma3(KMajor{}, d, p, p + kRegion, sV, kC / 16, 0, kC);
                const float fp = sc[kMxP] * inv_v;
#pragma unroll
                for (int hf = 0; hf < 2; ++hf) {
                    const int r = wr + g + 8 * hf;
                    if (r >= L) continue;
                    float* orow = a.o + (tb + r) * a.o_ts + h * a.o_hs + c0;
#pragma unroll
                    for (int i = 0; i < 4; ++i)
#pragma unroll
                        for (int e2 = 0; e2 < 2; ++e2) {
                            const int j = 8 * i + 2 * t + e2, e = 2 * hf + e2;
                            if (c0 + j < dv) orow[j] = vo[i][e] + sum3(d, i, e) * fp;
                        }
                }
            } else if constexpr (ROLE == 2) {  // S ← e^Γlast·S + K̃ᵀ·Vn, this warpgroup's 64 rows of S
                float d[32];
                const uint32_t k = sK + (wg - 2) * kRegion;
                mma3(MMajor{}, d, k, k + 2 * kRegion, sV, kC / 16, kRegion, kC);
                const float fk = sc[kMxK] * inv_v, last = sc[4];
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e) Sr[i][e] = last * Sr[i][e] + sum3(d, i, e) * fk;
            }
            max_into(&red[2 + ((ci + 1) & 1)], s_max());
            __syncthreads();  // max |S|; every read of K̃, P, U, Vn's tile and the scales is done
            load_k(cs + kC);
            cp_async_commit();
            load_pu(cs + 2 * kC, b);
            cp_async_commit();
            inv_s = round_s(&red[2 + ((ci + 1) & 1)]);
        }
        cp_async_wait<0>();  // (only empty groups remain)
        if (!S) {
            // A padding sequence keeps no state (see wy_state16): its last one-token chunk is
            // stepped here from S in f32 in U's buffers ([128][kLdS]); outputs only.
            if (sq.n_wy == sq.n) return;
            __syncthreads();  // every read of U's buffers is done
            float* Ss = Ub;
            if constexpr (ROLE == 2) {
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        Ss[(srow0 + 8 * (e / 2)) * kLdS + 8 * i + 2 * t + e % 2] = Sr[i][e];
            }
            __syncthreads();
            if (warp == 0) step_padding_last(a, sq, h, hk, c0, Ss, lane);
            return;
        }
        if constexpr (ROLE == 2) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int r = srow0 + 8 * (e / 2), col = c0 + 8 * i + 2 * t + e % 2;
                    if (r < dk && col < dv) S[int64_t(r) * dv + col] = Sr[i][e];
                }
        }
    };
    if (wg == 0) run(std::integral_constant<int, 0>{});
    else if (wg == 1) run(std::integral_constant<int, 1>{});
    else run(std::integral_constant<int, 2>{});
}

}  // namespace

cudaError_t launch_wy_state16_wg(const ChArgs& a, cudaStream_t stream) {
    const cudaError_t err =
        cudaFuncSetAttribute(wy_state16_wg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
    if (err != cudaSuccess) return err;
    const dim3 grid{unsigned(a.plan.n_seqs), unsigned(a.nv), unsigned((a.dv + kNs - 1) / kNs)};
    wy_state16_wg_kernel<<<grid, kThWg, kSmem, stream>>>(a);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail::f16x3
