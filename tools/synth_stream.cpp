// Double-buffered, multi-threaded row streaming for `tessera synth` (see synth_stream.h).
#include "synth_stream.h"

#include <algorithm>
#include <future>
#include <vector>

#include "core/thread_pool.h"

namespace tessera::cli {

void synth_stream_rows(int64_t rows, size_t row_bytes, const std::function<void(int64_t, int64_t, void*)>& gen,
                       const std::function<void(const void*, size_t)>& sink) {
    constexpr size_t kChunkBytes = size_t(16) << 20;
    const int64_t per_chunk = std::max<int64_t>(1, int64_t(kChunkBytes / std::max<size_t>(row_bytes, 1)));
    const int64_t n_chunks = (rows + per_chunk - 1) / per_chunk;
    std::vector<uint8_t> buf[2];
    auto make = [&](int64_t k) {
        const int64_t r0 = k * per_chunk, n = std::min(per_chunk, rows - r0);
        auto& b = buf[k % 2];
        b.resize(size_t(n) * row_bytes);
        ThreadPool::global().parallel_for(
            n, [&](int64_t lo, int64_t hi) { gen(r0 + lo, hi - lo, b.data() + size_t(lo) * row_bytes); },
            std::max<int64_t>(1, int64_t((size_t(1) << 16) / std::max<size_t>(row_bytes, 1))));
        return n;
    };
    if (n_chunks == 0) return;
    if (n_chunks == 1) {  // small tensors: no thread hand-off
        const int64_t n = make(0);
        sink(buf[0].data(), size_t(n) * row_bytes);
        return;
    }
    std::future<int64_t> next = std::async(std::launch::async, make, 0);
    for (int64_t k = 0; k < n_chunks; ++k) {
        const int64_t n = next.get();
        if (k + 1 < n_chunks) next = std::async(std::launch::async, make, k + 1);
        try {
            sink(buf[k % 2].data(), size_t(n) * row_bytes);
        } catch (...) {
            if (next.valid()) next.wait();  // the generator still uses the other buffer
            throw;
        }
    }
}

}  // namespace tessera::cli
