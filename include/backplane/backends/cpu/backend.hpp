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
//
// Threads (docs/threading.md): a backend is a stream, used by one thread at a time (any
// thread). Its mutating members (compute, make_plan, set_n_threads, set_thread_pool,
// set_reference, set_abort_callback, set_profile) detect a call from a second thread while the first
// is inside, and from the abort callback into its own backend: such a call changes
// nothing and returns errc::busy (the void setters throw backplane::error with it).
// Several backends may share one thread pool (set_thread_pool, as ggml's
// ggml_backend_cpu_set_threadpool): their computes take turns on it.

#include <backplane/backends/cpu/device.hpp>
#include <backplane/backends/cpu/plan.hpp>
#include <backplane/backends/cpu/plan_cache.hpp>
#include <backplane/backends/cpu/thread_pool.hpp>
#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/single_user.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/host_buffer.hpp>

#include <algorithm>
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
    /// With params.pool the backend computes on that shared pool (see set_thread_pool);
    /// n_threads 0 then means the pool's size.
    explicit basic_cpu_backend(const cpu_backend_params& params)
        : n_threads_(params.n_threads > 0 ? params.n_threads
                     : params.pool        ? params.pool->n_threads()
                                          : cpu::hardware_threads()),
          reference_(params.reference),
          fusions_(params.fusions),
          pool_(params.pool ? params.pool : std::make_shared<cpu::thread_pool>(n_threads_)),
          shared_pool_(params.pool != nullptr) {}

    /// Movable (the pool stays where it is, on the heap). A moved-from backend can be
    /// assigned to, destroyed, or used again (it starts a new pool). Not while in use.
    basic_cpu_backend(basic_cpu_backend&&) noexcept = default;
    basic_cpu_backend& operator=(basic_cpu_backend&&) noexcept = default;

    [[nodiscard]] std::string_view name() const noexcept { return "CPU"; }
    [[nodiscard]] const cpu_device& device() const noexcept { return cpu_device::instance(); }
    [[nodiscard]] const cpu_buffer_type& buffer_type() const noexcept { return cpu_buffer_type::instance(); }
    [[nodiscard]] bool supports_op(const tensor& t) const noexcept { return cpu::supports_op(t); }
    [[nodiscard]] bool supports_defined_op(const tensor& t) const noexcept { return cpu::supports_defined_op(t); }
    [[nodiscard]] bool supports_buffer_type(const buffer_type_ref& bt) const { return bt.is_host(); }

    /// Threads of the next computes, the calling thread included (at least 1; 0 or less
    /// is errc::invalid_argument and changes nothing). With a private pool, workers no
    /// longer needed are joined now and new ones start with the next compute that needs
    /// them; a shared pool is not resized: computes use min(n, the pool's size).
    status set_n_threads(int n) {
        const auto use = enter();
        if (!use.first()) return refusal(use, "set_n_threads");
        if (n <= 0)
            return {errc::invalid_argument, "cpu: set_n_threads(" + std::to_string(n) + "): need at least 1 thread"};
        n_threads_ = n;
        if (pool_ && !shared_pool_) return pool_->set_n_threads(n);
        return {};
    }
    [[nodiscard]] int n_threads() const noexcept { return n_threads_; }

    /// Computes on `pool` from now on, shared with whoever else holds it (other CPU
    /// backends, the program): their computes take turns on it, in the order they come.
    /// The backend keeps the pool alive while it uses it. Null: back to a private pool
    /// of n_threads() threads. A compute uses min(n_threads(), pool->n_threads()) threads.
    status set_thread_pool(std::shared_ptr<cpu::thread_pool> pool) {
        const auto use = enter();
        if (!use.first()) return refusal(use, "set_thread_pool");
        if (pool == nullptr) {
            try {
                pool = std::make_shared<cpu::thread_pool>(n_threads_);
            } catch (const std::bad_alloc&) {
                return {errc::alloc_failed, "cpu: out of memory starting the thread pool"};
            }
            shared_pool_ = false;
        } else {
            shared_pool_ = true;
        }
        pool_ = std::move(pool);
        return {};
    }
    /// The pool computes run on: the shared one, or the private one.
    [[nodiscard]] const std::shared_ptr<cpu::thread_pool>& thread_pool() const noexcept { return pool_; }

    /// Reference kernels only (true) or fast paths where they apply (false, default).
    void set_reference(bool on) {
        const auto use = enter();
        if (!use.first()) throw error(refusal(use, "set_reference"));
        reference_ = on;
    }
    [[nodiscard]] bool reference() const noexcept { return reference_; }

    /// The fused groups the next plans may make (cpu_backend_params::fusions).
    void set_fusions(fusion_set f) {
        const auto use = enter();
        if (!use.first()) throw error(refusal(use, "set_fusions"));
        fusions_ = f;
    }
    [[nodiscard]] fusion_set fusions() const noexcept { return fusions_; }

    /// See abort_callback; an empty function removes it.
    void set_abort_callback(abort_callback cb) {
        const auto use = enter();
        if (!use.first()) throw error(refusal(use, "set_abort_callback"));
        abort_ = std::move(cb);
    }

    /// Times every compute from now on into *prof, node by node and thread by thread
    /// (a cpu::profile of backends/cpu/profile.hpp); null stops timing. *prof must
    /// outlive the computes it times.
    void set_profile(cpu::profile_sink* prof) {
        const auto use = enter();
        if (!use.first()) throw error(refusal(use, "set_profile"));
        profile_ = prof;
    }
    [[nodiscard]] cpu::profile_sink* profile() const noexcept { return profile_; }

    /// Computes the nodes of g in order. Every node is checked first: an unsupported
    /// node is errc::not_supported, a node or source without host data (no data, or a
    /// non-host buffer) errc::invalid_argument, and then nothing is computed. A get_rows
    /// index outside its source is errc::out_of_range (the graph stops after that node).
    /// The abort callback is asked before each node. A tensor placed in a buffer that
    /// was freed since is errc::invalid_argument. The plans of the last few graphs (their
    /// checks, fused groups, schedules and work buffers) are used again while g is the
    /// same graph as one of them (cpu/plan_cache.hpp: the same nodes with the same ops,
    /// types, shapes, memory and sources); another graph is planned anew.
    status compute(graph_view g) {
        const auto use = enter();
        if (!use.first()) return refusal(use, "compute");
        const cpu::detail::plan_settings settings{reference_, fusions_};
        cpu_plan* plan = plans_.find(g, settings);
        if (plan == nullptr) {
            try {
                auto made = plans_.add(g, settings, [&](cpu_plan& p) {
                    return cpu::detail::build_plan(p, g, threads_now(), reference_, fusions_);
                });
                if (!made) return made.error();
                plan = *made;
            } catch (const std::bad_alloc&) {
                plans_.clear();
                return {errc::alloc_failed, "cpu: out of memory scheduling a graph"};
            }
        }
        return compute_plan(*plan);
    }

    /// How many times compute(graph_view) planned a graph since this backend was made
    /// (the other calls used a plan again).
    [[nodiscard]] std::uint64_t plans_made() const noexcept { return plans_.made(); }

    /// g checked and scheduled for compute(plan_t&): the same statuses as compute(g),
    /// found once. The plan holds its own work buffer.
    result<cpu_plan> make_plan(graph_view g) {
        const auto use = enter();
        if (!use.first()) return refusal(use, "make_plan");
        cpu_plan plan;
        try {
            if (auto s = cpu::detail::build_plan(plan, g, threads_now(), reference_, fusions_); !s) return s;
        } catch (const std::bad_alloc&) {
            return status(errc::alloc_failed, "cpu: out of memory making a plan");
        }
        return plan;
    }

    /// Computes a plan from make_plan (of this or another CPU backend), re-scheduling it
    /// first when it was made for another thread count or mode. A plan is used by one
    /// compute at a time.
    status compute(cpu_plan& plan) {
        const auto use = enter();
        if (!use.first()) return refusal(use, "compute");
        return compute_plan(plan);
    }

    status synchronize() noexcept { return {}; }

private:
    /// The lease of the calling thread: refused for another thread, and for this one
    /// when it is already inside (the abort callback calling back in).
    [[nodiscard]] detail::single_user::lease enter() noexcept { return user_.enter(); }
    static status refusal(const detail::single_user::lease& use, const char* call) {
        return use.nested() ? detail::reentered_status("cpu backend", call, "the abort callback")
                            : detail::busy_status("cpu backend", call);
    }

    /// Threads a compute would use now (a shared pool may be smaller than n_threads_).
    [[nodiscard]] int threads_now() const noexcept {
        return shared_pool_ && pool_ ? std::min(n_threads_, pool_->n_threads()) : n_threads_;
    }

    status compute_plan(cpu_plan& plan) {
        if (!pool_) {
            try {
                pool_ = std::make_shared<cpu::thread_pool>(n_threads_);
            } catch (const std::bad_alloc&) {
                return {errc::alloc_failed, "cpu: out of memory starting the thread pool"};
            }
            shared_pool_ = false; // a moved-from backend starts a private pool
        }
        // holding the pool, its size cannot change under the plan (a shared pool's owner
        // may resize it between computes)
        auto lease = pool_->acquire();
        if (!lease) return lease.error();
        const int n = shared_pool_ ? std::min(n_threads_, lease->n_threads()) : n_threads_;
        if (!plan.empty() && (plan.n_threads() != n || plan.reference() != reference_))
            if (auto s = cpu::detail::plan_access::schedule(plan, n, reference_); !s) return s;
        return cpu::detail::execute(plan, *lease, abort_ ? &abort_ : nullptr, profile_);
    }

    int n_threads_;
    bool reference_;
    fusion_set fusions_;
    std::shared_ptr<cpu::thread_pool> pool_; ///< private (made on first use) or shared
    bool shared_pool_;                       ///< pool_ came from set_thread_pool or the params
    abort_callback abort_;
    cpu::profile_sink* profile_ = nullptr; ///< set_profile
    cpu::detail::basic_plan_cache<> plans_; ///< compute(graph_view)'s plans, used again for the same graphs
    detail::single_user user_;
};

inline cpu_backend cpu_device::make_backend(const cpu_backend_params& params) const { return cpu_backend{params}; }

static_assert(backplane::device<cpu_device>);
static_assert(backplane::host_buffer_device<cpu_device>);
static_assert(backplane::host_ptr_device<cpu_device>);
static_assert(backplane::backend<cpu_backend>);
static_assert(backplane::host_backend<cpu_backend>);
static_assert(backplane::plan_backend<cpu_backend>);

} // namespace backplane
