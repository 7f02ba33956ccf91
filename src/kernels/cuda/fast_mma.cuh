// Device primitives of the kernel pack's tensor-core kernels (the dense GEMM and decode GEMV, the
// MoE tiles, the attention kernels): cp.async copies, ldmatrix, mma.sync m16n8k16 bf16 / f16 →
// f32 and m16n8k8 tf32 (3×TF32), bf16x2 arithmetic, and the exact Int4 decode into bf16 pairs. Header-only, device code only.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace tessera::cuda::fast::dev {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global → shared, or 16 zero bytes when !valid (nothing is read then).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
    const int n = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

// 16 bytes global → shared, of which the first n (0..16) are read and the rest zero-filled.
__device__ __forceinline__ void cp_async16_n(uint32_t dst, const void* src, int n) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// c[16×8] += a[16×16] · b[16×8], f16 operands, f32 accumulators.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ---- 3×TF32: f32 products on the TF32 tensor cores at f32's accuracy class ----
// x = hi + lo with hi = x's top 10 mantissa bits (tf32, exact) and lo = the rest (|lo| < 2^-10·|x|),
// passed as f32 bits: the tensor cores read a tf32 operand's top 19 bits, truncating lo to
// ~2^-21·|x|. Two instructions, no cvt. a·b ≈ lo_a·hi_b + hi_a·lo_b + hi_a·hi_b (lo·lo dropped).
__device__ __forceinline__ void tf32_split(float x, uint32_t& hi, uint32_t& lo) {
    hi = __float_as_uint(x) & 0xffffe000u;
    lo = __float_as_uint(x - __uint_as_float(hi));
}
// c[16×8] += a[16×8] · b[8×8], tf32 operands (f32 bits), f32 accumulators.
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8×8 b16 matrices from shared memory: lanes 8i … 8i + 7 give the row addresses of matrix i.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// Two: lanes 0–7 and 8–15 give the row addresses (the other lanes' are ignored).
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x2_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
}

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ float exp2_approx(float x) {  // 2^x; 2^-inf = 0
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ uint32_t fma_bf16x2(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(d) : "f"(hi), "f"(lo));  // first source → upper half
    return d;
}

// (a & b) | c in one LOP3: written plainly, with b and c both constants, the compiler emits an AND
// and an OR (a LOP3 takes one immediate); here c lives in a register (session 19: a third of the
// MoE mid kernel's dequant instructions).
__device__ __forceinline__ uint32_t and_or(uint32_t a, uint32_t b, uint32_t c) {
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, 0xea;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// (128 + nibble i, 128 + nibble i + 4) of a word as a bf16 pair (low half first).
template <int I>
__device__ __forceinline__ uint32_t nib_pair(uint32_t w) {
    return and_or(w >> (4 * I), 0x000f000fu, 0x43004300u);
}

// f16 bits → (v, v) as bf16x2.
__device__ __forceinline__ uint32_t f16_to_bf16x2(uint16_t h) {
    const float f = __half2float(__ushort_as_half(h));
    return pack_bf16x2(f, f);
}

// Int4 word q (codes of columns 0..7) → the four bf16 pairs (i, i + 4), i = 0..3, of
// w = (code − c)·s + b, with negc = −(128 + c) as bf16x2 (−128 with biases, −136 without: bias
// −8·s): 0x4300 | code is 128 + code exactly, (128 + code − c) is exact, then one rounding.
__device__ __forceinline__ void dequant_int4_pairs(uint32_t q, uint32_t s2, uint32_t b2, uint32_t negc,
                                                   uint32_t (&w)[4]) {
    constexpr uint32_t kMask = 0x000f000f, kExp = 0x43004300, kOne = 0x3f803f80;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = fma_bf16x2(fma_bf16x2(and_or(q >> (4 * i), kMask, kExp), kOne, negc), s2, b2);
}

// The lean form (the k-tile probe's Lean; in the MoE tiles measured and not kept, session 62): the four
// bf16 pairs (i, i + 4) of w = code·s, c2 = −128·s as bf16x2 (exact): (128 + code)·s − 128·s in one
// FMA, one rounding. The offsets (−8·s, or the biases) go in apart, against each activation row's sums.
__device__ __forceinline__ void dequant_int4_pairs_lean(uint32_t q, uint32_t s2, uint32_t c2, uint32_t (&w)[4]) {
    constexpr uint32_t kMask = 0x000f000f, kExp = 0x43004300;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = fma_bf16x2(and_or(q >> (4 * i), kMask, kExp), s2, c2);
}

// Lane t of a quad holds a[j] = M[t][j]; afterwards a[j] = M[j][t].
__device__ __forceinline__ void quad_transpose(uint32_t (&a)[4], int t) {
    const bool hi = t & 2;
    uint32_t s0 = hi ? a[0] : a[2], s1 = hi ? a[1] : a[3];
    s0 = __shfl_xor_sync(0xffffffffu, s0, 2);
    s1 = __shfl_xor_sync(0xffffffffu, s1, 2);
    if (hi) a[0] = s0, a[1] = s1;
    else a[2] = s0, a[3] = s1;
    const bool odd = t & 1;
    uint32_t r0 = odd ? a[0] : a[1], r1 = odd ? a[2] : a[3];
    r0 = __shfl_xor_sync(0xffffffffu, r0, 1);
    r1 = __shfl_xor_sync(0xffffffffu, r1, 1);
    if (odd) a[0] = r0, a[2] = r1;
    else a[1] = r0, a[3] = r1;
}

}  // namespace tessera::cuda::fast::dev
