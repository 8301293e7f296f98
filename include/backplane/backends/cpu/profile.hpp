#pragma once
// cpu::profile: where a CPU backend's computes spend their time, node by node and thread
// by thread (basic_cpu_backend::set_profile).
//
//   cpu::profile prof;
//   cpu.set_profile(&prof);
//   for (...) cpu.compute(g);        // each compute adds to prof
//   std::printf("%s", prof.table().c_str());
//
// Not part of <backplane/backplane.hpp> (the backend knows only its interface,
// cpu::profile_sink of plan.hpp): include this header where a profile is made.
//
// Each thread times its share of each node (the kernel) and its wait at the barrier
// before it; the executor reports the compute's wall time, from the start of its work to
// the end of its last node. A node's `work` is its slowest thread's kernel time, the time
// it holds up the graph; the sum over a compute's nodes is what the compute would cost if
// nothing happened between kernels, and wall / work is the overhead of everything else
// (waking threads, barriers, threads that finish a node unevenly). Timing costs two clock reads per node
// and thread (~40 ns); a backend without a profile takes none.

#include <backplane/backends/cpu/compute.hpp>
#include <backplane/backends/cpu/plan.hpp>
#include <backplane/core/op_traits.hpp>
#include <backplane/core/tensor.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace backplane::cpu {

/// A node of the last profiled compute.
struct node_time {
    const tensor* node = nullptr; ///< valid while its graph lives
    kernel_kind kernel = kernel_kind::nothing;
    int nth = 1;               ///< threads that computed it
    std::int64_t work_ns = 0;  ///< its slowest thread's time in the kernel
    std::int64_t busy_ns = 0;  ///< its threads' kernel times together
    std::int64_t wait_ns = 0;  ///< the threads' waits at the barrier before it, together
};

/// Totals of the nodes of one op computed by one kernel, over the profiled computes.
struct op_time {
    op_kind op = op_kind::none;
    kernel_kind kernel = kernel_kind::nothing;
    std::size_t count = 0; ///< node computes
    std::int64_t work_ns = 0, busy_ns = 0, wait_ns = 0; ///< sums of node_time's
};

/// Times of a CPU backend's computes (see the header comment). Not thread-safe: one
/// backend at a time writes it, and it is read between computes.
class profile final : public profile_sink {
public:
    /// Forgets every compute.
    void clear() noexcept {
        last_.clear();
        ops_.fill(op_time{});
        computes_ = 0;
        wall_ns_ = work_ns_ = wait_ns_ = last_wall_ns_ = 0;
    }

    /// The last compute's nodes, in order (those that compute something).
    [[nodiscard]] std::span<const node_time> last() const noexcept { return last_; }
    [[nodiscard]] std::int64_t last_wall_ns() const noexcept { return last_wall_ns_; }

    /// Totals since clear(): computes, their wall times, their nodes' work (slowest
    /// thread per node) and barrier waits (all threads).
    [[nodiscard]] std::size_t computes() const noexcept { return computes_; }
    [[nodiscard]] std::int64_t wall_ns() const noexcept { return wall_ns_; }
    [[nodiscard]] std::int64_t work_ns() const noexcept { return work_ns_; }
    [[nodiscard]] std::int64_t wait_ns() const noexcept { return wait_ns_; }

    /// Totals per op and kernel since clear(), the most work first.
    [[nodiscard]] std::vector<op_time> by_op() const {
        std::vector<op_time> v;
        for (const op_time& t : ops_)
            if (t.count != 0) v.push_back(t);
        std::stable_sort(v.begin(), v.end(), [](const op_time& a, const op_time& b) { return a.work_ns > b.work_ns; });
        return v;
    }

    /// by_op() and the totals as a text table, times per compute.
    [[nodiscard]] std::string table() const {
        if (computes_ == 0) return "no computes profiled\n";
        const double per = 1e3 * static_cast<double>(computes_); // ns totals -> us per compute
        std::string out = line("%-16s %-16s %8s %10s %10s %10s %6s\n", "op", "kernel", "nodes", "work us",
                               "busy us", "wait us", "share");
        for (const op_time& t : by_op())
            out += line("%-16s %-16s %8.1f %10.1f %10.1f %10.1f %5.1f%%\n", std::string(to_string(t.op)).c_str(),
                        std::string(to_string(t.kernel)).c_str(),
                        static_cast<double>(t.count) / static_cast<double>(computes_),
                        static_cast<double>(t.work_ns) / per, static_cast<double>(t.busy_ns) / per,
                        static_cast<double>(t.wait_ns) / per, 100.0 * ratio(t.work_ns, wall_ns_));
        out += line("per compute (%zu computes): wall %.1f us, kernels %.1f us (wall / kernels %.2f), barrier "
                    "waits %.1f us (all threads)\n",
                    computes_, static_cast<double>(wall_ns_) / per, static_cast<double>(work_ns_) / per,
                    ratio(wall_ns_, work_ns_), static_cast<double>(wait_ns_) / per);
        return out;
    }

    // -- profile_sink: the executor's side (plan.hpp) --

    /// Rows are padded apart so that threads never share a cache line.
    std::int64_t* begin(std::size_t n, int n_threads, std::size_t& stride) override {
        stride_ = (2 * n + 15) / 16 * 16 + 16;
        slots_.assign(stride_ * static_cast<std::size_t>(n_threads), 0);
        threads_ = n_threads;
        stride = stride_;
        return slots_.data();
    }
    void end(std::span<const plan_step> steps, std::int64_t wall_ns) override {
        last_.clear();
        for (std::size_t k = 0; k < steps.size(); ++k) add(k, steps[k].node, steps[k].kernel, steps[k].nth);
        ++computes_;
        wall_ns_ += wall_ns;
        last_wall_ns_ = wall_ns;
    }

private:
    [[nodiscard]] const std::int64_t* slots(int ith) const noexcept {
        return slots_.data() + stride_ * static_cast<std::size_t>(ith);
    }

    static constexpr std::size_t n_kernels = kernel_kind_count;

    template <class... A>
    static std::string line(const char* format, A... a) {
        char buf[240];
        std::snprintf(buf, sizeof buf, format, a...);
        return buf;
    }
    static double ratio(std::int64_t a, std::int64_t b) noexcept {
        return b > 0 ? static_cast<double>(a) / static_cast<double>(b) : 0.0;
    }

    void add(std::size_t k, const tensor* node, kernel_kind kernel, int nth) {
        node_time t{node, kernel, nth};
        for (int i = 0; i < threads_; ++i) {
            const std::int64_t work = slots(i)[2 * k];
            t.work_ns = std::max(t.work_ns, work);
            t.busy_ns += work;
            t.wait_ns += slots(i)[2 * k + 1];
        }
        last_.push_back(t);
        work_ns_ += t.work_ns;
        wait_ns_ += t.wait_ns;
        const auto op = static_cast<std::size_t>(node->op);
        if (op >= op_kind_count) return;
        op_time& o = ops_[op * n_kernels + static_cast<std::size_t>(kernel)];
        o.op = node->op;
        o.kernel = kernel;
        ++o.count;
        o.work_ns += t.work_ns;
        o.busy_ns += t.busy_ns;
        o.wait_ns += t.wait_ns;
    }

    std::vector<node_time> last_;
    std::array<op_time, op_kind_count * n_kernels> ops_{};
    std::size_t computes_ = 0;
    std::int64_t wall_ns_ = 0, work_ns_ = 0, wait_ns_ = 0, last_wall_ns_ = 0;
    std::vector<std::int64_t> slots_;
    std::size_t stride_ = 0;
    int threads_ = 0;
};

} // namespace backplane::cpu
