// gemm_f32_check: a standalone GPU check of fast::gemm_f32_tf32x3 (fast_gemm_f32.cu, the 3×TF32
// f32 GEMM behind TESSERA_F32_GEMM=tf32x3) that needs no cmake build, fmt or gtest — one nvcc
// command (cuBLAS for the comparison):
//   nvcc -Isrc -Iinclude -O3 -DNDEBUG -gencode arch=compute_90a,code=sm_90a -std=c++20 -o /tmp/gfc \
//       scripts/gpu/gemm_f32_check.cu src/kernels/cuda/tma_map.cpp -lcublas && /tmp/gfc
// Per case: every element against a double product on the CPU within 4e-6 of Σ|x·w| (a single
// TF32 pass misses it), and against cuBLAS's f32 GEMM within the same bound. Then µs a call (CUDA
// events, median of 20 samples of 20 back-to-back calls): cublasSgemm and the kernel (w's split
// apart: timed once at 2,048) on the router's shape (257 rows × 2,048) at 16 … 8,192 tokens. Exit
// status 1 on any failure.
#include "../../src/kernels/cuda/fast_gemm_f32.cu"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

using namespace tessera::cuda::fast;

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_));                \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)
#define CB(x)                                                                                   \
    do {                                                                                        \
        if ((x) != CUBLAS_STATUS_SUCCESS) {                                                     \
            printf("cuBLAS %s at %d failed\n", #x, __LINE__);                                   \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)
static int failures = 0;

static float* upload(const std::vector<float>& v) {
    float* p;
    CK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * 4));
    CK(cudaMemcpy(p, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return p;
}

// The kernel as fast::gemm_f32_tf32x3 runs it (without its host checks, which need fmt): w's halves
// (split here once per w: not timed with the product), then the product.
// splits: 0 the pick's (gemm_f32_split), else K in that many parts.
struct Halves {
    const float* w = nullptr;
    float *hi = nullptr, *lo = nullptr, *parts = nullptr;
    size_t n = 0;
};
static Halves halves;
static int sm_count() {
    static const int n = [] {
        cudaDeviceProp p{};
        CK(cudaGetDeviceProperties(&p, 0));
        return p.multiProcessorCount;
    }();
    return n;
}
static GemmF32Split split_of(int T, int N, int K, int splits) {
    if (splits == 0) return gemm_f32_split(T, N, K, sm_count());
    const int n_k = int(gemm_f32_k_steps(K)), per = (n_k + splits - 1) / splits;
    return {(n_k + per - 1) / per, per};
}
static void run(float* y, int ldy, const float* x, int ldx, const float* w, int T, int N, int K, int splits = 0) {
    if (halves.w != w || halves.n != size_t(N) * K) {
        if (halves.hi) {
            CK(cudaFree(halves.hi));
            CK(cudaFree(halves.lo));
        }
        halves.w = w, halves.n = size_t(N) * K;
        CK(cudaMalloc(&halves.hi, std::max<size_t>(halves.n, 1) * 4));
        CK(cudaMalloc(&halves.lo, std::max<size_t>(halves.n, 1) * 4));
        CK(detail::launch_tf32_split(w, halves.hi, halves.lo, int64_t(halves.n), nullptr));
    }
    static size_t parts_n = 0;
    const GemmF32Split sp = split_of(T, N, K, splits);
    if (size_t(sp.splits) * T * N > parts_n) {
        if (halves.parts) CK(cudaFree(halves.parts));
        parts_n = size_t(sp.splits) * T * N;
        CK(cudaMalloc(&halves.parts, parts_n * 4));
    }
    CK(detail::launch_gemm_f32_tf32x3_tma(y, ldy, x, ldx, halves.hi, halves.lo, T, N, K, sp, halves.parts, nullptr));
}

// y = x·wᵀ row-major through cuBLAS's column-major f32 GEMM (as ref::matmul_f32).
static void sgemm(cublasHandle_t h, float* y, int ldy, const float* x, int ldx, const float* w, int T, int N, int K) {
    const float one = 1.f, zero = 0.f;
    CB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, N, T, K, &one, w, K, x, ldx, &zero, y, ldy));
}

static void check(cublasHandle_t h, int T, int N, int K, int ldx, uint32_t seed, int splits) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    std::vector<float> x(size_t(T) * ldx), w(size_t(N) * K);
    for (auto& v : x) v = u(rng);
    for (auto& v : w) v = u(rng);
    float *dx = upload(x), *dw = upload(w);
    float *dy = upload(std::vector<float>(size_t(T) * N)), *dc = upload(std::vector<float>(size_t(T) * N));
    run(dy, N, dx, ldx, dw, T, N, K, splits);
    sgemm(h, dc, N, dx, ldx, dw, T, N, K);
    CK(cudaDeviceSynchronize());
    std::vector<float> y(size_t(T) * N), c(size_t(T) * N);
    CK(cudaMemcpy(y.data(), dy, y.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
    double worst = 0, worst_cublas = 0, worst_vs = 0;
    for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
            double ref = 0, mag = 0;
            for (int k = 0; k < K; ++k) {
                const double p = double(x[size_t(t) * ldx + k]) * double(w[size_t(n) * K + k]);
                ref += p;
                mag += std::fabs(p);
            }
            const size_t i = size_t(t) * N + n;
            worst = std::max(worst, std::fabs(y[i] - ref) / mag);
            worst_cublas = std::max(worst_cublas, std::fabs(c[i] - ref) / mag);
            worst_vs = std::max(worst_vs, std::fabs(double(y[i]) - c[i]) / mag);
        }
    const bool ok = worst <= 4e-6 && worst_vs <= 4e-6 && !std::isnan(worst);
    failures += !ok;
    printf("%s T=%d N=%d K=%d ldx=%d splits %d: worst |y - exact| %.2e of sum|xw| (cuBLAS f32 %.2e), |y - cuBLAS| "
           "%.2e\n",
           ok ? "ok  " : "FAIL", T, N, K, ldx, split_of(T, N, K, splits).splits, worst, worst_cublas, worst_vs);
    CK(cudaFree(dx));
    CK(cudaFree(dw));
    CK(cudaFree(dy));
    CK(cudaFree(dc));
    halves.w = nullptr;  // (its address may come back)
}

template <class F>
static double time_us(F&& f) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; ++i) f();
    std::vector<float> ms;
    for (int s = 0; s < 20; ++s) {
        CK(cudaEventRecord(a));
        for (int i = 0; i < 20; ++i) f();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float m;
        CK(cudaEventElapsedTime(&m, a, b));
        ms.push_back(m);
    }
    std::sort(ms.begin(), ms.end());
    return double(ms[ms.size() / 2]) * 1000.0 / 20;
}

int main() {
    cudaDeviceProp p{};
    CK(cudaGetDeviceProperties(&p, 0));
    printf("gemm_f32_check on %s\n", p.name);
    cublasHandle_t h;
    CB(cublasCreate(&h));
    for (int splits : {0, 1, 3}) {  // the pick's K split, K whole, K in three (a short last part)
        check(h, 9, 257, 2048, 2048, 1, splits);
        check(h, 300, 257, 2048, 2052, 2, splits);
        check(h, 65, 33, 36, 36, 3, splits);
        check(h, 130, 7, 100, 108, 4, splits);
        check(h, 1, 1, 4, 4, 5, splits);
        check(h, 64, 72, 32, 32, 6, splits);
        check(h, 129, 145, 2052, 2052, 7, splits);
    }
    for (int T : {16, 64, 128, 256, 512, 1024, 2048, 8192}) {
        const int N = 257, K = 2048;
        std::vector<float> x(size_t(T) * K, 0.5f), w(size_t(N) * K, 0.25f);
        float *dx = upload(x), *dw = upload(w), *dy = upload(std::vector<float>(size_t(T) * N));
        const double flop = 2.0 * T * N * K;
        const double cub = time_us([&] { sgemm(h, dy, N, dx, K, dw, T, N, K); });
        const double ours = time_us([&] { run(dy, N, dx, K, dw, T, N, K); });
        const double whole = time_us([&] { run(dy, N, dx, K, dw, T, N, K, 1); });
        printf("| %5d x %d x %d | cublasSgemm %8.2f us (%6.1f TFLOP/s) | tf32x3 %8.2f us (%6.1f TFLOP/s; K in %d) | "
               "K whole %8.2f us |",
               T, N, K, cub, flop / cub / 1e6, ours, flop / ours / 1e6, split_of(T, N, K, 0).splits, whole);
        if (T == 2048) {
            float *hi, *lo;
            CK(cudaMalloc(&hi, size_t(N) * K * 4));
            CK(cudaMalloc(&lo, size_t(N) * K * 4));
            const double split_us =
                time_us([&] { CK(detail::launch_tf32_split(dw, hi, lo, int64_t(N) * K, nullptr)); });
            printf(" w's split %.2f us |", split_us);
            CK(cudaFree(hi));
            CK(cudaFree(lo));
        }
        printf("\n");
        CK(cudaFree(dx));
        CK(cudaFree(dw));
        CK(cudaFree(dy));
        halves.w = nullptr;
    }
    printf("%s\n", failures ? "FAILED" : "all cases ok");
    return failures ? 1 : 0;
}
