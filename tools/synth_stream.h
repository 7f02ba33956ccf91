// Streams one tensor's rows to a sink in bounded chunks: a chunk is generated on every core while
// the previous one is being written, so memory stays at two chunks whatever the model's size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>

namespace tessera::cli {

// gen(r0, n, dst): writes rows [r0, r0 + n) (row_bytes each) to dst; called from several threads
// at once on disjoint row ranges. sink(data, bytes): receives the chunks in order.
void synth_stream_rows(int64_t rows, size_t row_bytes, const std::function<void(int64_t, int64_t, void*)>& gen,
                       const std::function<void(const void*, size_t)>& sink);

}  // namespace tessera::cli
