// Hopper (sm_90) synchronisation primitives for warp-specialised kernels: shared-memory mbarriers
// (init, arrive, wait on a phase's parity), named barriers for a subset of the block's warps, and
// setmaxnreg (moving registers from producer warpgroups to consumer warpgroups). Header-only,
// device code only.
//
// Phases: an mbarrier initialised with count n completes phase 0 after n arrivals, then phase 1,
// … Waiting for parity p returns once the phase of that parity is the last completed one; a fresh
// barrier counts its (never run) phase before 0 as completed with parity 1, so a producer waiting
// for "slot free" with parity ((use >> 1) & 1) ^ 1 passes its first round at once.
#pragma once
#include <cstdint>

#include "kernels/cuda/fast_mma.cuh"  // smem_addr

namespace tessera::cuda::fast::dev {

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}

// One arrival (release semantics: this thread's earlier writes are visible to whoever waits).
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// One arrival at the barrier at `bar`'s offset in cluster block `rank` (release at cluster scope:
// this thread's earlier reads of its own shared memory are done before that block sees it).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(bar)), "r"(rank));
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" ::"r"(remote) : "memory");
}

// The f32 at `p`'s offset in cluster block `rank`'s shared memory (distributed shared memory).
__device__ __forceinline__ float ld_shared_cluster_f32(const float* p, uint32_t rank) {
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(smem_addr(p)), "r"(rank));
    float v;
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
    return v;
}

// v into the f32 at `p`'s offset in cluster block `rank`'s shared memory, completing 4 bytes of
// the transaction count of the mbarrier at `bar`'s offset there (st.async: the receiver sees v once
// its wait on that barrier's phase returns; nothing to wait for here).
__device__ __forceinline__ void st_async_cluster_f32(float* p, uint32_t rank, float v, uint64_t* bar) {
    uint32_t rp, rb;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rp) : "r"(smem_addr(p)), "r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(rb) : "r"(smem_addr(bar)), "r"(rank));
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(rp),
                 "r"(__float_as_uint(v)), "r"(rb)
                 : "memory");
}

// Makes this thread's mbarrier inits visible to the cluster (before the cluster barrier that
// publishes them to blocks that will arrive on or st.async to them).
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// This block's rank in its cluster, and the cluster-wide barrier (every thread of every block;
// release / acquire: what each block wrote before is visible after; not .aligned: a warp may
// arrive diverged — a producer lane after its last copy, its other lanes long before).
__device__ __forceinline__ uint32_t cluster_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ void cluster_barrier() {
    asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// Waits (acquire) until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    asm volatile(
        "{\n.reg .pred done;\n"
        "wait_%=:\n"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
}

// One try of mbar_wait: whether the phase of parity `parity` has completed (acquire when it has).
// For waits that give up: a watchdog that turns a hang into an error (fast_moe_fused.cu).
// CLUSTER: the acquire at cluster scope, for a phase completed by other blocks' st.async (their
// release is the cluster's; one at the block's scope does not pair with it in PTX's memory model).
template <bool CLUSTER = false>
__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done;
#define TS_MBAR_TRY_WAIT(SCOPE)                                                        \
    asm volatile(                                                                      \
        "{\n.reg .pred p;\n"                                                           \
        "mbarrier.try_wait.parity.acquire." SCOPE ".shared::cta.b64 p, [%1], %2;\n"     \
        "selp.u32 %0, 1, 0, p;\n}\n"                                                   \
        : "=r"(done)                                                                   \
        : "r"(smem_addr(bar)), "r"(parity)                                             \
        : "memory")
    if constexpr (CLUSTER) TS_MBAR_TRY_WAIT("cluster");
    else TS_MBAR_TRY_WAIT("cta");
#undef TS_MBAR_TRY_WAIT
    return done != 0;
}

// The SM this thread runs on (%smid: may exceed the SM count, ids can have holes).
__device__ __forceinline__ uint32_t sm_id() {
    uint32_t sm;
    asm("mov.u32 %0, %%smid;" : "=r"(sm));
    return sm;
}

// The GPU's nanosecond clock (%globaltimer: the same on every SM).
__device__ __forceinline__ uint64_t global_ns() {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t)::"memory");
    return t;
}

// Barrier `id` (1 … 15; 0 is __syncthreads') among `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Arrives at barrier `id` without waiting (the other `threads` − this warp's count wait there).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The warpgroup's registers a thread: lowered (producers) or raised (consumers); N a multiple of 8
// in [24, 256]. Every warp of the warpgroup executes the same one.
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}

}  // namespace tessera::cuda::fast::dev
