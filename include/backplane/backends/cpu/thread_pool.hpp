#pragma once
// The CPU backend's thread pool: persistent worker threads that run one job at a time
// together with the calling thread. Several CPU backends may share one pool (ggml's
// threadpool: ggml_threadpool_new, ggml_backend_cpu_set_threadpool).
//
//   auto pool = std::make_shared<cpu::thread_pool>(4);   // no thread starts yet
//   status s = pool->run(fn, ctx);        // fn(ctx, 0) here, fn(ctx, 1..3) on workers
//   s = pool->set_n_threads(2);           // joins the two workers no longer needed
//   s = pool->pause();                    // idle workers sleep at once, polling no more
//
// * The calling thread is thread 0 and does its share; workers 1..n-1 start with the
//   first job that needs them and live until the pool shrinks or dies, so a compute
//   pays no thread start-up.
// * Between jobs workers poll for `poll` (1 ms by default: a next compute that follows
//   soon finds them awake), then sleep, so an idle pool costs no CPU (detail/sync.hpp).
// * Inside a job, barrier() waits for the job's threads and barrier(n) for threads
//   0..n-1 (the threads of one node); both are spin barriers that fall back to sleeping.
//
// Threads: every member may be called from any thread. Jobs are serialised: run() (or
// a lease from acquire()) waits while another thread runs a job, so backends sharing a
// pool take turns. A job that uses its own pool again (run, acquire, set_n_threads,
// pause, resume from inside fn, or while the same thread holds a lease) would wait for
// itself forever: that is refused with errc::busy instead.
//
// Pause, as ggml's ggml_threadpool_pause / resume: pause() makes idle workers sleep at
// once instead of polling (a pool that will not be used for a while, next to another
// that computes, leaves the cores to it); a job on a paused pool resumes it first, as
// ggml's kickoff does, so a forgotten resume costs only the wake-up; resume() wakes the
// workers so that they poll for the next job again.
//
// Lifetime: backends hold a pool by std::shared_ptr, so it lives as long as any backend
// using it (or its creator) holds it; destruction order does not matter.

#include <backplane/backends/cpu/detail/sync.hpp>
#include <backplane/core/error.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace backplane::cpu {

/// The number of hardware threads (at least 1): the default size of a pool.
inline int hardware_threads() noexcept {
    const unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(n);
}

/// How a thread_pool starts (ggml_threadpool_params: n_threads, poll, paused).
struct thread_pool_params {
    /// Threads of a job, the calling thread included; 0 or less: one per hardware thread.
    int n_threads = 0;
    /// How long idle workers poll for the next job before they sleep.
    std::chrono::microseconds poll = std::chrono::duration_cast<std::chrono::microseconds>(detail::poll_time);
    /// Start paused (no difference until workers exist: they start with the first job).
    bool paused = false;
};

class thread_pool {
public:
    /// A job: thread ith's part. Must not throw, and every thread that calls a barrier
    /// must be matched by the others (or the job deadlocks).
    using job_fn = void (*)(void* ctx, int ith) noexcept;

    /// A pool of n threads (at least 1), the calling thread included.
    explicit thread_pool(int n_threads = hardware_threads()) noexcept
        : thread_pool(thread_pool_params{.n_threads = std::max(n_threads, 1)}) {}
    explicit thread_pool(const thread_pool_params& p) noexcept
        : n_threads_(p.n_threads < 1 ? hardware_threads() : p.n_threads), paused_(p.paused),
          poll_(p.poll.count() < 0 ? std::chrono::microseconds(0) : p.poll) {}
    ~thread_pool() { stop_workers(0); }
    thread_pool(const thread_pool&) = delete;
    thread_pool& operator=(const thread_pool&) = delete;

    /// Exclusive use of the pool for one or more jobs, from acquire(): other threads'
    /// jobs wait until it is destroyed.
    class lease {
    public:
        lease(lease&& o) noexcept : pool_(std::exchange(o.pool_, nullptr)), outer_(o.outer_) {}
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        lease& operator=(lease&&) = delete;
        ~lease() {
            if (pool_ == nullptr) return;
            current() = outer_;
            pool_->unlock();
        }

        [[nodiscard]] thread_pool& pool() const noexcept { return *pool_; }
        /// The pool's size: the most threads a job may have.
        [[nodiscard]] int n_threads() const noexcept { return pool_->n_threads(); }

        /// Runs fn(ctx, ith) for every ith in [0, n), ith 0 on the calling thread, and
        /// returns when all have returned; n is clamped to [1, n_threads()]. Resumes a
        /// paused pool. Fails (running nothing) only when a worker cannot be started.
        [[nodiscard]] status run(job_fn fn, void* ctx, int n) noexcept { return pool_->run_locked(fn, ctx, n); }
        [[nodiscard]] status run(job_fn fn, void* ctx) noexcept { return run(fn, ctx, n_threads()); }

    private:
        friend class thread_pool;
        lease(thread_pool* p, const thread_pool* outer) noexcept : pool_(p), outer_(outer) {}
        thread_pool* pool_;
        const thread_pool* outer_; ///< the pool this thread was inside before (nested pools)
    };

    /// Waits until no other thread uses the pool, then holds it. errc::busy when this
    /// thread is inside one of the pool's jobs or holds it already (waiting would never end).
    [[nodiscard]] result<lease> acquire() {
        if (current() == this) return status(errc::busy, reentered("acquire"));
        lock();
        const thread_pool* outer = current();
        current() = this;
        return lease(this, outer); // a prvalue: nvcc's front end does not move a named lease into result
    }

    /// acquire(), then lease::run(fn, ctx) with every thread of the pool.
    [[nodiscard]] status run(job_fn fn, void* ctx) {
        auto l = acquire();
        if (!l) return l.error();
        return l->run(fn, ctx);
    }

    /// The pool's size (a snapshot when other threads may change it).
    [[nodiscard]] int n_threads() const noexcept { return n_threads_.load(std::memory_order_relaxed); }

    /// Threads of the next jobs (at least 1). Workers above the new count are joined
    /// now; missing ones start with the next job that needs them. Waits for a running job.
    [[nodiscard]] status set_n_threads(int n) {
        auto l = acquire();
        if (!l) return status(errc::busy, reentered("set_n_threads"));
        n_threads_.store(n < 1 ? 1 : n, std::memory_order_relaxed);
        stop_workers(static_cast<std::size_t>(n_threads() - 1));
        return {};
    }

    /// Idle workers sleep at once instead of polling, until resume() or the next job.
    /// Waits for a running job.
    [[nodiscard]] status pause() {
        auto l = acquire();
        if (!l) return status(errc::busy, reentered("pause"));
        paused_.store(true, std::memory_order_relaxed); // polling workers see it and sleep
        return {};
    }

    /// Ends a pause and wakes the workers, which poll for the next job again.
    [[nodiscard]] status resume() {
        auto l = acquire();
        if (!l) return status(errc::busy, reentered("resume"));
        paused_.store(false, std::memory_order_relaxed);
        post(nullptr, nullptr, 0); // an empty job: every worker wakes, then polls
        return {};
    }

    [[nodiscard]] bool paused() const noexcept { return paused_.load(std::memory_order_relaxed); }

    /// Worker threads alive now (not counting the caller); for tests and diagnostics,
    /// from the thread that uses the pool.
    [[nodiscard]] int n_workers() const noexcept { return static_cast<int>(workers_.size()); }
    /// Workers asleep waiting for a job, not polling (all of them soon after pause()); a
    /// snapshot, for tests and diagnostics.
    [[nodiscard]] int n_sleeping() const noexcept { return job_.sleepers.load(std::memory_order_relaxed); }

    /// Inside a job: waits until all the job's threads arrive.
    void barrier() noexcept { all_.arrive_and_wait(job_n_); }
    /// Inside a job: waits until threads 0..n-1 arrive (each of them calls this; the
    /// others must not). A separate barrier from barrier(), so that threads waiting
    /// for the whole job do not count here.
    void barrier(int n) noexcept { some_.arrive_and_wait(n); }
    /// Inside a job: its number of threads.
    [[nodiscard]] int job_threads() const noexcept { return job_n_; }

private:
    /// The pool whose job (or lease) the calling thread is inside, if any.
    static const thread_pool*& current() noexcept {
        static thread_local const thread_pool* p = nullptr;
        return p;
    }

    // The lease's lock: a word that is 1 while held. Waiters sleep on it (detail::wait_word,
    // no polling: a job takes far longer than a wake-up); not fair, jobs are few. Not a
    // std::mutex, so that <mutex> stays out of <backplane/backplane.hpp> (compile time).
    void lock() noexcept {
        for (std::uint32_t free = 0; !held_.value.compare_exchange_weak(free, 1, std::memory_order_acquire,
                                                                        std::memory_order_relaxed);
             free = 0)
            if (free != 0) held_.block_while(1);
    }
    void unlock() noexcept {
        held_.value.store(0, std::memory_order_seq_cst); // seq_cst: see wait_word::block_while
        held_.notify_changed();
    }

    static std::string reentered(const char* what) {
        return std::string("cpu thread pool: ") + what +
               " called from inside one of the pool's own jobs, or by a thread that holds the pool already; "
               "it would wait for itself (docs/threading.md)";
    }

    status run_locked(job_fn fn, void* ctx, int n) noexcept {
        n = std::clamp(n, 1, n_threads());
        paused_.store(false, std::memory_order_relaxed); // a job resumes a paused pool, as ggml
        if (n == 1) {
            job_n_ = 1;
            fn(ctx, 0);
            return {};
        }
        if (auto s = start_workers(static_cast<std::size_t>(n - 1)); !s) return s;
        post(fn, ctx, n);
        fn(ctx, 0);
        wait_for_workers();
        return {};
    }

    /// Hands fn to every worker (those at or above n skip it; null: nothing to run).
    /// Written while no worker looks (all acknowledged the last job); published by the
    /// release in bump(). Returns once fn is posted, not when it is done.
    void post(job_fn fn, void* ctx, int n) noexcept {
        fn_ = fn;
        ctx_ = ctx;
        job_n_ = n;
        pending_.value.store(static_cast<std::uint32_t>(workers_.size()), std::memory_order_relaxed);
        job_.bump();
        if (fn == nullptr) wait_for_workers();
    }

    void worker_main(int ith, std::uint32_t seen) noexcept {
        current() = this;
        for (;;) {
            wait_for_job(seen);
            ++seen; // the caller posts the next job only after every worker acknowledged
            const bool leave = static_cast<std::size_t>(ith) >= exit_from_;
            if (!leave && fn_ != nullptr && ith < job_n_) fn_(ctx_, ith);
            pending_.value.fetch_sub(1, std::memory_order_seq_cst);
            pending_.notify_changed();
            if (leave) return;
        }
    }

    /// Polls for the next job for up to poll_ unless the pool is paused, then sleeps.
    void wait_for_job(std::uint32_t seen) noexcept {
        const auto posted = [&] { return job_.value.load(std::memory_order_acquire) != seen; };
        if (!paused() && detail::spin_until([&] { return posted() || paused(); }, poll_) && posted()) return;
        job_.block_while(seen);
    }

    void wait_for_workers() noexcept {
        for (std::uint32_t left; (left = pending_.value.load(std::memory_order_acquire)) != 0;)
            pending_.wait_while(left);
    }

    /// Starts workers until there are `want` (never fewer than there are).
    status start_workers(std::size_t want) noexcept {
        try {
            workers_.reserve(want);
            while (workers_.size() < want) {
                const int ith = static_cast<int>(workers_.size()) + 1;
                const std::uint32_t seen = job_.value.load(std::memory_order_relaxed);
                workers_.emplace_back([this, ith, seen] { worker_main(ith, seen); });
            }
        } catch (const std::exception& e) {
            return {errc::failed, "cpu: cannot start worker thread " + std::to_string(workers_.size() + 1) +
                                      " of " + std::to_string(want + 1) + ": " + e.what()};
        }
        return {};
    }

    /// Joins the workers beyond the first `keep`.
    void stop_workers(std::size_t keep) noexcept {
        if (workers_.size() <= keep) return;
        exit_from_ = keep + 1; // worker ith is workers_[ith - 1]
        post(nullptr, nullptr, 0);
        for (std::size_t i = keep; i < workers_.size(); ++i) workers_[i].join();
        workers_.resize(keep);
        exit_from_ = static_cast<std::size_t>(-1);
    }

    detail::wait_word held_;         ///< 1 while a lease holds the pool: one job at a time
    std::atomic<int> n_threads_;     ///< written under the lease, read anywhere
    std::atomic<bool> paused_;
    std::chrono::nanoseconds poll_;
    std::vector<std::thread> workers_;

    // The posted job: written by the lease holder only while every worker waits.
    job_fn fn_ = nullptr;
    void* ctx_ = nullptr;
    int job_n_ = 1;                                        ///< threads of the posted job
    std::size_t exit_from_ = static_cast<std::size_t>(-1); ///< workers from this index leave

    detail::wait_word job_;     ///< generation of the posted job
    detail::wait_word pending_; ///< workers that have not finished the posted job
    detail::spin_barrier all_;  ///< barrier()
    detail::spin_barrier some_; ///< barrier(n)
};

} // namespace backplane::cpu
