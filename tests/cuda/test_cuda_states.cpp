// The CUDA reference path against the CPU backend inside a hybrid model, step by step: logits
// and the recurrent state caches (conv + delta-rule state of every GDN layer) after a chunked
// prefill, a two-sequence decode (a new sequence next to a running one), and a lone decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "ref_test_util.h"  // REQUIRE_CUDA
#include "runtime/model_loader.h"
#include "runtime/session.h"

using namespace tessera;

namespace {

std::vector<float> host_copy(const Tensor& t) {
    std::vector<float> v(size_t(t.numel()));
    if (t.device == Device::CUDA)
        cudaMemcpy(v.data(), t.data, v.size() * sizeof(float), cudaMemcpyDeviceToHost);
    else
        std::copy_n(t.ptr<float>(), v.size(), v.data());
    return v;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
    double d = 0, m = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        d = std::max(d, double(std::fabs(a[i] - b[i])));
        m = std::max(m, double(std::fabs(b[i])));
    }
    return m > 0 ? d / m : d;
}

}  // namespace

class CudaStates : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaStates, MatchCpuStepByStep) {
    REQUIRE_CUDA();
    const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/" + GetParam();
    LoadOptions cpu_o, gpu_o;
    cpu_o.device = "cpu";
    gpu_o.device = "cuda";
    LoadedModel mc = load_model(dir, cpu_o), mg = load_model(dir, gpu_o);
    Session sc(*mc.model, 32, 16, 3), sg(*mg.model, 32, 16, 3);
    for (int i = 0; i < 3; ++i) {
        sc.add_sequence();
        sg.add_sequence();
    }
    auto compare = [&](const char* what, const std::vector<float>& lc, const std::vector<float>& lg) {
        const double r = rel(lg, lc);
        std::printf("%-28s logits rel %.2e\n", what, r);
        EXPECT_LT(r, 1e-3) << what;
        const StateCache& c = *sc.caches().state;
        const StateCache& g = *sg.caches().state;
        for (int64_t l = 0; l < c.shape().n_layers; ++l) {
            const double rc = rel(host_copy(g.conv(l)), host_copy(c.conv(l)));
            const double rr = rel(host_copy(g.recurrent(l)), host_copy(c.recurrent(l)));
            std::printf("  layer %lld: conv rel %.2e, state rel %.2e\n", (long long)l, rc, rr);
            EXPECT_LT(rc, 1e-4) << what << " conv layer " << l;
            EXPECT_LT(rr, 1e-3) << what << " state layer " << l;
        }
    };
    std::vector<int32_t> p(20);
    for (int i = 0; i < 20; ++i) p[size_t(i)] = (i * 37 + 11) % 1000;
    compare("prefill 20 (seq 0)", sc.feed(0, p), sg.feed(0, p));
    compare("lone decode (seq 0)", sc.decode({0}, {5}), sg.decode({0}, {5}));
    compare("first token of seq 1 alone", sc.decode({1}, {9}), sg.decode({1}, {9}));
    compare("decode seqs 2 + 0", sc.decode({2, 0}, {3, 4}), sg.decode({2, 0}, {3, 4}));
    compare("decode seqs 1 + 2 + 0", sc.decode({1, 2, 0}, {6, 7, 8}), sg.decode({1, 2, 0}, {6, 7, 8}));
}

INSTANTIATE_TEST_SUITE_P(Models, CudaStates, ::testing::Values("qwen35_tiny", "qwen35moe_tiny", "qwen3next_tiny"));
