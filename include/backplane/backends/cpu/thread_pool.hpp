#pragma once
// The CPU backend's thread pool: persistent worker threads that run one job at a time
// together with the calling thread.
//
//   thread_pool pool(4);                  // no thread starts yet
//   pool.run(fn, ctx);                    // fn(ctx, 0) here, fn(ctx, 1..3) on workers
//   pool.set_n_threads(2);                // joins the two workers no longer needed
//
// * The calling thread is thread 0 and does its share; workers 1..n-1 start with the
//   first job that needs them and live until the pool shrinks or dies, so a compute
//   pays no thread start-up.
// * Between jobs workers poll for up to 1 ms (a next compute that follows soon finds
//   them awake), then sleep, so an idle backend costs no CPU (detail/sync.hpp).
// * Inside a job, barrier() waits for all threads and barrier(n) for threads 0..n-1
//   (the threads of one node); both are spin barriers that fall back to sleeping.
//
// One job at a time, and set_n_threads only between jobs: a backend is a stream, used
// by one thread at a time, so the pool needs no lock.

#include <backplane/backends/cpu/detail/sync.hpp>
#include <backplane/core/error.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace backplane::cpu {

/// The number of hardware threads (at least 1): the default size of a pool.
inline int hardware_threads() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

class thread_pool {
public:
    /// A job: thread ith's part. Must not throw, and every thread that calls a barrier
    /// must be matched by the others (or the job deadlocks).
    using job_fn = void (*)(void* ctx, int ith) noexcept;

    /// A pool of n threads (at least 1), the calling thread included.
    explicit thread_pool(int n_threads = hardware_threads()) noexcept
        : n_threads_(n_threads < 1 ? 1 : n_threads) {}
    ~thread_pool() { stop_workers(0); }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    [[nodiscard]] int n_threads() const noexcept { return n_threads_; }

    /// Threads of the next jobs (at least 1). Workers above the new count are joined
    /// now; missing ones start with the next job. Only between jobs.
    void set_n_threads(int n) noexcept {
        n_threads_ = n < 1 ? 1 : n;
        stop_workers(static_cast<std::size_t>(n_threads_ - 1));
    }

    /// Worker threads alive now (not counting the caller); for tests and diagnostics.
    [[nodiscard]] int n_workers() const noexcept { return static_cast<int>(workers_.size()); }

    /// Runs fn(ctx, ith) for every ith in [0, n_threads()), ith 0 on the calling thread,
    /// and returns when all have returned. Fails (running nothing) only when a worker
    /// thread cannot be started.
    [[nodiscard]] status run(job_fn fn, void* ctx) noexcept {
        if (n_threads_ <= 1) {
            fn(ctx, 0);
            return {};
        }
        if (auto s = start_workers(); !s) return s;
        fn_ = fn;
        ctx_ = ctx;
        // Written while no worker looks (all acknowledged the last job); published by
        // the release in bump().
        pending_.value.store(static_cast<std::uint32_t>(workers_.size()), std::memory_order_relaxed);
        job_.bump();
        fn(ctx, 0);
        wait_for_workers();
        return {};
    }

    /// Inside a job: waits until all n_threads() threads arrive.
    void barrier() noexcept { all_.arrive_and_wait(n_threads_); }
    /// Inside a job: waits until threads 0..n-1 arrive (each of them calls this; the
    /// others must not). A separate barrier from barrier(), so that threads waiting
    /// for the whole pool do not count here.
    void barrier(int n) noexcept { some_.arrive_and_wait(n); }

private:
    void worker_main(int ith, std::uint32_t seen) noexcept {
        for (;;) {
            job_.wait_while(seen);
            ++seen; // the caller posts the next job only after every worker acknowledged
            const bool leave = static_cast<std::size_t>(ith) >= exit_from_;
            if (!leave && fn_ != nullptr) fn_(ctx_, ith);
            pending_.value.fetch_sub(1, std::memory_order_seq_cst);
            pending_.notify_changed();
            if (leave) return;
        }
    }

    void wait_for_workers() noexcept {
        for (std::uint32_t left; (left = pending_.value.load(std::memory_order_acquire)) != 0;)
            pending_.wait_while(left);
    }

    status start_workers() noexcept {
        const auto want = static_cast<std::size_t>(n_threads_ - 1);
        try {
            workers_.reserve(want);
            while (workers_.size() < want) {
                const int ith = static_cast<int>(workers_.size()) + 1;
                const std::uint32_t seen = job_.value.load(std::memory_order_relaxed);
                workers_.emplace_back([this, ith, seen] { worker_main(ith, seen); });
            }
        } catch (const std::exception& e) {
            return {errc::failed, "cpu: cannot start worker thread " + std::to_string(workers_.size() + 1) +
                                      " of " + std::to_string(n_threads_) + ": " + e.what()};
        }
        return {};
    }

    /// Joins the workers beyond the first `keep`.
    void stop_workers(std::size_t keep) noexcept {
        if (workers_.size() <= keep) return;
        exit_from_ = keep + 1; // worker ith is workers_[ith - 1]
        fn_ = nullptr;
        pending_.value.store(static_cast<std::uint32_t>(workers_.size()), std::memory_order_relaxed);
        job_.bump();
        wait_for_workers();
        for (std::size_t i = keep; i < workers_.size(); ++i) workers_[i].join();
        workers_.resize(keep);
        exit_from_ = static_cast<std::size_t>(-1);
    }

    int n_threads_;
    std::vector<std::thread> workers_;

    // The posted job: written by the calling thread only while every worker waits.
    job_fn fn_ = nullptr;
    void* ctx_ = nullptr;
    std::size_t exit_from_ = static_cast<std::size_t>(-1); ///< workers from this index leave

    detail::wait_word job_;     ///< generation of the posted job
    detail::wait_word pending_; ///< workers that have not finished the posted job
    detail::spin_barrier all_;  ///< barrier()
    detail::spin_barrier some_; ///< barrier(n)
};

} // namespace backplane::cpu
