#pragma once
// The scheduler: splits one graph across several backends, allocates it, copies tensors
// between the backends and computes it (DESIGN.md section 5; docs/scheduler.md).
//
//     vulkan_backend gpu(...);  cpu_backend cpu;
//     scheduler sched(gpu, cpu);            // priority order; the last one uses host memory
//     if (auto s = sched.reserve(worst_case); !s) return s;   // optional: size buffers once
//     graph g = build(ctx);                 // a no_alloc context; weights already allocated
//     if (auto s = sched.alloc_graph(g); !s) return s;
//     ...write the inputs...
//     if (auto s = sched.compute(g); !s) return s;
//     ...read the outputs...
//
// This file is the API. It holds together the stages, each in its own file, which pass
// plain values to each other (sched/plan.hpp; docs/scheduler.md, "Stages", lists them).
// The user's graph is never modified: a node that reads copies runs as its shadow, the
// scheduler's own tensor (docs/scheduler.md, "Splits and copies"). Errors are statuses on
// the runtime paths (alloc, compute) and backplane::error from the constructors; nothing
// aborts.

#include <backplane/core/concepts.hpp>
#include <backplane/core/detail/describe.hpp>
#include <backplane/core/detail/single_user.hpp>
#include <backplane/core/error.hpp>
#include <backplane/core/graph.hpp>
#include <backplane/core/tensor.hpp>
#include <backplane/memory/buffer.hpp>
#include <backplane/memory/graph_alloc.hpp>
#include <backplane/memory/host_buffer.hpp>
#include <backplane/memory/tensor_copy.hpp>
#include <backplane/memory/tensor_io.hpp>
#include <backplane/sched/backend_set.hpp>
#include <backplane/sched/alloc_request.hpp>
#include <backplane/sched/cost_placement.hpp>
#include <backplane/sched/executor.hpp>
#include <backplane/sched/explain.hpp>
#include <backplane/sched/greedy_placement.hpp>
#include <backplane/sched/memory_caps.hpp>
#include <backplane/sched/numbering.hpp>
#include <backplane/sched/splitting.hpp>
#include <backplane/sched/placement.hpp>
#include <backplane/sched/plan.hpp>
#include <backplane/sched/plan_summary.hpp>
#include <backplane/sched/scheduler_params.hpp>
#include <backplane/sched/scheduler_setup.hpp>
#include <backplane/sched/trace.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane {

/// The scheduler over a backend set (see the header comment), placing nodes by `Policy`
/// (sched/placement.hpp). scheduler<B0, ..., Bn> is this over a tuple of backend
/// references; policy_scheduler<P, B0, ..., Bn> the same with policy P;
/// dynamic_scheduler over a run-time list.
///
/// Threads (docs/threading.md): one thread at a time drives a scheduler. Its mutating
/// members (plan, dry_run, reserve, alloc_graph, compute, compute_async, synchronize,
/// reset, set_backend, the setters) detect a call from a second thread while the first is
/// inside: the call changes nothing and returns errc::busy (the void ones throw
/// backplane::error with it).
template <backend_set Set, class Policy = greedy_policy>
class basic_scheduler {
public:
    /// Throws backplane::error (and no other exception) for an empty set, n_copies
    /// outside [1, max_copies], more memory caps than backends, a buffer type override
    /// its backend does not support (or more overrides than backends), a last backend
    /// whose compute buffer type is not host memory, or no memory (errc::alloc_failed).
    explicit basic_scheduler(Set backends, scheduler_params params = {}, Policy policy = {}) try
        : set_(std::move(backends)), params_(std::move(params)), policy_(std::move(policy)), nb_(set_.size()),
          galloc_(detail::make_compute_allocator(set_, params_)), ask_(set_, bt_), numberer_(galloc_, ask_), exec_(nb_) {
        detail::check_scheduler_params(params_, nb_);
        detail::read_compute_types(set_, galloc_, bt_, names_);
        detail::start_backends(set_, policy_, params_);
        if (const char* v = std::getenv("BACKPLANE_SCHED_DEBUG")) debug_ = std::atoi(v);
        copy_batch_ = detail::weight_copy_batches(set_, params_.weight_copy_batch, Policy::uses_costs);
    } catch (...) {
        detail::rethrow_as_scheduler_error();
    }

    /// Waits for the runs still queued: their backends read the scheduler's tensors.
    ~basic_scheduler() {
        if (queued_) (void)exec_.wait_idle(set_);
    }
    basic_scheduler(const basic_scheduler&) = delete;
    basic_scheduler& operator=(const basic_scheduler&) = delete;

    [[nodiscard]] Set& backends() noexcept { return set_; }
    [[nodiscard]] Policy& policy() noexcept { return policy_; }
    [[nodiscard]] const Policy& policy() const noexcept { return policy_; }
    [[nodiscard]] std::size_t n_backends() const noexcept { return nb_; }

    // -- assignments ---------------------------------------------------------------------

    /// Runs `t` on backend `i` in every graph until reset(). errc::invalid_argument when
    /// there is no backend i.
    status set_backend(const tensor& t, std::size_t i) {
        const auto use = in_use_.enter();
        if (!use) return busy("set_backend");
        if (i >= nb_)
            return {errc::invalid_argument, "scheduler::set_backend: no backend " + std::to_string(i) + " (it has " +
                                                std::to_string(nb_) + ")"};
        user_[&t] = static_cast<std::int32_t>(i);
        return {};
    }
    /// set_backend by backend object: errc::invalid_argument when b is not one of this
    /// scheduler's backends.
    template <class B>
        requires(!std::is_integral_v<B>)
    status set_backend(const tensor& t, const B& b) {
        const std::size_t i = set_.index_of(b);
        if (i >= nb_)
            return {errc::invalid_argument, "scheduler::set_backend: that backend is not one of this scheduler's"};
        return set_backend(t, i);
    }
    /// The backend of `t` in the last graph (or set by the user), -1 when none.
    [[nodiscard]] int backend_of(const tensor& t) const {
        if (graph_nodes_ != nullptr) {
            if (const std::int32_t k = num_.find(&t); k != graph_index::none) return asg_.backend[static_cast<std::size_t>(k)];
        }
        if (auto it = user_.find(&t); it != user_.end()) return it->second;
        return -1;
    }
    /// Why `t` runs where it does in the last graph (none when it was not in it).
    [[nodiscard]] placement_cause cause_of(const tensor& t) const {
        if (graph_nodes_ != nullptr) {
            if (const std::int32_t k = num_.find(&t); k != graph_index::none) return asg_.cause[static_cast<std::size_t>(k)];
        }
        return user_.contains(&t) ? placement_cause::user : placement_cause::none;
    }

    void set_eval_callback(eval_callback cb) {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("set_eval_callback"));
        eval_ = std::move(cb);
    }
    void set_op_offload(bool on) {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("set_op_offload"));
        params_.op_offload = on;
    }
    [[nodiscard]] bool op_offload() const noexcept { return params_.op_offload; }

    // -- the graph -----------------------------------------------------------------------

    /// Places and splits `g` without allocating anything: the accessors, describe() and
    /// to_dot() then show its plan (until the next call that takes a graph, or reset()).
    /// g is left as it was.
    [[nodiscard]] status plan(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("plan");
        return guarded([&]() -> status {
            if (status s = wait_before_replan(); !s) return s;
            if (status s = split(g); !s) return s;
            return fit_caps(g);
        });
    }

    /// A dry run: plan(g), then what the plan needs (plan_summary) without allocating
    /// anything, so that a program can choose what to offload before it loads a model:
    /// weights not allocated yet can be assigned with set_backend() and are then counted
    /// in their backend's compute_bytes. With memory caps the plan respects them (or this
    /// fails). The accessors, describe() and to_dot() then show the plan.
    [[nodiscard]] result<plan_summary> dry_run(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("dry_run");
        std::vector<std::size_t> bytes;
        status st = guarded([&]() -> status {
            if (status s = wait_before_replan(); !s) return s;
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g, &bytes); !s) return s;
            if (!bytes.empty()) return {}; // the caps' last measure
            auto need = measure(g);
            if (!need) return need.error();
            bytes = std::move(*need);
            return {};
        });
        if (!st) return st;
        return detail::summarize_plan(num_, asg_, plan_, ask_, std::move(bytes), last_estimate());
    }

    /// Why node `t` of the last plan runs where it does, in words; under the cost
    /// policy with the estimates of each backend and the copies it causes.
    [[nodiscard]] std::string explain(const tensor& t) const {
        return graph_nodes_ == nullptr ? "no plan" : detail::explain_node(facts(), t);
    }

    /// The cost model's estimate of one compute of the last plan, and of the greedy plan,
    /// in seconds (NaN without a cost policy or a plan).
    [[nodiscard]] double estimated_seconds() const noexcept {
        const detail::placement_result* e = last_estimate();
        return e != nullptr ? e->seconds : std::numeric_limits<double>::quiet_NaN();
    }
    [[nodiscard]] double greedy_estimated_seconds() const noexcept {
        const detail::placement_result* e = last_estimate();
        return e != nullptr ? e->greedy_seconds : std::numeric_limits<double>::quiet_NaN();
    }

    /// Sizes the backends' buffers for `g` (a worst-case graph) without placing its
    /// tensors, so that later graphs up to its size allocate without growing. g is left
    /// as it was and forgotten.
    [[nodiscard]] status reserve(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("reserve");
        return guarded([&]() -> status {
            // the buffers may grow: runs still queued on them finish first
            if (status s = exec_.wait_idle(set_); !s) return s;
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g); !s) return s;
            req_.build(g, num_, asg_, plan_, nb_, params_.n_copies, cur_copy_);
            status s = req_.reserve_in(galloc_);
            forget_graph();
            return s;
        });
    }

    /// Places every node of `g` on a backend, splits it and gives every tensor without
    /// memory an address (see the header comment). With pipeline copies, waits until the
    /// run that last used this alloc's slot is done, so inputs can be written right away.
    [[nodiscard]] status alloc_graph(const graph& g) {
        const auto use = in_use_.enter(); // nested when compute_async allocates
        if (!use) return busy("alloc_graph");
        return guarded([&]() -> status {
            cur_copy_ = next_copy_;
            next_copy_ = (next_copy_ + 1) % params_.n_copies;
            if (status s = exec_.wait_slot(set_, cur_copy_); !s) return s;
            if (status s = split(g); !s) return s;
            if (status s = fit_caps(g); !s) return s;
            req_.build(g, num_, asg_, plan_, nb_, params_.n_copies, cur_copy_);
            // a new allocation plan may move any tensor, the input slots of runs still in
            // flight included, and grow buffers: with pipeline copies those runs finish first
            const alloc_replan_hook idle{
                [](void* self) -> status {
                    auto& sc = *static_cast<basic_scheduler*>(self);
                    // one copy: wait_slot already waited for the last run
                    return sc.params_.n_copies == 1 ? status{} : sc.exec_.wait_idle(sc.set_);
                },
                this};
            if (status s = req_.alloc_in(galloc_, idle); !s) {
                forget_graph();
                return s;
            }
            exec_.slots().make(slot_input(g));
            allocated_ = &g;
            if (debug_ > 0) std::fputs(describe(debug_).c_str(), stderr);
            return {};
        });
    }

    /// compute_async, then synchronize every backend.
    [[nodiscard]] status compute(const graph& g) {
        const auto use = in_use_.enter(); // held across compute_async and synchronize
        if (!use) return busy("compute");
        if (status s = compute_async(g); !s) {
            (void)synchronize();
            return s;
        }
        return synchronize();
    }

    /// Allocates g unless it is the graph allocated last, then runs its splits; returns
    /// when everything is queued (backends may still be running: synchronize()).
    [[nodiscard]] status compute_async(const graph& g) {
        const auto use = in_use_.enter();
        if (!use) return busy("compute_async");
        if (allocated_ != &g || graph_nodes_ != g.nodes().data() || num_.n_nodes() != g.n_nodes()) {
            if (status s = alloc_graph(g); !s) return s;
        } else if (status s = numberer_.check_user_buffers(); !s) { // weights freed since alloc_graph
            return s;
        } else if (!exec_.slots().current(slot_input(g))) { // a node that runs as a shadow changed since
            if (status st = alloc_graph(g); !st) return st;
        }
        tracer_.clear();
        queued_ = true;
        return guarded([&]() -> status { return run_splits(g); });
    }

    /// The trace of the last compute (empty unless scheduler_params::trace).
    [[nodiscard]] std::span<const trace_event> trace() const noexcept { return tracer_.events(); }
    /// The trace as Chrome trace JSON (opens in ui.perfetto.dev), one track per backend.
    [[nodiscard]] std::string trace_json() const { return trace_to_chrome_json(tracer_.events(), backend_names()); }
    /// The trace as a table per backend.
    [[nodiscard]] std::string trace_table() const { return trace_summary(tracer_.events(), backend_names()); }

    /// Waits for every backend.
    [[nodiscard]] status synchronize() {
        const auto use = in_use_.enter();
        if (!use) return busy("synchronize");
        status first = detail::synchronize_all(set_);
        if (allocated_ == nullptr) next_copy_ = 0; // a stable slot while no graph is held
        queued_ = false;
        return first;
    }

    /// Forgets the last graph and every set_backend assignment. Buffers are kept (the
    /// tensors placed in them keep dangling addresses: allocate their graph again).
    void reset() {
        const auto use = in_use_.enter();
        if (!use) throw error(busy("reset"));
        forget_graph();
        user_.clear();
    }

    // -- what the last graph became --------------------------------------------------------

    [[nodiscard]] std::size_t n_splits() const noexcept { return graph_nodes_ ? plan_.splits.size() : 0; }
    /// Pipeline copies (scheduler_params::n_copies).
    [[nodiscard]] int n_copies() const noexcept { return params_.n_copies; }
    /// Tensors copied between backends per run of the last graph.
    [[nodiscard]] std::size_t n_split_inputs() const noexcept { return graph_nodes_ ? plan_.inputs.size() : 0; }
    [[nodiscard]] split_info split_at(std::size_t k) const {
        if (k >= n_splits())
            throw error("scheduler::split_at: no split " + std::to_string(k) + " (the last graph has " +
                            std::to_string(n_splits()) + ")",
                        errc::out_of_range);
        const split_rec& s = plan_.splits[k];
        return {static_cast<std::size_t>(s.backend), s.first, s.last,
                std::span<tensor* const>(plan_.input_ptrs).subspan(s.in0, s.in1 - s.in0), exec_.slots().nodes_of(s, {graph_nodes_, num_.n_nodes()}, plan_.kept, cur_copy_)};
    }
    /// How many alloc_graph calls planned the memory anew. Allocating a graph of the same
    /// structure again replays the plan: nothing moves but the rotated inputs (pipeline
    /// copies), and no run in flight is waited for.
    [[nodiscard]] std::size_t n_alloc_plans() const noexcept { return galloc_.n_plans(); }
    /// Bytes of compute buffers held for backend i (backends sharing a buffer type report
    /// it under the first of them).
    [[nodiscard]] std::size_t buffer_size(std::size_t i) const noexcept {
        return i < nb_ ? galloc_.buffer_size(static_cast<int>(i)) : 0;
    }
    /// The buffer type of backend i's compute buffers: its override
    /// (scheduler_params::buffer_types) or its default.
    [[nodiscard]] buffer_type_ref buffer_type(std::size_t i) const { return bt_[i]; }
    [[nodiscard]] std::string_view backend_name(std::size_t i) const { return set_.name(i); }

    /// The plan in words: level 1 the splits with their inputs and bytes, level 2 also
    /// every node with its backend and cause (what BACKPLANE_SCHED_DEBUG prints). This
    /// and to_dot() read the last graph's tensors: call them while that graph lives.
    [[nodiscard]] std::string describe(int level = 1) const {
        const std::string head = detail::describe_backends(names_);
        if (graph_nodes_ == nullptr) return head + ", no graph\n";
        return head + detail::describe_plan(facts(), level) +
               detail::describe_buffers(names_, galloc_, bt_, params_.buffer_types);
    }
    /// The last graph in Graphviz DOT: nodes coloured by backend, splits as clusters,
    /// copies as labelled edges.
    [[nodiscard]] std::string to_dot() const {
        return detail::dot_document(graph_nodes_ != nullptr ? detail::plan_to_dot(facts()) : std::string());
    }

private:
    // The last plan, for the explanation (sched/explain.hpp).
    detail::plan_facts facts() const {
        detail::plan_facts f{num_, asg_, plan_, names_, params_.n_copies};
        if constexpr (Policy::uses_costs) {
            f.problem = cost_.problem();
            f.estimate = cost_.estimate();
        }
        return f;
    }
    // The cost policy's estimate of the last plan (null without a cost policy or a plan).
    const detail::placement_result* last_estimate() const noexcept {
        if constexpr (Policy::uses_costs)
            if (graph_nodes_ != nullptr) return cost_.estimate();
        return nullptr;
    }

    using split_rec = detail::split_rec;

    static status busy(const char* call) { return detail::busy_status("scheduler", call); }

    template <class F>
    status guarded(F&& f) {
        try {
            return f();
        } catch (const std::bad_alloc&) {
            forget_graph();
            return {errc::alloc_failed, "scheduler: out of host memory"};
        } catch (const error& e) {
            forget_graph();
            return {e.code(), e.what()};
        }
    }

    [[nodiscard]] detail::slot_tensors::slot_input slot_input(const graph& g) const noexcept {
        return {g, num_, asg_, plan_, nb_, cur_copy_, params_.n_copies > 1};
    }

    // A new plan remakes the plan's copies. Runs of one pipeline slot use those copies
    // (with more slots each keeps its own, slot_tensors.hpp): with one slot, a run still
    // queued finishes first.
    status wait_before_replan() {
        if (params_.n_copies > 1 || !queued_) return {};
        return exec_.wait_idle(set_);
    }

    void forget_graph() noexcept {
        graph_nodes_ = nullptr;
        allocated_ = nullptr;
        exec_.slots().forget();
    }

    // -- splits and copies ---------------------------------------------------------------------

    // The split plan of the assignment (sched/splitting.hpp).
    void pass_splits() {
        const auto readable_in_place = [this](std::int32_t s, std::size_t b) { return ask_.readable(asg_, s, b); };
        detail::make_split_plan(plan_, num_, asg_, {names_, params_.n_copies, copy_batch_}, readable_in_place);
    }

    status split(const graph& g) {
        forget_graph();
        detail::greedy_placement<Set> greedy(ask_, num_, asg_, params_.op_offload);
        if (status s = numberer_.number(g, num_, asg_, user_.empty() ? &greedy : nullptr); !s) return s;
        if (!user_.empty()) {
            for (const auto& [t, b] : user_)
                if (const std::int32_t k = num_.find(t); k != graph_index::none)
                    asg_.set(static_cast<std::size_t>(k), b, placement_cause::user);
            std::size_t failed = 0;
            if (!greedy.place_from_tensors(failed)) return numberer_.no_backend_for_memory(num_[failed]);
        }
        if (status s = greedy.place_rest(); !s) return s;
        if constexpr (Policy::uses_costs) {
            cost_.forget_estimate();
            if (nb_ > 1) cost_.place(policy_, ask_, num_, asg_);
        }
        pass_splits();
        graph_nodes_ = g.nodes().data();
        return {};
    }

    // -- memory caps ---------------------------------------------------------------------------

    // The bytes each backend's compute buffers need for the current plan (see
    // graph_allocator::measure).
    result<std::vector<std::size_t>> measure(const graph& g) {
        req_.build(g, num_, asg_, plan_, nb_, params_.n_copies, cur_copy_);
        return req_.measure_in(galloc_);
    }

    // Fits the plan under the memory caps (sched/memory_caps.hpp). `fitted`, when given,
    // receives the measure of the plan that fits (left empty without caps).
    status fit_caps(const graph& g, std::vector<std::size_t>* fitted = nullptr) {
        auto measure_plan = [&] { return measure(g); };
        auto replan = [&] {
            detail::follow_views(num_, asg_);
            if constexpr (Policy::uses_costs) cost_.reprice(policy_, num_, asg_);
            pass_splits();
        };
        return detail::fit_under_caps(params_.memory_caps, names_, num_, asg_, policy_, ask_, measure_plan, replan,
                                      fitted);
    }

    // -- compute ---------------------------------------------------------------------------------

    status run_splits(const graph& g) {
        const typename detail::executor<Set>::run_input in{
            g, num_, asg_, plan_, cur_copy_, params_.n_copies > 1, eval_, params_.trace ? &tracer_ : nullptr};
        return exec_.run(set_, in);
    }

    [[nodiscard]] std::vector<std::string> backend_names() const {
        return std::vector<std::string>(names_.begin(), names_.end());
    }

    Set set_;
    scheduler_params params_;
    Policy policy_;
    detail::cost_placement<Policy, Set> cost_; // the cost policy's last search (unused under the greedy policy)
    tracer tracer_;
    std::size_t nb_;
    graph_allocator galloc_;
    eval_callback eval_;
    int debug_ = 0;
    bool queued_ = false; // compute_async queued work that synchronize() has not waited for
    std::unordered_map<const tensor*, std::int32_t> user_;

    // the last graph
    const graph* allocated_ = nullptr;
    tensor* const* graph_nodes_ = nullptr;
    int cur_copy_ = 0;
    int next_copy_ = 0;
    detail::graph_numbering num_;
    detail::assignment asg_;
    detail::split_plan plan_;
    std::vector<buffer_type_ref> bt_;
    std::vector<std::string_view> names_; // the backends' names
    // (initialised in the constructor: nvcc's front end fails on braced default member
    // initialisers that name other members)
    detail::backend_queries<Set> ask_;
    detail::numberer<Set> numberer_;

    std::vector<std::size_t> copy_batch_; // per backend: weight_copy_batch resolved
    detail::executor<Set> exec_;

    detail::alloc_request req_;
    detail::single_user in_use_; // the thread inside an entry point (docs/threading.md)
};

/// A scheduler over backends known at compile time, in priority order; the last must be a
/// host backend. Holds references: the backends must outlive it.
///
///     scheduler sched(blas, cpu);                       // or scheduler<blas_backend, cpu_backend>
///     scheduler sched2(scheduler_params{.n_copies = 2}, gpu, cpu);
template <backend... Bs>
class scheduler : public basic_scheduler<tuple_backend_set<Bs...>> {
    static_assert(detail::static_backends<Bs...>::ok);
    using base = basic_scheduler<tuple_backend_set<Bs...>>;

public:
    explicit scheduler(Bs&... backends) : base(tuple_backend_set<Bs...>(backends...)) {}
    scheduler(scheduler_params params, Bs&... backends) : base(tuple_backend_set<Bs...>(backends...), params) {}
};

template <backend... Bs>
scheduler(Bs&...) -> scheduler<Bs...>;
template <backend... Bs>
scheduler(scheduler_params, Bs&...) -> scheduler<Bs...>;

/// A scheduler over backends known at compile time with placement policy `Policy`
/// (sched/placement.hpp), for example cost_scheduler = policy_scheduler<cost_policy, ...>:
///
///     policy_scheduler sched(cost_policy{}, scheduler_params{}, gpu, cpu);
template <class Policy, backend... Bs>
class policy_scheduler : public basic_scheduler<tuple_backend_set<Bs...>, Policy> {
    static_assert(detail::static_backends<Bs...>::ok);
    using base = basic_scheduler<tuple_backend_set<Bs...>, Policy>;

public:
    policy_scheduler(Policy policy, scheduler_params params, Bs&... backends)
        : base(tuple_backend_set<Bs...>(backends...), std::move(params), std::move(policy)) {}
    explicit policy_scheduler(Policy policy, Bs&... backends)
        : base(tuple_backend_set<Bs...>(backends...), scheduler_params{}, std::move(policy)) {}
};

template <class Policy, backend... Bs>
policy_scheduler(Policy, scheduler_params, Bs&...) -> policy_scheduler<Policy, Bs...>;
template <class Policy, backend... Bs>
policy_scheduler(Policy, Bs&...) -> policy_scheduler<Policy, Bs...>;

/// A scheduler over backends chosen at run time.
using dynamic_scheduler = basic_scheduler<dynamic_backend_set>;

} // namespace backplane
