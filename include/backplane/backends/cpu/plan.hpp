#pragma once
// cpu_plan: a graph checked once and scheduled for the thread pool, computed many times
// (the plan_backend refinement); and the executor that runs a plan on a pool.
//
// Scheduling. Every node that computes something becomes a step with its kernel
// (choose_kernel, decided here once rather than at every compute) and nth =
// n_tasks(node, n_threads) threads (view ops and leafs are dropped). All threads walk
// the steps together; a thread whose index is nth or more skips the step. A barrier
// separates step k-1 from step k unless both run on thread 0 alone: a chain of small
// nodes runs on the calling thread with no synchronisation at all, and a graph whose
// every node is small does not wake the workers. Kernels may also wait inside a node
// (compute_params::barrier) for that node's nth threads.
//
// Stopping. Thread 0 asks the abort callback before each step; a node that fails (a
// get_rows, set_rows, mul_mat_id or add_id index out of range) stops the graph too. Either records the step before
// which to stop; every thread reads it after each barrier and leaves at the first
// barrier at or past that step, so all threads leave at the same barrier and none is
// left waiting; the thread that stopped computes nothing more meanwhile.

#include <backplane/backends/cpu/compute.hpp>
#include <backplane/backends/cpu/fused.hpp>
#include <backplane/backends/cpu/detail/work_buffer.hpp>
#include <backplane/backends/cpu/isa.hpp>
#include <backplane/backends/cpu/supports.hpp>
#include <backplane/backends/cpu/thread_pool.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/memory/buffer.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <chrono>
#include <functional>
#include <new>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace backplane {

namespace cpu {

namespace detail {
struct plan_access;
}

/// One node of a plan and how it runs.
struct plan_step {
    tensor* node = nullptr;
    std::size_t wsize = 0;       ///< work buffer bytes it uses (work_size)
    int nth = 1;                 ///< threads that compute it (n_tasks), 0..nth-1
    bool barrier_before = false; ///< all threads meet before it
    kernel_kind kernel = kernel_kind::nothing; ///< what computes it (choose_kernel in the plan's mode)
    /// kernel fused: the group whose result `node` is (held by the plan).
    const fused_group* group = nullptr;
};

/// The clock of profiles, in ns.
[[nodiscard]] inline std::int64_t profile_clock_ns() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

/// Where a timed compute reports its times (cpu::profile, backends/cpu/profile.hpp,
/// implements it; basic_cpu_backend::set_profile).
class profile_sink {
public:
    virtual ~profile_sink() = default;
    /// Zeroed slots for a compute of n steps on n_threads threads: thread ith writes
    /// (first + ith * stride)[2k], its kernel time of step k, and [2k + 1], its wait at
    /// the barrier before it. May throw std::bad_alloc.
    virtual std::int64_t* begin(std::size_t n, int n_threads, std::size_t& stride) = 0;
    /// The compute of `steps` is over, `wall_ns` after it started. May throw std::bad_alloc.
    virtual void end(std::span<const plan_step> steps, std::int64_t wall_ns) = 0;
};

} // namespace cpu

/// A graph prepared for cpu_backend::compute(cpu_plan&): checked (every node supported,
/// every tensor with host data), scheduled (threads per node, barriers) and given its
/// work buffer, which it keeps. The plan refers to the graph's tensors: they must
/// outlive it and keep their ops, types, shapes and memory; the values in them may
/// change freely between computes (that is the point). A tensor whose buffer was freed
/// since is errc::invalid_argument at the next compute (the plan keeps its buffers'
/// serials and asks once). A plan made for one thread count
/// or mode is re-scheduled when computed by a backend set differently (no new checks).
class cpu_plan {
public:
    cpu_plan() = default; ///< an empty plan: computes nothing
    cpu_plan(cpu_plan&&) noexcept = default;
    cpu_plan& operator=(cpu_plan&&) noexcept = default;
    cpu_plan(const cpu_plan&) = delete;
    cpu_plan& operator=(const cpu_plan&) = delete;

    /// The nodes that compute something, in order, with their threads and barriers.
    [[nodiscard]] std::span<const cpu::plan_step> steps() const noexcept { return steps_; }
    [[nodiscard]] std::size_t size() const noexcept { return steps_.size(); }
    [[nodiscard]] bool empty() const noexcept { return steps_.empty(); }
    /// The thread count and mode it is scheduled for.
    [[nodiscard]] int n_threads() const noexcept { return n_threads_; }
    [[nodiscard]] bool reference() const noexcept { return reference_; }
    /// The most threads any step uses (1: the plan runs on the calling thread alone).
    [[nodiscard]] int max_nth() const noexcept { return max_nth_; }
    /// Barriers between steps per compute.
    [[nodiscard]] std::size_t n_barriers() const noexcept { return n_barriers_; }
    /// Bytes of work buffer it holds.
    [[nodiscard]] std::size_t work_size() const noexcept { return work_.size(); }
    /// The fused groups it computes as one step each (core/fusion.hpp).
    [[nodiscard]] std::span<const fused_group> groups() const noexcept { return groups_; }

private:
    friend struct cpu::detail::plan_access;

    std::vector<cpu::plan_step> steps_;
    std::vector<fused_group> groups_; ///< the steps' groups point here
    std::vector<std::uint64_t> buffers_; ///< the serials of the buffers its tensors live in
    int n_threads_ = 0; ///< 0: not scheduled yet
    bool reference_ = false;
    int max_nth_ = 0;
    std::size_t n_barriers_ = 0;
    cpu::detail::work_buffer work_;
};

namespace cpu::detail {

/// Places steps one after another: kernel, threads, work size, barrier before.
struct scheduler {
    int n_threads;
    bool reference;
    int prev = 0; ///< nth of the previous step, 0 before the first
    int max_nth = 0;
    std::size_t barriers = 0;
    std::size_t wmax = 0;

    template <class = void>
    void place(plan_step& s) noexcept {
        if (s.group != nullptr) {
            s.kernel = kernel_kind::fused;
            s.nth = n_tasks(*s.group, n_threads);
            s.wsize = work_size(*s.group, s.nth, reference);
        } else {
            // threads are counted with the default mode's kernel in either mode (n_tasks)
            const kernel_kind fast = choose_kernel(*s.node, false);
            s.kernel = reference ? reference_kernel(s.node->op) : fast;
            s.nth = n_tasks(*s.node, n_threads, fast);
            s.wsize = work_size(*s.node, s.nth, s.kernel);
        }
        s.barrier_before = prev != 0 && !(prev == 1 && s.nth == 1);
        barriers += s.barrier_before ? 1 : 0;
        max_nth = std::max(max_nth, s.nth);
        wmax = std::max(wmax, s.wsize);
        prev = s.nth;
    }
};

/// What the backend and the executor need of a plan (private to users).
struct plan_access {
    static std::vector<plan_step>& steps(cpu_plan& p) noexcept { return p.steps_; }
    static detail::work_buffer& work(cpu_plan& p) noexcept { return p.work_; }
    static std::vector<fused_group>& groups(cpu_plan& p) noexcept { return p.groups_; }
    static std::vector<std::uint64_t>& buffers(cpu_plan& p) noexcept { return p.buffers_; }
    static const std::vector<std::uint64_t>& buffers(const cpu_plan& p) noexcept { return p.buffers_; }

    /// Takes the schedule of p's steps placed by `s`, with a work buffer big enough.
    /// Out of memory is a status.
    static status commit(cpu_plan& p, const scheduler& s) noexcept {
        if (auto st = p.work_.reserve(s.wmax); !st) return st;
        p.n_threads_ = s.n_threads;
        p.reference_ = s.reference;
        p.max_nth_ = s.max_nth;
        p.n_barriers_ = s.barriers;
        return {};
    }

    /// Re-schedules p's steps for n_threads in this mode. Cheap (one pass, no checks).
    static status schedule(cpu_plan& p, int n_threads, bool reference) noexcept {
        scheduler s{n_threads, reference};
        for (plan_step& step : p.steps_) s.place(step);
        return commit(p, s);
    }
};

inline status host_data(const tensor& t, const tensor& node, const char* role) {
    if (t.data == nullptr)
        return {errc::invalid_argument, "cpu: " + std::string(role) + " '" + t.name + "' of node '" + node.name +
                                            "' (" + std::string(to_string(node.op)) +
                                            ") has no data; allocate the graph first"};
    if (t.buffer != nullptr && !t.buffer->is_host())
        return {errc::invalid_argument, "cpu: " + std::string(role) + " '" + t.name + "' of node '" + node.name +
                                            "' lives in a non-host buffer (" + std::string(t.buffer->type().name()) +
                                            ")"};
    return {};
}

inline bool has_host_data(const tensor& t) noexcept {
    return t.data != nullptr && (t.buffer == nullptr || t.buffer->is_host());
}

/// The node can be computed here: a kernel for it, host data for it and its sources.
inline status check_node(const tensor& node) {
    bool fine = supports_op(node) && has_host_data(node);
    for (const tensor* s : node.src) fine = fine && (s == nullptr || has_host_data(*s));
    if (fine) return {}; // the common case, without building any message
    if (!supports_op(node))
        return {errc::not_supported, "cpu: op " + std::string(to_string(node.op)) + " on node '" + node.name +
                                         "' with these types or layouts is not supported"};
    if (auto s = host_data(node, node, "output"); !s) return s;
    for (const tensor* s : node.src)
        if (s != nullptr)
            if (auto st = host_data(*s, node, "source"); !st) return st;
    return {};
}

/// The serials of the buffers that g's nodes and their sources live in, each once, into
/// out. Throws std::bad_alloc.
template <class = void>
void collect_buffers(graph_view g, std::vector<std::uint64_t>& out) {
    out.clear();
    const auto add = [&out](const tensor* t) {
        if (t != nullptr && t->buffer != nullptr && (out.empty() || out.back() != t->buffer_serial))
            out.push_back(t->buffer_serial);
    };
    for (const tensor* node : g) {
        add(node);
        for (const tensor* src : node->src) add(src);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
}

/// node, or one of its sources, when placed in the buffer with this serial; else null.
inline const tensor* placed_in(const tensor* node, std::uint64_t serial) noexcept {
    const auto in = [serial](const tensor* t) { return t != nullptr && t->buffer != nullptr && t->buffer_serial == serial; };
    if (in(node)) return node;
    for (const tensor* src : node->src)
        if (in(src)) return src;
    return nullptr;
}

/// ok while every buffer of `serials` exists; else the status of a freed buffer, naming
/// a tensor in it that `find(serial)` returns (or none). One lock for all of them.
template <class Find>
status check_buffers(std::span<const std::uint64_t> serials, Find find) {
    const std::size_t dead = backplane::detail::live_buffer_set()->first_dead(serials);
    if (dead == serials.size()) return {};
    if (const tensor* t = find(serials[dead])) return backplane::detail::freed_buffer_error("cpu", *t);
    return {errc::invalid_argument, "cpu: a tensor of the graph was placed in a buffer that has since been freed"};
}

/// check_buffers for the tensors of g.
template <class = void>
status check_buffers(std::span<const std::uint64_t> serials, graph_view g) {
    return check_buffers(serials, [g](std::uint64_t serial) -> const tensor* {
        for (const tensor* node : g)
            if (const tensor* t = placed_in(node, serial)) return t;
        return nullptr;
    });
}

/// check_buffers for the tensors of p: its buffers exist still (asked at every compute).
template <class = void>
status check_buffers(const cpu_plan& p) {
    return check_buffers(plan_access::buffers(p), [&p](std::uint64_t serial) -> const tensor* {
        for (const plan_step& step : p.steps()) {
            if (const tensor* t = placed_in(step.node, serial)) return t;
            if (step.group != nullptr)
                for (const tensor* part : step.group->parts)
                    if (const tensor* t = part != nullptr ? placed_in(part, serial) : nullptr) return t;
        }
        return nullptr;
    });
}

/// Checks every node of g and fills p with its steps, scheduled for n_threads, the
/// groups of `fusions` that the CPU takes (accepts) as one step each (none in reference
/// mode). On failure p holds no steps.
template <class = void>
inline status build_plan(cpu_plan& p, graph_view g, int n_threads, bool reference, fusion_set fusions = {}) {
    auto& steps = plan_access::steps(p);
    auto& groups = plan_access::groups(p);
    steps.clear();
    groups.clear();
    auto& buffers = plan_access::buffers(p);
    buffers.clear();
    for (const tensor* node : g)
        if (node == nullptr) return {errc::invalid_argument, "cpu: a graph node is null"};
    // before any buffer is asked whether it is host memory: a freed one cannot be asked
    collect_buffers(g, buffers);
    if (auto s = check_buffers(buffers, g); !s) {
        buffers.clear();
        return s;
    }
    if (!reference) groups = find_fusions(g, fusions, [](const fused_group& grp) { return accepts(grp); });
    scheduler sched{n_threads, reference};
    std::size_t next = 0; // the next group
    for (std::size_t i = 0; i < g.size(); ++i) {
        tensor* node = g[i];
        if (node->op == op_kind::none || is_view_op(node->op)) continue;
        if (auto s = check_node(*node); !s) {
            steps.clear();
            return s;
        }
        if (next < groups.size() && groups[next].first == i) {
            const fused_group& grp = groups[next++];
            for (std::size_t k = i + 1; k <= grp.last; ++k)
                if (auto s = is_view_op(g[k]->op) ? status{} : check_node(*g[k]); !s) {
                    steps.clear();
                    return s;
                }
            sched.place(steps.emplace_back(plan_step{&result_of(grp), 0, 1, false, kernel_kind::fused, &grp}));
            i = grp.last;
            continue;
        }
        sched.place(steps.emplace_back(plan_step{node}));
    }
    if (auto s = plan_access::commit(p, sched); !s) {
        steps.clear();
        return s;
    }
    return {};
}

/// Shared by the threads running one plan; lives on the calling thread's stack.
struct exec_state {
    const plan_step* steps = nullptr;
    std::size_t n = 0;
    std::byte* wdata = nullptr;
    isa level = isa::portable;
    bool reference = false;
    thread_pool* pool = nullptr;                      ///< null: thread 0 alone
    const std::function<bool()>* abort = nullptr;     ///< asked by thread 0 only
    bool aborted = false;                             ///< thread 0 only
    /// Timed runs: thread ith's kernel and barrier times of step k at
    /// times[ith * stride + 2k] and [... + 1] (profile_sink::begin).
    std::int64_t* times = nullptr;
    std::size_t stride = 0;

    /// The step before which every thread stops (none: SIZE_MAX). It names a step, not
    /// just "stop", because threads read it after different barriers: a thread still
    /// reading it after an earlier barrier must not stop before the others do.
    alignas(cache_line) std::atomic<std::size_t> stop_at{static_cast<std::size_t>(-1)};
    alignas(cache_line) std::atomic<std::uint64_t> first_error{~std::uint64_t{0}}; ///< step << 8 | errc

    template <class T> static void lower(std::atomic<T>& a, T v) noexcept {
        T cur = a.load(std::memory_order_relaxed);
        while (v < cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
        }
    }
    /// Stops every thread at the first barrier before a step >= k (published by that
    /// barrier's release).
    void stop_before(std::size_t k) noexcept { lower(stop_at, k); }
    void fail(std::size_t step, errc e) noexcept {
        lower(first_error, (static_cast<std::uint64_t>(step) << 8) | static_cast<std::uint8_t>(e));
        stop_before(step + 1);
    }
};

/// The context of compute_params::barrier for one thread: the node's thread count.
struct node_sync {
    thread_pool* pool;
    int n;
};
inline void node_barrier(void* ctx) noexcept {
    auto* s = static_cast<node_sync*>(ctx);
    s->pool->barrier(s->n);
}

/// True when the user's callback asks to stop (an exception counts as a stop: it
/// cannot travel through the worker threads).
inline bool ask_abort(const std::function<bool()>& f) noexcept {
    try {
        return f();
    } catch (...) {
        return true;
    }
}

/// Thread ith's walk over the steps (see the header comment); Timed: each kernel and
/// barrier timed into st.times (the profile's slots).
template <bool Timed>
inline void run_steps(exec_state& st, int ith) noexcept {
    node_sync sync{st.pool, 1};
    compute_params p;
    p.ith = ith;
    p.wdata = st.wdata;
    p.level = st.level;
    p.reference = st.reference;
    if (st.pool != nullptr) {
        p.barrier_fn = &node_barrier;
        p.barrier_ctx = &sync;
    }
    bool halted = false; // this thread computes nothing more
    std::int64_t* times = nullptr;
    if constexpr (Timed) times = st.times + st.stride * static_cast<std::size_t>(ith);
    for (std::size_t k = 0; k < st.n; ++k) {
        const plan_step& s = st.steps[k];
        if (ith == 0 && k != 0 && st.abort != nullptr && !halted && ask_abort(*st.abort)) {
            st.aborted = true;
            halted = true;
            st.stop_before(k);
        }
        if (s.barrier_before) {
            std::int64_t t0 = 0;
            if constexpr (Timed) t0 = profile_clock_ns();
            st.pool->barrier();
            if constexpr (Timed) times[2 * k + 1] = profile_clock_ns() - t0;
            if (st.stop_at.load(std::memory_order_relaxed) <= k) return;
        }
        if (halted || ith >= s.nth) continue;
        p.nth = s.nth;
        p.wsize = s.wsize;
        sync.n = s.nth;
        std::int64_t t0 = 0;
        if constexpr (Timed) t0 = profile_clock_ns();
        const errc e = s.group != nullptr ? run_fused(p, *s.group) : run_kernel(p, *s.node, s.kernel);
        if constexpr (Timed) times[2 * k] = profile_clock_ns() - t0;
        if (e != errc::ok) {
            st.fail(k, e);
            halted = true;
        }
    }
}

template <bool Timed>
inline void run_steps_job(void* ctx, int ith) noexcept { run_steps<Timed>(*static_cast<exec_state*>(ctx), ith); }

/// Runs every thread's walk: on the calling thread alone, or on the pool.
template <bool Timed>
inline status run_all(exec_state& st, thread_pool::lease& pool, int n_threads) {
    if (st.pool == nullptr) {
        run_steps<Timed>(st, 0);
        return {};
    }
    return pool.run(&run_steps_job<Timed>, &st, n_threads);
}

inline status failure(const tensor& node, errc e) {
    if (e == errc::out_of_range && node.op == op_kind::get_rows)
        return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name +
                       "' reads outside a source (a get_rows index beyond the rows of '" +
                       (node.src[0] ? node.src[0]->name : std::string()) + "')"};
    if (e == errc::out_of_range && node.op == op_kind::mul_mat_id)
        return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name +
                       "' reads outside a source (an expert id beyond the experts of '" +
                       (node.src[0] ? node.src[0]->name : std::string()) + "')"};
    if (e == errc::out_of_range && node.op == op_kind::add_id)
        return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name +
                       "' reads outside a source (an expert id beyond the rows of '" +
                       (node.src[1] ? node.src[1]->name : std::string()) + "')"};
    if (e == errc::out_of_range && node.op == op_kind::ssm_scan)
        return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name +
                       "' reads outside a source (a state id beyond the states of '" +
                       (node.src[0] ? node.src[0]->name : std::string()) + "')"};
    if (e == errc::out_of_range && node.op == op_kind::set_rows)
        return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name +
                       "' writes outside its destination (a set_rows index beyond the rows of '" +
                       (node.src[2] ? node.src[2]->name : std::string()) + "')"};
    return {e, "cpu: " + std::string(to_string(node.op)) + " node '" + node.name + "' failed (" +
                   std::string(to_string(e)) + ")"};
}

/// Computes a scheduled plan with the pool that `pool` holds (which must have at least
/// plan.n_threads() threads), or on the calling thread alone when no step needs more;
/// with `prof`, timed into it.
template <class = void>
inline status execute(cpu_plan& plan, thread_pool::lease& pool, const std::function<bool()>* abort,
                      profile_sink* prof = nullptr) {
    const auto& steps = plan_access::steps(plan);
    if (steps.empty()) return {};
    if (auto s = check_buffers(plan); !s) return s;
    if (abort != nullptr && ask_abort(*abort)) return {errc::aborted, "cpu: compute aborted by the abort callback"};
    exec_state st;
    st.steps = steps.data();
    st.n = steps.size();
    st.wdata = plan_access::work(plan).data();
    st.reference = plan.reference();
    st.level = plan.reference() ? isa::portable : active_isa();
    st.abort = abort;
    if (plan.max_nth() > 1) {
        if (plan.n_threads() > pool.n_threads()) // its barriers would wait for threads that never come
            return {errc::invalid_argument, "cpu: a plan for " + std::to_string(plan.n_threads()) +
                                                " threads cannot run on a pool of " + std::to_string(pool.n_threads())};
        st.pool = &pool.pool();
    }
    if (prof == nullptr) {
        if (auto s = run_all<false>(st, pool, plan.n_threads()); !s) return s;
    } else {
        try {
            st.times = prof->begin(steps.size(), st.pool != nullptr ? plan.n_threads() : 1, st.stride);
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "cpu: out of memory for the profile's timings"};
        }
        const std::int64_t t0 = profile_clock_ns();
        if (auto s = run_all<true>(st, pool, plan.n_threads()); !s) return s;
        const std::int64_t wall = profile_clock_ns() - t0;
        try {
            prof->end(std::span<const plan_step>(steps), wall);
        } catch (const std::bad_alloc&) {
            return {errc::alloc_failed, "cpu: out of memory for the profile's timings"};
        }
    }
    if (const std::uint64_t e = st.first_error.load(std::memory_order_relaxed); e != ~std::uint64_t{0})
        return failure(*steps[static_cast<std::size_t>(e >> 8)].node, static_cast<errc>(e & 0xff));
    if (st.aborted) return {errc::aborted, "cpu: compute aborted by the abort callback"};
    return {};
}

} // namespace cpu::detail

} // namespace backplane
