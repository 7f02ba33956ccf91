#include "core/thread_pool.h"

#include <algorithm>
#include <memory>

namespace tessera {

namespace {
thread_local bool t_in_pool = false;
std::unique_ptr<ThreadPool> g_pool;
std::mutex g_pool_mu;
int g_threads = 0;
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    if (n_threads <= 0) n_threads = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int i = 0; i < n_threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_start_.notify_all();
    for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int) {
    t_in_pool = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lk(mu_);
    for (;;) {
        cv_start_.wait(lk, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        while (next_chunk_ < n_chunks_) {
            const int c = next_chunk_++;
            const int64_t b = c * job_chunk_, e = std::min(job_n_, b + job_chunk_);
            lk.unlock();
            std::exception_ptr err;
            try {
                (*job_)(b, e);
            } catch (...) {
                err = std::current_exception();
            }
            lk.lock();
            if (err && !error_) error_ = err;
            if (--pending_ == 0) cv_done_.notify_all();
        }
    }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
    if (n <= 0) return;
    grain = std::max<int64_t>(1, grain);
    const int64_t max_chunks = std::max<int64_t>(1, n / grain);
    const int n_chunks = int(std::min<int64_t>(max_chunks, int64_t(size()) * 4));
    if (n_chunks <= 1 || workers_.empty() || t_in_pool) {
        fn(0, n);
        return;
    }
    std::lock_guard<std::mutex> call_lk(call_mu_);
    std::unique_lock<std::mutex> lk(mu_);
    job_ = &fn;
    job_n_ = n;
    job_chunk_ = (n + n_chunks - 1) / n_chunks;
    n_chunks_ = int((n + job_chunk_ - 1) / job_chunk_);
    next_chunk_ = 0;
    pending_ = n_chunks_;
    error_ = nullptr;
    ++generation_;
    cv_start_.notify_all();
    // The caller takes chunks too.
    t_in_pool = true;
    while (next_chunk_ < n_chunks_) {
        const int c = next_chunk_++;
        const int64_t b = c * job_chunk_, e = std::min(job_n_, b + job_chunk_);
        lk.unlock();
        std::exception_ptr err;
        try {
            fn(b, e);
        } catch (...) {
            err = std::current_exception();
        }
        lk.lock();
        if (err && !error_) error_ = err;
        --pending_;
    }
    t_in_pool = false;
    cv_done_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) {
        auto e = error_;
        error_ = nullptr;
        std::rethrow_exception(e);
    }
}

ThreadPool& ThreadPool::global() {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    if (!g_pool) g_pool = std::make_unique<ThreadPool>(g_threads);
    return *g_pool;
}

void ThreadPool::set_global_threads(int n) {
    std::lock_guard<std::mutex> lk(g_pool_mu);
    g_threads = n;
    g_pool.reset();
}

}  // namespace tessera
