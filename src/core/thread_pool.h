// A fixed pool of worker threads (one per core by default) with a blocking parallel_for.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads = 0);  // 0: every core (std::thread::hardware_concurrency)
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return int(workers_.size()) + 1; }  // the calling thread works too

    // Splits [0, n) into contiguous chunks of at least `grain` and runs fn(begin, end) on them;
    // returns when all are done. Exceptions from fn are rethrown on the caller (first one wins).
    // Nested calls from inside fn run serially.
    void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

    // The process-wide pool used by the CPU kernels; sized by set_global_threads (default: all cores).
    static ThreadPool& global();
    static void set_global_threads(int n);

private:
    void worker_loop(int index);

    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_start_, cv_done_;
    std::mutex call_mu_;  // one parallel_for at a time
    const std::function<void(int64_t, int64_t)>* job_ = nullptr;
    int64_t job_n_ = 0, job_chunk_ = 0;
    int n_chunks_ = 0;
    int next_chunk_ = 0, pending_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
};

}  // namespace tessera
