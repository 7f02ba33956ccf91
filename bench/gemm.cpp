// bench_gemm: prefill-sized matmuls (512+ tokens) through Backend::matmul per weight dtype, at
// llama.cpp's 4096x14336 and the flagship's projections. Reports FLOP/s (2·T·N·K) and its % of
// the device's compute limit.
#include "matmul_cases.h"

int main(int argc, char** argv) {
    using namespace tessera::bench;
    const FamilyInfo info{
        "bench_gemm", "prefill matmul y[T,N] = x[T,K] w[N,K]^T, FLOP/s", {512}, {"q4_0", "q4_k", "q8_0", "bf16"}};
    return run_main(info, argc, argv, [](Bench& b) { bench_matmul(b, /*gemv=*/false); });
}
