#pragma once
// The CPU backend: computes graphs on the host with a persistent thread pool.
//
//   cpu_backend cpu({.n_threads = 8});
//   status s = cpu.compute(g);                  // checks, schedules and runs g
//   result<cpu_plan> p = cpu.make_plan(g);      // or: check and schedule once...
//   s = cpu.compute(*p);                        // ...and run many times
//
// Threads: n_threads (default: one per hardware thread) share each big node; small
// nodes run on the calling thread with no synchronisation (plan.hpp explains the
// schedule). Workers start with the first compute that needs them and sleep between
// computes. Reference mode runs the reference kernels only: the oracle for tests.
// A backend is a stream: one compute at a time (from any thread).

#include <backplane/backends/cpu/device.hpp>
#include <backplane/backends/cpu/plan.hpp>
#include <backplane/backends/cpu/thread_pool.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>

namespace backplane {

/// The CPU backend; use it as `cpu_backend` (= basic_cpu_backend<>). It is a class
/// template only so that its compute members, and through them every kernel, are
/// instantiated in the translation units that call them and nowhere else: including
/// <backplane/backplane.hpp> costs no kernel instantiation (docs/benchmarks.md).
template <class Tag>
class basic_cpu_backend {
public:
    /// Asked by the calling thread before each node that computes something (view ops
    /// and leafs do not count); returning true stops the compute, which then returns
    /// errc::aborted: every thread stops at that node boundary and the nodes from there
    /// on are not computed. An exception thrown by it counts as true.
    using abort_callback = std::function<bool()>;
    using plan_t = cpu_plan;

    basic_cpu_backend() : basic_cpu_backend(cpu_backend_params{}) {}
    explicit basic_cpu_backend(const cpu_backend_params& params)
        : n_threads_(params.n_threads > 0 ? params.n_threads : cpu::hardware_threads()),
          reference_(params.reference), pool_(std::make_unique<cpu::thread_pool>(n_threads_)) {}

    /// Movable (the pool stays where it is, on the heap). A moved-from backend can be
    /// assigned to, destroyed, or used again (it starts a new pool).
    basic_cpu_backend(basic_cpu_backend&&) noexcept = default;
    basic_cpu_backend& operator=(basic_cpu_backend&&) noexcept = default;

    [[nodiscard]] std::string_view name() const noexcept { return "CPU"; }
    [[nodiscard]] const cpu_device& device() const noexcept { return cpu_device::instance(); }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return cpu::supports_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Threads of the next computes, the calling thread included (at least 1; 0 or less
    /// is errc::invalid_argument and changes nothing). Workers no longer needed are
    /// joined now; new ones start with the next compute that needs them.
    status set_n_threads(int n) {
        if (n <= 0)
            return {errc::invalid_argument, "cpu: set_n_threads(" + std::to_string(n) + "): need at least 1 thread"};
        n_threads_ = n;
        if (pool_) pool_->set_n_threads(n);
        return {};
    }
    [[nodiscard]] int n_threads() const noexcept { return n_threads_; }

    /// Reference kernels only (true) or fast paths where they apply (false, default).
    void set_reference(bool on) noexcept { reference_ = on; }
    [[nodiscard]] bool reference() const noexcept { return reference_; }

    /// See abort_callback; an empty function removes it.
    void set_abort_callback(abort_callback cb) { abort_ = std::move(cb); }

    /// Computes the nodes of g in order. Every node is checked first: an unsupported
    /// node is errc::not_supported, a node or source without host data (no data, or a
    /// non-host buffer) errc::invalid_argument, and then nothing is computed. A get_rows
    /// index outside its source is errc::out_of_range (the graph stops after that node).
    /// The abort callback is asked before each node. Reuses this backend's schedule and
    /// work buffer from the last call (they only grow).
    status compute(graph_view g) {
        try {
            if (auto s = cpu::detail::build_plan(last_, g, n_threads_, reference_); !s) return s;
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "cpu: out of memory scheduling a graph"};
        }
        return compute(last_);
    }

    /// g checked and scheduled for compute(plan_t&): the same statuses as compute(g),
    /// found once. The plan holds its own work buffer.
    result<cpu_plan> make_plan(graph_view g) {
        cpu_plan plan;
        try {
            if (auto s = cpu::detail::build_plan(plan, g, n_threads_, reference_); !s) return s;
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "cpu: out of memory making a plan");
        }
        return plan;
    }

    /// Computes a plan from make_plan (of this or another CPU backend), re-scheduling it
    /// first when it was made for another thread count or mode.
    status compute(cpu_plan& plan) {
        if (!pool_) {
            try {
                pool_ = std::make_unique<cpu::thread_pool>(n_threads_);
            } catch (const std::bad_alloc&) {
                return {errc::alloc_failed, "cpu: out of memory starting the thread pool"};
            }
        }
        if (!plan.empty() && (plan.n_threads() != n_threads_ || plan.reference() != reference_))
            if (auto s = cpu::detail::plan_access::schedule(plan, n_threads_, reference_); !s) return s;
        return cpu::detail::execute(plan, *pool_, abort_ ? &abort_ : nullptr);
    }

    status synchronize() noexcept { return {}; }

private:
    int n_threads_;
    bool reference_;
    std::unique_ptr<cpu::thread_pool> pool_;
    abort_callback abort_;
    cpu_plan last_; ///< compute(graph_view)'s schedule and work buffer, reused
};

inline cpu_backend cpu_device::make_backend(const cpu_backend_params& params) const { return cpu_backend{params}; }

static_assert(backplane::device<cpu_device>);
static_assert(backplane::host_buffer_device<cpu_device>);
static_assert(backplane::host_ptr_device<cpu_device>);
static_assert(backplane::backend<cpu_backend>);
static_assert(backplane::host_backend<cpu_backend>);
static_assert(backplane::plan_backend<cpu_backend>);

} // namespace backplane
