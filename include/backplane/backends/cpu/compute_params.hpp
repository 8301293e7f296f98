#pragma once
// What a CPU kernel is told besides its node: which share of the work is its own.
// Every kernel splits its work by (ith, nth), so the same code runs single-threaded
// (ith 0 of 1) and on the thread pool.

namespace backplane::cpu {

struct compute_params {
    int ith = 0; ///< this thread's index
    int nth = 1; ///< number of threads working on the node
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
