// A profiling build's stamps of the chunked GDN (cmake -DTESSERA_GDN_PHASES=ON; run by
// scripts/gpu/gdn_phases.sh): where an F16Rt lean prep item's cycles go, phase by phase, and when the
// state pass's chunks became ready, began and ended. Off (the default build) the stamps are empty
// inline functions and no buffer is ever allocated. Host side here; the device side is
// fast_gdn_phases.cuh.
//
// The buffer (64-bit words, zeroed before the stamped call):
//  - prep item i (< kPhaseMaxItems), kPhaseItemWords words from i·kPhaseItemWords: [0] its SM, [1] its
//    start on the global timer (ns), [2 + k] its SM's clock64 at stamp k = 0 (start) … 8 (published),
//    [11] its end on the global timer. Stamp k ends phase k: 1 K's and Q's rows in, Γ and β;
//    2 the maxima; 3 the f16 rows, K̃ / Q̃ to scratch, V's loads issued; 4 K·Kᵀ and Q·Kᵀ (and V in);
//    5 P to scratch, T's diagonal blocks; 6 the rest of T; 7 T' / T''; 8 W and U, published.
//  - the state pass, value head h (< kPhaseMaxHeads) of sequence 0's first column block, chunk c
//    (< kPhaseMaxChunks): 4 words from kPhasePassBase + 4·(h·kPhaseMaxChunks + c): [0] when its
//    producer saw the chunk's flag, [1] when its consumers began it, [2] when they ended it, [3]
//    (chunk 0 only) the block's start — all on the global timer.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace tessera::cuda::fast::detail {

constexpr uint64_t kPhaseItemWords = 16, kPhaseMaxItems = uint64_t(1) << 18;
constexpr uint64_t kPhaseMaxHeads = 64, kPhaseMaxChunks = 4096;
constexpr uint64_t kPhasePassBase = kPhaseItemWords * kPhaseMaxItems;
constexpr uint64_t kPhaseWords = kPhasePassBase + 4 * kPhaseMaxHeads * kPhaseMaxChunks;

#if TESSERA_GDN_PHASES
// The stamps' buffer for this chunked call — zeroed on `stream` — where TESSERA_GDN_PHASES names a file
// prefix and this is the process's TESSERA_GDN_PHASES_CALL-th call not being captured into a graph
// (default 6: past a bench row's warm-up); else null (no stamps).
unsigned long long* gdn_phases_begin(cudaStream_t stream);
// After the stamped call's launches: waits for them and writes PREFIX_prep.csv (item, sm, gt_start,
// gt_end, c0 … c8) for `items` items and PREFIX_pass.csv (head, chunk, ready, start, end,
// block_start) for `heads` heads of `chunks` chunks; says where on stderr.
void gdn_phases_end(const unsigned long long* buf, int64_t items, int64_t heads, int64_t chunks, cudaStream_t stream);
#else
inline unsigned long long* gdn_phases_begin(cudaStream_t) { return nullptr; }
inline void gdn_phases_end(const unsigned long long*, int64_t, int64_t, int64_t, cudaStream_t) {}
#endif

}  // namespace tessera::cuda::fast::detail
