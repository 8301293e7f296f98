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

/// What a fused group does with each block of a quantized mul_mat's results once the
/// thread that computed it has written it (backends/cpu/fused.hpp): fn(*this, bi, m0, m1,
/// n0, n1) for elements [m0, m1) of columns [n0, n1) of matrix bi (dst's dims 2 and 3,
/// dim 2 fastest).
struct mul_mat_epilogue {
    void (*fn)(const mul_mat_epilogue& e, long long bi, long long m0, long long m1, long long n0,
               long long n1) noexcept = nullptr;
    const void* ctx = nullptr;
};

struct compute_params {
    int ith = 0;                 ///< this thread's index
    int nth = 1;                 ///< number of threads working on the node
    void* wdata = nullptr;       ///< work buffer shared by the node's threads (work_size bytes)
    std::size_t wsize = 0;       ///< its size
    isa level = isa::portable;   ///< instruction set the kernel may use
    void (*barrier_fn)(void*) noexcept = nullptr; ///< waits for the node's nth threads
    void* barrier_ctx = nullptr;
    bool reference = false;      ///< run the reference kernels only (no fast paths)
    /// The quantized mul_mat kernels (fast/quant.hpp, fast/kquant.hpp) call it after each
    /// block of results (null: none), and with b_ready take b as already quantized in
    /// wdata by a product of the same b, plan and threads just before (a fused pair's
    /// second product: no quantizing, no barrier).
    const mul_mat_epilogue* epilogue = nullptr;
    bool b_ready = false;

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
