// CUDA device query.
#include "kernels/cuda/device.h"

#include <fmt/format.h>

#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if (why) *why = fmt::format("{} ({})", cudaGetErrorName(err), cudaGetErrorString(err));
        return 0;
    }
    if (n == 0 && why) *why = "the CUDA runtime reports 0 devices";
    return n;
}

DeviceInfo device_info(int index) {
    std::string why;
    const int n = device_count(&why);
    TS_CHECK(index >= 0 && index < n, "CUDA device {} does not exist ({} devices{}{})", index, n,
             why.empty() ? "" : ": ", why);
    cudaDeviceProp prop{};
    TS_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
    DeviceInfo d;
    d.index = index;
    d.name = prop.name;
    d.sm_count = prop.multiProcessorCount;
    d.cc_major = prop.major;
    d.cc_minor = prop.minor;
    d.total_bytes = prop.totalGlobalMem;

    // cudaMemGetInfo reports on the current device: switch to `index`, then back.
    int prev = 0;
    TS_CUDA_CHECK(cudaGetDevice(&prev));
    TS_CUDA_CHECK(cudaSetDevice(index));
    size_t free_b = 0, total_b = 0;
    const cudaError_t err = cudaMemGetInfo(&free_b, &total_b);
    TS_CUDA_CHECK(cudaSetDevice(prev));
    TS_CUDA_CHECK(err);
    d.free_bytes = free_b;
    return d;
}

std::string to_string(const DeviceInfo& d) {
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    return fmt::format("cuda:{} {}, sm_{}{}, {} SMs, {:.1f} GiB ({:.1f} GiB free)", d.index, d.name,
                       d.cc_major, d.cc_minor, d.sm_count, d.total_bytes / GiB, d.free_bytes / GiB);
}

int current_sm_count() {
    static int count[64] = {};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) return 132;
    if (!count[dev] && (cudaDeviceGetAttribute(&count[dev], cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
                        count[dev] <= 0))
        count[dev] = 132;
    return count[dev];
}

}  // namespace tessera::cuda
