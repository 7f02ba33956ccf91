// A CUDA injection library that records every kernel's start and end on the GPU (CUPTI's
// concurrent-kernel activity: kernels launched from CUDA graphs included, each node on its own)
// into a CSV that timeline.py reads — for machines without Nsight Systems. Build and use (on the
// GPU machine; scripts/gpu/timeline.sh does both):
//   g++ -O2 -shared -fPIC -I$CUDA/include kernel_trace.cpp -o libkernel_trace.so -L<cupti dir> -lcupti
//   CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so KERNEL_TRACE_OUT=trace.csv <command>
// Columns: "Start (ns)","Duration (ns)","Name" (demangled). KERNEL_TRACE_API=1 adds the runtime API
// calls and memory copies on the same clock, named "api:<call>" and "memcpy:<kind>" (host_gap.py);
// KERNEL_TRACE_API=memcpy only the copies (the API tracing slows the host's launches several-fold,
// which hides what the GPU waits for: gpu_gap.py).
#include <cupti.h>
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

FILE* out = nullptr;
std::mutex lock;

void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    constexpr size_t kBytes = 8 << 20;
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
    *size = kBytes;
    *max_records = 0;
}

void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* record = nullptr;
    std::lock_guard<std::mutex> g(lock);
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
        if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
            const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
            const char* name = nullptr;
            cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name);
            if (out) std::fprintf(out, "%llu,%llu,\"api:%s\"\n", (unsigned long long)a->start,
                                  (unsigned long long)(a->end - a->start), name ? name : "?");
            continue;
        }
        if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
            if (out) std::fprintf(out, "%llu,%llu,\"memcpy:%d:%llu\"\n", (unsigned long long)m->start,
                                  (unsigned long long)(m->end - m->start), int(m->copyKind),
                                  (unsigned long long)m->bytes);
            continue;
        }
        if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
        const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        int status = 0;
        char* name = abi::__cxa_demangle(k->name, nullptr, nullptr, &status);
        std::string n = status == 0 && name ? name : k->name;
        std::free(name);
        for (char& c : n)
            if (c == '"') c = '\'';
        if (out) std::fprintf(out, "%llu,%llu,\"%s\"\n", (unsigned long long)k->start,
                              (unsigned long long)(k->end - k->start), n.c_str());
    }
    std::free(buffer);
}

void finish() {
    cuptiActivityFlushAll(1);
    std::lock_guard<std::mutex> g(lock);
    if (out) std::fclose(out);
    out = nullptr;
}

}  // namespace

extern "C" int InitializeInjection(void) {
    const char* path = std::getenv("KERNEL_TRACE_OUT");
    out = std::fopen(path ? path : "kernel_trace.csv", "w");
    if (!out) return 0;
    std::fprintf(out, "\"Start (ns)\",\"Duration (ns)\",\"Name\"\n");
    if (cuptiActivityRegisterCallbacks(requested, completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS)
        return 0;
    const char* api = std::getenv("KERNEL_TRACE_API");
    const std::string mode = api ? api : "";
    if (mode == "1" && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) != CUPTI_SUCCESS) return 0;
    if ((mode == "1" || mode == "memcpy") && cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS)
        return 0;
    cuptiActivityFlushPeriod(200);  // ms: buffers reach the file while the program runs, not only at exit
    std::atexit(finish);
    return 1;
}
