// Reference MoE kernels: the router (a warp per token row) and the experts (a warp per output
// element: gate/up dot products + SwiGLU per (token, slot), then the down dot products summed
// over the token's slots in order). Every reduction has a fixed shape (lane-strided partial sums,
// then an xor-butterfly across the warp), so the results do not depend on scheduling.
#include "kernels/cuda/ref_moe.h"

#include <cmath>

#include "core/half.h"

namespace tessera::cuda::ref::detail {

namespace {

constexpr int kWarp = 32;
constexpr int kWarpsPerBlock = 8;  // expert kernels: 8 output elements per block
constexpr unsigned kFull = 0xffffffffu;

__device__ float quiet_nan() { return __int_as_float(0x7fc00000); }

// ---- router --------------------------------------------------------------------------------

// The CPU's ranking (kernels/cpu/gating.cpp): larger first, NaN above everything, equal values
// by the lower index. A total order, so the warp's reduction finds the same winner in any order.
__device__ bool ranks_before(float a, int ia, float b, int ib) {
    const bool na = isnan(a), nb = isnan(b);
    if (na != nb) return na;
    if (!na && a != b) return a > b;
    return ia < ib;
}

// One warp per row t of logits [T, E]; p [E] in dynamic shared memory.
__global__ void moe_topk_kernel(const float* logits, int64_t E, int k, bool renormalize, bool shared, int32_t* ids,
                                float* weights) {
    extern __shared__ float p[];  // [E]
    const int64_t t = blockIdx.x;
    const int lane = int(threadIdx.x);
    const int slots = k + (shared ? 1 : 0);
    const float* l = logits + t * (E + (shared ? 1 : 0));

    // m = max over the row as the CPU's sequential std::max from -inf computes it (NaNs skipped).
    float m = -INFINITY;
    for (int64_t i = lane; i < E; i += kWarp) m = m < l[i] ? l[i] : m;
    for (int off = kWarp / 2; off > 0; off /= 2) {
        const float o = __shfl_xor_sync(kFull, m, off);
        m = m < o ? o : m;
    }
    // exp in double rounded to f32: the correctly rounded value, as the CPU's expf gives.
    for (int64_t i = lane; i < E; i += kWarp) p[i] = float(exp(double(l[i] - m)));
    __syncwarp();
    double sum = 0.0;  // in expert order, as the CPU sums
    if (lane == 0)
        for (int64_t i = 0; i < E; ++i) sum += p[i];
    const float inv = float(1.0 / __shfl_sync(kFull, sum, 0));
    for (int64_t i = lane; i < E; i += kWarp) p[i] *= inv;
    __syncwarp();

    // Top-k by k selections: pass j takes the best of the experts ranking after pass j-1's.
    int32_t* id = ids + t * slots;
    float* w = weights + t * slots;
    float prev_v = 0.f, wsum = 0.f;
    int prev_i = -1;
    for (int j = 0; j < k; ++j) {
        float best_v = 0.f;
        int best_i = -1;
        for (int64_t i = lane; i < E; i += kWarp) {
            if (prev_i >= 0 && !ranks_before(prev_v, prev_i, p[i], int(i))) continue;
            if (best_i < 0 || ranks_before(p[i], int(i), best_v, best_i)) {
                best_v = p[i];
                best_i = int(i);
            }
        }
        for (int off = kWarp / 2; off > 0; off /= 2) {
            const float ov = __shfl_xor_sync(kFull, best_v, off);
            const int oi = __shfl_xor_sync(kFull, best_i, off);
            if (oi >= 0 && (best_i < 0 || ranks_before(ov, oi, best_v, best_i))) {
                best_v = ov;
                best_i = oi;
            }
        }
        if (lane == 0) {
            id[j] = best_i;
            w[j] = best_v;
        }
        wsum += best_v;  // in j order, as the CPU sums
        prev_v = best_v;
        prev_i = best_i;
    }
    if (renormalize && lane == 0)
        for (int j = 0; j < k; ++j) w[j] /= wsum;
    if (shared && lane == 0) {  // σ(g) as the CPU computes it (its expf correctly rounded)
        id[k] = int32_t(E);
        w[k] = 1.f / (1.f + float(exp(-double(l[E]))));
    }
}

// ---- experts -------------------------------------------------------------------------------

__device__ float to_f32(float v) { return v; }
__device__ float to_f32(uint16_t v) { return bf16_to_f32(v); }

// Σ_{c<n} w[c]·v[c] over one warp: lane-strided f32 partial sums, then an xor-butterfly (every
// lane ends with the same bits: each step adds the same two values, a + b or b + a).
template <typename W>
__device__ float warp_dot(const W* w, const float* v, int64_t n, int lane) {
    float acc = 0.f;
    for (int64_t c = lane; c < n; c += kWarp) acc = fmaf(to_f32(w[c]), v[c], acc);
    for (int off = kWarp / 2; off > 0; off /= 2) acc += __shfl_xor_sync(kFull, acc, off);
    return acc;
}

// act[s, i] = silu(gate_e[i]·x_t) · (up_e[i]·x_t) for slot s = t·k + j (e = ids[s]).
// Grid (T·k, ceil(I / 8)); warp w of block (s, b) computes i = 8b + w.
template <typename W>
__global__ void moe_gate_up_kernel(float* act, const float* x, int64_t ldx, int64_t H, int64_t I, int E,
                                   const W* const* gate, const W* const* up, const int32_t* ids, int k) {
    const int64_t s = blockIdx.x;
    const int64_t i = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (i >= I) return;  // the whole warp leaves together
    const int e = ids[s];
    float out = quiet_nan();
    if (e >= 0 && e < E) {
        const float* xt = x + (s / k) * ldx;
        const float g = warp_dot(gate[e] + i * H, xt, H, lane);
        const float u = warp_dot(up[e] + i * H, xt, H, lane);
        out = g / (1.f + expf(-g)) * u;  // cpu::swiglu
    }
    if (lane == 0) act[s * I + i] = out;
}

// y[t, h] = Σ_{j<k} weights[t, j] · (down_e[h]·act[t·k + j]), j ascending.
// Grid (T, ceil(H / 8)); warp w of block (t, b) computes h = 8b + w.
template <typename W>
__global__ void moe_down_kernel(float* y, int64_t ldy, const float* act, int64_t H, int64_t I, int E,
                                const W* const* down, const int32_t* ids, const float* weights, int k) {
    const int64_t t = blockIdx.x;
    const int64_t h = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / kWarp;
    const int lane = int(threadIdx.x % kWarp);
    if (h >= H) return;
    float acc = 0.f;
    for (int j = 0; j < k; ++j) {
        const int64_t s = t * k + j;
        const int e = ids[s];
        const float o = (e >= 0 && e < E) ? warp_dot(down[e] + h * I, act + s * I, I, lane) : quiet_nan();
        const float wo = weights[s] * o;
        acc = j == 0 ? wo : acc + wo;
    }
    if (lane == 0) y[t * ldy + h] = acc;
}

template <typename W>
cudaError_t launch_experts(float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T, int64_t H, int64_t I,
                           int E, const void* const* gate, const void* const* up, const void* const* down,
                           const int32_t* ids, const float* weights, int k, float* act, cudaStream_t stream) {
    constexpr int threads = kWarp * kWarpsPerBlock;
    if (I > 0) {  // I = 0: no activations, every down product is an empty sum
        const dim3 gu_grid(unsigned(T * k), unsigned((I + kWarpsPerBlock - 1) / kWarpsPerBlock));
        moe_gate_up_kernel<W><<<gu_grid, threads, 0, stream>>>(act, x, ldx, H, I, E,
                                                               reinterpret_cast<const W* const*>(gate),
                                                               reinterpret_cast<const W* const*>(up), ids, k);
        if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    }
    const dim3 down_grid(unsigned(T), unsigned((H + kWarpsPerBlock - 1) / kWarpsPerBlock));
    moe_down_kernel<W><<<down_grid, threads, 0, stream>>>(y, ldy, act, H, I, E,
                                                          reinterpret_cast<const W* const*>(down), ids, weights, k);
    return cudaGetLastError();
}

}  // namespace

cudaError_t launch_moe_topk(const float* logits, int64_t T, int64_t E, int k, bool renormalize, bool shared,
                            int32_t* ids, float* weights, cudaStream_t stream) {
    moe_topk_kernel<<<unsigned(T), kWarp, size_t(E) * sizeof(float), stream>>>(logits, E, k, renormalize, shared,
                                                                                 ids, weights);
    return cudaGetLastError();
}

cudaError_t launch_moe_experts(bool weight_bf16, float* y, int64_t ldy, const float* x, int64_t ldx, int64_t T,
                               int64_t H, int64_t I, int E, const void* const* gate, const void* const* up,
                               const void* const* down, const int32_t* ids, const float* weights, int k,
                               float* scratch, cudaStream_t stream) {
    return weight_bf16 ? launch_experts<uint16_t>(y, ldy, x, ldx, T, H, I, E, gate, up, down, ids, weights, k,
                                                  scratch, stream)
                       : launch_experts<float>(y, ldy, x, ldx, T, H, I, E, gate, up, down, ids, weights, k, scratch,
                                               stream);
}

}  // namespace tessera::cuda::ref::detail
