// bench_norms: the elementwise ops of every layer — rms_norm, rope, swiglu, add — at widths 2048
// (the flagship's hidden) and 4096 (its q heads, 16 x 256), 1 and 512 tokens. Bandwidth-bound:
// reports GB/s of the arrays each op must read and write (activations stay cache-hot, as in a
// forward pass, so CPU figures can exceed the DRAM limit).
#include "harness.h"

using namespace tessera;
using namespace tessera::bench;

int main(int argc, char** argv) {
    const FamilyInfo info{"bench_norms", "rms_norm, rope, swiglu, add at widths 2048 and 4096", {1, 512}, {}};
    return run_main(info, argc, argv, [](Bench& b) {
        Backend& be = b.be();
        for (int64_t C : {Flagship::hidden, int64_t(4096)}) {
            const std::string w = " " + std::to_string(C);
            for (int64_t T : b.opt().tokens) {
                Scope sc(b.dev());
                const auto ah = random_f32(size_t(T * C), -1.f, 1.f, 1), bh = random_f32(size_t(T * C), -1.f, 1.f, 2);
                const auto wh = random_f32(size_t(C), 0.5f, 1.5f, 3);
                const Tensor x = sc.tensor(DType::F32, {T, C}, ah.data()),
                             y2 = sc.tensor(DType::F32, {T, C}, bh.data());
                const Tensor y = sc.tensor(DType::F32, {T, C}), wt = sc.tensor(DType::F32, {C}, wh.data());
                if (b.want("rms_norm" + w, "f32", T)) {
                    Cost c = elementwise_cost(T * C, 1, 1, 4);
                    c.bytes += double(C) * 4;  // the weight
                    b.run({"rms_norm" + w, "f32", T, c, "", ""}, [&](int) { be.rms_norm(y, x, wt, 1e-6f); });
                }
                // The flagship's rope: heads of 256, the first 64 dims rotated (NeoX), theta 1e7.
                const int64_t D = Flagship::head_dim, rot = 64;
                if (b.want("rope" + w, "f32", T)) {
                    std::vector<int32_t> pos(static_cast<size_t>(T));
                    for (int64_t t = 0; t < T; ++t) pos[size_t(t)] = int32_t(1000 + t);
                    const int32_t* p = sc.ints(pos);
                    RopeParams rp;
                    rp.rot_dims = int(rot);
                    rp.theta = 1e7f;
                    const Tensor xh = y2.view({T, C / D, D});
                    // Reads and writes the rotated dims: 3 FLOPs per element (2 mul, 1 add), angles aside.
                    b.run({"rope" + w, "f32", T, elementwise_cost(T * (C / D) * rot, 1, 1, 3), "", "64 of 256 dims"},
                          [&](int) { be.rope(xh, p, rp); });
                }
                if (b.want("swiglu" + w, "f32", T))
                    b.run({"swiglu" + w, "f32", T, elementwise_cost(T * C, 2, 1, 6), "", ""},
                          [&](int) { be.swiglu(y, x, y2); });
                if (b.want("add" + w, "f32", T))
                    b.run({"add" + w, "f32", T, elementwise_cost(T * C, 2, 1, 1), "", ""},
                          [&](int) { be.add(y, x, y2); });
            }
        }
    });
}
