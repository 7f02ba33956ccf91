// decode_merge_check: a standalone GPU check of the Mma decode attention's fused merge
// (fast::AttnMerge, TESSERA_DECODE_MERGE=fused) that needs no cmake build, fmt or gtest — the
// kernels' .cu files and this file, two nvcc commands:
//   F="-Isrc -Iinclude -O3 -DNDEBUG -arch=sm_90a --expt-relaxed-constexpr -std=c++20"
//   nvcc $F -c -o /tmp/fa.o src/kernels/cuda/fast_attention.cu &&
//   nvcc $F -o /tmp/dmc scripts/gpu/decode_merge_check.cu /tmp/fa.o && /tmp/dmc
// Per case: the merge kernel against a CPU attention in double (4e-3), the fused merge against the
// merge kernel at the same split count (2e-5), three fused launches bit for bit the same on the
// same counters, the counters back at zero, NaN rows for a bad block table, zeros for padding, the
// out row padding untouched. Then µs a launch of 200 back-to-back launches replayed as a CUDA graph
// (PDL on; NOPDL=1 off): the merge kernel (attention + combine) against the fused merge at its
// own cluster pick and at 8 / 4 / 2 / 16, the flagship's shape (16 / 2 heads, D 256, blocks of 16)
// at 4K and 32K, batch 1 and 4 at 4K. Exit status 1 on any failure.
#include "../../src/kernels/cuda/fast_decode_attention.cu"
#include <cstdio>
#include <numeric>
#include <cstring>
#include <random>
#include <vector>
#include <algorithm>
#include <cmath>

namespace tessera::cuda::pdl { bool enabled() { static bool e = !getenv("NOPDL"); return e; } }
using namespace tessera;
using namespace tessera::cuda;

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)
static int failures = 0;

template <typename T> T* dev(const std::vector<T>& v) { T* p; CK(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T))); CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice)); return p; }

struct Case {
    int n_head, n_kv, D, bs;
    std::vector<int32_t> n_new, kv_len;
    bool bad = false;  // sequence 0's first block outside the cache
};

void run_case(const Case& c, int splits, int cluster, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    const int n_seqs = int(c.n_new.size());
    std::vector<int32_t> q_start(n_seqs + 1, 0);
    for (int s = 0; s < n_seqs; ++s) q_start[s + 1] = q_start[s] + c.n_new[s];
    const int T = q_start.back();
    int max_blocks = 1, used = 0;
    for (int s = 0; s < n_seqs; ++s) { int nb = (c.kv_len[s] + c.bs - 1) / c.bs; max_blocks = std::max(max_blocks, nb + 1); used += nb; }
    const int n_blocks = used + 3;
    std::vector<int32_t> pool(n_blocks); std::iota(pool.begin(), pool.end(), 0); std::shuffle(pool.begin(), pool.end(), rng);
    std::vector<int32_t> table(size_t(n_seqs) * max_blocks, -1);
    for (int s = 0, nx = 0; s < n_seqs; ++s) for (int k = 0; k < (c.kv_len[s] + c.bs - 1) / c.bs; ++k) table[size_t(s) * max_blocks + k] = pool[nx++];
    if (c.bad) table[0] = n_blocks + 5;
    const size_t elems = size_t(n_blocks) * c.bs * c.n_kv * c.D;
    std::vector<__half> kc(elems), vc(elems);
    std::vector<float> kf(elems), vf(elems);
    for (size_t i = 0; i < elems; ++i) { kc[i] = __float2half(u(rng) * 2.f); kf[i] = __half2float(kc[i]); vc[i] = __float2half(u(rng) * 2.f); vf[i] = __half2float(vc[i]); }
    const int D = c.D, H = c.n_head, G = H / c.n_kv;
    const int64_t q_ts = int64_t(H) * D, out_ts = int64_t(H) * D + 3;
    std::vector<float> q(size_t(T) * q_ts);
    for (auto& x : q) x = u(rng) * 3.f;
    const float scale = 1.f / std::sqrt(float(D));
    // CPU reference in double.
    std::vector<double> ref(size_t(T) * H * D, 0.0);
    std::vector<char> refnan(size_t(T) * H, 0);
    for (int s = 0; s < n_seqs; ++s)
        for (int i = 0; i < c.n_new[s]; ++i) {
            const int t = q_start[s] + i, len = c.kv_len[s], pos = len - c.n_new[s] + i;
            for (int h = 0; h < H; ++h) {
                if (c.bad && s == 0) { refnan[size_t(t) * H + h] = 1; continue; }
                if (len == 0) continue;
                const int g = h / G;
                std::vector<double> sc(pos + 1);
                double mx = -1e300;
                for (int p = 0; p <= pos; ++p) {
                    const size_t base = ((size_t(table[size_t(s) * max_blocks + p / c.bs]) * c.bs + p % c.bs) * c.n_kv + g) * D;
                    double a = 0; for (int d = 0; d < D; ++d) a += double(q[size_t(t) * q_ts + size_t(h) * D + d]) * kf[base + d];
                    sc[p] = a * scale; mx = std::max(mx, sc[p]);
                }
                double L = 0; for (int p = 0; p <= pos; ++p) { sc[p] = std::exp(sc[p] - mx); L += sc[p]; }
                for (int p = 0; p <= pos; ++p) {
                    const size_t base = ((size_t(table[size_t(s) * max_blocks + p / c.bs]) * c.bs + p % c.bs) * c.n_kv + g) * D;
                    for (int d = 0; d < D; ++d) ref[(size_t(t) * H + h) * D + d] += sc[p] / L * vf[base + d];
                }
            }
        }
    __half *dk = dev(kc), *dv = dev(vc);
    float* dq = dev(q);
    int32_t *dqs = dev(q_start), *dlen = dev(c.kv_len), *dtab = dev(table);
    ref::PagedCache pk; pk.data = dk; pk.f16 = true; pk.n_blocks = n_blocks; pk.block_size = c.bs; pk.n_kv = c.n_kv; pk.D = D;
    pk.head_stride = D; pk.row_stride = int64_t(c.n_kv) * D; pk.block_stride = int64_t(c.bs) * c.n_kv * D;
    ref::PagedCache pv = pk; pv.data = dv;
    const AttnPlan plan{n_seqs, dqs, dlen, dtab, max_blocks, c.bs};
    const int C = fast::detail::decode_fused_cluster(T, c.n_kv, D, splits, cluster);
    const int n = splits / C * C;
    const size_t out_n = size_t(T) * out_ts;
    std::vector<float> pad(out_n, -777.25f);
    float *d_out = dev(pad), *d_kern = dev(pad);
    float* part; CK(cudaMalloc(&part, std::max<size_t>(size_t(T) * H * splits * (D + 2) * 4, 16)));
    uint32_t* ctr; const size_t ctr_n = size_t(T) * c.n_kv; CK(cudaMalloc(&ctr, ctr_n * 4)); CK(cudaMemset(ctr, 0, ctr_n * 4));
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    const fast::AttnMerge fm{true, cluster, ctr};
    CK(fast::detail::launch_decode_attention_mma(d_kern, out_ts, D, dq, q_ts, D, T, H, pk, pv, plan, scale, n, part, {}, {}, st));
    CK(cudaStreamSynchronize(st));
    std::vector<float> kern(out_n), first(out_n), again(out_n);
    CK(cudaMemcpy(kern.data(), d_kern, out_n * 4, cudaMemcpyDeviceToHost));
    for (int r = 0; r < 3; ++r) {
        CK(fast::detail::launch_decode_attention_mma(d_out, out_ts, D, dq, q_ts, D, T, H, pk, pv, plan, scale, splits, part, {}, fm, st));
        CK(cudaStreamSynchronize(st));
        CK(cudaMemcpy(r ? again.data() : first.data(), d_out, out_n * 4, cudaMemcpyDeviceToHost));
        if (r && std::memcmp(first.data(), again.data(), out_n * 4)) { printf("  FAIL launch %d not bitwise equal\n", r); ++failures; }
    }
    std::vector<uint32_t> ch(ctr_n); CK(cudaMemcpy(ch.data(), ctr, ctr_n * 4, cudaMemcpyDeviceToHost));
    if (std::any_of(ch.begin(), ch.end(), [](uint32_t x) { return x != 0; })) { printf("  FAIL counters not zero\n"); ++failures; }
    double worst_cpu = 0, worst_fk = 0; int bad = 0;
    for (int t = 0; t < T; ++t) for (int h = 0; h < H; ++h) {
        for (int d = 0; d < D; ++d) {
            const size_t i = size_t(t) * out_ts + size_t(h) * D + d;
            const double r = ref[(size_t(t) * H + h) * D + d];
            if (refnan[size_t(t) * H + h]) { if (!std::isnan(first[i]) || !std::isnan(kern[i])) ++bad; continue; }
            const double e1 = std::fabs(kern[i] - r), e2 = std::fabs(first[i] - kern[i]);
            worst_cpu = std::max(worst_cpu, std::isnan(e1) ? 1e9 : e1);
            worst_fk = std::max(worst_fk, std::isnan(e2) ? 1e9 : e2);
        }
        for (int k = 0; k < 3; ++k) { const size_t i = size_t(t) * out_ts + size_t(H) * D + k; if (first[i] != -777.25f) ++bad; }
    }
    const bool ok = bad == 0 && worst_cpu <= 4e-3 && worst_fk <= 2e-5;
    if (!ok) ++failures;
    printf("%s H%d/%d D%d bs%d T%d splits %d->%d C%d (want %d): kern-cpu %.2e fused-kern %.2e nanpad-bad %d\n", ok ? "ok  " : "FAIL", H, c.n_kv, D, c.bs, T, splits, n, C, cluster, worst_cpu, worst_fk, bad);
    cudaFree(dk); cudaFree(dv); cudaFree(dq); cudaFree(dqs); cudaFree(dlen); cudaFree(dtab); cudaFree(d_out); cudaFree(d_kern); cudaFree(part); cudaFree(ctr); cudaStreamDestroy(st);
}

void timing(int kv_len, int B) {
    const int H = 16, n_kv = 2, D = 256, bs = 16;
    const int nb = (kv_len + bs - 1) / bs, n_blocks = nb * B;
    std::vector<__half> kc(size_t(n_blocks) * bs * n_kv * D);
    for (size_t i = 0; i < kc.size(); ++i) kc[i] = __float2half(float((i * 2654435761u) % 1000) / 1000.f - 0.5f);
    std::vector<int32_t> table(size_t(B) * nb), q_start(B + 1), lens(B, kv_len);
    for (int i = 0; i < B * nb; ++i) table[i] = (i * 7919) % n_blocks;
    for (int b = 0; b <= B; ++b) q_start[b] = b;
    __half *dk = dev(kc), *dv = dev(kc);
    std::vector<float> q(size_t(B) * H * D, 0.1f);
    float* dq = dev(q); float* out = dev(q);
    int32_t *dqs = dev(q_start), *dlen = dev(lens), *dtab = dev(table);
    ref::PagedCache pk; pk.data = dk; pk.f16 = true; pk.n_blocks = n_blocks; pk.block_size = bs; pk.n_kv = n_kv; pk.D = D;
    pk.head_stride = D; pk.row_stride = int64_t(n_kv) * D; pk.block_stride = int64_t(bs) * n_kv * D;
    ref::PagedCache pv = pk; pv.data = dv;
    const AttnPlan plan{B, dqs, dlen, dtab, nb, bs};
    const int splits = std::min<int>((132 + B * n_kv - 1) / (B * n_kv), (nb * bs + 63) / 64);
    float* part; CK(cudaMalloc(&part, size_t(B) * H * splits * (D + 2) * 4));
    uint32_t* ctr; CK(cudaMalloc(&ctr, size_t(B) * n_kv * 4)); CK(cudaMemset(ctr, 0, size_t(B) * n_kv * 4));
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    auto bench = [&](const char* label, int sp, fast::AttnMerge m) {
        const int reps = 200;
        for (int i = 0; i < 20; ++i) CK(fast::detail::launch_decode_attention_mma(out, H * D, D, dq, H * D, D, B, H, pk, pv, plan, 0.0625f, sp, part, {}, m, st));
        // A CUDA graph of `reps` launches (replayed), as the decode step.
        cudaGraph_t gr; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < reps; ++i) CK(fast::detail::launch_decode_attention_mma(out, H * D, D, dq, H * D, D, B, H, pk, pv, plan, 0.0625f, sp, part, {}, m, st));
        CK(cudaStreamEndCapture(st, &gr)); CK(cudaGraphInstantiate(&ge, gr, 0));
        CK(cudaGraphLaunch(ge, st)); CK(cudaStreamSynchronize(st));
        std::vector<float> ms;
        for (int k = 0; k < 7; ++k) { cudaEventRecord(a, st); CK(cudaGraphLaunch(ge, st)); cudaEventRecord(b, st); CK(cudaEventSynchronize(b)); float x; cudaEventElapsedTime(&x, a, b); ms.push_back(x); }
        std::sort(ms.begin(), ms.end());
        const int C = m.fused ? fast::detail::decode_fused_cluster(B, n_kv, D, sp, m.cluster) : 0;
        printf("time B%d ctx %d %-14s splits %3d C %2d: %.2f us/launch\n", B, kv_len, label, m.fused ? sp / C * C : sp, C, ms[3] * 1e3 / reps);
        cudaGraphExecDestroy(ge); cudaGraphDestroy(gr);
    };
    bench("kernel", splits, {});
    for (int cl : {0, 8, 4, 2, 16}) bench(cl ? "fused forced" : "fused auto", splits, {true, cl, ctr});
    const int C8 = fast::detail::decode_fused_cluster(B, n_kv, D, splits, 8);
    bench("kernel@fused8n", splits / C8 * C8, {});
    std::vector<uint32_t> ch(size_t(B) * n_kv); CK(cudaMemcpy(ch.data(), ctr, ch.size() * 4, cudaMemcpyDeviceToHost));
    if (std::any_of(ch.begin(), ch.end(), [](uint32_t x) { return x != 0; })) { printf("FAIL counters after timing\n"); ++failures; }
}

int main() {
    using tessera::cuda::fast::detail::decode_fused_cluster;
    printf("fused cluster picks at D 256, 2 kv heads x 64 / 32 / 16 splits: %d / %d / %d\n",
           decode_fused_cluster(1, 2, 256, 64, 0), decode_fused_cluster(1, 2, 256, 32, 0),
           decode_fused_cluster(1, 2, 256, 16, 0));
    uint32_t seed = 1;
    run_case({16, 2, 256, 16, {1}, {4096}}, 64, 0, seed++);
    for (int cl : {0, 2, 4, 8, 16}) run_case({16, 2, 256, 16, {1}, {4096}}, 64, cl, seed++);
    for (int D : {64, 128, 256})
        for (auto hk : std::vector<std::pair<int,int>>{{16, 2}, {6, 2}, {12, 1}})
            for (int sp : {2, 3, 9, 24, 255})
                for (int cl : {0, 2, 8})
                    run_case({hk.first, hk.second, D, 16, {1, 1, 1}, {3000, 2, 700}}, sp, cl, seed++);
    for (int sp : {2, 5, 16, 64}) {
        run_case({16, 2, 128, 16, {1, 1, 1}, {50, 0, 9}}, sp, 0, seed++);
        run_case({16, 2, 128, 16, {1, 1, 1}, {1000, 0, 900}}, sp, 2, seed++);
        run_case({16, 2, 128, 16, {1, 1, 1}, {1000, 700, 900}, true}, sp, 0, seed++);
        run_case({16, 2, 64, 1, {17}, {2100}}, sp, 0, seed++);
        run_case({16, 2, 256, 16, {1, 1, 0, 65, 1, 65, 1}, {1, 17, 40, 195, 300, 65, 64}}, sp, 4, seed++);
    }
    printf("correctness failures: %d\n", failures);
    timing(4096, 1);
    timing(32768, 1);
    timing(4096, 4);
    printf("total failures: %d\n", failures);
    return failures != 0;
}
