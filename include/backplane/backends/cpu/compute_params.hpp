#pragma once
// What a CPU kernel is told besides its node: which share of the work is its own, the
// shared work buffer of the node, a barrier among the threads working on it, and the
// instruction set to use.
//
// Every kernel splits its work by (ith, nth), so the same code runs single-threaded
// (ith 0 of 1) and on the thread pool. A kernel that needs a preparation step shared by
// all threads (for example quantizing the activations once for a quantized mul_mat)
// writes it into wdata, each thread its share, then calls barrier() before reading it.

#include <backplane/backends/cpu/isa.hpp>

#include <cstddef>

namespace backplane::cpu {

struct compute_params {
    int ith = 0;                 ///< this thread's index
    int nth = 1;                 ///< number of threads working on the node
    void* wdata = nullptr;       ///< work buffer shared by the node's threads (work_size bytes)
    std::size_t wsize = 0;       ///< its size
    isa level = isa::portable;   ///< instruction set the kernel may use
    void (*barrier_fn)(void*) noexcept = nullptr; ///< waits for the node's nth threads
    void* barrier_ctx = nullptr;
    bool reference = false;      ///< run the reference kernels only (no fast paths)

    /// Waits until every thread of the node has reached this point (no-op for nth == 1).
    void barrier() const noexcept {
        if (nth > 1 && barrier_fn != nullptr) barrier_fn(barrier_ctx);
    }
};

/// The [begin, end) share of n items for thread ith of nth (contiguous blocks).
struct work_range {
    long long begin;
    long long end;
};
constexpr work_range split_work(long long n, const compute_params& p) noexcept {
    const long long per = (n + p.nth - 1) / p.nth;
    const long long b = per * p.ith < n ? per * p.ith : n;
    const long long e = b + per < n ? b + per : n;
    return {b, e};
}

} // namespace backplane::cpu
