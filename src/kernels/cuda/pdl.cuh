// Programmatic dependent launch (PDL, sm_90): a kernel launched with pdl::launch may start while
// the kernel before it on the stream still runs, so its launch, block scheduling and prologue
// overlap that kernel's tail — a decode step is ~450 kernels of 3–20 µs, where those gaps add up.
// The contract, for every kernel launched so:
//   - before pdl::wait() it reads only what no kernel of the step writes (weights, constants)
//     and writes nothing;
//   - it calls pdl::trigger() (which lets the kernel after it start) only after pdl::wait(), so a
//     kernel two launches on still finds everything before its predecessor complete.
// pdl::wait() returns once the kernel before has completed and its writes are visible. Both are
// no-ops in a kernel launched the ordinary way, so such a kernel is correct either way.
// TESSERA_PDL=0 launches every kernel the ordinary way (for A/B measurements).
#pragma once
#include <cuda_runtime_api.h>

#include "kernels/cuda/pdl.h"

namespace tessera::cuda::pdl {

__device__ __forceinline__ void wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

template <typename... KArgs, typename... Args>
cudaError_t launch(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   Args... args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = enabled() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

}  // namespace tessera::cuda::pdl
