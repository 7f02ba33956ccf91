// The small reference kernels (softmax, argmax, kv_store, gdn_gates) against the CPU backend:
// masked and NaN rows, ties, odd widths, padding slots, f16 rounding, in-place gates.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/ref_misc.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;
namespace ref = tessera::cuda::ref;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

const std::vector<std::tuple<int64_t, int64_t>> kShapes = {{1, 1},   {1, 3},    {3, 127}, {2, 129},
                                                           {4, 257}, {2, 4097}, {33, 33}, {5, 151936 / 8}};

}  // namespace

TEST(CudaRefMisc, SoftmaxMatchesCpu) {
    REQUIRE_CUDA();
    // Outputs are in [0, 1]. expf differs from glibc by a few ulp and the kernel sums in f32 (a
    // block tree: ~1e-6 relative over 19K terms) where the CPU sums in double: 1e-5 absolute.
    const double tol = 1e-5;
    for (auto [R, C] : kShapes) {
        const int64_t ld = C + 2;
        std::vector<float> x = random_rows(R, C, ld, uint32_t(R * 3 + C), -20.f, 20.f);
        // Masked entries (attention-style -inf), and in a multi-row case one fully masked row.
        for (int64_t r = 0; r < R; ++r)
            for (int64_t c = r % 3; c < C; c += 5) x[size_t(r * ld + c)] = -kInf;
        if (R > 1)
            for (int64_t c = 0; c < C; ++c) x[size_t(1 * ld + c)] = -kInf;
        cuda::Stream s;
        cuda::DeviceBuffer dx = to_device(x);
        make_cpu_backend()->softmax(rows_view(x.data(), R, C, ld));
        ref::softmax(dx.as<float>(), ld, R, C, s);
        s.synchronize();
        expect_close(to_host<float>(dx), x, tol, "softmax [" + std::to_string(R) + ", " + std::to_string(C) + "]");
    }
}

TEST(CudaRefMisc, ArgmaxMatchesCpuExactly) {
    REQUIRE_CUDA();
    for (auto [R0, C] : kShapes) {
        const int64_t R = R0 + 6, ld = C + 1;  // six extra rows of special cases
        // Coarse values make ties common (several threads and warps hold the maximum).
        std::vector<float> x = random_rows(R, C, ld, uint32_t(C), -4.f, 4.f);
        for (float& v : x)
            if (v != kPad) v = std::round(v * 2.f) / 2.f;
        auto row = [&](int64_t r) { return x.begin() + r * ld; };
        std::fill(row(R0), row(R0) + C, kNan);                        // all NaN: 0
        std::fill(row(R0 + 1), row(R0 + 1) + C, -kInf);               // all -inf: 0
        std::fill(row(R0 + 2), row(R0 + 2) + C, 1.5f);                // all equal: 0
        for (int64_t c = 0; c < C; c += 2) row(R0 + 3)[c] = kNan;     // NaN never wins
        row(R0 + 3)[C - 1] = 100.f;                                   // ... the last column does
        std::fill(row(R0 + 4), row(R0 + 4) + C, 0.f);                 // -0 before +0: the first index
        row(R0 + 4)[0] = -0.f;
        if (C > 2) {                                                  // NaN first, then a tie of +inf
            row(R0 + 5)[0] = kNan;
            row(R0 + 5)[C / 2] = kInf;
            row(R0 + 5)[C - 1] = kInf;
        }
        std::vector<int32_t> want(size_t(R), -1);
        cuda::Stream s;
        cuda::DeviceBuffer dx = to_device(x), dout(size_t(R) * 4);
        make_cpu_backend()->argmax(rows_view(x.data(), R, C, ld), want.data());
        ref::argmax(dx.as<float>(), ld, R, C, dout.as<int32_t>(), s);
        s.synchronize();
        const std::vector<int32_t> got = to_host<int32_t>(dout);
        for (int64_t r = 0; r < R; ++r)
            EXPECT_EQ(got[size_t(r)], want[size_t(r)]) << "argmax [" << R << ", " << C << "] row " << r;
    }
}

TEST(CudaRefMisc, KvStoreMatchesCpuExactly) {
    REQUIRE_CUDA();
    struct Case {
        DType kt, vt;
        int64_t block_size, n_kv_k, D_k, n_kv_v, D_v;
    };
    const std::vector<Case> cases = {{DType::F32, DType::F32, 16, 2, 128, 2, 128},
                                     {DType::F16, DType::F16, 16, 4, 64, 4, 64},
                                     {DType::F16, DType::F32, 3, 1, 129, 3, 7},
                                     {DType::F32, DType::F16, 1, 2, 1, 1, 257}};
    const int64_t n_blocks = 6;
    for (const Case& c : cases) {
        // Three sequences (block tables {4, 1}, {0}, {5, 2}) at different positions, padding
        // tokens (slot -1) between them.
        auto slot_of = [&](std::vector<int64_t> blocks, int64_t p) {
            return int32_t(blocks[size_t(p / c.block_size)] * c.block_size + p % c.block_size);
        };
        std::vector<int32_t> slot;
        for (int64_t p = 0; p < std::min<int64_t>(2 * c.block_size, 20); ++p) slot.push_back(slot_of({4, 1}, p));
        slot.push_back(-1);
        slot.push_back(slot_of({0}, c.block_size - 1));
        slot.push_back(-7);
        for (int64_t p = c.block_size - 1; p < std::min<int64_t>(2 * c.block_size, c.block_size + 3); ++p)
            slot.push_back(slot_of({5, 2}, p));
        const int64_t T = int64_t(slot.size());

        // Caches with a padded head and row stride (bytes); filled with a byte pattern.
        auto cache_tensor = [&](std::vector<uint8_t>& bytes, DType t, int64_t n_kv, int64_t D, ref::KvCacheRef& r) {
            const int64_t es = t == DType::F16 ? 2 : 4, hs = (D + 1) * es, rs = n_kv * hs + 2 * es,
                          bs = c.block_size * rs + 4;
            bytes.assign(size_t(n_blocks * bs), 0x5a);
            Tensor tt(bytes.data(), t, {n_blocks, c.block_size, n_kv, D});
            tt.stride = {bs, rs, hs, es};
            r = {nullptr, t, n_blocks, c.block_size, n_kv, D, bs, rs, hs};
            return tt;
        };
        std::vector<uint8_t> kc, vc;
        ref::KvCacheRef kr, vr;
        const Tensor kt = cache_tensor(kc, c.kt, c.n_kv_k, c.D_k, kr), vt = cache_tensor(vc, c.vt, c.n_kv_v, c.D_v, vr);
        // k/v values over a wide range: f16 rounding, overflow to inf and subnormals.
        const int64_t khs = c.D_k + 2, kts = c.n_kv_k * khs + 1, vhs = c.D_v, vts = c.n_kv_v * vhs;
        std::vector<float> k = random_heads(T, c.n_kv_k, c.D_k, kts, khs, uint32_t(T + c.D_k));
        std::vector<float> v = random_heads(T, c.n_kv_v, c.D_v, vts, vhs, uint32_t(T * 3 + c.D_v));
        std::mt19937 rng(5);
        std::uniform_int_distribution<int> expo(-26, 17);
        for (float& e : k) e = std::ldexp(e, expo(rng));
        v[0] = kNan;
        v[1] = 65520.f;  // rounds to f16 inf

        cuda::Stream s;
        cuda::DeviceBuffer dkc = to_device(kc), dvc = to_device(vc), dk = to_device(k), dv = to_device(v),
                           dslot = to_device(slot);
        kr.data = dkc.data();
        vr.data = dvc.data();
        make_cpu_backend()->kv_store(kt, vt, heads_view(k.data(), T, c.n_kv_k, c.D_k, kts, khs),
                                     heads_view(v.data(), T, c.n_kv_v, c.D_v, vts, vhs), slot.data());
        ref::kv_store(kr, vr, dk.as<float>(), kts, khs, dv.as<float>(), vts, vhs, T, dslot.as<int32_t>(), s);
        s.synchronize();
        const std::string what = std::string("kv_store ") + dtype_name(c.kt) + "/" + dtype_name(c.vt) +
                                 " block " + std::to_string(c.block_size);
        expect_same_bytes(to_host<uint8_t>(dkc), kc, what + " k_cache");
        expect_same_bytes(to_host<uint8_t>(dvc), vc, what + " v_cache");
    }
}

TEST(CudaRefMisc, KvStoreSkipsSlotsPastTheCache) {
    REQUIRE_CUDA();
    const int64_t D = 4;
    std::vector<float> cache(2 * D, 0.f), k = {1, 2, 3, 4, 5, 6, 7, 8};
    std::vector<int32_t> slot = {1, 2};  // a cache of 2 slots: slot 2 is past it
    cuda::Stream s;
    cuda::DeviceBuffer dk = to_device(cache), dv = to_device(cache), dx = to_device(k), ds = to_device(slot);
    ref::KvCacheRef kr{dk.data(), DType::F32, 1, 2, 1, D, 2 * D * 4, D * 4, D * 4};
    ref::KvCacheRef vr = kr;
    vr.data = dv.data();
    ref::kv_store(kr, vr, dx.as<float>(), D, D, dx.as<float>(), D, D, 2, ds.as<int32_t>(), s);
    s.synchronize();
    EXPECT_EQ(to_host<float>(dk), (std::vector<float>{0, 0, 0, 0, 1, 2, 3, 4}));
}

TEST(CudaRefMisc, GdnGatesMatchCpu) {
    REQUIRE_CUDA();
    // expf / log1pf differ from glibc by a few ulp (~5e-7 relative through the product):
    // 1e-5 of max(1, |ref|).
    const double tol = 1e-5;
    for (auto [T, nv] : std::vector<std::tuple<int64_t, int64_t>>{{1, 1}, {1, 32}, {3, 3}, {33, 129}, {7, 1000}})
        for (bool in_place : {false, true}) {
            const int64_t lda = nv + 1, ldb = nv + 2, ldg = nv + 3, ldbeta = nv;
            // a + dt_bias spans both sides of softplus's threshold (20) and very negative values.
            std::vector<float> a = random_rows(T, nv, lda, uint32_t(T + nv), -40.f, 30.f);
            std::vector<float> b = random_rows(T, nv, ldb, uint32_t(T * 7 + nv), -30.f, 30.f);
            std::vector<float> dt_bias = random_rows(1, nv, nv, uint32_t(nv), -2.f, 2.f);
            std::vector<float> neg_exp_a = random_rows(1, nv, nv, uint32_t(nv + 1), -3.f, 1.f);
            for (float& e : neg_exp_a) e = -std::exp(e);
            std::vector<float> g = random_rows(T, nv, ldg, 1), beta = random_rows(T, nv, ldbeta, 2);
            cuda::Stream s;
            cuda::DeviceBuffer da = to_device(a), db = to_device(b), ddt = to_device(dt_bias),
                               dna = to_device(neg_exp_a), dg = to_device(g), dbeta = to_device(beta);
            const Tensor nat(neg_exp_a.data(), DType::F32, {nv}), dtt(dt_bias.data(), DType::F32, {nv});
            auto cpu = make_cpu_backend();
            const Tensor av = rows_view(a.data(), T, nv, lda), bv = rows_view(b.data(), T, nv, ldb);
            const std::string what = "gdn_gates [" + std::to_string(T) + ", " + std::to_string(nv) + "]" +
                                     (in_place ? " in place" : "");
            if (in_place) {
                cpu->gdn_gates(bv, av, bv, av, nat, dtt);
                ref::gdn_gates(db.as<float>(), ldb, da.as<float>(), lda, db.as<float>(), ldb, da.as<float>(), lda,
                               dna.as<float>(), ddt.as<float>(), T, nv, s);
                s.synchronize();
                expect_close(to_host<float>(db), b, tol, what + " beta");
                expect_close(to_host<float>(da), a, tol, what + " g");
            } else {
                cpu->gdn_gates(rows_view(beta.data(), T, nv, ldbeta), rows_view(g.data(), T, nv, ldg), bv, av, nat,
                               dtt);
                ref::gdn_gates(dbeta.as<float>(), ldbeta, dg.as<float>(), ldg, db.as<float>(), ldb, da.as<float>(),
                               lda, dna.as<float>(), ddt.as<float>(), T, nv, s);
                s.synchronize();
                expect_close(to_host<float>(dbeta), beta, tol, what + " beta");
                expect_close(to_host<float>(dg), g, tol, what + " g");
            }
        }
}

TEST(CudaRefMisc, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float buf[64] = {};
    float* p = buf;
    int32_t out[4];
    EXPECT_NO_THROW(ref::softmax(nullptr, 0, 0, 3, nullptr));
    EXPECT_THROW(ref::softmax(nullptr, 4, 2, 4, nullptr), Error);
    EXPECT_THROW(ref::argmax(p, 4, 2, 0, out, nullptr), Error);      // empty rows
    EXPECT_THROW(ref::argmax(p, 4, 2, 4, nullptr, nullptr), Error);  // null out
    ref::KvCacheRef c{p, DType::BF16, 2, 4, 1, 4, 64, 16, 16};
    ref::KvCacheRef f = c;
    f.dtype = DType::F32;
    const int32_t* slot = out;
    EXPECT_THROW(ref::kv_store(c, f, p, 4, 4, p, 4, 4, 1, slot, nullptr), Error);  // bf16 cache
    ref::KvCacheRef other = f;
    other.block_size = 8;
    EXPECT_THROW(ref::kv_store(f, other, p, 4, 4, p, 4, 4, 1, slot, nullptr), Error);  // different blocks
    ref::KvCacheRef odd = f;
    odd.head_stride = 6;
    EXPECT_THROW(ref::kv_store(odd, f, p, 4, 4, p, 4, 4, 1, slot, nullptr), Error);   // stride not whole floats
    EXPECT_THROW(ref::kv_store(f, f, p, 4, 4, p, 4, 4, 1, nullptr, nullptr), Error);  // null slots
    // gdn_gates: beta over a (not b) is rejected.
    EXPECT_THROW(ref::gdn_gates(p, 4, p + 16, 4, p + 32, 4, p, 4, p + 48, p + 52, 2, 4, nullptr), Error);
}
