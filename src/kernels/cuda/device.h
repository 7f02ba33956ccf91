// CUDA device query. Only built when nvcc is found; host code that uses it is guarded by
// TESSERA_HAVE_CUDA.
#pragma once
#include <cstddef>
#include <string>

namespace tessera::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;        // e.g. "NVIDIA H200"
    int sm_count = 0;        // streaming multiprocessors
    int cc_major = 0, cc_minor = 0;  // compute capability, e.g. 9.0
    size_t total_bytes = 0;  // global memory
    size_t free_bytes = 0;   // free global memory at the time of the query
};

// Number of usable devices; 0 (never an exception) when there is no device or driver, with
// the runtime's reason in *why when given.
int device_count(std::string* why = nullptr);

// Properties of device `index` (0 <= index < device_count()); throws Error otherwise.
DeviceInfo device_info(int index);

// Streaming multiprocessors of the current device, cached per device (132, the H200's, when the
// query fails): what the kernels' launch heuristics size their grids by.
int current_sm_count();

// One line: "cuda:0 NVIDIA H200, sm_90, 132 SMs, 139.8 GiB (139.1 GiB free)".
std::string to_string(const DeviceInfo& d);

}  // namespace tessera::cuda
