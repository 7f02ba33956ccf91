// State slots for recurrent (Gated DeltaNet) layers: per layer a conv state [n_slots, K-1, C]
// and a recurrent state [n_slots, nv, dk, dv], both f32. A live sequence owns one slot index
// across all layers; a slot is zeroed when handed out (a new sequence starts from zero state).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"

namespace tessera {

struct StateCacheShape {
    int64_t n_layers = 0;  // recurrent layers only
    int64_t n_slots = 0;
    int64_t conv_channels = 0, conv_k = 0;   // C, K (the state keeps K-1 inputs)
    int64_t n_v_heads = 0, dk = 0, dv = 0;
    size_t conv_bytes() const { return size_t(n_slots * (conv_k - 1) * conv_channels) * sizeof(float); }
    size_t rec_bytes() const { return size_t(n_slots * n_v_heads * dk * dv) * sizeof(float); }
    size_t bytes() const { return size_t(n_layers) * (conv_bytes() + rec_bytes()); }
    size_t bytes_per_slot() const { return n_slots ? bytes() / size_t(n_slots) : 0; }
};

class StateCache {
public:
    // Slots in the backend's memory, zeroed and copied by its ops (host memory for the CPU's).
    StateCache(const StateCacheShape& shape, Backend& be);
    ~StateCache();
    StateCache(const StateCache&) = delete;
    StateCache& operator=(const StateCache&) = delete;
    const StateCacheShape& shape() const { return shape_; }
    Tensor conv(int64_t layer) const;       // [n_slots, K-1, C]
    Tensor recurrent(int64_t layer) const;  // [n_slots, nv, dk, dv]

    int64_t free_slots() const { return int64_t(free_.size()); }
    // A zeroed slot; throws Error(OutOfMemory) when none is free.
    int32_t alloc();
    void release(int32_t slot);
    // Slot contents, all layers (the engine manages slot ids itself and uses these).
    void zero(int32_t slot);
    void copy(int32_t dst, int32_t src);

private:
    StateCacheShape shape_;
    // [n_layers] x (conv, recurrent), not initialised: a slot is zeroed (or copied into) when it
    // is handed out, so untouched slots cost no resident memory.
    Backend& be_;
    float* storage_ = nullptr;
    std::vector<int32_t> free_;
};

}  // namespace tessera
