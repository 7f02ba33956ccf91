// Where a benchmark runs: the Backend, its memory (alloc / upload / zero), a timer, and the
// device's Limits. The benchmarks only talk to BenchDevice, so the same binary measures the CPU
// today and CUDA once a CUDA Backend exists: the CUDA issue only has to define
// TESSERA_HAVE_CUDA_BACKEND and make_cuda_backend() (see make_device below).
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/backend.h"
#include "device_limits.h"

#ifdef TESSERA_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "kernels/cuda/cuda_backend.h"
#include "stream_gate.h"
#define TESSERA_HAVE_CUDA_BACKEND 1
#endif

namespace tessera::bench {

class BenchDevice {
public:
    virtual ~BenchDevice() = default;
    virtual Backend& backend() = 0;
    virtual Device device() const = 0;
    virtual const Limits& limits() const = 0;
    virtual std::string describe() const = 0;
    // Device memory of `bytes`, freed when the last handle goes.
    virtual std::shared_ptr<void> alloc(size_t bytes) = 0;
    virtual void upload(void* dst, const void* src, size_t bytes) = 0;
    virtual void zero(void* dst, size_t bytes) = 0;
    // Seconds for `reps` calls of fn(i), i = 0..reps-1, all queued work finished (CPU: wall clock;
    // CUDA: events on the stream the backend launches on).
    virtual double time(int reps, const std::function<void(int)>& fn) = 0;
};

class CpuDevice final : public BenchDevice {
public:
    explicit CpuDevice(Limits limits) : backend_(make_cpu_backend()), limits_(std::move(limits)) {}
    Backend& backend() override { return *backend_; }
    Device device() const override { return Device::CPU; }
    const Limits& limits() const override { return limits_; }
    std::string describe() const override { return "cpu: backend '" + backend_->name() + "', " + limits_.name; }
    std::shared_ptr<void> alloc(size_t bytes) override {
        void* p = std::aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
        if (!p) fail(ErrorKind::OutOfMemory, "bench: cannot allocate {} bytes of host memory", bytes);
        return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    }
    void upload(void* dst, const void* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
    void zero(void* dst, size_t bytes) override { std::memset(dst, 0, bytes); }
    double time(int reps, const std::function<void(int)>& fn) override {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) fn(i);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }

private:
    std::unique_ptr<Backend> backend_;
    Limits limits_;
};

#ifdef TESSERA_HAVE_CUDA
// CUDA memory and event timing: events on the backend's stream (cuda_backend_stream).
class CudaDevice final : public BenchDevice {
public:
    CudaDevice(std::unique_ptr<Backend> backend, Limits limits)
        : backend_(std::move(backend)), limits_(std::move(limits)) {
        check(cudaEventCreate(&start_), "cudaEventCreate");
        check(cudaEventCreate(&stop_), "cudaEventCreate");
    }
    ~CudaDevice() override {
        cudaEventDestroy(start_);
        cudaEventDestroy(stop_);
    }
    Backend& backend() override { return *backend_; }
    Device device() const override { return Device::CUDA; }
    const Limits& limits() const override { return limits_; }
    std::string describe() const override {
        cudaDeviceProp p{};
        cudaGetDeviceProperties(&p, 0);
        return std::string("cuda: backend '") + backend_->name() + "', " + p.name;
    }
    std::shared_ptr<void> alloc(size_t bytes) override {
        void* p = nullptr;
        check(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
        return std::shared_ptr<void>(p, [](void* q) { cudaFree(q); });
    }
    void upload(void* dst, const void* src, size_t bytes) override {
        check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    void zero(void* dst, size_t bytes) override { check(cudaMemset(dst, 0, bytes), "cudaMemset"); }
    // Up to kGateReps reps are queued behind a StreamGate on the backend's stream, so the time is
    // the GPU's alone (no launch latency between calls, as inside a CUDA graph); more would fill
    // the launch queue while the gate holds it.
    static constexpr int kGateReps = 256;
    double time(int reps, const std::function<void(int)>& fn) override {
        auto s = static_cast<cudaStream_t>(cuda_backend_stream(*backend_));
        const bool gated = reps <= kGateReps && !ungated_;
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        if (gated) gate_.close(s);
        check(cudaEventRecord(start_, s), "cudaEventRecord");
        for (int i = 0; i < reps; ++i) fn(i);
        check(cudaEventRecord(stop_, s), "cudaEventRecord");
        gate_.open();
        check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
        check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        if (gated && gate_.timed_out()) {  // an op waited on the stream (e.g. a pageable copy)
            ungated_ = true;
            return time(reps, fn);
        }
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        return double(ms) * 1e-3;
    }

private:
    static void check(cudaError_t e, const char* what) {
        if (e != cudaSuccess) fail(ErrorKind::Internal, "bench: {} failed: {}", what, cudaGetErrorString(e));
    }
    std::unique_ptr<Backend> backend_;
    Limits limits_;
    cudaEvent_t start_{}, stop_{};
    StreamGate gate_;
    bool ungated_ = false;  // set once an op was seen waiting on the stream from the host
};
#endif

// The device named by --device. "cuda" needs a CUDA build and a CUDA Backend; without them it
// is a clear error (Unsupported), which main() turns into exit status 2.
inline std::unique_ptr<BenchDevice> make_device(const std::string& name, double cpu_bw, double cpu_flops) {
    if (name == "cpu") return std::make_unique<CpuDevice>(cpu_limits(cpu_bw, cpu_flops));
    if (name == "cuda") {
#if defined(TESSERA_HAVE_CUDA) && defined(TESSERA_HAVE_CUDA_BACKEND)
        return std::make_unique<CudaDevice>(make_cuda_backend(), h200_limits());
#elif defined(TESSERA_HAVE_CUDA)
        fail(
            ErrorKind::Unsupported,
            "--device cuda: the CUDA backend is not built yet (no make_cuda_backend(); the CUDA kernel issue adds it)");
#else
        fail(ErrorKind::Unsupported,
             "--device cuda: this build has no CUDA (configure with nvcc present, TESSERA_CUDA=ON)");
#endif
    }
    fail(ErrorKind::Invalid, "--device {}: expected cpu or cuda", name);
}

// Owns the device memory of one benchmark case; everything is freed when it goes.
class Scope {
public:
    explicit Scope(BenchDevice& dev) : dev_(dev) {}

    // A tensor on the device holding `host` (nbytes of the shape), or zeros when host is null.
    Tensor tensor(DType t, std::initializer_list<int64_t> shape, const void* host = nullptr) {
        Tensor v(nullptr, t, shape, dev_.device());
        const size_t bytes = v.nbytes();
        v.data = raw(bytes, host);
        return v;
    }
    // A weight matrix [rows, cols] from host blocks. The one place a backend that repacks weights
    // at load (the CUDA kernel pack) would repack them.
    // On CUDA the backend places it (the reference path: bf16 / f32 in memory it owns, as at load).
    Tensor weight(DType t, int64_t rows, int64_t cols, const void* host) {
        if (dev_.device() == Device::CPU) return tensor(t, {rows, cols}, host);
        return dev_.backend().place_weight(Tensor(const_cast<void*>(host), t, {rows, cols}), WeightUse::Matrix);
    }
    // Index arrays of the step plans (ids, q_start, block tables) where the backend reads them.
    // The CPU backend reads host memory; the CUDA contract decides for CUDA (device memory here).
    const int32_t* ints(const std::vector<int32_t>& v) {
        return static_cast<const int32_t*>(raw(v.size() * sizeof(int32_t), v.data()));
    }
    const float* floats(const std::vector<float>& v) {
        return static_cast<const float*>(raw(v.size() * sizeof(float), v.data()));
    }
    BenchDevice& device() { return dev_; }

private:
    void* raw(size_t bytes, const void* host) {
        held_.push_back(dev_.alloc(bytes));
        void* p = held_.back().get();
        if (host)
            dev_.upload(p, host, bytes);
        else
            dev_.zero(p, bytes);
        return p;
    }
    BenchDevice& dev_;
    std::vector<std::shared_ptr<void>> held_;
};

}  // namespace tessera::bench
