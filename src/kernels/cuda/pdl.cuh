// Programmatic dependent launch (PDL, sm_90): a kernel launched with pdl::launch may start while
// the kernel before it on the stream still runs, so its launch, block scheduling and prologue
// overlap that kernel's tail — a decode step is ~450 kernels of 3–20 µs, where those gaps add up.
// The contract, for every kernel launched so:
//   - before pdl::wait() it reads only what no kernel of the step writes (weights, constants)
//     and writes nothing;
//   - it calls pdl::trigger() (which lets the kernel after it start) only after pdl::wait(), so a
//     kernel two launches on still finds everything before its predecessor complete.
// That second rule is what lets a kernel read, before its wait, what was written two launches
// back or earlier (its predecessor had passed its own wait when it let this one start): the MoE
// decode's x and router logits after the routing kernel (MoeSwitches::x_settled, MoeRouteAhead).
// pdl::wait() returns once the kernel before has completed and its writes are visible. Both are
// no-ops in a kernel launched the ordinary way, so such a kernel is correct either way.
// TESSERA_PDL=0 launches every kernel the ordinary way (for A/B measurements).
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/pdl.h"

namespace tessera::cuda::pdl {

__device__ __forceinline__ void wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

namespace detail {
// cudaLaunchKernelEx with programmatic stream serialisation where enabled, and in clusters of
// *cluster blocks where cluster is given.
template <typename... KArgs, typename... Args>
cudaError_t launch_ex(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                      const dim3* cluster, bool pdl, Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute at[2];
    unsigned n = 0;
    if (cluster) {
        at[n].id = cudaLaunchAttributeClusterDimension;
        at[n].val.clusterDim.x = cluster->x;
        at[n].val.clusterDim.y = cluster->y;
        at[n].val.clusterDim.z = cluster->z;
        ++n;
    }
    if (pdl && enabled()) {
        at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[n].val.programmaticStreamSerializationAllowed = 1;
        ++n;
    }
    cfg.attrs = at;
    cfg.numAttrs = n;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}
}  // namespace detail

template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args... args) {
    return detail::launch_ex(kernel, grid, block, smem, stream, nullptr, true, args...);
}

// launch() in thread-block clusters of cluster.x × cluster.y × cluster.z blocks (the grid a
// multiple of it).
template <typename... KArgs, typename... Args>
cudaError_t launch_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                           dim3 cluster, Args... args) {
    return detail::launch_ex(kernel, grid, block, smem, stream, &cluster, true, args...);
}

// A kernel that does not keep the contract above (no pdl::wait) in clusters, launched the
// ordinary way: it starts once the kernel before it has completed.
template <typename... KArgs, typename... Args>
cudaError_t launch_cluster_serial(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                  dim3 cluster, Args... args) {
    return detail::launch_ex(kernel, grid, block, smem, stream, &cluster, false, args...);
}

}  // namespace tessera::cuda::pdl
