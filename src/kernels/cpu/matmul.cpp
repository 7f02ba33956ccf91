// y[T, N] = x[T, K] · w[N, K]ᵀ for every weight dtype: quantize the activations once (q8 blocks
// for quantized weights), then run (weight-row block × 64-token tile) tasks over the thread pool;
// inside a task K is chunked so a block of weight rows stays in L1 while the token tile streams
// past it, and each weight load in the row-dot kernels is shared by up to 4 tokens.
//
// Batch invariance: y[t, n] is always Σ over the same K chunks (a size fixed by the dtypes and K,
// never by T), each a row-dot the kernels compute alike for any row count, added in ascending
// order — so a row's result does not depend on T, its place in the tile or the thread count.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/quant_dot.h"
#include "kernels/cpu/simd.h"

namespace tessera::cpu {

namespace {
constexpr int64_t kTokenTile = 64;           // tokens per task
constexpr size_t kActChunkBytes = 8192;      // four activation rows of one K chunk
constexpr size_t kWeightChunkBytes = 16384;  // the K chunks of one block of weight rows
}  // namespace

void matmul(float* y, int64_t y_stride, const float* x, int64_t x_stride, const void* w, size_t w_stride_bytes,
            DType w_type, int64_t T, int64_t N, int64_t K) {
    const DotKernel* dk = dot_kernel(w_type);
    if (!dk) fail(ErrorKind::Unsupported, "matmul: weights of dtype {} are not supported on cpu", dtype_name(w_type));
    if (T == 0 || N == 0) return;
    const RowDotFn dot = simd_enabled() ? dk->simd : dk->scalar;
    ThreadPool& pool = ThreadPool::global();

    // Activations in the kernel's format: x itself for float weights, else q8 rows.
    const char* act = reinterpret_cast<const char*>(x);
    size_t act_stride = size_t(x_stride) * sizeof(float);
    thread_local std::vector<char> qbuf;
    if (dk->act != ActFormat::F32) {
        act_stride = act_row_bytes(dk->act, K);
        qbuf.resize(size_t(T) * act_stride);
        char* q = qbuf.data();
        pool.parallel_for(T, [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) quantize_act(dk->act, x + t * x_stride, q + t * act_stride, K);
        });
        act = q;
    }

    // Cache blocking: split K into chunks so that four activation rows of a chunk and the chunks
    // of a block of weight rows stay in L1 while the token tile passes them: about kActChunkBytes,
    // in equal whole blocks (K = 2048 of q8_K activations is one chunk, not 1792 + 256). T must
    // not enter here.
    const int64_t blk = dtype_info(w_type).block_elems;
    const double act_bpe = double(act_row_bytes(dk->act, K)) / double(K), w_bpe = double(dtype_row_bytes(w_type, K)) / double(K);
    const double kc_target = double(kActChunkBytes) / (kMaxDotRows * act_bpe);
    const int64_t n_split = std::max<int64_t>(1, std::llround(double(K) / kc_target));
    const int64_t kc = std::clamp<int64_t>((K / blk + n_split - 1) / n_split * blk, blk, K);
    const int64_t nb = std::clamp<int64_t>(int64_t(double(kWeightChunkBytes) / (double(kc) * w_bpe)), 1, 64);
    const int64_t n_blocks = (N + nb - 1) / nb;
    const int64_t t_tiles = (T + kTokenTile - 1) / kTokenTile;
    const char* wc = static_cast<const char*>(w);
    // Byte offsets of each K chunk in a weight row and an activation row (kept out of the loops:
    // dtype_row_bytes divides).
    const int64_t n_chunks = (K + kc - 1) / kc;
    thread_local std::vector<size_t> chunk_off;
    chunk_off.resize(size_t(2 * n_chunks));
    for (int64_t c = 0; c < n_chunks; ++c) {
        chunk_off[size_t(2 * c)] = dtype_row_bytes(w_type, c * kc);
        chunk_off[size_t(2 * c + 1)] = act_row_bytes(dk->act, c * kc);
    }
    const size_t* off = chunk_off.data();

    pool.parallel_for(n_blocks * t_tiles, [&](int64_t begin, int64_t end) {
        float out[kMaxDotRows];
        for (int64_t task = begin; task < end; ++task) {
            const int64_t n0 = (task / t_tiles) * nb, n1 = std::min(N, n0 + nb);
            const int64_t t0 = (task % t_tiles) * kTokenTile, t1 = std::min(T, t0 + kTokenTile);
            if (t1 - t0 <= kMaxDotRows) {
                // One row group (decode): nothing to reuse across rows, so each weight row streams
                // whole, chunk after chunk; the chunk sums are added in the same order as below.
                const int R = int(t1 - t0);
                const char* at = act + t0 * act_stride;
                float acc[kMaxDotRows];
                for (int64_t n = n0; n < n1; ++n) {
                    const char* wn = wc + n * w_stride_bytes;
                    for (int64_t c = 0; c < n_chunks; ++c) {
                        dot(wn + off[2 * c], at + off[2 * c + 1], act_stride, R, std::min(kc, K - c * kc), out);
                        for (int r = 0; r < R; ++r) acc[r] = c == 0 ? out[r] : acc[r] + out[r];
                    }
                    for (int r = 0; r < R; ++r) y[(t0 + r) * y_stride + n] = acc[r];
                }
                continue;
            }
            for (int64_t c = 0; c < n_chunks; ++c) {
                const int64_t k0 = c * kc, klen = std::min(kc, K - k0);
                const char* wk = wc + off[2 * c];
                const char* ak = act + off[2 * c + 1];
                for (int64_t t = t0; t < t1; t += kMaxDotRows) {
                    const int R = int(std::min<int64_t>(kMaxDotRows, t1 - t));
                    for (int64_t n = n0; n < n1; ++n) {
                        dot(wk + n * w_stride_bytes, ak + t * act_stride, act_stride, R, klen, out);
                        for (int r = 0; r < R; ++r) {
                            float& dst = y[(t + r) * y_stride + n];
                            dst = k0 == 0 ? out[r] : dst + out[r];
                        }
                    }
                }
            }
        }
    });
}

}  // namespace tessera::cpu
