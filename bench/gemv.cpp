// bench_gemv: decode-sized matmuls (1–8 tokens) through Backend::matmul per weight dtype, at
// llama.cpp's 4096x14336 and the flagship's projections and lm_head. Reports the weight-read
// bandwidth and its % of the device's bandwidth limit (weights rotated over copies, read cold).
#include "matmul_cases.h"

int main(int argc, char** argv) {
    using namespace tessera::bench;
    const FamilyInfo info{"bench_gemv",
                          "decode matmul y[T,N] = x[T,K] w[N,K]^T, weight-read bandwidth",
                          {1, 2, 4, 8},
                          {"q4_0", "q4_k", "q8_0", "bf16"}};
    return run_main(info, argc, argv, [](Bench& b) { bench_matmul(b, /*gemv=*/true); });
}
