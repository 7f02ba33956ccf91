// The RoPE reference kernel against the CPU backend: NeoX and GPT-J pairs, full and partial
// rotation, Llama-3 / linear scaling and given frequencies, several sequences at different
// positions in one batch, strided heads. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/backend.h"
#include "kernels/cuda/ref_rope.h"
#include "kernels/cuda/stream.h"
#include "ref_test_util.h"

using namespace tessera;
using namespace tessera::reftest;
namespace ref = tessera::cuda::ref;

namespace {

struct RopeCase {
    std::string name;
    int64_t n_heads, D;
    RopeParams p;  // rot_dims 0 = D
};

std::vector<RopeCase> cases() {
    std::vector<RopeCase> v;
    RopeParams neox;
    v.push_back({"neox full 128", 4, 128, neox});
    RopeParams gptj;
    gptj.style = RopeStyle::GptJ;
    v.push_back({"gptj full 64", 3, 64, gptj});
    RopeParams partial = neox;
    partial.rot_dims = 64;
    partial.theta = 1e7f;
    v.push_back({"neox partial 64 of 256", 2, 256, partial});
    RopeParams gptj_partial = gptj;
    gptj_partial.rot_dims = 4;
    v.push_back({"gptj partial 4 of 7", 5, 7, gptj_partial});
    RopeParams tiny = neox;
    tiny.rot_dims = 2;
    v.push_back({"neox 2 of 3", 1, 3, tiny});
    RopeParams llama3 = neox;
    llama3.theta = 500000.f;
    llama3.llama3_factor = 8.f;
    v.push_back({"llama3 scaled", 8, 128, llama3});
    RopeParams linear = gptj;
    linear.linear_factor = 4.f;
    linear.rot_dims = 96;
    v.push_back({"gptj linear 96 of 130", 2, 130, linear});
    return v;
}

// Three sequences of a batch: a prefill from 0, a decode deep into the context, a chunk in the
// middle; plus one token at a very large position (range reduction of big angles).
std::vector<int32_t> positions() {
    std::vector<int32_t> pos;
    for (int32_t i = 0; i < 37; ++i) pos.push_back(i);
    pos.push_back(32767);
    for (int32_t i = 0; i < 5; ++i) pos.push_back(4096 + i);
    pos.push_back(1000003);
    return pos;
}

}  // namespace

TEST(CudaRefRope, MatchesCpu) {
    REQUIRE_CUDA();
    const std::vector<int32_t> pos = positions();
    const int64_t T = int64_t(pos.size());
    // The same f32 angle and the same double cos/sin rounded to f32 on both sides; what may
    // differ is FMA contraction of a·cos − b·sin (1 ulp of the products): 1e-5 of max(1, |ref|).
    const double tol = 1e-5;
    for (const RopeCase& c : cases())
        for (int64_t Tn : {int64_t(1), T}) {
            const int64_t n = c.n_heads, D = c.D, hs = D + 3, ts = n * hs + 1;
            std::vector<float> x = random_heads(Tn, n, D, ts, hs, uint32_t(D * 7 + n + Tn));
            RopeParams q = c.p;
            if (q.rot_dims == 0) q.rot_dims = int(D);
            std::vector<float> inv_freq(size_t(q.rot_dims / 2));
            rope_inv_freq(q, inv_freq.data());
            // A one-token batch takes the deepest position (a decode step).
            const std::vector<int32_t> p = Tn == 1 ? std::vector<int32_t>{pos[37]} : pos;
            cuda::Stream s;
            cuda::DeviceBuffer dx = to_device(x), dpos = to_device(p), dfreq = to_device(inv_freq);
            make_cpu_backend()->rope(heads_view(x.data(), Tn, n, D, ts, hs), p.data(), c.p);
            ref::rope(dx.as<float>(), ts, hs, Tn, n, D, dpos.as<int32_t>(), dfreq.as<float>(), q.rot_dims, q.style,
                      s);
            s.synchronize();
            expect_close(to_host<float>(dx), x, tol, "rope " + c.name + " T=" + std::to_string(Tn));
        }
}

TEST(CudaRefRope, GivenFrequenciesMatchCpu) {
    REQUIRE_CUDA();
    const int64_t T = 9, n = 2, D = 32;
    std::vector<float> freqs(D / 2);
    for (size_t i = 0; i < freqs.size(); ++i) freqs[i] = 1.f / float(1 + 3 * i);
    RopeParams p;
    p.inv_freq = freqs.data();
    std::vector<float> inv_freq(D / 2);
    RopeParams q = p;
    q.rot_dims = int(D);
    rope_inv_freq(q, inv_freq.data());
    std::vector<int32_t> pos = {5, 6, 7, 8, 0, 1, 100, 101, 102};
    std::vector<float> x = random_heads(T, n, D, n * D, D, 17);
    cuda::Stream s;
    cuda::DeviceBuffer dx = to_device(x), dpos = to_device(pos), dfreq = to_device(inv_freq);
    make_cpu_backend()->rope(heads_view(x.data(), T, n, D, n * D, D), pos.data(), p);
    ref::rope(dx.as<float>(), n * D, D, T, n, D, dpos.as<int32_t>(), dfreq.as<float>(), int(D), RopeStyle::NeoX, s);
    s.synchronize();
    expect_close(to_host<float>(dx), x, 1e-5, "rope with given inv_freq");
}

TEST(CudaRefRope, BadArgumentsAreErrors) {  // checked before any launch: needs no GPU
    float buf[64] = {};
    float* x = buf;
    const int32_t* pos = reinterpret_cast<const int32_t*>(buf);
    EXPECT_THROW(ref::rope(x, 8, 8, 1, 1, 8, pos, buf, 3, RopeStyle::NeoX, nullptr), Error);   // odd rot_dims
    EXPECT_THROW(ref::rope(x, 8, 8, 1, 1, 8, pos, buf, 10, RopeStyle::NeoX, nullptr), Error);  // rot_dims > D
    EXPECT_THROW(ref::rope(x, 8, 8, 1, 1, 8, pos, buf, 0, RopeStyle::NeoX, nullptr), Error);   // unresolved 0
    EXPECT_THROW(ref::rope(x, 8, 8, 1, 1, 8, nullptr, buf, 8, RopeStyle::GptJ, nullptr), Error);
    EXPECT_THROW(ref::rope(x, 8, 8, 1, 1, 8, pos, nullptr, 8, RopeStyle::GptJ, nullptr), Error);
    EXPECT_THROW(ref::rope(x, 8, 4, 2, 2, 8, pos, buf, 8, RopeStyle::GptJ, nullptr), Error);   // heads overlap
    EXPECT_NO_THROW(ref::rope(nullptr, 0, 0, 0, 4, 8, nullptr, nullptr, 8, RopeStyle::NeoX, nullptr));  // T = 0
}
