// CudaBackend::record: the ops a body queues on the backend's stream, captured into a CUDA graph
// and instantiated once; replay() launches the whole graph on the same stream.
#include <cuda_runtime_api.h>

#include "core/status.h"
#include "kernels/cuda/cuda_backend_impl.h"
#include "kernels/cuda/cuda_check.h"

namespace tessera::cuda {

namespace {

class CudaRecording final : public Backend::Recording {
public:
    CudaRecording(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
    ~CudaRecording() override { cudaGraphExecDestroy(exec_); }
    void replay() override { TS_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

private:
    cudaGraphExec_t exec_;
    cudaStream_t stream_;
};

}  // namespace

std::unique_ptr<Backend::Recording> CudaBackend::record(const std::function<void()>& body) {
    cudaStream_t s = stream_.get();
    // Thread-local mode: other threads' CUDA calls (the engine thread is the only one queueing
    // here, but a server thread may ask for device memory) do not invalidate the capture.
    TS_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
        body();
    } catch (...) {
        cudaStreamEndCapture(s, &graph);  // leave the stream usable; the partial graph is dropped
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
        throw;
    }
    TS_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TS_CUDA_CHECK(err);
    return std::make_unique<CudaRecording>(exec, s);
}

}  // namespace tessera::cuda
