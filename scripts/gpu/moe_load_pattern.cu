// Runs ON the GPU machine, standalone (no project code): the MoE mid gate+up kernel's weight loads
// alone (fast_moe_mid.cu's grid, warps and ring; no math) on the flagship's experts (256 × 2 ×
// 512×2048 Int4, 222 of them selected, as at 64 tokens top-8), row-major against 16-row tiles,
// against a flat stream of the same bytes — the floor the layout sets (docs/cuda-rounds.md, seventeenth
// round: 90.3 / 75.6 / 71.6 µs). Also longer blocks (RPW row tiles a warp) and persistent blocks.
//   nvcc -O3 -arch=sm_90a -std=c++17 scripts/gpu/moe_load_pattern.cu -o /tmp/mlp && /tmp/mlp
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#define CK(x)                                                                  \
    do {                                                                       \
        const cudaError_t e_ = (x);                                            \
        if (e_ != cudaSuccess) {                                               \
            std::printf("%s: %s\n", #x, cudaGetErrorString(e_));               \
            return 1;                                                          \
        }                                                                      \
    } while (0)

namespace {

__device__ __forceinline__ uint4 load_stream(const uint8_t* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

constexpr int E = 256, N = 512, K = 2048, NKT = K / 128;  // experts, rows (I), columns (H), k-tiles
constexpr size_t kCodes = size_t(N) * K / 2, kScales = size_t(N) * (K / 32) * 2, kMat = kCodes + kScales;

struct Tile {
    uint4 q0, q1;
    uint32_t s;
};
// Lane (g, t)'s share of k-tile kt of row tile rt. LAYOUT 0: row-major (rows g, g + 8, chunk
// 4kt + t: 16 runs of 64 bytes a warp); 1: tiles (a warp's k-tile is 1 KB contiguous).
template <int LAYOUT>
__device__ __forceinline__ Tile load(const uint8_t* m, int rt, int kt, int lane) {
    const int g = lane >> 2, t = lane & 3;
    Tile x;
    if (LAYOUT == 0) {
        const uint8_t* r = m + size_t(16 * rt + g) * (K / 2) + 16 * (4 * kt + t);
        x.q0 = load_stream(r);
        x.q1 = load_stream(r + 8 * (K / 2));
    } else {
        const uint8_t* r = m + (size_t(rt) * NKT + kt) * 1024 + 32 * lane;
        x.q0 = load_stream(r);
        x.q1 = load_stream(r + 16);
    }
    const uint16_t* sc = reinterpret_cast<const uint16_t*>(m + kCodes);
    const int gi = 4 * kt + t;
    x.s = uint32_t(__ldg(sc + (16 * rt + g) * (K / 32) + gi)) |
          uint32_t(__ldg(sc + (16 * rt + g + 8) * (K / 32) + gi)) << 16;
    return x;
}
__device__ __forceinline__ uint32_t fold(const Tile& t) {
    return t.q0.x ^ t.q0.y ^ t.q0.z ^ t.q0.w ^ t.q1.x ^ t.q1.y ^ t.q1.z ^ t.q1.w ^ t.s;
}

// The warp's nv tiles through a ring of U: each slot refilled by next(slot, v) as soon as consumed.
template <int U, typename Next>
__device__ __forceinline__ void ring(int nv, Next next, uint32_t* sink) {
    Tile tl[U];
#pragma unroll
    for (int u = 0; u < U; ++u) next(tl[u], u);
    uint32_t acc = 0;
    for (int v0 = 0; v0 < nv; v0 += U) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (v0 + u >= nv) break;
            acc ^= fold(tl[u]);
            next(tl[u], v0 + u + U);
        }
    }
    if (acc == 0x12345678u) sink[0] = acc;  // never: keeps the loads
}

// A block an (item, 4·RPW row tiles of gate and of up): warps 0–3 gate's, 4–7 up's; a ring of U.
template <int U, int RPW, int LAYOUT>
__global__ void __launch_bounds__(256, U <= 3 ? 3 : 2)
    blocks(const uint8_t* __restrict__ w, const int* __restrict__ expert, uint32_t* sink) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rt = warp % 4, mat = warp / 4;
    const uint8_t* m = w + (size_t(expert[blockIdx.x]) * 2 + mat) * kMat;
    const int tile0 = blockIdx.y * 4 * RPW + rt, nv = RPW * NKT;
    int lr = 0, lkt = 0;
    auto next = [&](Tile& s, int v) {
        if (v < nv) s = load<LAYOUT>(m, tile0 + 4 * lr, lkt, lane);
        if (++lkt == NKT) lkt = 0, ++lr;
    };
    ring<U>(nv, next, sink);
}

// Persistent: a grid of SMs × blocks, each walking the (item, row-tile group) units strided.
template <int U, int LAYOUT>
__global__ void __launch_bounds__(256, 3)
    persistent(const uint8_t* __restrict__ w, const int* __restrict__ expert, int n_units, uint32_t* sink) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rt = warp % 4, mat = warp / 4;
    const int nu = (n_units - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x), nv = nu * NKT;
    int lu = 0, lkt = 0;
    auto next = [&](Tile& s, int v) {
        if (v < nv) {
            const int unit = blockIdx.x + lu * gridDim.x;
            const uint8_t* m = w + (size_t(expert[unit / 8]) * 2 + mat) * kMat;
            s = load<LAYOUT>(m, (unit % 8) * 4 + rt, lkt, lane);
        }
        if (++lkt == NKT) lkt = 0, ++lu;
    };
    ring<U>(nv, next, sink);
}

__global__ void flat(const uint8_t* __restrict__ p, size_t n16, uint32_t* sink) {
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
        const uint4 v = load_stream(p + 16 * i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

}  // namespace

int main() {
    const size_t total = size_t(E) * 2 * kMat;
    const int items = 222;
    uint8_t *w = nullptr, *flush = nullptr;
    int* expert = nullptr;
    uint32_t* sink = nullptr;
    CK(cudaMalloc(&w, total));
    CK(cudaMemset(w, 1, total));
    CK(cudaMalloc(&flush, 256 << 20));
    CK(cudaMalloc(&sink, 4));
    std::vector<int> perm(E);
    for (int i = 0; i < E; ++i) perm[size_t(i)] = i;
    std::mt19937 rng(1);
    std::shuffle(perm.begin(), perm.end(), rng);
    CK(cudaMalloc(&expert, E * 4));
    CK(cudaMemcpy(expert, perm.data(), E * 4, cudaMemcpyHostToDevice));
    const double bytes = double(items) * 2 * kMat;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    auto time = [&](const char* name, auto launch) {  // median of 20 after 5, L2 flushed before each
        std::vector<float> ts;
        for (int r = 0; r < 25; ++r) {
            cudaMemsetAsync(flush, r, 256 << 20);
            cudaEventRecord(a);
            launch();
            cudaEventRecord(b);
            cudaEventSynchronize(b);
            float ms = 0.f;
            cudaEventElapsedTime(&ms, a, b);
            if (r >= 5) ts.push_back(ms);
        }
        std::sort(ts.begin(), ts.end());
        const float ms = ts[ts.size() / 2];
        std::printf("%-34s %8.1f us  %5.2f TB/s  %s\n", name, ms * 1e3, bytes / (ms * 1e-3) / 1e12,
                    cudaGetErrorString(cudaGetLastError()));
    };
    time("flat read (the same bytes)", [&] { flat<<<132 * 8, 256>>>(w, size_t(bytes) / 16, sink); });
#define BLOCKS(U, R, L)                                                                                   \
    time(L ? "ring U=" #U " RPW=" #R " tiles" : "ring U=" #U " RPW=" #R " row-major",                     \
         [&] { blocks<U, R, L><<<dim3(items, 8 / R), 256>>>(w, expert, sink); });
    BLOCKS(3, 1, 0) BLOCKS(3, 2, 0) BLOCKS(3, 4, 0) BLOCKS(4, 1, 0) BLOCKS(4, 2, 0) BLOCKS(6, 2, 0)
    BLOCKS(3, 1, 1) BLOCKS(3, 2, 1) BLOCKS(3, 4, 1) BLOCKS(4, 1, 1) BLOCKS(4, 2, 1) BLOCKS(6, 2, 1)
    for (int per_sm : {2, 3}) {
        char name[64];
        std::snprintf(name, sizeof name, "persistent %d/SM U=3 row-major", per_sm);
        time(name, [&] { persistent<3, 0><<<132 * per_sm, 256>>>(w, expert, items * 8, sink); });
        std::snprintf(name, sizeof name, "persistent %d/SM U=3 tiles", per_sm);
        time(name, [&] { persistent<3, 1><<<132 * per_sm, 256>>>(w, expert, items * 8, sink); });
    }
    return 0;
}
