// The fast MoE's large tiles (prefill): tokens grouped per expert in tiles of BM (32 or 64) rows,
// mma.sync m16n8k16 bf16 → f32 on the tensor cores. A = the tile's activation rows (bf16, gathered
// into grouped order first), B = the expert's Int4 rows dequantized in registers (scale·code + bias
// rounded to bf16) from codes staged in shared memory; a two-stage cp.async pipeline over k-tiles
// of 64. Warp tile 32×32 (2 m16 × 4 n8); block tile BM × 64 output features. Each matrix is read in
// its own order, row-major or 16-row tiles (packed_weight.h's PackedLayout; gate and up may differ).
//   gather:  xg [rows, H] bf16 = x[token of row] (grouped order)
//   gate_up: act [rows, I] bf16 = silu(xg·gateᵀ) ⊙ (xg·upᵀ)  (both matrices in one block)
//   down:    out [rows, H] f32 = act·downᵀ; then combine (fast_moe_experts.cu) sums slots in order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

#include "kernels/cuda/fast_moe.h"

namespace tessera::cuda::fast::detail {

namespace {

constexpr int kBN = 64;           // output features per block
constexpr int kBK = 64;           // k per pipeline stage (two Int4 chunks of 32)
constexpr int kARow = kBK + 8;    // bf16 per A row in shared memory (conflict-free ldmatrix)
constexpr int kBRowWords = 12;    // 32 code bytes + 16 of padding (conflict-free fragment reads)

__device__ __forceinline__ float half_bits(uint16_t h) { return __half2float(__ushort_as_half(h)); }

__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    const unsigned d = unsigned(__cvta_generic_to_shared(dst));
    const int n = valid ? 16 : 0;  // 0: zero-fill
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    const unsigned a = unsigned(__cvta_generic_to_shared(p));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two columns (k, k + 1: the low and high nibble of `byte`) dequantized to a bf16 pair.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t byte, float s, float b) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(fmaf(s, float(byte & 15u), b), fmaf(s, float(byte >> 4), b));
    return *reinterpret_cast<const uint32_t*>(&v);
}

template <int BM, int NMAT>
struct Smem {
    __nv_bfloat16 a[2][BM][kARow];
    uint32_t b[2][NMAT][kBN][kBRowWords];
    float scale[2][NMAT][kBN][2], bias[2][NMAT][kBN][2];  // per 32-column half of the k-tile
};

// out = A · Bᵀ for one item (rows r0 .. r0 + n of A) and kBN output features from n0. NMAT = 2:
// B = gate, up of the item's expert, the epilogue writes bf16 silu(g)·u to act; NMAT = 1: B = down,
// f32 to out. A [rows, K] bf16 (row stride K); outputs [rows, N] (row stride N).
template <int BM, int NMAT>
__global__ void __launch_bounds__(BM / 32 * 2 * 32)
    tile_kernel(const __nv_bfloat16* __restrict__ A, int64_t K, int64_t N, int E, const PackedMatrix* __restrict__ m0,
                const PackedMatrix* __restrict__ m1, MoeGrouping g, __nv_bfloat16* __restrict__ act,
                float* __restrict__ out) {
    constexpr int kThreads = BM / 32 * 2 * 32;
    __shared__ __align__(16) Smem<BM, NMAT> sm;
    const int item = int(blockIdx.x);
    if (item >= *g.n_items) return;
    const int e = g.item_expert[item], r0 = g.item_row0[item], n_rows = g.item_rows[item];
    if (e < 0 || e >= E) return;
    const int64_t n0 = int64_t(blockIdx.y) * kBN;
    PackedMatrix mat[NMAT];
    mat[0] = m0[e];
    if constexpr (NMAT == 2) mat[1] = m1[e];

    const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
    const int wm = warp / 2, wn = warp % 2;  // warp tile: rows wm·32.., features wn·32..
    const int64_t KT = (K + kBK - 1) / kBK;

    auto load = [&](int64_t kt, int st) {
        const int64_t k0 = kt * kBK;
        for (int i = tid; i < BM * (kBK / 8); i += kThreads) {  // A: 8 bf16 per copy
            const int r = i / (kBK / 8), c = i % (kBK / 8);
            const bool ok = r < n_rows && k0 + c * 8 < K;
            const __nv_bfloat16* src = ok ? A + int64_t(r0 + r) * K + k0 + c * 8 : A;
            cp_async16(&sm.a[st][r][c * 8], src, ok);
        }
#pragma unroll
        for (int m = 0; m < NMAT; ++m) {
            // Either order: codes at code_row(row) + chunk(2kt + c) (a k-tile of 64 is half a row of a
            // 128-column tile), scales (biases) at scale_row(row) + scale_group(group).
            const PackedMatrix& w = mat[m];
            const PackedLayout lay = packed_layout(w);
            const int lg_group = __ffs(w.group) - 1;  // G is a power of two
            for (int i = tid; i < kBN * 2; i += kThreads) {  // codes: two 16-byte chunks per row
                const int r = i / 2, c = i % 2;
                const bool ok = n0 + r < N && k0 + c * 32 < K;
                const uint8_t* src = ok ? w.codes + lay.code_row(n0 + r) + lay.chunk(2 * kt + c) : w.codes;
                cp_async16(&sm.b[st][m][r][c * 4], src, ok);
                float s = 0.f, b = 0.f;  // out of range: the weights dequantize to 0
                if (ok) {
                    const int64_t gi = lay.scale_row(n0 + r) + lay.scale_group((k0 + c * 32) >> lg_group);
                    s = half_bits(w.scales[gi]);
                    b = w.biases ? half_bits(w.biases[gi]) : -8.f * s;
                }
                sm.scale[st][m][r][c] = s;
                sm.bias[st][m][r][c] = b;
            }
        }
    };

    float acc[NMAT][2][4][4];
#pragma unroll
    for (int m = 0; m < NMAT; ++m)
#pragma unroll
        for (int mi = 0; mi < 2; ++mi)
#pragma unroll
            for (int ni = 0; ni < 4; ++ni)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[m][mi][ni][q] = 0.f;

    const int gq = lane >> 2, tq = lane & 3;
    load(0, 0);
    cp_async_commit();
    for (int64_t kt = 0; kt < KT; ++kt) {
        const int st = int(kt & 1);
        if (kt + 1 < KT) {
            load(kt + 1, st ^ 1);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kBK; kk += 16) {
            uint32_t a[2][4];
#pragma unroll
            for (int mi = 0; mi < 2; ++mi)
                ldmatrix_x4(a[mi], &sm.a[st][wm * 32 + mi * 16 + (lane & 15)][kk + (lane >> 4) * 8]);
#pragma unroll
            for (int m = 0; m < NMAT; ++m)
#pragma unroll
                for (int ni = 0; ni < 4; ++ni) {
                    const int n = wn * 32 + ni * 8 + gq;
                    const uint32_t w0 = sm.b[st][m][n][kk / 8], w1 = sm.b[st][m][n][kk / 8 + 1];
                    const float s = sm.scale[st][m][n][kk / 32], b = sm.bias[st][m][n][kk / 32];
                    // b0: columns kk + 2tq, +1 (byte tq of word kk/8); b1: columns kk + 8 + 2tq, +1.
                    const uint32_t b0 = dequant_pair((w0 >> (8 * tq)) & 0xffu, s, b);
                    const uint32_t b1 = dequant_pair((w1 >> (8 * tq)) & 0xffu, s, b);
#pragma unroll
                    for (int mi = 0; mi < 2; ++mi) mma_bf16(acc[m][mi][ni], a[mi], b0, b1);
                }
        }
        __syncthreads();  // the stage is refilled next iteration
    }

    // Epilogue. acc[.][mi][ni]: rows wm·32 + mi·16 + gq (+8), features wn·32 + ni·8 + 2tq (+1).
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int r = wm * 32 + mi * 16 + gq + half * 8;
            if (r >= n_rows) continue;
            const int64_t row = r0 + r;
#pragma unroll
            for (int ni = 0; ni < 4; ++ni) {
                const int64_t col = n0 + wn * 32 + ni * 8 + 2 * tq;
                if (col >= N) continue;  // N is even: col + 1 < N too
                const float v0 = acc[0][mi][ni][2 * half], v1 = acc[0][mi][ni][2 * half + 1];
                if constexpr (NMAT == 2) {
                    const float u0 = acc[NMAT - 1][mi][ni][2 * half], u1 = acc[NMAT - 1][mi][ni][2 * half + 1];
                    const __nv_bfloat162 p =
                        __floats2bfloat162_rn(v0 / (1.f + expf(-v0)) * u0, v1 / (1.f + expf(-v1)) * u1);
                    *reinterpret_cast<__nv_bfloat162*>(act + row * N + col) = p;
                } else {
                    *reinterpret_cast<float2*>(out + row * N + col) = make_float2(v0, v1);
                }
            }
        }
}

// xg[r] = bf16(x[perm[r] / k]) for every grouped row r with a slot.
__global__ void __launch_bounds__(256)
    gather_kernel(__nv_bfloat16* __restrict__ xg, const float* __restrict__ x, int64_t ldx, int64_t H,
                  const int32_t* __restrict__ perm, int k) {
    const int64_t r = blockIdx.x;
    const int s = perm[r];
    if (s < 0) return;
    const float* src = x + int64_t(s / k) * ldx;
    __nv_bfloat162* dst = reinterpret_cast<__nv_bfloat162*>(xg + r * H);
    for (int64_t c = threadIdx.x; c < H / 2; c += blockDim.x)
        dst[c] = __floats2bfloat162_rn(__ldg(src + 2 * c), __ldg(src + 2 * c + 1));
}

}  // namespace

cudaError_t launch_moe_gather_bf16(void* xg, const float* x, int64_t ldx, int64_t T, int64_t H, int k,
                                   const MoeGrouping& g, cudaStream_t stream) {
    gather_kernel<<<unsigned(T * k), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(xg), x, ldx, H, g.perm, k);
    return cudaGetLastError();
}

cudaError_t launch_moe_tile_gate_up(void* act, const void* xg, const MoePackedExperts& w, const MoeGrouping& g,
                                    int tile_rows, cudaStream_t stream) {
    const dim3 grid(unsigned(g.max_items), unsigned((w.I + kBN - 1) / kBN));
    auto* a = static_cast<const __nv_bfloat16*>(xg);
    auto* o = static_cast<__nv_bfloat16*>(act);
    if (tile_rows == 32)
        tile_kernel<32, 2><<<grid, 64, 0, stream>>>(a, w.H, w.I, w.E, w.gate, w.up, g, o, nullptr);
    else
        tile_kernel<64, 2><<<grid, 128, 0, stream>>>(a, w.H, w.I, w.E, w.gate, w.up, g, o, nullptr);
    return cudaGetLastError();
}

cudaError_t launch_moe_tile_down(float* out, const void* act, const MoePackedExperts& w, const MoeGrouping& g,
                                 int tile_rows, cudaStream_t stream) {
    const dim3 grid(unsigned(g.max_items), unsigned((w.H + kBN - 1) / kBN));
    auto* a = static_cast<const __nv_bfloat16*>(act);
    if (tile_rows == 32)
        tile_kernel<32, 1><<<grid, 64, 0, stream>>>(a, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out);
    else
        tile_kernel<64, 1><<<grid, 128, 0, stream>>>(a, w.I, w.H, w.E, w.down, nullptr, g, nullptr, out);
    return cudaGetLastError();
}

}  // namespace tessera::cuda::fast::detail
