// CudaTimer: the median time of a call on one CUDA stream, by CUDA events — what the kernel
// pack's benchmarks (bench/fast_*.cpp) time with. Each timed call is queued behind a StreamGate,
// so the time is the GPU's alone (no launch latency), as a call inside a CUDA graph or a busy
// stream sees it. CUDA builds only.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "stream_gate.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::bench {

class CudaTimer {
public:
    explicit CudaTimer(cudaStream_t s) : s_(s) {
        TS_CUDA_CHECK(cudaEventCreate(&a_));
        TS_CUDA_CHECK(cudaEventCreate(&b_));
    }
    ~CudaTimer() {
        cudaEventDestroy(a_);
        cudaEventDestroy(b_);
    }
    CudaTimer(const CudaTimer&) = delete;
    CudaTimer& operator=(const CudaTimer&) = delete;

    // Median seconds of one call over `runs` timed calls after `warmup` untimed ones. fn(i) gets
    // the call's index (to rotate buffers) when it takes one, else fn().
    template <typename F>
    double median(int warmup, int runs, F&& fn) {
        int i = 0;
        auto call = [&] {
            if constexpr (std::is_invocable_v<F&, int>) fn(i++);
            else fn();
        };
        for (int w = 0; w < warmup; ++w) call();
        TS_CUDA_CHECK(cudaStreamSynchronize(s_));
        std::vector<double> t;
        bool gated = true;
        for (int r = 0; r < runs; ++r) {
            if (gated) gate_.close(s_);
            TS_CUDA_CHECK(cudaEventRecord(a_, s_));
            call();
            TS_CUDA_CHECK(cudaEventRecord(b_, s_));
            gate_.open();
            TS_CUDA_CHECK(cudaEventSynchronize(b_));
            float ms = 0;
            TS_CUDA_CHECK(cudaEventElapsedTime(&ms, a_, b_));
            if (gated && gate_.timed_out()) {  // the call waited on the stream: time it ungated
                gated = false;
                t.clear();
                r = -1;
                continue;
            }
            t.push_back(double(ms) * 1e-3);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }

    // Median seconds per call of call(i) (i: the call's index), `reps` calls back to back per
    // timed sample — captured once into one CUDA graph and replayed when `graph` (launch gaps and
    // host time hidden, as in the engine's decode graphs and llama.cpp's test-backend-ops).
    template <typename F>
    double per_call(int warmup, int runs, int reps, bool graph, F&& call) {
        if (!graph) {
            int i = 0;
            return median(warmup, runs, [&] {
                       for (int r = 0; r < reps; ++r) call(i++);
                   }) /
                   reps;
        }
        cudaGraph_t g = nullptr;
        cudaGraphExec_t exec = nullptr;
        TS_CUDA_CHECK(cudaStreamBeginCapture(s_, cudaStreamCaptureModeRelaxed));
        for (int r = 0; r < reps; ++r) call(r);
        TS_CUDA_CHECK(cudaStreamEndCapture(s_, &g));
        TS_CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
        const double sec = median(warmup, runs, [&] { TS_CUDA_CHECK(cudaGraphLaunch(exec, s_)); });
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(g);
        return sec / reps;
    }

private:
    cudaStream_t s_;
    cudaEvent_t a_{}, b_{};
    StreamGate gate_;
};

}  // namespace tessera::bench
